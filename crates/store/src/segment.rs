//! Session segments: `sessions/<id>/<replica>.jsonl`, appended to by exactly one replica.
//!
//! A chunk is committed once its whole line, newline included, is on disk. Readers stop at the
//! last newline, so they never see a torn line. A single-chunk append is one `write` of one line
//! followed by `fdatasync`; a crash mid-write leaves at most a torn tail, which the next writer
//! (under the lock) completes when it parses as a chunk or cuts off otherwise. A batch first
//! records an intent (`.memdir/staging/<txid>.append`, holding the segment's length before the
//! batch); recovery cuts the segment back to that length, so a batch is all or nothing.
//!
//! A batch touching many segments writes them all first and then flushes them together
//! ([`sync_together`]): concurrent flushes share journal commits, so a batch over 1,000
//! sessions costs a few waits for the disk instead of 1,000. The acknowledgement still follows
//! every flush.

use std::fs;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::codec::parse_chunk_line;
use crate::fsx::{sync_dir, write_synced};
use crate::model::ChunkRecord;
use crate::{failpoint, fsx};
use memdir_api::error::{IoContext, IoError};

/// A parsed segment.
#[derive(Debug, Default)]
pub struct Segment {
    pub chunks: Vec<ChunkRecord>,
    /// Lines that did not parse: (1-based line number, reason).
    pub bad_lines: Vec<(usize, String)>,
    /// Bytes up to and including the last newline.
    pub committed_len: u64,
    /// Bytes after the last newline (a torn or unterminated last line).
    pub tail_len: u64,
    /// The signature of the committed bytes ([`sign`]) when read by [`read_signed`]; empty
    /// (unknown) otherwise.
    pub sig: String,
}

/// The signature of no lines: where [`sign`] starts.
pub const EMPTY_SIG: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Extends the signature `sig` of a segment's committed bytes by `lines` (whole lines, each
/// ending in a newline), one blake3 link per line, so an append extends what a full read of the
/// file computes. An unknown signature (empty) stays unknown.
pub fn sign(sig: &str, lines: &[u8]) -> String {
    if sig.is_empty() {
        return String::new();
    }
    let mut at = sig.to_string();
    for line in lines.split_inclusive(|&b| b == b'\n') {
        let mut h = blake3::Hasher::new();
        h.update(at.as_bytes());
        h.update(line);
        at = h.finalize().to_hex().to_string();
    }
    at
}

impl Segment {
    /// The seq the next appended chunk gets.
    pub fn next_seq(&self) -> u64 {
        self.chunks.iter().map(|c| c.seq + 1).max().unwrap_or(0)
    }
}

/// Reads and parses a segment; a missing file is an empty segment. Links and special files
/// are refused (see [`fsx`]).
pub fn read(path: &Path) -> Result<Segment, IoError> {
    match fsx::read(path, fsx::MAX_SEGMENT_FILE)? {
        Some(bytes) => Ok(parse(&bytes)),
        None => Ok(Segment::default()),
    }
}

/// Reads and parses a segment with the signature of its committed bytes (a missing file: an
/// empty segment, signed as empty).
pub fn read_signed(path: &Path) -> Result<Segment, IoError> {
    match fsx::read(path, fsx::MAX_SEGMENT_FILE)? {
        Some(bytes) => {
            let mut seg = parse(&bytes);
            seg.sig = sign(EMPTY_SIG, &bytes[..seg.committed_len as usize]);
            Ok(seg)
        }
        None => Ok(Segment {
            sig: EMPTY_SIG.to_string(),
            ..Segment::default()
        }),
    }
}

/// Parses segment bytes.
pub fn parse(bytes: &[u8]) -> Segment {
    let committed = bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map(|i| i + 1)
        .unwrap_or(0);
    let mut seg = Segment {
        committed_len: committed as u64,
        tail_len: (bytes.len() - committed) as u64,
        ..Segment::default()
    };
    for (i, line) in bytes[..committed].split(|&b| b == b'\n').enumerate() {
        if line.is_empty() || line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        match parse_chunk_line(line) {
            Ok(c) => seg.chunks.push(c),
            Err(e) => seg.bad_lines.push((i + 1, e)),
        }
    }
    seg
}

