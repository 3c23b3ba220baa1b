//! The vector cache: one embedding per distinct text and model, quantised to int8, kept under
//! `.memdir/vectors/<model>/vectors.bin` and keyed by the BLAKE3 hash of the text embedded.
//! A rebuild of every index re-embeds nothing whose text is unchanged, and two chunks with the
//! same text share one vector.
//!
//! Format (see STORAGE.md): an 8-byte magic `MDVEC001`, the dimensions (u32 LE), the length
//! of the model id (u32 LE) and the id; then fixed-size records `hash[32] | scale f32 LE |
//! check u32 LE | dims × i8`, where `check` is the first four bytes of the BLAKE3 of the rest
//! of the record. Records are only appended, one `write` per batch. The file is a cache: it is
//! never synced (a lost record is embedded again), a record whose check fails is skipped, and
//! a torn tail is cut off before the next append.
//!
//! A forget takes a text's vector out ([`VectorCache::retain_all`]): the file is rewritten
//! without the records of texts no longer indexed and renamed over the old one. A process that
//! holds the old file in memory notices the new one (another file, or a shorter one) on its
//! next read and reads it afresh; its [`VectorCache::generation`] then moves, so row numbers
//! taken before are stale.
//!
//! Quantisation is symmetric per vector: `x ≈ scale × q` with `q` in -127..=127. Vectors are
//! unit length, so the dot product of two is their cosine; it is computed on the integers
//! (an i32 sum the compiler vectorises) and scaled once.

use memdir_store::fsx::private_file;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"MDVEC001";

/// A content hash (BLAKE3 of the text embedded).
pub type Hash = [u8; 32];

/// The hash of a text.
pub fn hash(text: &str) -> Hash {
    *blake3::hash(text.as_bytes()).as_bytes()
}

/// A quantised vector.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    pub scale: f32,
    pub q: Vec<i8>,
}

/// Quantises a vector to int8.
pub fn quantize(v: &[f32]) -> Quantized {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
    Quantized {
        scale,
        q: v.iter()
            .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
            .collect(),
    }
}

/// The integer dot product of two quantised vectors of equal length.
#[inline]
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    // Products of two i8 fit an i16: this form compiles to packed multiply-adds (SSE2
    // `pmaddwd`), measured 1.6x faster than widening each product to i32 first.
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (x as i16 * y as i16) as i32)
        .sum()
}

/// Errors of the cache: always the path and what went wrong.
#[derive(Debug)]
pub struct CacheError(pub String);

fn err(path: &Path, what: &str, e: impl std::fmt::Display) -> CacheError {
    CacheError(format!("{what} {}: {e}", path.display()))
}

/// The vectors of one model, in memory, with the file they come from.
pub struct VectorCache {
    path: PathBuf,
    model_id: String,
    /// `None` until the first vector is stored or read.
    dims: Option<usize>,
    /// Bytes of the file read so far (a multiple of the record size after the header).
    read_to: u64,
    /// Which file those bytes came from ([`identity`]): another one means the file was
    /// rewritten, and is read afresh.
    file_id: Option<u64>,
    /// How often the vectors were read afresh (rows renumbered).
    generation: u64,
    rows: HashMap<Hash, u32>,
    scales: Vec<f32>,
    data: Vec<i8>,
    /// The sign bits of each vector, `words` u64 per row: a coarse first pass (Hamming
    /// distance) reads an eighth of the bytes the int8 pass does.
    bits: Vec<u64>,
}

/// The sign bits of a quantised vector (1 where the component is positive).
pub fn sign_bits(q: &[i8]) -> Vec<u64> {
    let mut out = vec![0u64; q.len().div_ceil(64)];
    for (i, x) in q.iter().enumerate() {
        if *x > 0 {
            out[i / 64] |= 1 << (i % 64);
        }
    }
    out
}

impl VectorCache {
    /// The directory of a model's vectors under `vectors_dir`: a readable prefix of its id and
    /// a hash of the whole id.
    pub fn dir_for(vectors_dir: &Path, model_id: &str) -> PathBuf {
        let slug: String = model_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(48)
            .collect();
        let h = blake3::hash(model_id.as_bytes()).to_hex();
        vectors_dir.join(format!("{slug}-{}", &h[..12]))
    }

