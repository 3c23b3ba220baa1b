//! Sync over HTTP: the same files and the same merge core as the git transport, moved as
//! JSON pages between two memory directories, one of them a `memdir serve`.
//!
//! What is exchanged is exactly what git sync merges by union: history entries and conflict
//! records (write-once, named by identity) and session segments (append-only, one writer
//! each). Category files are never sent: each side derives them from the merged history
//! ([`Memdir::settle_category`], the function the git transport uses), so both sides write
//! the same bytes.
//!
//! - **Manifest**: every exchanged file as `path len hash` (BLAKE3), grouped in buckets
//!   (`history/<category>`, `conflicts/<category>`, `sessions/<session>`); a bucket's hash is
//!   the BLAKE3 of its sorted lines, the root the BLAKE3 of the sorted `bucket hash` lines.
//!   Equal roots: nothing to do (a no-op sync is one request).
//! - **Diff**: the client sends its files of the buckets whose hashes differ; the server
//!   answers what each side lacks: whole files, or a segment's tail from the shorter length.
//! - **Pages**: items `{path, from, prefix, hash, data}`, at most `max_bytes` of data each
//!   (a long tail is cut at a line end). The receiver recomputes every hash, validates every
//!   path and every file, checks access, and applies a page as one staged transaction under
//!   the store lock, or refuses it whole.
//!
//! State-based: nothing is queued or cleared, so a write made during a sync is a newer file
//! the next manifest shows.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};

use super::adoption::Sync;
use super::sync::tombstones;
use super::{Inner, Memdir};
use crate::sync::http::{self as wire, Remote, RemoteError};
use crate::sync::merge::{self, Strategy};
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::{
    Problem, SYNC_FORMAT, SyncDiffRequest, SyncDiffResponse, SyncFile, SyncItem,
    SyncManifestResponse, SyncPage, SyncPullRequest, SyncPushRequest, SyncPushResponse,
    SyncResponse, SyncWant,
};
use memdir_store::lock::WriteLock;
use memdir_store::model::{
    CategoryName, SessionId, content_hash, decode_component, encode_component,
};
use memdir_store::{self as store, Layout, failpoint, fsx, txn};

/// Default page size in bytes of data.
pub const PAGE_BYTES: u64 = 1 << 20;
/// Largest page a caller may ask for.
pub const MAX_PAGE_BYTES: u64 = 8 << 20;
/// Manifest-diff-pull-push rounds before a sync gives up on a remote that keeps moving.
const MAX_ROUNDS: usize = 5;
/// Timeout of one HTTP call.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// What a caller of the sync plane may touch, decided by the access-control policy of the
/// surface that calls (the engine only asks).
pub struct SyncAccess<'a> {
    /// Whether the caller may read this category.
    pub read: &'a dyn Fn(&str) -> bool,
    /// Whether the caller may write this category (the error names the rule).
    pub write: &'a dyn Fn(&str) -> Result<()>,
    /// Whether the caller may ingest into these projects (`""`: no project).
    pub ingest: &'a dyn Fn(&[&str]) -> Result<()>,
    /// Whether the caller may forget session memory: a pushed segment that turns a chunk
    /// this store holds into a tombstone is a forget.
    pub forget: &'a dyn Fn() -> Result<()>,
}

impl SyncAccess<'static> {
    /// Everything allowed: this replica's own side of a sync.
    pub fn all() -> SyncAccess<'static> {
        SyncAccess {
            read: &|_| true,
            write: &|_| Ok(()),
            ingest: &|_| Ok(()),
            forget: &|| Ok(()),
        }
    }
}

/// What a path of the sync plane names.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    History(CategoryName, String),
    Conflict(CategoryName, String),
    Segment,
}

fn bad_path(path: &str, why: &str) -> Error {
    Error::invalid(
        "path",
        format!("{path:?} is not a file sync exchanges: {why}"),
    )
}