/// Completes or cuts off a torn tail of the segment at `path` below `root`. The caller holds
/// the write lock. Never writes through a link.
pub fn repair_tail(root: &Path, path: &Path, seg: &Segment) -> Result<bool, IoError> {
    if seg.tail_len == 0 {
        return Ok(false);
    }
    let f = fsx::open_write(root, path, false, false)?;
    let bytes = fsx::read(path, fsx::MAX_SEGMENT_FILE)?.unwrap_or_default();
    let Some(tail) = bytes.get(seg.committed_len as usize..) else {
        return Ok(false);
    };
    if parse_chunk_line(tail).is_ok() {
        // A whole chunk whose newline is missing (a hand edit): keep it.
        let mut f = fsx::open_write(root, path, true, false)?;
        f.write_all(b"\n").at("write", path)?;
    } else if seg.committed_len == 0 {
        // Nothing was ever committed here: the crashed append created the file, so the
        // store goes back to having none (and no session directory, if it made that too).
        drop(f);
        remove_empty(root, path)?;
        return Ok(true);
    } else {
        f.set_len(seg.committed_len)
            .at("truncate torn tail", path)?;
    }
    // DURABILITY: the repaired length must be on disk before new lines follow it.
    f.sync_all().at("fsync", path)?;
    Ok(true)
}

/// Removes a segment that holds no committed line, and its session directory when that is
/// left empty. The caller holds the write lock.
fn remove_empty(root: &Path, path: &Path) -> Result<(), IoError> {
    fsx::check_no_links(root, path)?;
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(IoError {
                op: "remove empty segment",
                path: path.to_path_buf(),
                source: e,
            });
        }
    }
    if let Some(dir) = path.parent() {
        // DURABILITY: the removal must not come back after a crash.
        sync_dir(dir)?;
        if fs::remove_dir(dir).is_ok()
            && let Some(sessions) = dir.parent()
        {
            sync_dir(sessions)?;
        }
    }
    Ok(())
}

#[derive(Serialize, Deserialize)]
struct Intent {
    segments: Vec<(String, u64)>,
}

/// Lines to append to one segment.
pub struct SegmentAppend {
    /// Path relative to the store root.
    pub rel: std::path::PathBuf,
    /// Whole lines, each ending in a newline.
    pub lines: Vec<u8>,
    /// The segment's committed length before this append.
    pub len_before: u64,
}

/// Appends to one or more segments, durably.
///
/// When more than one chunk is written (`batch`), an intent recording every segment's length
/// is made durable first, so that a crash mid-append cuts every segment back: all or nothing.
/// A failed append (a full disk, say) is undone before the error is returned: segments are cut
/// back, files and directories it created are removed, and the intent goes.
pub fn append(
    root: &Path,
    staging: &Path,
    txid: &str,
    appends: &[SegmentAppend],
    batch: bool,
) -> Result<(), IoError> {
    let intent_path = staging.join(format!("{txid}.append"));
    let mut created: Vec<std::path::PathBuf> = Vec::new();
    let result = append_in(root, staging, &intent_path, appends, batch, &mut created);
    if result.is_err() {
        for a in appends {
            let path = root.join(&a.rel);
            if let Ok(meta) = fs::symlink_metadata(&path)
                && meta.is_file()
                && meta.len() > a.len_before
                && let Ok(f) = fsx::open_write(root, &path, false, false)
            {
                let _ = f.set_len(a.len_before).and_then(|_| f.sync_all());
            }
        }
        // Newest first: a segment file before its session directory.
        for p in created.iter().rev() {
            let _ = if p.is_dir() {
                fs::remove_dir(p)
            } else {
                fs::remove_file(p)
            };
        }
        let _ = fs::remove_file(&intent_path);
    }
    result
}

