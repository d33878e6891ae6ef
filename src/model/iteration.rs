//! An iteration's name: the name of its directory as written (`008`, `1`, `12`), CONTRACTS 1.3.
//!
//! A person who names a directory `008` expects to read `008` wherever braids shows that
//! iteration: the spawn message, `tick --json`, STATUS.md, notifications and commit messages.
//! Showing the number instead (`8`) makes the iteration hard to find on disk. Names still order by
//! their number (`9` before `10`), then by their text, so `1` and `001` in one project order the
//! same way on every run.
//!
//! A name a person types (`braids iteration activate app 8`) or one an older braids wrote into a
//! running worker's spawn message (`Iteration: 1` for the directory `001`) is matched by its
//! text first and by its number when no directory has that exact name ([`IterationName::find`]).
//!
//! A name is at most ten ASCII digits and is stored inline, so it is `Copy` like the number it
//! replaced.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The longest name: every `u32` fits.
const MAX_DIGITS: usize = 10;

/// Why a string is not an iteration name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("iteration `{0}` is not a number such as `8` or `008` (digits only, at most 4294967295)")]
pub struct IterationNameError(pub String);

/// An iteration directory's name as written: 1 to 10 ASCII digits whose value fits a `u32`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IterationName {
    len: u8,
    /// The digits; bytes past `len` are zero, so the derived equality is the text's.
    digits: [u8; MAX_DIGITS],
}

impl IterationName {
    /// Reads a name as written; surrounding whitespace is ignored.
    pub fn new(raw: &str) -> Result<Self, IterationNameError> {
        let s = raw.trim();
        let bad = || IterationNameError(s.chars().take(40).collect());
        if s.is_empty() || s.len() > MAX_DIGITS || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        if s.parse::<u32>().is_err() {
            return Err(bad());
        }
        let mut digits = [0u8; MAX_DIGITS];
        digits[..s.len()].copy_from_slice(s.as_bytes());
        Ok(IterationName {
            len: s.len() as u8,
            digits,
        })
    }

    /// The name as written.
    pub fn as_str(&self) -> &str {
        // Only ASCII digits are ever stored.
        std::str::from_utf8(&self.digits[..self.len as usize]).unwrap_or_default()
    }

    /// The number it names: `008` and `8` are both 8.
    pub fn number(&self) -> u32 {
        self.as_str().parse().unwrap_or_default()
    }

    /// The name padded to at least three digits, as `braids iteration new` names directories:
    /// `8` → `008`, `012` stays, `1234` stays.
    pub fn padded(&self) -> IterationName {
        let s = format!("{:0>3}", self.as_str());
        IterationName::new(&s).unwrap_or(*self)
    }

    /// The item named `self`: the one whose name is exactly this text, else the first whose name
    /// has this number (`1` finds `001`: a person typing the number, or the spawn message of a
    /// worker started by an older braids).
    pub fn find<T>(self, items: &[T], name_of: impl Fn(&T) -> IterationName) -> Option<&T> {
        items
            .iter()
            .find(|i| name_of(i) == self)
            .or_else(|| items.iter().find(|i| name_of(i).number() == self.number()))
    }
}

impl From<u32> for IterationName {
    fn from(n: u32) -> Self {
        IterationName::new(&n.to_string()).expect("a u32 has at most ten digits")
    }
}

impl std::str::FromStr for IterationName {
    type Err = IterationNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        IterationName::new(s)
    }
}

impl Ord for IterationName {
    fn cmp(&self, other: &Self) -> Ordering {
        self.number()
            .cmp(&other.number())
            .then_with(|| self.as_str().cmp(other.as_str()))
    }
}

impl PartialOrd for IterationName {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for IterationName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for IterationName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IterationName({:?})", self.as_str())
    }
}

impl Serialize for IterationName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A string, or a number as braids wrote iterations before they kept their names.
impl<'de> Deserialize<'de> for IterationName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = IterationName;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an iteration name such as \"008\", or a number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<IterationName, E> {
                IterationName::new(v).map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<IterationName, E> {
                u32::try_from(v)
                    .map(IterationName::from)
                    .map_err(|_| E::custom(IterationNameError(v.to_string())))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<IterationName, E> {
                u32::try_from(v)
                    .map(IterationName::from)
                    .map_err(|_| E::custom(IterationNameError(v.to_string())))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> IterationName {
        IterationName::new(s).unwrap()
    }

    #[test]
    fn c1_3_iteration_names_are_kept_as_written_and_sort_numerically() {
        assert_eq!(n("008").to_string(), "008");
        assert_eq!(n(" 12 ").as_str(), "12");
        assert_eq!(n("008").number(), 8);
        assert_ne!(n("008"), n("8"));
        let mut names = [n("10"), n("9"), n("001"), n("1"), n("0002")];
        names.sort();
        let shown: Vec<&str> = names.iter().map(|x| x.as_str()).collect();
        assert_eq!(shown, ["001", "1", "0002", "9", "10"]);
        for bad in ["", "a1", "-1", "1.0", "12345678901", "4294967296", "１"] {
            assert!(IterationName::new(bad).is_err(), "{bad:?}");
        }
        assert_eq!(n("4294967295").number(), u32::MAX);
        assert_eq!(IterationName::from(7).as_str(), "7");
        assert_eq!(n("8").padded().as_str(), "008");
        assert_eq!(n("1234").padded().as_str(), "1234");
        assert_eq!(n("012").padded().as_str(), "012");
    }

    #[test]
    fn c1_3_a_name_finds_its_iteration_by_text_then_by_number() {
        let dirs = [n("001"), n("1"), n("008"), n("10")];
        let find = |s: &str| n(s).find(&dirs, |x| *x).map(|x| x.as_str());
        assert_eq!(find("1"), Some("1"));
        assert_eq!(find("001"), Some("001"));
        assert_eq!(find("8"), Some("008"));
        assert_eq!(find("0010"), Some("10"));
        assert_eq!(find("2"), None);
    }

    #[test]
    fn iteration_names_are_strings_in_json_and_old_numbers_still_load() {
        assert_eq!(serde_json::to_string(&n("008")).unwrap(), "\"008\"");
        let back: IterationName = serde_json::from_str("\"008\"").unwrap();
        assert_eq!(back, n("008"));
        let old: IterationName = serde_json::from_str("3").unwrap();
        assert_eq!(old, n("3"));
        assert!(serde_json::from_str::<IterationName>("\"x\"").is_err());
        assert!(serde_json::from_str::<IterationName>("-1").is_err());
        let map: std::collections::BTreeMap<IterationName, u8> =
            serde_json::from_str("{\"010\": 1, \"9\": 2}").unwrap();
        assert_eq!(map.keys().next(), Some(&n("9")));
    }
}
