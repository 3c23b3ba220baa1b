//! Sync over HTTP: the same files and the same merge core as the git transport, moved as
//! JSON pages between two memory directories, one of them a `memdir serve`.
//!
//! What is exchanged is exactly what git sync merges by union: history entries and conflict
//! records (write-once, named by identity) and session segments (append-only, one writer
//! each). Category files are never sent: each side derives them from the merged history
//! ([`Replication::settle_category`], the function the git transport uses), so both sides write
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
use crate::service::Peers;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::service::WriteTxn;
use crate::service::categories::adoption::Sync;
use crate::sync::gate::{self, Body, Entry, Gate, Incoming, Place, SyncAccess, Verdict};
use crate::sync::http::{self as wire, Remote, RemoteError};
use crate::sync::merge::Strategy;
use crate::sync::seal::{self, SealBook};
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::{
    Problem, SYNC_FORMAT, SyncDiffRequest, SyncDiffResponse, SyncFile, SyncItem,
    SyncManifestResponse, SyncPage, SyncPullRequest, SyncPushRequest, SyncPushResponse,
    SyncResponse, SyncWant,
};
use memdir_store::lock::WriteLock;
use memdir_store::model::{CategoryName, content_hash, decode_component};
use memdir_store::note::NotePath;
use memdir_store::{self as store, Layout, failpoint, fsx, txn};

/// Default page size in bytes of data.
pub const PAGE_BYTES: u64 = 1 << 20;
/// Largest page a caller may ask for.
pub const MAX_PAGE_BYTES: u64 = 8 << 20;
/// Manifest-diff-pull-push rounds before a sync gives up on a remote that keeps moving.
const MAX_ROUNDS: usize = 5;
/// Timeout of one HTTP call.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

fn bad_path(path: &str, why: &str) -> Error {
    Error::invalid(
        "path",
        format!("{path:?} is not a file sync exchanges: {why}"),
    )
}

/// Validates a path the other side named, as strictly as a local write names its files:
/// a history entry, a conflict record or a segment (category files never travel).
fn classify(path: &str) -> Result<Place> {
    match Place::of(path) {
        Ok(Place::Category(_) | Place::Note(_)) => Err(bad_path(
            path,
            "not under history/, note-history/, conflicts/ or sessions/",
        )),
        Ok(p) => Ok(p),
        Err(why) => Err(bad_path(path, &why)),
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
    b.truncate(gate::whole_lines(&b).len());
    b
}

/// The most bytes of this replica's own file at `place` read to compare.
fn local_bound(place: &Place) -> u64 {
    match place {
        Place::Segment(_) | Place::Seal(_) => fsx::MAX_SEGMENT_FILE,
        _ => fsx::MAX_JSON_FILE,
    }
}

/// The longest a sync may run: between calls, a sync past it ends with `unavailable`.
const MAX_SYNC_TIME: Duration = Duration::from_secs(600);
/// The most pages of one sync, whatever its diffs announce.
const MAX_PAGES: u64 = 100_000;

/// One client sync's remote and what bounds it.
struct Run<'a> {
    url: &'a str,
    remote: &'a Remote,
    strategy: Strategy,
    progress: &'a dyn Fn(u64, u64),
    /// Files and tails moved so far.
    done: u64,
    budget: Budget,
}

impl Run<'_> {
    /// POSTs `body` to `route` within the sync's time, and decodes the answer.
    fn call<T: serde::de::DeserializeOwned>(&self, route: &str, body: Value) -> Result<T> {
        self.budget.call(self.url)?;
        let v = self
            .remote
            .call(route, Some(&body))
            .map_err(|e| remote_err(self.url, e))?;
        decode(self.url, v)
    }
}

/// The pages and time a sync may take: a page for each file a diff announced and for each
/// 64 KiB of data received, a fixed slack, within [`MAX_PAGES`] and [`MAX_SYNC_TIME`].
struct Budget {
    deadline: std::time::Instant,
    pages: u64,
    allowed: u64,
}

impl Budget {
    fn new(deadline: std::time::Instant) -> Budget {
        Budget {
            deadline,
            pages: 0,
            allowed: 64,
        }
    }

