//! The one gate between memdir and the files of a memory directory: links are never followed
//! inside the store, only regular files are read, and reads are bounded.
//!
//! A memory directory is tracked with git, edited by hand and synced, so what sits in it is not
//! always what memdir wrote: git carries symbolic links, and a hand edit can leave a directory
//! where a file belongs, a FIFO, or a link to `/dev/zero`. The rules, enforced here and nowhere
//! else:
//!
//! - **No link is followed below the root.** Reads open with `O_NOFOLLOW`; writes check every
//!   component from the root down ([`check_no_links`]) before they create, append, truncate,
//!   rename or remove, so nothing outside the store is ever changed through a link. Listings
//!   skip links. `verify-store` reports them. (The root itself may be a link: that is the
//!   user's choice of where the store lives.)
//! - **Only regular files are read**, opened without blocking so a FIFO cannot hang a reader,
//!   and never more than a bound (a file over the bound is reported, not loaded).
//! - A file that breaks these rules is broken on its own: callers report it and go on with
//!   every other file.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::io::{self, Read};
use std::path::{Component, Path};

use crate::failpoint;
use memdir_api::error::{IoContext, IoError};

/// Largest category or history file memdir reads.
pub const MAX_JSON_FILE: u64 = 64 * 1024 * 1024;
/// Largest segment file memdir reads.
pub const MAX_SEGMENT_FILE: u64 = 4 * 1024 * 1024 * 1024;

/// Also sets the mode of files it creates: 0600, memories are private.
#[cfg(unix)]
fn no_follow(o: &mut OpenOptions, nonblock: bool) {
    use std::os::unix::fs::OpenOptionsExt;
    let mut flags = libc::O_NOFOLLOW | libc::O_CLOEXEC;
    if nonblock {
        flags |= libc::O_NONBLOCK;
    }
    o.custom_flags(flags).mode(0o600);
}

#[cfg(not(unix))]
fn no_follow(_o: &mut OpenOptions, _nonblock: bool) {}