    /// Opens (or starts) the cache of `model_id` in `dir` and reads what it holds.
    pub fn open(dir: &Path, model_id: &str) -> Result<VectorCache, CacheError> {
        let mut c = VectorCache {
            path: dir.join("vectors.bin"),
            model_id: model_id.to_string(),
            dims: None,
            read_to: 0,
            file_id: None,
            generation: 0,
            rows: HashMap::new(),
            scales: Vec::new(),
            data: Vec::new(),
            bits: Vec::new(),
        };
        c.reload()?;
        Ok(c)
    }

    /// The dimensions of its vectors, once known.
    pub fn dims(&self) -> Option<usize> {
        self.dims
    }

    /// Moves each time the vectors are read afresh from a rewritten file: rows taken before
    /// then point at other vectors.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Forgets what was read, to read the file afresh.
    fn reset(&mut self) {
        self.dims = None;
        self.read_to = 0;
        self.file_id = None;
        self.rows.clear();
        self.scales.clear();
        self.data.clear();
        self.bits.clear();
        self.generation += 1;
    }

    /// Sees whether `f` (of length `len`) is still the file read so far; resets if not.
    fn check_same(&mut self, f: &File, len: u64) -> Result<(), CacheError> {
        let id = identity(&f.metadata().map_err(|e| err(&self.path, "stat", e))?);
        if self.read_to > 0 && (self.file_id != Some(id) || len < self.read_to) {
            self.reset();
        }
        self.file_id = Some(id);
        Ok(())
    }

    /// Number of vectors held.
    pub fn len(&self) -> usize {
        self.scales.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scales.is_empty()
    }

    /// The row of a text's vector, if embedded.
    pub fn row(&self, h: &Hash) -> Option<u32> {
        self.rows.get(h).copied()
    }

    /// A row's integers and scale.
    #[inline]
    pub fn vector(&self, row: u32) -> (&[i8], f32) {
        let d = self.dims.unwrap_or(0);
        let r = row as usize;
        (&self.data[r * d..(r + 1) * d], self.scales[r])
    }

    /// The Hamming distance of `q`'s sign bits to every stored vector's, by row: one
    /// sequential pass over an eighth of the bytes of the vectors (memory, not arithmetic,
    /// bounds a brute-force pass; visiting rows in document order was slower still).
    pub fn hamming_all(&self, q: &Quantized) -> Vec<u16> {
        let Some(d) = self.dims.filter(|d| *d == q.q.len()) else {
            return vec![u16::MAX; self.scales.len()];
        };
        let qb = sign_bits(&q.q);
        self.bits
            .chunks_exact(d.div_ceil(64))
            .map(|b| {
                b.iter()
                    .zip(&qb)
                    .map(|(x, y)| (x ^ y).count_ones())
                    .sum::<u32>() as u16
            })
            .collect()
    }

    /// The cosine of `q` with the vector in `row` (int8 dot product, scaled).
    #[inline]
    pub fn score(&self, q: &Quantized, row: u32) -> f32 {
        let (v, s) = self.vector(row);
        dot_i8(&q.q, v) as f32 * q.scale * s
    }

    fn record_len(dims: usize) -> u64 {
        32 + 4 + 4 + dims as u64
    }

    fn header(&self, dims: usize) -> Vec<u8> {
        let mut h = MAGIC.to_vec();
        h.extend_from_slice(&(dims as u32).to_le_bytes());
        h.extend_from_slice(&(self.model_id.len() as u32).to_le_bytes());
        h.extend_from_slice(self.model_id.as_bytes());
        h
    }