/// A file name of ours: `[A-Za-z0-9._-]`, not starting with a dot, with this suffix.
fn file_name_ok(name: &str, suffix: &str) -> bool {
    name.len() > suffix.len()
        && name.len() <= 200
        && name.ends_with(suffix)
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Validates a path the other side named, as strictly as a local write names its files.
fn classify(path: &str) -> Result<Kind> {
    let parts: Vec<&str> = path.split('/').collect();
    if parts.len() != 3 {
        return Err(bad_path(path, "three components expected"));
    }
    let (top, stem, file) = (parts[0], parts[1], parts[2]);
    let decoded = decode_component(stem).ok_or_else(|| bad_path(path, "bad name encoding"))?;
    if encode_component(&decoded) != stem {
        return Err(bad_path(path, "not the canonical encoding of its name"));
    }
    match top {
        "history" | "conflicts" => {
            let name = CategoryName::new(&decoded).map_err(|e| bad_path(path, &e.message))?;
            if !file_name_ok(file, ".json") {
                return Err(bad_path(path, "bad file name"));
            }
            let id = file.trim_end_matches(".json").to_string();
            Ok(if top == "history" {
                Kind::History(name, id)
            } else {
                Kind::Conflict(name, id)
            })
        }
        "sessions" => {
            SessionId::new(&decoded).map_err(|e| bad_path(path, &e.message))?;
            if !file_name_ok(file, ".jsonl") {
                return Err(bad_path(path, "bad segment name"));
            }
            Ok(Kind::Segment)
        }
        _ => Err(bad_path(
            path,
            "not under history/, conflicts/ or sessions/",
        )),
    }
}

/// The bucket of a path: its first two components.
fn bucket_of(path: &str) -> &str {
    match path.match_indices('/').nth(1) {
        Some((i, _)) => &path[..i],
        None => path,
    }
}

/// The two-level hash tree of a set of files: per-bucket hashes and the root.
pub fn tree(files: &BTreeMap<String, SyncFile>) -> (String, BTreeMap<String, String>) {
    let mut lines: BTreeMap<String, String> = BTreeMap::new();
    for f in files.values() {
        let l = lines.entry(bucket_of(&f.path).to_string()).or_default();
        l.push_str(&format!("{} {} {}\n", f.path, f.len, f.hash));
    }
    let buckets: BTreeMap<String, String> = lines
        .into_iter()
        .map(|(b, l)| (b, content_hash(l.as_bytes())))
        .collect();
    let mut all = String::new();
    for (b, h) in &buckets {
        all.push_str(&format!("{b} {h}\n"));
    }
    (content_hash(all.as_bytes()), buckets)
}

/// A segment's bytes up to its last line end (a torn tail is not exchanged).
fn whole_lines(mut b: Vec<u8>) -> Vec<u8> {
    let end = b.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1);
    b.truncate(end);
    b
}

/// The `seq`s of a segment's chunk lines that are tombstones (`dead`) or alive (`!dead`).
fn segment_seqs(bytes: &[u8], dead: bool) -> BTreeSet<u64> {
    bytes
        .split(|&b| b == b'\n')
        .filter_map(|l| store::codec::parse_chunk_line(l).ok())
        .filter(|c| c.is_tombstone() == dead)
        .map(|c| c.seq)
        .collect()
}

fn remote_err(url: &str, e: RemoteError) -> Error {
    match e {
        RemoteError::Unreachable(m) => Error::new(ErrorKind::Unavailable, m),
        RemoteError::Status {
            status: 401,
            message,
            ..
        } => Error::new(
            ErrorKind::Denied,
            format!("{url} refused the token (HTTP 401): {message}"),
        )
        .hint("give the server's token in the environment variable named by {arg:token_env}"),
        RemoteError::Status {
            status,
            code,
            message,
            details,
        } => {
            let kind = match code.as_str() {
                "forbidden" => ErrorKind::Forbidden,
                "denied" => ErrorKind::Denied,
                "invalid" => ErrorKind::Invalid,
                "corrupt" => ErrorKind::Corrupt,
                "busy" => ErrorKind::Busy,
                "conflict" => ErrorKind::Conflict,
                "not_found" => ErrorKind::NotFound,
                _ => ErrorKind::Unavailable,
            };
            let mut e = Error::new(
                kind,
                format!("the remote {url} answered HTTP {status}: {message}"),
            );
            for (k, v) in details {
                e = e.detail(&k, v);
            }
            e
        }
        RemoteError::Protocol(m) => Error::new(ErrorKind::Unavailable, m),
    }
}

fn decode<T: serde::de::DeserializeOwned>(url: &str, v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| {
        Error::new(
            ErrorKind::Unavailable,
            format!("{url} answered something that is not a memdir sync message: {e}"),
        )
    })
}

fn check_format(url: &str, f: &str) -> Result<()> {
    if f != SYNC_FORMAT {
        return Err(Error::new(
            ErrorKind::Unavailable,
            format!("{url} speaks sync format {f:?}; this memdir speaks {SYNC_FORMAT:?}"),
        ));
    }
    Ok(())
}