fn err(op: &'static str, path: &Path, source: io::Error) -> IoError {
    IoError {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// The error for a link met inside the store.
pub fn link_error(op: &'static str, path: &Path) -> IoError {
    err(
        op,
        path,
        io::Error::other(
            "is a symbolic link; memdir never follows links inside the memory directory",
        ),
    )
}

/// ELOOP: what `O_NOFOLLOW` answers for a link.
fn is_loop(e: &io::Error) -> bool {
    e.raw_os_error() == Some(40)
}

/// Opens a regular file for reading without following a final link and without blocking on
/// a FIFO; checks the type on the open descriptor. Returns the file and its length.
fn open_regular(path: &Path) -> Result<(File, u64), IoError> {
    let mut o = OpenOptions::new();
    o.read(true);
    no_follow(&mut o, true);
    let f = o.open(path).map_err(|e| {
        if is_loop(&e) {
            link_error("read", path)
        } else {
            err("read", path, e)
        }
    })?;
    let meta = f.metadata().map_err(|e| err("stat", path, e))?;
    if !meta.is_file() {
        return Err(err(
            "read",
            path,
            io::Error::other("is not a regular file; memdir reads only regular files"),
        ));
    }
    Ok((f, meta.len()))
}

/// Reads a whole regular file of at most `limit` bytes. `Ok(None)` when it does not exist.
pub fn read(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, IoError> {
    let (f, len) = match open_regular(path) {
        Ok(x) => x,
        Err(e) if e.source.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if len > limit {
        return Err(too_large(path, len, limit));
    }
    let mut buf = Vec::with_capacity(len as usize);
    f.take(limit + 1)
        .read_to_end(&mut buf)
        .map_err(|e| err("read", path, e))?;
    if buf.len() as u64 > limit {
        return Err(too_large(path, buf.len() as u64, limit));
    }
    Ok(Some(buf))
}

/// Whether the regular file at `path` holds exactly `expected`, compared as it is read in
/// small blocks (nothing of the file is kept): `false` when it is absent, another length or
/// differs anywhere. A caller that holds what it wrote last learns that the file is still
/// that, at the cost of reading it, without allocating or hashing it.
pub fn holds(path: &Path, expected: &[u8]) -> Result<bool, IoError> {
    let (mut f, len) = match open_regular(path) {
        Ok(x) => x,
        Err(e) if e.source.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if len != expected.len() as u64 {
        return Ok(false);
    }
    let mut block = vec![0u8; expected.len().clamp(1, 64 * 1024)];
    let mut at = 0usize;
    loop {
        let n = match f.read(&mut block) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(err("read", path, e)),
        };
        if n == 0 {
            return Ok(at == expected.len());
        }
        // Grown since its length was taken, or different here.
        if at + n > expected.len() || block[..n] != expected[at..at + n] {
            return Ok(false);
        }
        at += n;
    }
}

/// Reads bytes `from..to` (to the end when `to` is `None`) of a regular file of at most
/// `limit` bytes. `Ok(None)` when it does not exist.
pub fn read_range(
    path: &Path,
    from: u64,
    to: Option<u64>,
    limit: u64,
) -> Result<Option<Vec<u8>>, IoError> {
    use std::io::{Seek, SeekFrom};
    let (mut f, len) = match open_regular(path) {
        Ok(x) => x,
        Err(e) if e.source.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if len > limit {
        return Err(too_large(path, len, limit));
    }
    let end = to.unwrap_or(len).min(len);
    if from >= end {
        return Ok(Some(Vec::new()));
    }
    f.seek(SeekFrom::Start(from))
        .map_err(|e| err("seek", path, e))?;
    let mut buf = Vec::with_capacity((end - from) as usize);
    f.take(end - from)
        .read_to_end(&mut buf)
        .map_err(|e| err("read", path, e))?;
    Ok(Some(buf))
}

fn too_large(path: &Path, len: u64, limit: u64) -> IoError {
    err(
        "read",
        path,
        io::Error::other(format!(
            "is {len} bytes, more than the {limit} bytes memdir reads from one file"
        )),
    )
}

/// Fails when any component of `path` below `root` is a symbolic link, or when a component
/// that must be a directory is something else. Components that do not exist yet are fine (the
/// caller creates them as directories, which are not links).
pub fn check_no_links(root: &Path, path: &Path) -> Result<(), IoError> {
    check_no_links_for("write", root, path)
}

/// Reads the regular file at `rel` below `root`, as [`read`] does, after checking that no
/// component of it is a link: a directory inside the store that is a link to somewhere else is
/// never read through (writes never follow links; reads do not either).
pub fn read_under(root: &Path, rel: &Path, limit: u64) -> Result<Option<Vec<u8>>, IoError> {
    let path = root.join(rel);
    check_no_links_for("read", root, &path)?;
    read(&path, limit)
}

/// Fails when the directory `dir` below `root`, or any directory on the way to it, is a link.
pub fn check_dir_under(root: &Path, dir: &Path) -> Result<(), IoError> {
    check_no_links_for("list", root, dir)
}

fn check_no_links_for(op: &'static str, root: &Path, path: &Path) -> Result<(), IoError> {
    let Ok(rel) = path.strip_prefix(root) else {
        return Ok(());
    };
    let mut cur = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for (i, c) in parts.iter().enumerate() {
        match c {
            Component::Normal(n) => cur.push(n),
            _ => {
                return Err(err(
                    "check path",
                    path,
                    io::Error::other("is not a plain path below the memory directory"),
                ));
            }
        }
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => return Err(link_error(op, &cur)),
            Ok(m) if i + 1 < parts.len() && !m.is_dir() => {
                return Err(err(op, &cur, io::Error::other("is not a directory")));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(err("stat", &cur, e)),
        }
    }
    Ok(())
}

/// Opens a file under `root` for writing (appending when `append`), creating it when
/// `create`, after checking that no component is a link; the final component is opened with
/// `O_NOFOLLOW` as well, and must be a regular file.
pub fn open_write(root: &Path, path: &Path, append: bool, create: bool) -> Result<File, IoError> {
    check_no_links(root, path)?;
    let mut o = OpenOptions::new();
    if append {
        o.append(true);
    } else {
        o.write(true);
    }
    o.create(create);
    no_follow(&mut o, true);
    let f = o.open(path).map_err(|e| {
        if is_loop(&e) {
            link_error("open", path)
        } else {
            err("open", path, e)
        }
    })?;
    let meta = f.metadata().map_err(|e| err("stat", path, e))?;
    if !meta.is_file() {
        return Err(err(
            "open",
            path,
            io::Error::other("is not a regular file; memdir writes only regular files"),
        ));
    }
    Ok(f)
}

/// Creates a new file at `path` (which must not exist, not even as a dangling link).
pub fn create_new(path: &Path) -> Result<File, IoError> {
    let mut o = OpenOptions::new();
    o.write(true).create_new(true);
    no_follow(&mut o, false);
    o.open(path).map_err(|e| err("create", path, e))
}

/// What a directory entry is, without following links.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    /// A link, FIFO, socket or device: never followed, never read.
    Other,
}

/// The kind of a directory entry, without following links.
pub fn entry_kind(entry: &std::fs::DirEntry) -> EntryKind {
    match entry.file_type() {
        Ok(t) if t.is_file() => EntryKind::File,
        Ok(t) if t.is_dir() => EntryKind::Dir,
        _ => EntryKind::Other,
    }
}

/// Whether `path` is a real directory (not a link to one).
pub fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// fsyncs a directory so that entries created or renamed in it are durable.
pub fn sync_dir(dir: &Path) -> Result<(), IoError> {
    // DURABILITY: on Linux a rename or create is only durable once its directory is fsynced.
    File::open(dir)
        .and_then(|f| f.sync_all())
        .at("fsync directory", dir)
}

/// Creates `dir` and any missing parents, fsyncing each parent that gained an entry.
pub fn create_dir_durable(dir: &Path) -> Result<(), IoError> {
    // The parent of a relative one-component path is "": the current directory.
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dir_durable(parent)?;
    }
    match private_dir().create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => {
            return Err(IoError {
                op: "create directory",
                path: dir.to_path_buf(),
                source: e,
            });
        }
    }
    if let Some(parent) = dir.parent() {
        // DURABILITY: the new directory entry lives in the parent.
        sync_dir(if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        })?;
    }
    Ok(())
}

/// Writes `bytes` to a new file at `path` and fsyncs it. A link at `path` is not followed.
pub fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    let mut o = OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NOFOLLOW).mode(0o600);
    }
    let mut f = o.open(path).at("create", path)?;
    failpoint::io("stage.write").at("write", path)?;
    f.write_all(bytes).at("write", path)?;
    // DURABILITY: content must reach the disk before the manifest names it.
    f.sync_all().at("fsync", path)?;
    Ok(())
}