    /// Reads records appended since the last read (by this or another process).
    pub fn reload(&mut self) -> Result<(), CacheError> {
        let mut f = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(err(&self.path, "open", e)),
        };
        let len = f.metadata().map_err(|e| err(&self.path, "stat", e))?.len();
        self.check_same(&f, len)?;
        if self.read_to == 0 {
            let mut head = [0u8; 16];
            if f.read_exact(&mut head).is_err() || &head[..8] != MAGIC {
                return Ok(()); // torn or foreign: rewritten on the next append
            }
            let dims = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes")) as usize;
            let id_len = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes")) as u64;
            let mut id = vec![0u8; id_len.min(4096) as usize];
            if f.read_exact(&mut id).is_err() || id != self.model_id.as_bytes() || dims == 0 {
                return Ok(());
            }
            self.dims = Some(dims);
            self.read_to = 16 + id_len;
        }
        let Some(dims) = self.dims else {
            return Ok(());
        };
        let rec = Self::record_len(dims);
        let whole = (len.saturating_sub(self.read_to)) / rec * rec;
        if whole == 0 {
            return Ok(());
        }
        f.seek(SeekFrom::Start(self.read_to))
            .map_err(|e| err(&self.path, "seek", e))?;
        let mut buf = vec![0u8; whole as usize];
        f.read_exact(&mut buf)
            .map_err(|e| err(&self.path, "read", e))?;
        for r in buf.chunks_exact(rec as usize) {
            let check = blake3::hash(&[&r[..36], &r[40..]].concat());
            if check.as_bytes()[..4] != r[36..40] {
                continue;
            }
            let h: Hash = r[..32].try_into().expect("32 bytes");
            if self.rows.contains_key(&h) {
                continue;
            }
            self.rows.insert(h, self.scales.len() as u32);
            self.scales
                .push(f32::from_le_bytes(r[32..36].try_into().expect("4 bytes")));
            let q: Vec<i8> = r[40..].iter().map(|b| *b as i8).collect();
            self.bits.extend(sign_bits(&q));
            self.data.extend(q);
        }
        self.read_to += whole;
        Ok(())
    }

    /// Stores vectors (unit length, all of one length) for their texts' hashes, in memory and
    /// at the end of the file. A vector of other dimensions than the cache holds is an error.
    pub fn insert(&mut self, items: &[(Hash, Vec<f32>)]) -> Result<(), CacheError> {
        let Some(first) = items.first() else {
            return Ok(());
        };
        let same = |dims: usize| match items.iter().find(|(_, v)| v.len() != dims) {
            Some((_, v)) => Err(CacheError(format!(
                "a vector of {} dimensions for a cache of {dims}",
                v.len()
            ))),
            None => Ok(()),
        };
        same(self.dims.unwrap_or(first.1.len()))?;
        if let Some(parent) = self.path.parent() {
            create_private_dir(parent).map_err(|e| err(parent, "create", e))?;
        }
        let mut f = private_file(OpenOptions::new().create(true).read(true).append(true))
            .open(&self.path)
            .map_err(|e| err(&self.path, "open", e))?;
        let mut len = f.metadata().map_err(|e| err(&self.path, "stat", e))?.len();
        let read_before = self.read_to;
        self.check_same(&f, len)?;
        if read_before > 0 && self.read_to == 0 {
            // Rewritten by a forget since it was read: read afresh before appending.
            self.reload()?;
            len = f.metadata().map_err(|e| err(&self.path, "stat", e))?.len();
        }
        let dims = *self.dims.get_or_insert(first.1.len());
        same(dims)?;
        let header = self.header(dims);
        let rec = Self::record_len(dims);
        let mut out = Vec::with_capacity(items.len() * rec as usize + header.len());
        if len < header.len() as u64 || self.read_to == 0 {
            // New, torn or foreign: start it afresh (it is a cache).
            f.set_len(0).map_err(|e| err(&self.path, "truncate", e))?;
            out.extend_from_slice(&header);
            self.read_to = header.len() as u64;
        } else if !(len - self.read_to).is_multiple_of(rec) {
            // A torn record at the end: cut it so records stay aligned.
            self.reload()?;
            let aligned = self.read_to + (len - self.read_to) / rec * rec;
            f.set_len(aligned)
                .map_err(|e| err(&self.path, "truncate", e))?;
        }
        for (h, v) in items {
            if self.rows.contains_key(h) {
                continue;
            }
            let qv = quantize(v);
            let at = out.len();
            out.extend_from_slice(h);
            out.extend_from_slice(&qv.scale.to_le_bytes());
            let body: Vec<u8> = qv.q.iter().map(|x| *x as u8).collect();
            let check = blake3::hash(&[&out[at..at + 36], &body[..]].concat());
            out.extend_from_slice(&check.as_bytes()[..4]);
            out.extend_from_slice(&body);
        }
        // A cache: no fsync; a record lost to a crash is embedded again.
        f.write_all(&out)
            .map_err(|e| err(&self.path, "append to", e))?;
        // Ours and whatever another process appended meanwhile.
        self.reload()?;
        Ok(())
    }

    /// Rewrites the cache of every model under `vectors_dir` (the directories
    /// [`VectorCache::dir_for`] names) without the records of texts `keep` refuses; returns how
    /// many records went. A file whose header is not a cache's is removed (it is a cache).
    pub fn retain_all(vectors_dir: &Path, keep: &dyn Fn(&Hash) -> bool) -> Result<u64, CacheError> {
        let rd = match std::fs::read_dir(vectors_dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(err(vectors_dir, "list", e)),
        };
        let mut gone = 0;
        for entry in rd {
            let entry = entry.map_err(|e| err(vectors_dir, "list", e))?;
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                gone += retain_file(&entry.path().join("vectors.bin"), keep)?;
            }
        }
        Ok(gone)
    }

    /// Whether any model's cache exists under `vectors_dir`.
    pub fn any_in(vectors_dir: &Path) -> bool {
        std::fs::read_dir(vectors_dir)
            .is_ok_and(|rd| rd.flatten().any(|e| e.path().join("vectors.bin").is_file()))
    }
}