    /// Files a diff announced: each may take a page.
    fn announce(&mut self, files: usize) {
        self.allowed = self.allowed.saturating_add(files as u64);
    }

    /// Before a call: the time left.
    fn call(&self, url: &str) -> Result<()> {
        if std::time::Instant::now() > self.deadline {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "the sync with {url} ran longer than {} s; it stops here (what was applied stays)",
                    MAX_SYNC_TIME.as_secs()
                ),
            )
            .hint("sync again to go on from where it stopped"));
        }
        Ok(())
    }

    /// A page received: within the pages its data and the diffs allow.
    fn page(&mut self, url: &str, page: &SyncPage) -> Result<()> {
        let bytes: u64 = page.items.iter().map(|i| i.data.len() as u64).sum();
        self.pages += 1;
        self.allowed = self.allowed.saturating_add(bytes / (64 * 1024));
        if self.pages > self.allowed.min(MAX_PAGES) {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "{url} kept sending pages: {} pages, more than what its diffs announced allow; the sync stops",
                    self.pages
                ),
            ));
        }
        Ok(())
    }
}

/// Whether a pulled page is progress on `want`: its items and what it says remains are all
/// files the diff announced, and every file it sends either leaves the list or, cut, goes on
/// from where the page ended it.
fn check_progress(want: &[SyncWant], page: &SyncPage) -> std::result::Result<(), String> {
    let wanted: BTreeSet<&str> = want.iter().map(|w| w.path.as_str()).collect();
    if page.items.is_empty() && !page.rest.is_empty() {
        return Err("it holds nothing and says more is to come".into());
    }
    for it in &page.items {
        if !wanted.contains(it.path.as_str()) {
            return Err(format!("it holds {}, which was not asked for", it.path));
        }
        if let Some(r) = page.rest.iter().find(|r| r.path == it.path)
            && (it.data.is_empty() || r.from != it.from + it.data.len() as u64)
        {
            return Err(format!("it asks again for {} without going on", it.path));
        }
    }
    if let Some(r) = page.rest.iter().find(|r| !wanted.contains(r.path.as_str())) {
        return Err(format!(
            "it names {} as still to come, which was not asked for",
            r.path
        ));
    }
    if page.rest.len() > want.len() {
        return Err("it names more files to come than were asked for".into());
    }
    Ok(())
}

/// Adds a problem unless one for the same path and kind is there.
fn report(reported: &mut Vec<Problem>, p: Problem) {
    if !reported
        .iter()
        .any(|r| r.path == p.path && r.kind == p.kind)
    {
        reported.push(p);
    }
}

/// What the gate let in from a page.
#[derive(Default)]
struct Admitted {
    writes: Vec<txn::FileWrite>,
    touched: BTreeSet<CategoryName>,
    touched_notes: BTreeSet<NotePath>,
    /// Whether tombstones of chunks this replica held alive arrived.
    forgotten: bool,
    /// Whether a history entry written as a patch arrived.
    patched: bool,
}

/// What a page's settling needs: what it touched, and the inputs every replica resolves with.
struct Settling<'a> {
    categories: &'a BTreeSet<CategoryName>,
    notes: &'a BTreeSet<NotePath>,
    strategy: Strategy,
    local_heads: &'a BTreeSet<String>,
    seed: &'a str,
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

