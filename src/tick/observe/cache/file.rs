//! The cache file: a header, the entries one after another, and an index at the end.
//!
//! ```text
//! "braids-observe\0\0" | version u32 | generation u64 | entries… | index | index offset u64 | "end\0"
//! index: count, then per project: slug, offset, length
//! ```
//!
//! A run reads the header and the index, then each project's observation reads its own entry
//! with one `pread` on its own thread: the file is never held in memory whole, and decoding is
//! spread over the observing threads. A full run streams the entries into a temp file as the
//! observations finish and renames it into place at the end (`atomic::Streamed`).
//!
//! The generation is a random number written in the header and recorded in the state the run
//! writes after; a reader given another generation (a run killed between the two writes, a file
//! from elsewhere) sees no cache at all. Anything else wrong with the file (missing, truncated,
//! another version, garbage) is no cache too, never an error.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::codec::{Dec, Enc};

const MAGIC: &[u8; 16] = b"braids-observe\0\0";
const END: &[u8; 4] = b"end\0";
/// Bump when an entry's layout changes: a file of another version is no cache.
const VERSION: u32 = 3;
const HEADER: u64 = 16 + 4 + 8;
const TRAILER: u64 = 8 + 4;

/// Where one project's entry lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    offset: u64,
    len: u32,
}

/// An open cache file and its index.
#[derive(Debug)]
pub struct Reader {
    file: File,
    index: HashMap<Box<str>, Loc>,
}

impl Reader {
    /// The cache at `path` when it is the one of `generation`; `None` otherwise.
    pub fn open(path: &Path, generation: u64) -> Option<Reader> {
        let file = File::open(path).ok()?;
        let size = file.metadata().ok().filter(|m| m.is_file())?.len();
        let mut head = [0u8; HEADER as usize];
        file.read_exact_at(&mut head, 0).ok()?;
        let version = u32::from_le_bytes(head[16..20].try_into().ok()?);
        let theirs = u64::from_le_bytes(head[20..28].try_into().ok()?);
        if &head[..16] != MAGIC || version != VERSION || theirs != generation {
            return None;
        }
        let mut tail = [0u8; TRAILER as usize];
        file.read_exact_at(&mut tail, size.checked_sub(TRAILER)?)
            .ok()?;
        if &tail[8..] != END {
            return None;
        }
        let at = Dec::new(&tail[..8]).u64_fixed()?;
        let index_len = size.checked_sub(TRAILER)?.checked_sub(at)?;
        if at < HEADER {
            return None;
        }
        let mut raw = vec![0u8; usize::try_from(index_len).ok()?];
        file.read_exact_at(&mut raw, at).ok()?;
        let mut d = Dec::new(&raw);
        let n = d.len()?;
        let mut index = HashMap::with_capacity(n);
        for _ in 0..n {
            let slug = d.str()?;
            let loc = Loc {
                offset: d.uint()?,
                len: u32::try_from(d.uint()?).ok()?,
            };
            if loc.offset < HEADER || loc.offset.checked_add(u64::from(loc.len))? > at {
                return None;
            }
            index.insert(slug.into(), loc);
        }
        d.is_empty().then_some(Reader { file, index })
    }

    pub fn find(&self, slug: &str) -> Option<Loc> {
        self.index.get(slug).copied()
    }

    /// The bytes of one entry (safe to call from many threads at once).
    pub fn read(&self, loc: Loc) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; loc.len as usize];
        self.file.read_exact_at(&mut buf, loc.offset).ok()?;
        Some(buf)
    }
}

/// A cache file being written: entries as they come, then the index.
pub struct Writer {
    out: crate::system::atomic::Streamed,
    generation: u64,
    at: u64,
    index: Enc,
    count: u64,
}

impl Writer {
    pub fn create(path: &Path) -> anyhow::Result<Writer> {
        let generation = fresh_generation();
        let mut out = crate::system::atomic::Streamed::create(path)?;
        let mut head = Vec::with_capacity(HEADER as usize);
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&VERSION.to_le_bytes());
        head.extend_from_slice(&generation.to_le_bytes());
        out.write_all(&head)?;
        Ok(Writer {
            out,
            generation,
            at: HEADER,
            index: Enc::default(),
            count: 0,
        })
    }

    pub fn add(&mut self, slug: &str, entry: &[u8]) -> anyhow::Result<()> {
        self.out.write_all(entry)?;
        self.index.str(slug);
        self.index.uint(self.at);
        self.index.uint(entry.len() as u64);
        self.at += entry.len() as u64;
        self.count += 1;
        Ok(())
    }

    /// Writes the index and puts the file in place; returns its generation, for the state.
    pub fn finish(mut self) -> anyhow::Result<u64> {
        let mut tail = Enc::default();
        tail.uint(self.count);
        self.out.write_all(&tail.0)?;
        self.out.write_all(&self.index.0)?;
        self.out.write_all(&self.at.to_le_bytes())?;
        self.out.write_all(END)?;
        self.out.commit()?;
        Ok(self.generation)
    }
}

/// A number no earlier cache file is likely to carry: std's per-process random hash keys,
/// mixed with the time and the process id.
fn fresh_generation() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(path: &Path, entries: &[(&str, &[u8])]) -> u64 {
        let mut w = Writer::create(path).unwrap();
        for (slug, bytes) in entries {
            w.add(slug, bytes).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn c5_2_entries_are_found_by_slug_in_the_generation_written() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.bin");
        let g = written(&p, &[("a", b"alpha"), ("b", b""), ("c", b"gamma")]);
        let r = Reader::open(&p, g).unwrap();
        for (slug, want) in [("a", &b"alpha"[..]), ("b", b""), ("c", b"gamma")] {
            assert_eq!(r.read(r.find(slug).unwrap()).unwrap(), want);
        }
        assert_eq!(r.find("d"), None);
        assert!(Reader::open(&p, g ^ 1).is_none(), "another generation");
        let g2 = written(&p, &[]);
        assert_ne!(g, g2);
        assert!(Reader::open(&p, g2).unwrap().find("a").is_none());
    }

    #[test]
    fn c5_2_a_garbage_truncated_or_missing_cache_is_no_cache() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.bin");
        assert!(Reader::open(&p, 0).is_none(), "missing");
        let g = written(&p, &[("a", b"alpha"), ("b", b"beta")]);
        let good = std::fs::read(&p).unwrap();
        for cut in 0..good.len() {
            std::fs::write(&p, &good[..cut]).unwrap();
            assert!(Reader::open(&p, g).is_none(), "cut at {cut}");
        }
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x5a;
            std::fs::write(&p, &b).unwrap();
            // a flipped byte inside an entry is the entry's decoder's business; anywhere
            // else the file is refused or still reads, never a panic
            if let Some(r) = Reader::open(&p, g) {
                for slug in ["a", "b"] {
                    if let Some(loc) = r.find(slug) {
                        assert!(r.read(loc).is_some());
                    }
                }
            }
        }
        std::fs::write(&p, "{\"version\": 1, \"projects\": {}}").unwrap();
        assert!(Reader::open(&p, g).is_none(), "an old JSON cache");
        std::fs::remove_file(&p).unwrap();
        std::fs::create_dir(&p).unwrap();
        assert!(Reader::open(&p, g).is_none(), "a directory");
    }
}