/// Which file an open file is: its inode where there is one, else nothing to tell files apart
/// by (a rewrite is then noticed when the file got shorter).
fn identity(meta: &std::fs::Metadata) -> u64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        0
    }
}

/// Creates `dir` and its missing parents, each only its owner may list.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(dir)
}

/// [`VectorCache::retain_all`] for one file: the kept records are streamed to a new file that
/// replaces it; nothing is written when every record stays.
fn retain_file(path: &Path, keep: &dyn Fn(&Hash) -> bool) -> Result<u64, CacheError> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(err(path, "open", e)),
    };
    let mut r = BufReader::new(f);
    let mut head = [0u8; 16];
    let header = (|| {
        r.read_exact(&mut head).ok()?;
        let dims = u32::from_le_bytes(head[8..12].try_into().ok()?) as usize;
        let id_len = u32::from_le_bytes(head[12..16].try_into().ok()?) as usize;
        if &head[..8] != MAGIC || dims == 0 || id_len > 4096 {
            return None;
        }
        let mut id = vec![0u8; id_len];
        r.read_exact(&mut id).ok()?;
        Some((dims, [&head[..], &id[..]].concat()))
    })();
    let Some((dims, header)) = header else {
        std::fs::remove_file(path).map_err(|e| err(path, "remove", e))?;
        return Ok(0);
    };
    let tmp = path.with_extension("bin.tmp");
    let mut w = BufWriter::new(
        private_file(OpenOptions::new().write(true).create(true).truncate(true))
            .open(&tmp)
            .map_err(|e| err(&tmp, "create", e))?,
    );
    w.write_all(&header).map_err(|e| err(&tmp, "write", e))?;
    let mut rec = vec![0u8; VectorCache::record_len(dims) as usize];
    let mut gone = 0;
    loop {
        match r.read_exact(&mut rec) {
            Ok(()) => {}
            // The end, or a torn record: nothing after it is a record.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(err(path, "read", e)),
        }
        let h: Hash = rec[..32]
            .try_into()
            .expect("invariant: a record starts with its hash");
        if keep(&h) {
            w.write_all(&rec).map_err(|e| err(&tmp, "write", e))?;
        } else {
            gone += 1;
        }
    }
    if gone == 0 {
        drop(w);
        let _ = std::fs::remove_file(&tmp);
        return Ok(0);
    }
    w.flush().map_err(|e| err(&tmp, "write", e))?;
    // A cache: no fsync. A crash before the rename leaves the old file (the forget's purge
    // runs again with the next forget); after it, the new one.
    std::fs::rename(&tmp, path).map_err(|e| err(path, "replace", e))?;
    Ok(gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(seed: u32, d: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..d)
            .map(|i| (((seed as usize * 31 + i * 17) % 23) as f32) - 11.0)
            .collect();
        crate::embed::normalize(&mut v);
        v
    }

    #[test]
    fn quantised_dot_products_stay_close_to_cosines() {
        let (a, b) = (unit(1, 384), unit(2, 384));
        let exact: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        let (qa, qb) = (quantize(&a), quantize(&b));
        let approx = dot_i8(&qa.q, &qb.q) as f32 * qa.scale * qb.scale;
        assert!((exact - approx).abs() < 0.01, "{exact} vs {approx}");
    }

    #[test]
    fn a_retain_takes_the_hashes_and_vectors_out_of_the_file_and_every_reader_notices() {
        let root = tempfile::tempdir().unwrap();
        let vectors = root.path().join("vectors");
        let dir = VectorCache::dir_for(&vectors, "m");
        let mut c = VectorCache::open(&dir, "m").unwrap();
        c.insert(&[(hash("a"), unit(1, 8)), (hash("gone"), unit(2, 8))])
            .unwrap();
        c.insert(&[(hash("c"), unit(3, 8))]).unwrap();
        let path = dir.join("vectors.bin");
        let holds = |h: &Hash| {
            let bytes = std::fs::read(&path).unwrap();
            bytes.windows(32).any(|w| w == h)
        };
        assert!(holds(&hash("gone")));
        // Another model's cache in the same root, and a file that is no cache at all.
        let other = VectorCache::dir_for(&vectors, "other");
        VectorCache::open(&other, "other")
            .unwrap()
            .insert(&[(hash("gone"), unit(2, 4))])
            .unwrap();
        let junk = vectors.join("junk");
        std::fs::create_dir_all(&junk).unwrap();
        std::fs::write(junk.join("vectors.bin"), hash("gone")).unwrap();
        assert!(VectorCache::any_in(&vectors));

        let gone = VectorCache::retain_all(&vectors, &|h| *h != hash("gone")).unwrap();
        assert_eq!(gone, 2);
        assert!(!holds(&hash("gone")) && holds(&hash("a")) && holds(&hash("c")));
        assert!(VectorCache::open(&other, "other").unwrap().is_empty());
        assert!(!junk.join("vectors.bin").exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Nothing to take out: the file stays as it is.
        assert_eq!(VectorCache::retain_all(&vectors, &|_| true).unwrap(), 0);

        // The reader that held the old file reads the new one afresh, rows renumbered.
        let before = c.generation();
        c.reload().unwrap();
        assert_eq!(c.generation(), before + 1);
        assert_eq!(c.len(), 2);
        assert!(c.row(&hash("gone")).is_none());
        let fresh = VectorCache::open(&dir, "m").unwrap();
        assert_eq!(
            c.vector(c.row(&hash("c")).unwrap()),
            fresh.vector(fresh.row(&hash("c")).unwrap())
        );
        // A writer that held the old file appends to the new one, aligned.
        let mut w = VectorCache::open(&dir, "m").unwrap();
        VectorCache::retain_all(&vectors, &|h| *h != hash("a")).unwrap();
        w.insert(&[(hash("d"), unit(4, 8))]).unwrap();
        assert!(w.row(&hash("a")).is_none());
        let reread = VectorCache::open(&dir, "m").unwrap();
        assert_eq!(reread.len(), 2);
        assert_eq!(
            reread.vector(reread.row(&hash("d")).unwrap()),
            w.vector(w.row(&hash("d")).unwrap())
        );
        let g = c.generation();
        c.reload().unwrap();
        assert_eq!(c.generation(), g + 1, "a second rewrite is noticed too");
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn vectors_survive_a_reopen_and_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = VectorCache::open(dir.path(), "m").unwrap();
        c.insert(&[(hash("a"), unit(1, 8)), (hash("b"), unit(2, 8))])
            .unwrap();
        c.insert(&[(hash("c"), unit(3, 8))]).unwrap();
        let path = dir.path().join("vectors.bin");
        let len = std::fs::metadata(&path).unwrap().len();
        // A torn record at the end.
        OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&[1, 2, 3])
            .unwrap();
        let mut d = VectorCache::open(dir.path(), "m").unwrap();
        assert_eq!(d.len(), 3);
        assert_eq!(
            d.vector(d.row(&hash("b")).unwrap()),
            c.vector(c.row(&hash("b")).unwrap())
        );
        d.insert(&[(hash("d"), unit(4, 8))]).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), len + 48);
        assert_eq!(VectorCache::open(dir.path(), "m").unwrap().len(), 4);
        // Another model's id: nothing of this one is read, and its first insert starts afresh.
        let mut other = VectorCache::open(dir.path(), "other").unwrap();
        assert!(other.is_empty());
        assert!(other.insert(&[(hash("x"), unit(5, 4))]).is_ok());
        assert_eq!(VectorCache::open(dir.path(), "other").unwrap().len(), 1);
        let mut e = VectorCache::open(dir.path(), "other").unwrap();
        assert!(e.insert(&[(hash("y"), unit(5, 5))]).is_err());
    }
}