impl Memdir {
    /// Adopts hand edits (each becomes a version of its own before it is exchanged). Caller
    /// holds the lock.
    fn adopt_all(&self, inner: &Inner, lock: &WriteLock) -> Result<()> {
        let layout = self.layout();
        let mut names = store::list_category_files(layout)?.0;
        names.extend(store::list_history_names(layout)?);
        names.sort();
        names.dedup();
        for name in &names {
            let _ = self.sync_category(inner, name, Some(lock), Sync::Fast)?;
        }
        self.sync_sessions(inner, Some(lock))
    }

    /// Every file sync exchanges that `read` allows, by path. Files that do not parse are
    /// left out (verify-store reports them).
    fn sync_files(&self, read: &dyn Fn(&str) -> bool) -> Result<BTreeMap<String, SyncFile>> {
        let layout = self.layout();
        let mut out = BTreeMap::new();
        let mut add = |path: String, bytes: &[u8]| {
            out.insert(
                path.clone(),
                SyncFile {
                    path,
                    len: bytes.len() as u64,
                    hash: content_hash(bytes),
                },
            );
        };
        for name in store::list_history_names(layout)? {
            if !read(name.as_str()) {
                continue;
            }
            let rel = Layout::history_rel(&name);
            for id in store::list_history_ids(layout, &name)? {
                let path = format!("{}/{id}.json", rel.to_string_lossy());
                if let Some(b) = fsx::read(&layout.root.join(&path), fsx::MAX_JSON_FILE)?
                    && store::read_history_bytes(&b).is_ok()
                {
                    add(path, &b);
                }
            }
        }
        let conflicts = layout.root.join("conflicts");
        if let Ok(rd) = std::fs::read_dir(&conflicts) {
            let mut stems: Vec<String> = rd
                .flatten()
                .filter(|e| fsx::entry_kind(e) == fsx::EntryKind::Dir)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            stems.sort();
            for stem in stems {
                let Some(name) = decode_component(&stem) else {
                    continue;
                };
                if CategoryName::new(&name).is_err() || !read(&name) {
                    continue;
                }
                let Ok(rd) = std::fs::read_dir(conflicts.join(&stem)) else {
                    continue;
                };
                for e in rd.flatten() {
                    let file = e.file_name().to_string_lossy().into_owned();
                    if fsx::entry_kind(&e) != fsx::EntryKind::File || !file_name_ok(&file, ".json")
                    {
                        continue;
                    }
                    let path = format!("conflicts/{stem}/{file}");
                    if let Some(b) = fsx::read(&e.path(), fsx::MAX_JSON_FILE)?
                        && serde_json::from_slice::<Value>(&b).is_ok()
                    {
                        add(path, &b);
                    }
                }
            }
        }
        for (_, dir) in store::list_session_dirs(layout)? {
            for seg in store::list_segments(layout, &dir)? {
                let path = seg.rel.to_string_lossy().into_owned();
                if classify(&path).is_err() {
                    continue;
                }
                if let Some(b) = fsx::read(&layout.root.join(&seg.rel), fsx::MAX_SEGMENT_FILE)? {
                    let b = whole_lines(b);
                    if !b.is_empty() {
                        add(path, &b);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The files of this store as a sync sees them, after adopting hand edits.
    fn current_sync_files(
        &self,
        read: &dyn Fn(&str) -> bool,
    ) -> Result<BTreeMap<String, SyncFile>> {
        self.with_write(|inner, lock| self.adopt_all(inner, lock))?;
        self.sync_files(read)
    }

    /// `sync_manifest`.
    pub fn sync_manifest(&self, access: &SyncAccess<'_>) -> Result<SyncManifestResponse> {
        let files = self.current_sync_files(access.read)?;
        let (root, buckets) = tree(&files);
        Ok(SyncManifestResponse {
            format: SYNC_FORMAT.to_string(),
            root,
            buckets,
            files: files.len(),
        })
    }

    /// `sync_diff`: what each side lacks in the buckets the caller sent. A file the caller
    /// would push into a category it may not write refuses the whole diff.
    pub fn sync_diff(
        &self,
        req: &SyncDiffRequest,
        access: &SyncAccess<'_>,
    ) -> Result<SyncDiffResponse> {
        let ours = self.current_sync_files(access.read)?;
        let mut resp = SyncDiffResponse::default();
        for (bucket, theirs) in &req.buckets {
            let mut mine: BTreeMap<&str, &SyncFile> = ours
                .range(format!("{bucket}/")..)
                .take_while(|(p, _)| p.starts_with(&format!("{bucket}/")))
                .map(|(p, f)| (p.as_str(), f))
                .collect();
            for t in theirs {
                let kind = classify(&t.path)?;
                if bucket_of(&t.path) != bucket {
                    return Err(bad_path(&t.path, "not in the bucket it was listed under"));
                }
                let pushes_category = |c: &CategoryName| (access.write)(c.as_str());
                match (mine.remove(t.path.as_str()), &kind) {
                    (None, Kind::History(c, _) | Kind::Conflict(c, _)) => {
                        pushes_category(c)?;
                        resp.push.push(SyncWant::at(&t.path, 0));
                    }
                    (None, Kind::Segment) => resp.push.push(SyncWant::at(&t.path, 0)),
                    (Some(o), _) if o.hash == t.hash && o.len == t.len => {}
                    // The caller's copy may extend ours: it checks our hash against its
                    // first bytes before sending the tail (else the segment travels whole).
                    (Some(o), Kind::Segment) if t.len > o.len => resp.push.push(SyncWant {
                        prefix: Some(o.hash.clone()),
                        ..SyncWant::at(&t.path, o.len)
                    }),
                    (Some(o), Kind::Segment)
                        if o.len > t.len && self.segment_starts_with(&t.path, t)? =>
                    {
                        resp.pull.push(SyncWant::at(&t.path, t.len))
                    }
                    // Neither copy extends the other: a forget rewrote a line on one side
                    // (or both). Each side sends its whole copy; the receiver merges.
                    (Some(_), Kind::Segment) => {
                        resp.pull.push(SyncWant::whole(&t.path));
                        resp.push.push(SyncWant::whole(&t.path));
                    }
                    (Some(_), _) => resp.diverged.push(t.path.clone()),
                }
            }
            for p in mine.keys() {
                resp.pull.push(SyncWant::at(*p, 0));
            }
        }
        Ok(resp)
    }

    /// Whether this store's copy of a segment begins with exactly the bytes `prefix` names.
    fn segment_starts_with(&self, path: &str, prefix: &SyncFile) -> Result<bool> {
        let bytes = fsx::read(&self.layout().root.join(path), fsx::MAX_SEGMENT_FILE)?
            .map(whole_lines)
            .unwrap_or_default();
        let n = prefix.len as usize;
        Ok(n <= bytes.len() && content_hash(&bytes[..n]) == prefix.hash)
    }

    /// `sync_pull`: one page of the files and tails asked for.
    pub fn sync_pull(&self, req: &SyncPullRequest, access: &SyncAccess<'_>) -> Result<SyncPage> {
        let max = req.max_bytes.unwrap_or(PAGE_BYTES).clamp(1, MAX_PAGE_BYTES);
        self.sync_page(&req.want, max, access)
    }

    /// Builds a page of `want` from this store's files.
    fn sync_page(&self, want: &[SyncWant], max: u64, access: &SyncAccess<'_>) -> Result<SyncPage> {
        let layout = self.layout();
        let mut page = SyncPage {
            format: SYNC_FORMAT.to_string(),
            ..Default::default()
        };
        let mut used: u64 = 0;
        for (i, w) in want.iter().enumerate() {
            let kind = classify(&w.path)?;
            if let Kind::History(c, _) | Kind::Conflict(c, _) = &kind
                && !(access.read)(c.as_str())
            {
                return Err(Error::new(
                    ErrorKind::Forbidden,
                    format!(
                        "{} belongs to category {:?}, which this device may not read",
                        w.path,
                        c.as_str()
                    ),
                )
                .detail("rule", Value::from("acl.rules.read")));
            }
            let limit = if kind == Kind::Segment {
                fsx::MAX_SEGMENT_FILE
            } else {
                fsx::MAX_JSON_FILE
            };
            let Some(bytes) = fsx::read(&layout.root.join(&w.path), limit)? else {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    format!("{} is not in this memory directory", w.path),
                ));
            };
            let bytes = if kind == Kind::Segment {
                whole_lines(bytes)
            } else {
                bytes
            };
            // A tail whose prefix is not what the receiver holds travels whole, to be merged.
            let whole = kind == Kind::Segment
                && (w.whole
                    || w.prefix.as_deref().is_some_and(|p| {
                        (w.from as usize) > bytes.len()
                            || content_hash(&bytes[..w.from as usize]) != p
                    }));
            let from = if whole { 0 } else { w.from as usize };
            if from > bytes.len() || (kind != Kind::Segment && from != 0) {
                return Err(Error::invalid(
                    "from",
                    format!(
                        "{} holds {} bytes; cannot send from {from}",
                        w.path,
                        bytes.len()
                    ),
                ));
            }
            let mut data = &bytes[from..];
            if data.is_empty() {
                continue;
            }
            let room = max.saturating_sub(used) as usize;
            if used > 0 && data.len() > room && (kind != Kind::Segment || whole) {
                page.rest.extend(want[i..].iter().cloned());
                break;
            }
            let mut cut = false;
            if data.len() > room && kind == Kind::Segment && !whole {
                // A tail longer than the room left: whole lines up to it, at least one.
                let end = data[..room]
                    .iter()
                    .rposition(|&c| c == b'\n')
                    .map(|j| j + 1)
                    .or_else(|| {
                        (used == 0).then(|| {
                            data.iter()
                                .position(|&c| c == b'\n')
                                .expect("invariant: whole_lines ends in a line end")
                                + 1
                        })
                    });
                match end {
                    Some(e) => {
                        data = &data[..e];
                        cut = true;
                    }
                    None => {
                        page.rest.extend(want[i..].iter().cloned());
                        break;
                    }
                }
            }
            let text = std::str::from_utf8(data).map_err(|_| {
                Error::new(
                    ErrorKind::Corrupt,
                    format!(
                        "{} is not UTF-8 text; fix or remove it, then sync again",
                        w.path
                    ),
                )
            })?;
            used += data.len() as u64;
            let mut text = text.to_string();
            let hash = content_hash(data);
            if failpoint::armed_as("sync.page", "corrupt") {
                // A test's stand-in for damage in transit: the data no longer has its hash.
                text = text.replacen(|c: char| c.is_ascii_alphanumeric(), "#", 1);
            }
            page.items.push(SyncItem {
                path: w.path.clone(),
                from: from as u64,
                prefix: (from > 0).then(|| content_hash(&bytes[..from])),
                hash,
                data: text,
            });
            if cut {
                page.rest
                    .push(SyncWant::at(&w.path, (from + data.len()) as u64));
                page.rest.extend(want[i + 1..].iter().cloned());
                break;
            }
            if used >= max {
                page.rest.extend(want[i + 1..].iter().cloned());
                break;
            }
        }
        Ok(page)
    }

    /// `sync_push`: applies a page the caller sent.
    pub fn sync_push(
        &self,
        req: &SyncPushRequest,
        access: &SyncAccess<'_>,
    ) -> Result<SyncPushResponse> {
        if let Some(f) = &req.format
            && f != SYNC_FORMAT
        {
            return Err(Error::invalid(
                "format",
                format!("sync format {f:?} is not {SYNC_FORMAT:?}"),
            ));
        }
        let strategy = self.sync_strategy(req.strategy.as_deref())?;
        // The pushed side is the remote here: local_wins from the pusher's view is ours losing.
        let strategy = match strategy {
            Strategy::LocalWins => Strategy::RemoteWins,
            Strategy::RemoteWins => Strategy::LocalWins,
            s => s,
        };
        self.apply_items(&req.items, strategy, access)
    }

    /// The strategy of a run: named, else the configured one.
    pub(super) fn sync_strategy(&self, name: Option<&str>) -> Result<Strategy> {
        let name = name
            .map(String::from)
            .unwrap_or_else(|| self.settings().conflict_strategy.clone());
        Strategy::parse(&name).ok_or_else(|| {
            Error::invalid(
                "strategy",
                format!(
                    "unknown conflict strategy {name:?}; one of: last_write_wins, merge, manual, local_wins, remote_wins"
                ),
            )
        })
    }

    /// Checks every item of a page (hash, path, content, access) before anything is written,
    /// then applies them as one transaction under the store lock, derives the categories
    /// whose history grew, and brings the ledger (and so the index) up to date.
    fn apply_items(
        &self,
        items: &[SyncItem],
        strategy: Strategy,
        access: &SyncAccess<'_>,
    ) -> Result<SyncPushResponse> {
        let mut kinds = Vec::with_capacity(items.len());
        let mut patched = false;
        for it in items {
            let kind = classify(&it.path)?;
            let bytes = it.data.as_bytes();
            if content_hash(bytes) != it.hash {
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    format!(
                        "{}: the data does not match its BLAKE3 hash (damaged in transit); nothing of this page was applied",
                        it.path
                    ),
                )
                .field("items"));
            }
            match &kind {
                Kind::History(c, id) => {
                    (access.write)(c.as_str())?;
                    let e = store::read_history_bytes(bytes).map_err(|why| {
                        Error::invalid("items", format!("{}: not a history entry: {why}", it.path))
                    })?;
                    patched |= e.patch.is_some();
                    if &e.id != id || it.from != 0 {
                        return Err(Error::invalid(
                            "items",
                            format!("{}: the entry's id is {:?}", it.path, e.id),
                        ));
                    }
                }
                Kind::Conflict(c, id) => {
                    (access.write)(c.as_str())?;
                    if it.from != 0
                        || serde_json::from_slice::<Value>(bytes).is_err()
                        || !content_hash(bytes).starts_with(id.as_str())
                    {
                        return Err(Error::invalid(
                            "items",
                            format!("{}: not a conflict record named by its hash", it.path),
                        ));
                    }
                }
                Kind::Segment => {
                    if !bytes.ends_with(b"\n") || (it.from > 0 && it.prefix.is_none()) {
                        return Err(Error::invalid(
                            "items",
                            format!(
                                "{}: a segment tail is whole lines, with the hash of what precedes it",
                                it.path
                            ),
                        ));
                    }
                    let mut projects: BTreeSet<String> = BTreeSet::new();
                    for (n, line) in it.data.lines().enumerate() {
                        let v: Value = serde_json::from_str(line).map_err(|e| {
                            Error::invalid(
                                "items",
                                format!("{} line {} of the page: not JSON: {e}", it.path, n + 1),
                            )
                        })?;
                        if !v.is_object() {
                            return Err(Error::invalid(
                                "items",
                                format!("{} line {}: not a chunk line", it.path, n + 1),
                            ));
                        }
                        if v.get("op").is_none() {
                            projects.insert(v["project"].as_str().unwrap_or("").to_string());
                        }
                    }
                    let ps: Vec<&str> = projects.iter().map(String::as_str).collect();
                    (access.ingest)(&ps)?;
                    // Tombstones of chunks this store holds alive: the page forgets them.
                    let dead = segment_seqs(bytes, true);
                    if !dead.is_empty() {
                        let here =
                            fsx::read(&self.layout().root.join(&it.path), fsx::MAX_SEGMENT_FILE)?
                                .unwrap_or_default();
                        if !segment_seqs(&here, false).is_disjoint(&dead) {
                            (access.forget)()?;
                        }
                    }
                }
            }
            kinds.push(kind);
        }
        let mut resp = SyncPushResponse::default();
        if items.is_empty() {
            return Ok(resp);
        }
        let mut forgotten = false;
        let resp = self.with_write(|inner, lock| {
            self.adopt_all(inner, lock)?;
            let layout = self.layout().clone();
            let mut touched: BTreeSet<CategoryName> = BTreeSet::new();
            let mut current: BTreeMap<&str, Option<Vec<u8>>> = BTreeMap::new();
            let mut changed: BTreeSet<&str> = BTreeSet::new();
            for (it, kind) in items.iter().zip(&kinds) {
                let path = it.path.as_str();
                if !current.contains_key(path) {
                    let limit = if *kind == Kind::Segment {
                        fsx::MAX_SEGMENT_FILE
                    } else {
                        fsx::MAX_JSON_FILE
                    };
                    let b = fsx::read(&layout.root.join(path), limit)?;
                    current.insert(path, b);
                }
                let cur = current.get_mut(path).expect("invariant: inserted above");
                let data = it.data.as_bytes();
                match kind {
                    Kind::History(c, _) | Kind::Conflict(c, _) => match cur {
                        None => {
                            *cur = Some(data.to_vec());
                            changed.insert(path);
                            resp.applied += 1;
                            touched.insert(c.clone());
                        }
                        Some(b) if b.as_slice() == data => resp.present += 1,
                        Some(_) => resp.reported.push(Problem {
                            kind: "diverged".into(),
                            path: it.path.clone(),
                            message: "a write-once file with another content here; this copy is kept".into(),
                        }),
                    },
                    Kind::Segment => {
                        let have = whole_lines(cur.clone().unwrap_or_default());
                        let from = it.from as usize;
                        let prefix_ok = |b: &[u8]| {
                            from == 0 || it.prefix.as_deref() == Some(content_hash(&b[..from]).as_str())
                        };
                        if have.len() == from && prefix_ok(&have) {
                            let mut b = have;
                            b.extend_from_slice(data);
                            *cur = Some(b);
                            changed.insert(path);
                            resp.applied += 1;
                        } else if have.len() >= from + data.len()
                            && &have[from..from + data.len()] == data
                            && prefix_ok(&have)
                        {
                            resp.present += 1;
                        } else if from == 0 {
                            // Two copies of one segment, neither extending the other: a
                            // forget rewrote lines on one side. Merged line by line, the
                            // tombstones of both sides kept (the rule git sync follows).
                            let (merged, diverged) = merge::merge_segment(&have, data);
                            if diverged {
                                resp.reported.push(Problem {
                                    kind: "diverged".into(),
                                    path: it.path.clone(),
                                    message: "two machines appended to one segment (a shared replica id?); the copy with more lines was kept, with the other's forgotten chunks".into(),
                                });
                            }
                            if merged == have {
                                resp.present += 1;
                            } else {
                                forgotten |= tombstones(&merged) > tombstones(&have);
                                *cur = Some(merged);
                                changed.insert(path);
                                resp.applied += 1;
                            }
                        } else {
                            resp.reported.push(Problem {
                                kind: "diverged".into(),
                                path: it.path.clone(),
                                message: "the segment differs from the sender's copy (two machines under one replica id?); this copy is kept".into(),
                            });
                        }
                    }
                }
            }
            // The heads this replica had (for local_wins and remote_wins).
            let local_heads = self.head_ids(&touched)?;
            let mut writes: Vec<txn::FileWrite> = current
                .into_iter()
                .filter(|(p, _)| changed.contains(p))
                .map(|(p, b)| txn::FileWrite {
                    rel: p.into(),
                    bytes: b,
                    hash: None,
                })
                .collect();
            let seed = content_hash(
                items
                    .iter()
                    .map(|i| i.hash.as_str())
                    .collect::<String>()
                    .as_bytes(),
            );
            if patched && !writes.is_empty() {
                // Entries written as patches arrive with the format that reads them.
                store::format::raise_for_patches(&layout, &mut writes);
            }
            if !writes.is_empty() {
                if !touched.is_empty() {
                    writes.push(self.settle_note(&touched, strategy, &local_heads, &seed));
                }
                // DURABILITY: one staged transaction: a crash leaves all of the page or none
                // (and the note that settles its categories if it stops before they are).
                txn::commit(
                    &layout.root,
                    &layout.staging(),
                    &format!("sync-http-{}", &seed[..12]),
                    &writes,
                )?;
                store::failpoint::hit("sync.before_settle");
            }
            let mut out = SyncResponse::default();
            for name in &touched {
                let entries = self.history_entries(name)?;
                // A malformed hand edit stays as it is (adoption reports it); the history
                // holds the merged version.
                let _ = self.settle_category(name, &entries, strategy, &local_heads, &seed, &mut out)?;
            }
            self.settled()?;
            for name in &touched {
                let _ = self.sync_category(inner, name, Some(lock), Sync::Full)?;
            }
            self.sync_sessions(inner, Some(lock))?;
            resp.categories = out.categories;
            resp.conflicts = out.conflicts;
            resp.reported.extend(out.reported);
            Ok(resp)
        })?;
        if forgotten {
            // A chunk forgotten elsewhere: its text leaves the index and the ledger's log here
            // too, as after a local forget.
            self.purge_derived()?;
        }
        Ok(resp)
    }

    /// `memdir sync` with an HTTP remote: rounds of manifest, diff, pull, push until both
    /// sides hold the same files.
    pub(super) fn sync_http(
        &self,
        url: &str,
        token: Option<String>,
        strategy: Strategy,
        progress: &dyn Fn(u64, u64),
    ) -> Result<SyncResponse> {
        let remote = Remote::new(url, token, CALL_TIMEOUT);
        let mut resp = SyncResponse {
            remote: url.to_string(),
            strategy: strategy.as_str().to_string(),
            ..Default::default()
        };
        let all = SyncAccess::all();
        let call = |route: &str, body: Value| remote.call(route, Some(&body));
        let mut done: u64 = 0;
        for round in 1..=MAX_ROUNDS {
            resp.rounds = round;
            let mine = self.current_sync_files(all.read)?;
            let (root, buckets) = tree(&mine);
            let theirs: SyncManifestResponse = match remote.call(wire::MANIFEST, None) {
                Ok(v) => decode(url, v)?,
                Err(RemoteError::Unreachable(m)) => {
                    resp.offline = Some(m);
                    resp.push_pending = true;
                    return Ok(resp);
                }
                Err(e) => return Err(remote_err(url, e)),
            };
            check_format(url, &theirs.format)?;
            if theirs.root == root {
                resp.pushed = true;
                break;
            }
            let mut differing: BTreeMap<String, Vec<SyncFile>> = BTreeMap::new();
            for b in buckets.keys().chain(theirs.buckets.keys()) {
                if buckets.get(b) != theirs.buckets.get(b) {
                    differing.insert(b.clone(), Vec::new());
                }
            }
            for f in mine.values() {
                if let Some(l) = differing.get_mut(bucket_of(&f.path)) {
                    l.push(f.clone());
                }
            }
            let diff: SyncDiffResponse = decode(
                url,
                call(wire::DIFF, json!({"buckets": differing})).map_err(|e| remote_err(url, e))?,
            )?;
            for p in &diff.diverged {
                if !resp.reported.iter().any(|r| &r.path == p) {
                    resp.reported.push(Problem {
                        kind: "diverged".into(),
                        path: p.clone(),
                        message:
                            "both sides hold this file with different contents; each keeps its own"
                                .into(),
                    });
                }
            }
            if diff.pull.is_empty() && diff.push.is_empty() {
                // Only diverged files differ: nothing a sync can do.
                resp.pushed = true;
                break;
            }
            let (mut want, mut push) = (diff.pull, diff.push);
            // A tail the server lacks whose start is not the server's copy: the segment was
            // rewritten by a forget on one side. Both copies travel whole and merge.
            for w in &mut push {
                let Some(p) = w.prefix.clone() else { continue };
                let probe = SyncFile {
                    path: w.path.clone(),
                    len: w.from,
                    hash: p,
                };
                if !self.segment_starts_with(&w.path, &probe)? {
                    *w = SyncWant::whole(&w.path);
                    want.push(SyncWant::whole(&w.path));
                }
            }
            // Progress in files and tails: what this round moves, after what earlier ones did.
            let mut total = done + (want.len() + push.len()) as u64;
            progress(done, total);
            while !want.is_empty() {
                let page: SyncPage = decode(
                    url,
                    call(wire::PULL, json!({"want": want, "max_bytes": PAGE_BYTES}))
                        .map_err(|e| remote_err(url, e))?,
                )?;
                check_format(url, &page.format)?;
                if page.items.is_empty() && page.rest == want {
                    return Err(Error::new(
                        ErrorKind::Unavailable,
                        format!("{url} sent an empty page; the sync cannot progress"),
                    ));
                }
                let r = self.apply_items(&page.items, strategy, &all)?;
                failpoint::hit("sync.http.after_pull_page");
                resp.files_received += r.applied;
                resp.merged |= r.applied > 0;
                resp.categories.extend(r.categories);
                resp.conflicts.extend(r.conflicts);
                resp.reported.extend(r.reported);
                done += page.items.len() as u64;
                want = page.rest;
                total = total.max(done + (want.len() + push.len()) as u64);
                progress(done, total);
            }
            let mut want = push;
            while !want.is_empty() {
                let page = self.sync_page(&want, PAGE_BYTES, &all)?;
                if page.items.is_empty() && page.rest.is_empty() {
                    break;
                }
                let r: SyncPushResponse = decode(
                    url,
                    call(
                        wire::PUSH,
                        json!({"format": SYNC_FORMAT, "items": page.items, "strategy": strategy.as_str()}),
                    )
                    .map_err(|e| remote_err(url, e))?,
                )?;
                failpoint::hit("sync.http.after_push_page");
                resp.files_sent += page.items.len();
                resp.conflicts.extend(r.conflicts);
                done += page.items.len() as u64;
                want = page.rest;
                total = total.max(done + want.len() as u64);
                progress(done, total);
            }
        }
        if !resp.pushed {
            resp.push_pending = true;
            resp.offline = Some(format!(
                "the remote moved during each of {MAX_ROUNDS} rounds; sync again"
            ));
        }
        for l in [&mut resp.conflicts, &mut resp.categories] {
            l.sort();
            l.dedup();
        }
        Ok(resp)
    }
}