fn append_in(
    root: &Path,
    staging: &Path,
    intent_path: &Path,
    appends: &[SegmentAppend],
    batch: bool,
    created: &mut Vec<std::path::PathBuf>,
) -> Result<(), IoError> {
    if batch {
        let intent = Intent {
            segments: appends
                .iter()
                .map(|a| (a.rel.to_string_lossy().into_owned(), a.len_before))
                .collect(),
        };
        write_synced(
            intent_path,
            &serde_json::to_vec(&intent).expect("invariant: intent serializes"),
        )?;
        // DURABILITY: the intent must be durable before any segment grows.
        sync_dir(staging)?;
        failpoint::hit("append.after_intent");
    }
    // Every segment's lines are written first and flushed together afterwards: the disk
    // sees one burst of flushes per batch instead of one wait per touched segment. A crash
    // between the writes and the end of the flushes is covered by the intent (a batch) or is
    // a torn tail of the one segment written (a single chunk): nothing is acknowledged until
    // every file and directory below is durable.
    let mut files: Vec<(fs::File, std::path::PathBuf)> = Vec::with_capacity(appends.len());
    // Directories that gained an entry (a session directory, a segment file).
    let mut dirs: std::collections::BTreeSet<std::path::PathBuf> =
        std::collections::BTreeSet::new();
    for a in appends {
        let path = root.join(&a.rel);
        let parent = path
            .parent()
            .expect("invariant: segments live in a session directory");
        fsx::check_no_links(root, &path)?;
        if !parent.is_dir() {
            create_dir_deferred(parent, created, &mut dirs)?;
        }
        let new_file = std::fs::symlink_metadata(&path).is_err();
        let mut f = fsx::open_write(root, &path, true, true)?;
        if new_file {
            created.push(path.clone());
            // DURABILITY: a new segment's directory entry must be durable too.
            dirs.insert(parent.to_path_buf());
        }
        failpoint::io("append.write").at("append", &path)?;
        if failpoint_torn() {
            let half = a.lines.len() / 2;
            f.write_all(&a.lines[..half]).at("append", &path)?;
            let _ = f.sync_data();
            failpoint::hit("append.torn");
        }
        f.write_all(&a.lines).at("append", &path)?;
        files.push((f, path));
    }
    failpoint::hit("append.before_sync");
    // DURABILITY: a chunk is acknowledged only after its bytes, and every directory entry
    // that leads to them, are on disk.
    sync_together(&files, &dirs)?;
    failpoint::hit("append.after_write");
    if batch {
        fs::remove_file(intent_path).at("remove intent", intent_path)?;
        // DURABILITY: once acknowledged, a batch must not be cut back by a stale intent.
        sync_dir(staging)?;
    }
    Ok(())
}

