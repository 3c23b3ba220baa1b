//! The document store read with `pread`, not mapped ([`StoreFiles`]).
//!
//! A search reads a few stored documents: its hits and their windows, one compressed block of
//! a few KiB each. Through a memory map every such read faults in the pages around it too (the
//! kernel maps up to 64 KiB of cached neighbours per fault), so a long-lived server came to
//! hold most of the document store in its resident memory: 157 MiB of 315 after 10,000
//! searches at 1M chunks. Read with `pread`, a block is copied into a buffer that lives as long
//! as its decompression; the page cache still keeps what the system has room for, but it is
//! no longer counted against the process, and the memory it takes can be reclaimed without
//! touching the process's page tables.
//!
//! Large reads (a merge stacks whole stores) still go through the map, so a merge never copies
//! a store into memory.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use tantivy::HasLen;
use tantivy::directory::{FileHandle, OwnedBytes};

/// Reads up to this size are copied with `pread`; larger ones are served by the map.
pub(super) const PREAD_MAX: usize = 256 * 1024;

/// Whether `path` is a segment's document store.
pub(super) fn is_store(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "store")
}

/// One document store file: an open descriptor for small reads, the map for large ones.
pub(super) struct StoreFile {
    #[cfg(unix)]
    file: std::fs::File,
    mapped: Arc<dyn FileHandle>,
}

impl fmt::Debug for StoreFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreFile({} bytes)", self.mapped.len())
    }
}

impl HasLen for StoreFile {
    fn len(&self) -> usize {
        self.mapped.len()
    }
}

impl FileHandle for StoreFile {
    fn read_bytes(&self, range: Range<usize>) -> std::io::Result<OwnedBytes> {
        #[cfg(unix)]
        if range.len() <= PREAD_MAX {
            use std::os::unix::fs::FileExt as _;
            if range.end > self.len() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("read past the end of a store file: {range:?}"),
                ));
            }
            let mut buf = vec![0u8; range.len()];
            self.file.read_exact_at(&mut buf, range.start as u64)?;
            return Ok(OwnedBytes::new(buf));
        }
        self.mapped.read_bytes(range)
    }
}

/// The store files open now, shared by every reader of a segment (a reload opens each segment
/// again; its store is not opened again while a reader still holds it).
#[derive(Clone, Default)]
pub(super) struct StoreFiles {
    open: Arc<Mutex<HashMap<PathBuf, Weak<StoreFile>>>>,
}

impl StoreFiles {
    /// The handle of the store at `full` (the path on disk), given its mapped handle. Where the
    /// file cannot be opened for reading (it was just deleted, or this is not Unix), the map
    /// serves every read.
    #[cfg(unix)]
    pub(super) fn handle(&self, full: &Path, mapped: Arc<dyn FileHandle>) -> Arc<dyn FileHandle> {
        let Ok(mut open) = self.open.lock() else {
            return mapped;
        };
        if let Some(f) = open.get(full).and_then(Weak::upgrade) {
            return f;
        }
        let Ok(file) = std::fs::File::open(full) else {
            return mapped;
        };
        let f = Arc::new(StoreFile { file, mapped });
        open.retain(|_, w| w.strong_count() > 0);
        open.insert(full.to_path_buf(), Arc::downgrade(&f));
        f
    }

    /// Without `pread`, the map serves every read.
    #[cfg(not(unix))]
    pub(super) fn handle(&self, _full: &Path, mapped: Arc<dyn FileHandle>) -> Arc<dyn FileHandle> {
        mapped
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use tantivy::directory::{Directory, MmapDirectory};

    fn write(dir: &Path, name: &str, data: &[u8]) {
        std::fs::write(dir.join(name), data).unwrap();
    }

    #[test]
    fn small_reads_are_copied_large_ones_mapped_and_both_agree_with_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..PREAD_MAX * 2).map(|i| (i * 7 % 251) as u8).collect();
        write(tmp.path(), "a.store", &data);
        let mmap = MmapDirectory::open(tmp.path()).unwrap();
        let files = StoreFiles::default();
        let mapped = mmap.get_file_handle(Path::new("a.store")).unwrap();
        let h = files.handle(&tmp.path().join("a.store"), mapped);
        assert_eq!(h.len(), data.len());
        for r in [0..0, 0..10, 5..4096, 100..PREAD_MAX + 100, 0..data.len()] {
            assert_eq!(h.read_bytes(r.clone()).unwrap().as_slice(), &data[r]);
        }
        // Past the end is an error, not a panic or short read.
        assert!(h.read_bytes(data.len() - 1..data.len() + 1).is_err());
    }

    #[test]
    fn a_store_open_twice_shares_one_descriptor_until_its_readers_are_gone() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "b.store", b"hello");
        let mmap = MmapDirectory::open(tmp.path()).unwrap();
        let files = StoreFiles::default();
        let full = tmp.path().join("b.store");
        let open = || files.handle(&full, mmap.get_file_handle(Path::new("b.store")).unwrap());
        let a = open();
        let b = open();
        assert!(Arc::ptr_eq(&a, &b));
        drop((a, b));
        // Gone with its last reader: a file of the same name written later is read anew.
        write(tmp.path(), "b.store", b"world");
        let c = open();
        assert_eq!(c.read_bytes(0..5).unwrap().as_slice(), b"world");
        assert_eq!(files.open.lock().unwrap().len(), 1);
    }

    #[test]
    fn a_store_that_cannot_be_opened_is_read_through_its_map() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "c.store", b"mapped");
        let mmap = MmapDirectory::open(tmp.path()).unwrap();
        let mapped = mmap.get_file_handle(Path::new("c.store")).unwrap();
        let files = StoreFiles::default();
        let h = files.handle(&tmp.path().join("missing.store"), mapped);
        assert_eq!(h.read_bytes(0..6).unwrap().as_slice(), b"mapped");
    }
}