/// Options that create files only their owner may read or write (memories are private):
/// `fsx::private_file(OpenOptions::new().write(true).create(true))`.
pub fn private_file(o: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o
}

/// Takes read and write access from group and others on a file created before memdir made
/// its files private (an upgrade); a file that is already private is left untouched.
pub fn make_private(path: &Path) -> Result<(), IoError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = match fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(err("stat", path, e)),
        };
        let mode = meta.permissions().mode();
        if !meta.file_type().is_symlink() && mode & 0o077 != 0 {
            let keep = if meta.is_dir() { 0o700 } else { 0o600 };
            fs::set_permissions(path, fs::Permissions::from_mode(mode & keep))
                .map_err(|e| err("chmod", path, e))?;
        }
    }
    Ok(())
}

/// A builder of directories only their owner may list (memories are private).
pub fn private_dir() -> fs::DirBuilder {
    let mut b = fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_empty_parent_of_a_relative_name_is_the_current_directory() {
        // `Path::new("store").parent()` is "": nothing to create (the CLI test runs
        // `memdir --dir store` in a working directory of its own).
        assert!(create_dir_durable(Path::new("")).is_ok());
    }

    #[test]
    fn holds_is_true_only_for_exactly_the_same_bytes_in_a_regular_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        // Larger than one block, so the comparison crosses block boundaries.
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &bytes).unwrap();
        assert!(holds(&p, &bytes).unwrap());
        let mut other = bytes.clone();
        other[150_000] ^= 1;
        assert!(
            !holds(&p, &other).unwrap(),
            "one byte differs past the first block"
        );
        other[150_000] ^= 1;
        other[199_999] ^= 1;
        assert!(!holds(&p, &other).unwrap(), "the last byte differs");
        assert!(!holds(&p, &bytes[..199_999]).unwrap(), "another length");
        assert!(!holds(&t.path().join("absent"), b"").unwrap());
        std::os::unix::fs::symlink(&p, t.path().join("link")).unwrap();
        assert!(
            holds(&t.path().join("link"), &bytes).is_err(),
            "a link is never read"
        );
        std::fs::create_dir(t.path().join("dir")).unwrap();
        assert!(holds(&t.path().join("dir"), b"").is_err());
    }

    #[test]
    fn links_fifos_and_directories_are_never_read() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::write(root.join("outside"), b"secret").unwrap();
        std::os::unix::fs::symlink(root.join("outside"), root.join("link")).unwrap();
        std::fs::create_dir(root.join("dir.jsonl")).unwrap();
        assert!(read(&root.join("link"), 100).is_err());
        assert!(read(&root.join("dir.jsonl"), 100).is_err());
        assert!(read(&root.join("missing"), 100).unwrap().is_none());
        assert_eq!(
            read(&root.join("outside"), 100).unwrap().unwrap(),
            b"secret"
        );
        assert!(read(&root.join("outside"), 3).is_err());
        assert!(read(Path::new("/dev/zero"), 100).is_err());
        let fifo = root.join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        assert!(
            read(&fifo, 100).is_err(),
            "a FIFO must be refused, not waited on"
        );
    }

    #[test]
    fn writes_refuse_every_link_below_the_root() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("store");
        let outside = t.path().join("outside");
        std::fs::create_dir_all(root.join("sessions")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("sessions/x")).unwrap();
        let target = root.join("sessions/x/r.jsonl");
        assert!(check_no_links(&root, &target).is_err());
        assert!(open_write(&root, &target, true, true).is_err());
        assert!(!outside.join("r.jsonl").exists());
        std::fs::write(outside.join("f"), b"x").unwrap();
        std::os::unix::fs::symlink(outside.join("f"), root.join("sessions/l.jsonl")).unwrap();
        assert!(open_write(&root, &root.join("sessions/l.jsonl"), true, false).is_err());
        assert!(check_no_links(&root, &root.join("sessions/new/a.jsonl")).is_ok());
    }
}