impl Peers<'_> {
    /// Adopts hand edits (each becomes a version of its own before it is exchanged). Caller
    /// holds the lock.
    fn adopt_all(&self, tx: &WriteTxn<'_>) -> Result<()> {
        self.categories().adopt_hand_edits(tx)?;
        self.notes().adopt_hand_edits(tx)?;
        self.sessions().sync_sessions(tx.inner, Some(tx.lock))
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
        for path in memdir_store::note::history_paths(layout)? {
            if !read(&format!("notes/{path}")) {
                continue;
            }
            let rel = path.history_rel();
            for id in memdir_store::note::history_ids(layout, &path)? {
                let p = format!("{}/{id}.json", rel.to_string_lossy());
                if let Some(b) = fsx::read(&layout.root.join(&p), fsx::MAX_JSON_FILE)?
                    && store::read_history_bytes(&b).is_ok()
                {
                    add(p, &b);
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
                    if fsx::entry_kind(&e) != fsx::EntryKind::File
                        || !gate::file_name_ok(&file, ".json")
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
            for rel in crate::service::replication::seals::seal_files(&layout.root, &dir) {
                let path = rel.to_string_lossy().into_owned();
                if let (Ok(_), Some(b)) = (
                    classify(&path),
                    fsx::read(&layout.root.join(&rel), fsx::MAX_SEGMENT_FILE)?,
                ) {
                    add(path, &b);
                }
            }
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
        self.with_write(|tx| {
            self.adopt_all(tx)?;
            // Its own segments sealed before any of them is offered.
            crate::service::replication::seals::seal_own(self, tx.lock)
        })?;
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
        // A request that is refused changes nothing: its paths and rights are checked before
        // this replica seals its segments for the answer.
        for (bucket, theirs) in &req.buckets {
            for t in theirs {
                let kind = classify(&t.path)?;
                if bucket_of(&t.path) != bucket {
                    return Err(bad_path(&t.path, "not in the bucket it was listed under"));
                }
                if let Place::History { category: c, .. } | Place::Conflict { category: c, .. } =
                    &kind
                    && !self.layout().root.join(&t.path).exists()
                {
                    (access.write)(c.as_str())?;
                }
                if let Place::NoteHistory { path, .. } = &kind
                    && !self.layout().root.join(&t.path).exists()
                {
                    (access.write)(&format!("notes/{path}"))?;
                }
            }
        }
        let ours = self.current_sync_files(access.read)?;
        let mut resp = SyncDiffResponse::default();
        for (bucket, theirs) in &req.buckets {
            let mut mine: BTreeMap<&str, &SyncFile> = ours
                .range(format!("{bucket}/")..)
                .take_while(|(p, _)| p.starts_with(&format!("{bucket}/")))
                .map(|(p, f)| (p.as_str(), f))
                .collect();
            for t in theirs {
                // Paths and buckets were checked above.
                let kind = classify(&t.path)?;
                let pushes_category = |c: &CategoryName| (access.write)(c.as_str());
                match (mine.remove(t.path.as_str()), &kind) {
                    (
                        None,
                        Place::History { category: c, .. } | Place::Conflict { category: c, .. },
                    ) => {
                        pushes_category(c)?;
                        resp.push.push(SyncWant::at(&t.path, 0));
                    }
                    (None, Place::NoteHistory { path, .. }) => {
                        (access.write)(&format!("notes/{path}"))?;
                        resp.push.push(SyncWant::at(&t.path, 0));
                    }
                    (None, _) => resp.push.push(SyncWant::at(&t.path, 0)),
                    (Some(o), _) if o.hash == t.hash && o.len == t.len => {}
                    // The caller's copy may extend ours: it checks our hash against its
                    // first bytes before sending the tail (else the segment travels whole).
                    (Some(o), Place::Segment(_)) if t.len > o.len => resp.push.push(SyncWant {
                        prefix: Some(o.hash.clone()),
                        ..SyncWant::at(&t.path, o.len)
                    }),
                    (Some(o), Place::Segment(_))
                        if o.len > t.len && self.segment_starts_with(&t.path, t)? =>
                    {
                        resp.pull.push(SyncWant::at(&t.path, t.len))
                    }
                    // Neither copy extends the other: a forget rewrote a line on one side
                    // (or both). Each side sends its whole copy; the receiver's gate decides.
                    (Some(_), Place::Segment(_)) => {
                        resp.pull.push(SyncWant::whole(&t.path));
                        resp.push.push(SyncWant::whole(&t.path));
                    }
                    // Two copies of one version: a forget (or a patch written whole) on one
                    // side. Both travel; each side's gate keeps what wins, or reports.
                    (Some(_), Place::History { category: c, .. }) => {
                        pushes_category(c)?;
                        resp.pull.push(SyncWant::at(&t.path, 0));
                        resp.push.push(SyncWant::at(&t.path, 0));
                    }
                    (Some(_), Place::NoteHistory { path, .. }) => {
                        (access.write)(&format!("notes/{path}"))?;
                        resp.pull.push(SyncWant::at(&t.path, 0));
                        resp.push.push(SyncWant::at(&t.path, 0));
                    }
                    // Two seals of one segment: one has more lines sealed or more salts
                    // withdrawn. Both travel; each gate merges them.
                    (Some(_), Place::Seal(_)) => {
                        resp.pull.push(SyncWant::at(&t.path, 0));
                        resp.push.push(SyncWant::at(&t.path, 0));
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
            let segment = matches!(kind, Place::Segment(_));
            if let Some(c) = kind.category()
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
            let bytes = read_wanted(layout, &w.path, &kind)?;
            let bytes = if segment { whole_lines(bytes) } else { bytes };
            // A tail whose prefix is not what the receiver holds travels whole, to be merged.
            let whole = segment
                && (w.whole
                    || w.prefix.as_deref().is_some_and(|p| {
                        (w.from as usize) > bytes.len()
                            || content_hash(&bytes[..w.from as usize]) != p
                    }));
            let from = if whole { 0 } else { w.from as usize };
            if from > bytes.len() || (!segment && from != 0) {
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
            if used > 0 && data.len() > room && (!segment || whole) {
                page.rest.extend(want[i..].iter().cloned());
                break;
            }
            let mut cut = false;
            if data.len() > room && segment && !whole {
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
    pub(in crate::service) fn sync_strategy(&self, name: Option<&str>) -> Result<Strategy> {
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

    /// Applies a page: what a caller may not send at all refuses it whole before anything is
    /// read (a path sync does not exchange, damage in transit, a tail without its prefix);
    /// then, under the store lock, every item passes the gate, which refuses the page whole
    /// for a right the caller lacks and reports an item it refuses while the rest is taken.
    /// What the gate lets in is one transaction; the categories whose history grew are
    /// derived, and the ledger (and so the index) catches up.
    fn apply_items(
        &self,
        items: &[SyncItem],
        strategy: Strategy,
        access: &SyncAccess<'_>,
    ) -> Result<SyncPushResponse> {
        let mut places = Vec::with_capacity(items.len());
        for it in items {
            let place = classify(&it.path)?;
            if content_hash(it.data.as_bytes()) != it.hash {
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    format!(
                        "{}: the data does not match its BLAKE3 hash (damaged in transit); nothing of this page was applied",
                        it.path
                    ),
                )
                .field("items"));
            }
            let segment = matches!(place, Place::Segment(_));
            if (!segment && it.from != 0) || (segment && it.from > 0 && it.prefix.is_none()) {
                return Err(Error::invalid(
                    "items",
                    format!(
                        "{}: only a segment travels as a tail, with the hash of what precedes it",
                        it.path
                    ),
                ));
            }
            places.push(place);
        }
        let mut resp = SyncPushResponse::default();
        if items.is_empty() {
            return Ok(resp);
        }
        let mut forgotten = false;
        let resp = self.with_write(|tx| {
            self.adopt_all(tx)?;
            let layout = self.layout().clone();
            let admitted = self.admit_items(tx.lock, items, &places, access, &mut resp)?;
            forgotten = admitted.forgotten;
            let touched = admitted.touched;
            let touched_notes = admitted.touched_notes;
            let mut writes = admitted.writes;
            // The heads this replica had (for local_wins and remote_wins).
            let mut local_heads = self.replication().head_ids(&touched)?;
            local_heads.extend(self.replication().note_head_ids(&touched_notes)?);
            let seed = content_hash(
                items
                    .iter()
                    .map(|i| i.hash.as_str())
                    .collect::<String>()
                    .as_bytes(),
            );
            // A version forgotten on the other side: the versions here written as patches of
            // it are written whole in the same transaction.
            store::history::keep_chains(&layout.root, &mut writes)?;
            if admitted.patched && !writes.is_empty() {
                // Entries written as patches arrive with the format that reads them.
                store::format::raise_for_patches(&layout, &mut writes);
            }
            if !writes.is_empty() {
                if !touched.is_empty() || !touched_notes.is_empty() {
                    writes.push(self.replication().settle_note(
                        &touched,
                        &touched_notes,
                        strategy,
                        &local_heads,
                        &seed,
                    ));
                }
                if forgotten {
                    crate::service::upkeep::forget::mark_purge_pending(self.layout())?;
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
            let settling = Settling {
                categories: &touched,
                notes: &touched_notes,
                strategy,
                local_heads: &local_heads,
                seed: &seed,
            };
            let out = self.settle_page(tx, &settling)?;
            resp.categories = out.categories;
            resp.conflicts = out.conflicts;
            resp.reported.extend(out.reported);
            Ok(resp)
        })?;
        if forgotten {
            // A chunk forgotten elsewhere: its text leaves the index and the ledger's log here
            // too, as after a local forget.
            self.upkeep().purge_derived()?;
        }
        Ok(resp)
    }

    /// Derives the files of the categories and notes a page brought versions of, then brings
    /// the ledger (and so the index) up to date. Caller holds the lock.
    fn settle_page(&self, tx: &WriteTxn<'_>, s: &Settling<'_>) -> Result<SyncResponse> {
        let mut out = SyncResponse::default();
        for name in s.categories {
            let entries = self.categories().history_entries(name)?;
            // A malformed hand edit stays as it is (adoption reports it); the history
            // holds the merged version.
            let _ = self.replication().settle_category(
                name,
                &entries,
                s.strategy,
                s.local_heads,
                s.seed,
                &mut out,
            )?;
        }
        for path in s.notes {
            self.replication().settle_note_text(
                path,
                s.strategy,
                s.local_heads,
                s.seed,
                &mut out,
            )?;
        }
        self.notes().record_settled(tx, s.notes)?;
        self.replication().settled()?;
        for name in s.categories {
            let _ = self
                .categories()
                .sync_category(tx.inner, name, Some(tx.lock), Sync::Full)?;
        }
        self.sessions().sync_sessions(tx.inner, Some(tx.lock))?;
        Ok(out)
    }

    /// Each item of a page through the gate, in order (an item sees what the ones before it
    /// made of its file). Caller holds the lock.
    fn admit_items(
        &self,
        lock: &WriteLock,
        items: &[SyncItem],
        places: &[Place],
        access: &SyncAccess<'_>,
        resp: &mut SyncPushResponse,
    ) -> Result<Admitted> {
        let root = &self.layout().root;
        let replica = self.replica(lock)?;
        let book = SealBook::new(root);
        let gate = Gate::new(&replica, access, &self.settings.redaction).with_seals(&book);
        let mut current: BTreeMap<&str, Option<Vec<u8>>> = BTreeMap::new();
        let mut changed: BTreeSet<&str> = BTreeSet::new();
        let mut admitted = Admitted::default();
        for (it, place) in items.iter().zip(places) {
            let path = it.path.as_str();
            if !current.contains_key(path) {
                match fsx::read(&root.join(path), local_bound(place)) {
                    Ok(b) => current.insert(path, b),
                    Err(e) => {
                        resp.reported.push(Problem {
                            kind: "unreadable".into(),
                            path: it.path.clone(),
                            message: format!("{}; this copy stays as it is", e.source),
                        });
                        continue;
                    }
                };
            }
            let cur = current.get_mut(path).expect("invariant: inserted above");
            let data = it.data.as_bytes();
            let body = match &it.prefix {
                Some(prefix) if it.from > 0 => Body::Tail {
                    from: it.from,
                    prefix,
                    data,
                },
                _ => Body::Whole(data),
            };
            let incoming = Incoming {
                path,
                entry: Entry::File,
                body,
            };
            let verdict = gate.admit(&incoming, cur.as_deref())?;
            let withdrawn = matches!(verdict, Verdict::Withdraw(_));
            match verdict {
                Verdict::Same => resp.present += 1,
                Verdict::Refuse(p) => resp.reported.push(p),
                v => {
                    let bytes = v.into_bytes().expect("invariant: a verdict that writes");
                    admitted.forgotten |= withdrawn && matches!(place, Place::Segment(_));
                    admitted.patched |= matches!(place, Place::History { .. })
                        && store::read_history_bytes(&bytes).is_ok_and(|e| e.patch.is_some());
                    if let Some(c) = place.category() {
                        admitted.touched.insert(c.clone());
                    }
                    if let Some(n) = place.note() {
                        admitted.touched_notes.insert(n.clone());
                    }
                    *cur = Some(bytes);
                    changed.insert(path);
                    resp.applied += 1;
                }
            }
        }
        admitted.writes = current
            .into_iter()
            .filter(|(p, _)| changed.contains(p))
            .map(|(p, b)| txn::FileWrite {
                rel: p.into(),
                bytes: b,
                hash: None,
            })
            .collect();
        seal::settle(root, Some(&book), &mut admitted.writes);
        Ok(admitted)
    }

    /// `memdir sync` with an HTTP remote: rounds of manifest, diff, pull, push. A sync ends
    /// pushed when both sides hold the same files, or once a round after the first has
    /// pushed everything this replica held when it began (steady writers on either side
    /// never leave two equal manifests; what they write meanwhile is the next sync's).
    pub(in crate::service) fn sync_http(
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
        let mut run = Run {
            url,
            remote: &remote,
            strategy,
            progress,
            done: 0,
            budget: Budget::new(std::time::Instant::now() + MAX_SYNC_TIME),
        };
        for round in 1..=MAX_ROUNDS {
            resp.rounds = round;
            let mine = self.current_sync_files(all.read)?;
            let (root, buckets) = tree(&mine);
            run.budget.call(url)?;
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
            let diff: SyncDiffResponse = run.call(wire::DIFF, json!({"buckets": differing}))?;
            for p in &diff.diverged {
                report(
                    &mut resp.reported,
                    Problem {
                        kind: "diverged".into(),
                        path: p.clone(),
                        message:
                            "both sides hold this file with different contents; each keeps its own"
                                .into(),
                    },
                );
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
            // In path order: a segment's seal (`.head`) before the segment (`.jsonl`), so
            // the segment's new lines meet the seal that vouches for them.
            want.sort_by(|a, b| a.path.cmp(&b.path));
            push.sort_by(|a, b| a.path.cmp(&b.path));
            self.pull_all(&mut run, want, push.len() as u64, &mut resp)?;
            self.push_all(&mut run, push, &mut resp)?;
            if round >= 2 {
                // Everything this replica held when the round began is on the server.
                resp.pushed = true;
                break;
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

    /// Pulls and applies pages of `want` until the server has sent all of it. A page must be
    /// progress on what the diff announced, within the sync's page and time budgets, or the
    /// sync ends with `unavailable`.
    fn pull_all(
        &self,
        run: &mut Run<'_>,
        mut want: Vec<SyncWant>,
        pushes: u64,
        resp: &mut SyncResponse,
    ) -> Result<()> {
        let all = SyncAccess::all();
        let url = run.url;
        // Progress in files and tails: what this round moves, after what earlier ones did.
        let mut total = run.done + want.len() as u64 + pushes;
        (run.progress)(run.done, total);
        run.budget.announce(want.len());
        while !want.is_empty() {
            let page: SyncPage =
                run.call(wire::PULL, json!({"want": want, "max_bytes": PAGE_BYTES}))?;
            check_format(url, &page.format)?;
            check_progress(&want, &page).map_err(|why| {
                Error::new(
                    ErrorKind::Unavailable,
                    format!("{url} sent a page that is not progress on what its diff announced: {why}; the sync stops"),
                )
            })?;
            run.budget.page(url, &page)?;
            let r = self.apply_items(&page.items, run.strategy, &all)?;
            failpoint::hit("sync.http.after_pull_page");
            resp.files_received += r.applied;
            resp.merged |= r.applied > 0;
            resp.categories.extend(r.categories);
            resp.conflicts.extend(r.conflicts);
            for p in r.reported {
                report(&mut resp.reported, p);
            }
            run.done += page.items.len() as u64;
            want = page.rest;
            total = total.max(run.done + want.len() as u64 + pushes);
            (run.progress)(run.done, total);
        }
        Ok(())
    }

    /// Pushes pages of `push` until the server holds all of it; what it refuses is reported.
    fn push_all(
        &self,
        run: &mut Run<'_>,
        mut want: Vec<SyncWant>,
        resp: &mut SyncResponse,
    ) -> Result<()> {
        let all = SyncAccess::all();
        let mut total = run.done + want.len() as u64;
        while !want.is_empty() {
            let page = self.sync_page(&want, PAGE_BYTES, &all)?;
            if page.items.is_empty() && page.rest.is_empty() {
                break;
            }
            let body = json!({"format": SYNC_FORMAT, "items": page.items, "strategy": run.strategy.as_str()});
            let r: SyncPushResponse = run.call(wire::PUSH, body)?;
            failpoint::hit("sync.http.after_push_page");
            resp.files_sent += page.items.len();
            resp.conflicts.extend(r.conflicts);
            for p in r.reported {
                report(&mut resp.reported, p);
            }
            run.done += page.items.len() as u64;
            want = page.rest;
            total = total.max(run.done + want.len() as u64);
            (run.progress)(run.done, total);
        }
        Ok(())
    }
}

/// The bytes of a file a peer asked for, read without following any link on its way.
fn read_wanted(layout: &Layout, path: &str, kind: &Place) -> Result<Vec<u8>> {
    fsx::read_under(&layout.root, Path::new(path), local_bound(kind))?.ok_or_else(|| {
        Error::new(
            ErrorKind::NotFound,
            format!("{path} is not in this memory directory"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(path: &str, from: u64, data: &str) -> SyncItem {
        SyncItem {
            path: path.into(),
            from,
            prefix: None,
            hash: content_hash(data.as_bytes()),
            data: data.into(),
        }
    }

    fn page(items: Vec<SyncItem>, rest: Vec<SyncWant>) -> SyncPage {
        SyncPage {
            format: SYNC_FORMAT.into(),
            items,
            rest,
        }
    }

    #[test]
    fn a_pulled_page_must_be_progress_on_what_was_asked_for() {
        let want = vec![
            SyncWant::at("sessions/a/r.jsonl", 0),
            SyncWant::at("history/c/x.json", 0),
        ];
        // A file sent whole, the rest to come; a tail cut and going on from where it ended.
        assert!(
            check_progress(
                &want,
                &page(
                    vec![item("history/c/x.json", 0, "{}")],
                    vec![want[0].clone()]
                )
            )
            .is_ok()
        );
        let cut = page(
            vec![item("sessions/a/r.jsonl", 0, "l\n")],
            vec![SyncWant::at("sessions/a/r.jsonl", 2), want[1].clone()],
        );
        assert!(check_progress(&want, &cut).is_ok());
        assert!(check_progress(&want, &page(Vec::new(), Vec::new())).is_ok());
        // What was not asked for, nothing with more to come, the same file again.
        let other = page(vec![item("sessions/b/r.jsonl", 0, "l\n")], Vec::new());
        assert!(check_progress(&want, &other).is_err());
        let names_other = page(
            vec![item("history/c/x.json", 0, "{}")],
            vec![SyncWant::at("sessions/b/r.jsonl", 0)],
        );
        assert!(check_progress(&want, &names_other).is_err());
        assert!(check_progress(&want, &page(Vec::new(), want.clone())).is_err());
        let again = page(vec![item("sessions/a/r.jsonl", 0, "l\n")], want.clone());
        assert!(check_progress(&want, &again).is_err());
    }

    #[test]
    fn a_sync_has_a_page_budget_from_what_was_announced_and_received() {
        let mut b = Budget::new(std::time::Instant::now() + MAX_SYNC_TIME);
        b.announce(10);
        let small = page(vec![item("sessions/a/r.jsonl", 0, "l\n")], Vec::new());
        for _ in 0..74 {
            assert!(b.page("http://x", &small).is_ok());
        }
        assert!(b.page("http://x", &small).is_err());
        assert!(b.call("http://x").is_ok());
        let late = Budget::new(std::time::Instant::now() - Duration::from_secs(1));
        assert!(late.call("http://x").is_err());
    }
}