/// Creates `dir` and any missing parents without waiting for the disk, recording each
/// directory made (for undo) and each parent that gained an entry (to fsync before the ack).
fn create_dir_deferred(
    dir: &Path,
    created: &mut Vec<std::path::PathBuf>,
    to_sync: &mut std::collections::BTreeSet<std::path::PathBuf>,
) -> Result<(), IoError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dir_deferred(parent, created, to_sync)?;
    }
    let mut b = fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        // Memories are private: other local users may not list or read them.
        b.mode(0o700);
    }
    match b.create(dir) {
        Ok(()) => {
            created.push(dir.to_path_buf());
            if let Some(parent) = dir.parent() {
                to_sync.insert(parent.to_path_buf());
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(IoError {
            op: "create directory",
            path: dir.to_path_buf(),
            source: e,
        }),
    }
}

/// Most flushes in flight at once. A journalling file system (ext4, xfs) folds concurrent
/// flushes into one journal commit, so a batch touching hundreds of segments waits for a few
/// commits instead of one per segment.
const SYNC_THREADS: usize = 16;

/// Flushes every written file (`fdatasync`) and every directory that gained an entry
/// (`fsync`), several at a time; returns the first error after all have finished.
fn sync_together(
    files: &[(fs::File, std::path::PathBuf)],
    dirs: &std::collections::BTreeSet<std::path::PathBuf>,
) -> Result<(), IoError> {
    enum Job<'a> {
        File(&'a fs::File, &'a Path),
        Dir(&'a Path),
    }
    let jobs: Vec<Job> = files
        .iter()
        .map(|(f, p)| Job::File(f, p.as_path()))
        .chain(dirs.iter().map(|d| Job::Dir(d.as_path())))
        .collect();
    let run = |job: &Job| -> Result<(), IoError> {
        match job {
            Job::File(f, p) => {
                failpoint::io("append.sync").at("fsync", p)?;
                f.sync_data().at("fsync", p)
            }
            Job::Dir(d) => sync_dir(d),
        }
    };
    if jobs.len() <= 1 {
        return jobs.iter().try_for_each(run);
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let first_err: std::sync::Mutex<Option<IoError>> = std::sync::Mutex::new(None);
    let work = || {
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(job) = jobs.get(i) else { break };
            if let Err(e) = run(job) {
                let mut slot = first_err.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert(e);
            }
        }
    };
    let threads = jobs.len().min(SYNC_THREADS);
    std::thread::scope(|s| {
        // The calling thread works too: one thread fewer to start.
        // A thread the system refuses to start leaves its share to the others.
        for _ in 1..threads {
            let _ = std::thread::Builder::new().spawn_scoped(s, work);
        }
        work();
    });
    match first_err.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn failpoint_torn() -> bool {
    (cfg!(debug_assertions) || cfg!(feature = "failpoints"))
        && crate::env::process_raw("MEMDIR_FAILPOINT").is_some_and(|v| v == "append.torn")
}

/// Undoes an unfinished batch append recorded by `intent`. The caller holds the write lock.
pub fn undo_intent(root: &Path, intent_path: &Path) -> Result<(), IoError> {
    if let Ok(bytes) = fs::read(intent_path)
        && let Ok(intent) = serde_json::from_slice::<Intent>(&bytes)
    {
        for (rel, len_before) in intent.segments {
            if rel.split('/').any(|c| c == ".." || c.is_empty()) {
                continue;
            }
            let path = root.join(&rel);
            if let Ok(meta) = fs::symlink_metadata(&path)
                && meta.is_file()
                && meta.len() > len_before
            {
                if len_before == 0 {
                    // The batch created this segment: it goes, with its session directory
                    // if the batch made that too.
                    remove_empty(root, &path)?;
                    continue;
                }
                let f = fsx::open_write(root, &path, false, false)?;
                f.set_len(len_before)
                    .at("truncate unfinished batch", &path)?;
                // DURABILITY: the cut must be durable before the intent disappears.
                f.sync_all().at("fsync", &path)?;
            }
        }
    }
    fs::remove_file(intent_path).at("remove intent", intent_path)?;
    Ok(())
}

#[cfg(test)]
mod sig_tests {
    use super::*;

    /// An append extends the signature a full read computes; a change anywhere changes it;
    /// an unknown signature stays unknown.
    #[test]
    fn an_append_extends_what_a_full_read_signs() {
        let a = b"{\"a\":1}\n{\"b\":2}\n";
        let b = b"{\"c\":3}\n";
        let whole = [&a[..], &b[..]].concat();
        assert_eq!(sign(&sign(EMPTY_SIG, a), b), sign(EMPTY_SIG, &whole));
        assert_ne!(
            sign(EMPTY_SIG, a),
            sign(EMPTY_SIG, b"{\"a\":1}\n{\"b\":3}\n")
        );
        assert_ne!(sign(EMPTY_SIG, a), EMPTY_SIG);
        assert_eq!(sign(EMPTY_SIG, b""), EMPTY_SIG);
        assert_eq!(sign("", b), "");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        std::fs::write(&p, [&whole[..], b"{\"torn"].concat()).unwrap();
        assert_eq!(read_signed(&p).unwrap().sig, sign(EMPTY_SIG, &whole));
        assert_eq!(
            read_signed(&dir.path().join("none")).unwrap().sig,
            EMPTY_SIG
        );
    }
}
