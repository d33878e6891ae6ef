//! The cache's byte format: little-endian integers, LEB128 lengths, length-prefixed UTF-8.
//!
//! A hand-written format rather than a serde one: the cache holds a few plain records, it is
//! read by every full run of a large installation, and a decoder that only copies bytes (no
//! field names, no escapes, no number parsing) is what lets 10,000 unchanged projects cost
//! their stats and little more. Decoding never panics: anything short or malformed is `None`,
//! which the reader treats as no entry.

/// Appends values to a byte buffer.
#[derive(Default)]
pub struct Enc(pub Vec<u8>);

impl Enc {
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    pub fn bool(&mut self, v: bool) {
        self.0.push(u8::from(v));
    }

    /// An unsigned integer in LEB128: one byte for anything under 128.
    pub fn uint(&mut self, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(byte);
                return;
            }
            self.0.push(byte | 0x80);
        }
    }

    pub fn u64_fixed(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub fn i64(&mut self, v: i64) {
        self.u64_fixed(v as u64);
    }

    pub fn bytes(&mut self, v: &[u8]) {
        self.uint(v.len() as u64);
        self.0.extend_from_slice(v);
    }

    pub fn str(&mut self, v: &str) {
        self.bytes(v.as_bytes());
    }

    pub fn opt_str(&mut self, v: Option<&str>) {
        self.bool(v.is_some());
        if let Some(s) = v {
            self.str(s);
        }
    }

    /// A value of a closed set, as its position in `all` (255: none).
    pub fn choice<T: PartialEq>(&mut self, all: &[T], v: Option<&T>) {
        let at = v.and_then(|v| all.iter().position(|x| x == v));
        self.u8(at.map_or(u8::MAX, |i| i as u8));
    }
}

/// Reads values back in the order they were written.
pub struct Dec<'a> {
    buf: &'a [u8],
}

impl<'a> Dec<'a> {
    pub fn new(buf: &'a [u8]) -> Dec<'a> {
        Dec { buf }
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.buf.len() {
            return None;
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Some(head)
    }

    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    pub fn bool(&mut self) -> Option<bool> {
        match self.u8()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    pub fn uint(&mut self) -> Option<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f).checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    /// A length or a count, bounded by what is left: a corrupt count cannot make a caller
    /// reserve gigabytes.
    pub fn len(&mut self) -> Option<usize> {
        let n = usize::try_from(self.uint()?).ok()?;
        (n <= self.buf.len()).then_some(n)
    }

    pub fn u64_fixed(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("eight bytes")))
    }

    pub fn i64(&mut self) -> Option<i64> {
        self.u64_fixed().map(|v| v as i64)
    }

    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.len()?;
        self.take(n)
    }

    pub fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }

    pub fn string(&mut self) -> Option<String> {
        self.str().map(str::to_string)
    }

    pub fn opt_string(&mut self) -> Option<Option<String>> {
        match self.bool()? {
            false => Some(None),
            true => self.string().map(Some),
        }
    }

    /// A value [`Enc::choice`] wrote: `Some(None)` for none, `None` for a position `all` lacks.
    pub fn choice<T: Copy>(&mut self, all: &[T]) -> Option<Option<T>> {
        match self.u8()? {
            u8::MAX => Some(None),
            i => all.get(usize::from(i)).copied().map(Some),
        }
    }

    /// A value of a closed set that must be there.
    pub fn some_choice<T: Copy>(&mut self, all: &[T]) -> Option<T> {
        self.choice(all)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_short_input_is_none() {
        let mut e = Enc::default();
        for v in [0, 1, 127, 128, 300, u64::MAX] {
            e.uint(v);
        }
        e.i64(-5);
        e.str("héllo");
        e.opt_str(None);
        e.opt_str(Some(""));
        e.choice(&['a', 'b'], Some(&'b'));
        e.choice(&['a', 'b'], None);
        let bytes = e.0;
        let mut d = Dec::new(&bytes);
        for v in [0, 1, 127, 128, 300, u64::MAX] {
            assert_eq!(d.uint(), Some(v));
        }
        assert_eq!(d.i64(), Some(-5));
        assert_eq!(d.str(), Some("héllo"));
        assert_eq!(d.opt_string(), Some(None));
        assert_eq!(d.opt_string(), Some(Some(String::new())));
        assert_eq!(d.choice(&['a', 'b']), Some(Some('b')));
        assert_eq!(d.choice(&['a', 'b']), Some(None));
        assert!(d.is_empty());
        assert_eq!(d.u8(), None);
        for cut in 0..bytes.len() {
            let mut d = Dec::new(&bytes[..cut]);
            let all = (|| {
                for _ in 0..6 {
                    d.uint()?;
                }
                d.i64()?;
                d.str()?;
                d.opt_string()?;
                d.opt_string()?;
                d.choice(&['a', 'b'])?;
                d.choice(&['a', 'b'])
            })();
            assert_eq!(all, None, "cut at {cut}");
        }
    }

    #[test]
    fn a_corrupt_length_or_choice_is_none_not_a_panic() {
        let mut d = Dec::new(&[0xff, 0xff, 0xff, 0xff, 0x0f, b'x']);
        assert_eq!(d.bytes(), None);
        let mut d = Dec::new(&[0xff; 11]);
        assert_eq!(d.uint(), None);
        let mut d = Dec::new(&[7]);
        assert_eq!(d.choice(&['a']), None);
        let mut d = Dec::new(&[2, 0xff, 0xfe]);
        assert_eq!(d.str(), None, "not UTF-8");
    }
}
