//! Versions: every change of a category is a write-once file under `history/`.
//!
//! [`Categories::commit_version`] is the one way a version is made: it stamps the entry with the
//! hybrid clock, commits the history file and the category file as one staged transaction,
//! then records the new head in the ledger. The operations here read history (list, diff,
//! find one version), restore an old version as a new one, and trim old versions (compact),
//! always keeping heads and delete tombstones.
use crate::service::Categories;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::ledger::{CategoryRow, ChangeKind};
use crate::service::WriteTxn;
use crate::service::categories::adoption::{
    CatState, Sync, check_expect, hist_stamp, malformed_error, not_found, row_from,
};
use crate::service::state::{Delta, NewVersion};
use crate::service::{Inner, check_limit, limits};
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::*;
use memdir_store::clock;
use memdir_store::model::{
    CategoryKind, CategoryName, CategoryStatus, Expect, HistoryEntry, VersionOp, content_hash,
};
use memdir_store::{self as store, Layout, codec, failpoint, txn};

/// The category files this process wrote or read last, newest first (see
/// [`Categories::read_category_cached`]): at most [`FileCache::FILES`] files and
/// [`FileCache::BYTES`] bytes of them, though the newest one is always kept.
#[derive(Default)]
pub(in crate::service) struct FileCache {
    files: std::collections::VecDeque<Written>,
}

impl FileCache {
    const FILES: usize = 16;
    const BYTES: usize = 8 << 20;

    /// Takes out the file remembered for `name`.
    fn take(&mut self, name: &CategoryName) -> Option<Written> {
        let at = self.files.iter().position(|w| &w.name == name)?;
        self.files.remove(at)
    }

    /// Files from this size on are compared with the disk alongside the work of a write
    /// ([`Sync::Deferred`](crate::service::categories::adoption::Sync::Deferred)); smaller ones at once.
    pub(in crate::service) const DEFER_FROM: usize = 256 << 10;

    /// Remembers `w` as the newest, forgetting the oldest files beyond the bounds.
    fn put(&mut self, w: Written) {
        let _ = self.take(&w.name);
        self.files.push_front(w);
        let mut bytes: usize = self.files.iter().map(|w| w.file.bytes.len()).sum();
        while self.files.len() > 1
            && (self.files.len() > Self::FILES || bytes > Self::BYTES)
            && let Some(old) = self.files.pop_back()
        {
            bytes -= old.file.bytes.len();
        }
    }

    /// Forgets every file (the store was replaced).
    pub(in crate::service) fn clear(&mut self) {
        self.files.clear();
    }
}

/// A category file this process wrote or read (its content parsed).
struct Written {
    name: CategoryName,
    file: store::CategoryFile,
}

/// A version just committed, as the operations report it.
pub(in crate::service) struct Committed {
    pub(in crate::service) id: String,
    pub(in crate::service) version: u64,
    pub(in crate::service) hash: Option<String>,
    pub(in crate::service) ts: String,
    /// The content written (null for a tombstone), handed back to the caller.
    pub(in crate::service) content: Value,
    /// The category file's bytes as written (`None` for a tombstone or when the version
    /// recorded a file it did not write).
    pub(in crate::service) bytes: Option<Vec<u8>>,
}

fn parse_vv(s: &str) -> BTreeMap<String, u64> {
    serde_json::from_str(s).unwrap_or_default()
}

impl Categories<'_> {
    /// Writes one new version: a history entry and (when `write_file`) the category file, as
    /// one transaction; then records it in the ledger.
    pub(in crate::service) fn commit_version(
        &self,
        tx: &WriteTxn<'_>,
        v: NewVersion<'_>,
    ) -> Result<Committed> {
        let NewVersion {
            name,
            base,
            op,
            actor,
            reason,
            content,
            serialized,
            delta,
            write_file,
        } = v;
        let actor = actor.as_str();
        let layout = self.layout();
        let content = content.unwrap_or(Value::Null);
        let tombstone = content.is_null();
        let (bytes, known_hash) = file_bytes(&content, serialized, write_file)?;
        let hash = if write_file {
            known_hash.or_else(|| bytes.as_deref().map(content_hash))
        } else {
            base_file_hash(layout, name)?
        };
        let replica = self.replica(tx.lock)?;
        let now = clock::now_ms();
        let hlc = after_parent(self.tick(tx.inner, now)?, name, base)?;
        let id = format!("{hlc}_{replica}");
        refuse_recorded(layout, name, &id)?;
        let mut vv = parse_vv(&base.row.vv);
        *vv.entry(replica.clone()).or_insert(0) += 1;
        let ts = clock::rfc3339(now);
        let mut entry = HistoryEntry {
            id: id.clone(),
            parents: base.row.head_id.iter().cloned().collect(),
            vv,
            op: op.as_str().to_string(),
            hash: if tombstone { None } else { hash.clone() },
            actor: actor.to_string(),
            reason,
            ts: ts.clone(),
            content: Value::Null,
            forgotten: None,
            patch: None,
        };
        let version = entry.ordinal();
        entry.patch = match (delta, &bytes, &hash) {
            (Some(d), Some(b), Some(h)) if write_file => self.patch_of(name, base, d, b.len(), h),
            _ => None,
        };
        let depth = entry.patch.as_ref().map_or(0, |p| p.depth);
        let entry_bytes = entry_bytes(&entry, bytes.as_deref());
        let patched = entry.patch.take().is_some();
        entry.content = content;
        let category = write_file.then(|| (bytes, hash.clone()));
        let mut files = version_files(name, &id, entry_bytes, category);
        if patched {
            // The first patch and the format that names it land together: an older memdir
            // refuses the store rather than read a patch as a version without content. Read
            // every time (a small file): the store may have been replaced meanwhile.
            store::format::raise_for_patches(layout, &mut files);
        }
        // The file a write replaces holds nothing that must be gone when it returns (a forget
        // commits otherwise): its blocks are freed by the reaper.
        txn::commit_replacing(
            &layout.root,
            &layout.staging(),
            &id,
            &files,
            txn::Replaced::FreeLater,
        )?;
        if let Ok(mut last) = self.categories.last_head.lock() {
            *last = match &hash {
                Some(h) if write_file && !tombstone => Some((id.clone(), h.clone(), depth)),
                _ => None,
            };
        }
        let written = if write_file {
            let rel = Layout::category_rel(name);
            files
                .into_iter()
                .find(|f| f.rel == rel)
                .and_then(|f| f.bytes)
        } else {
            None
        };
        failpoint::hit("ledger.before_update");
        let row = committed_row(layout, name, &entry, hash.as_deref())?;
        self.record_durable(tx.inner, |l| {
            l.put_category(&row)?;
            l.record_txn(&id, op.as_str(), &format!("category:{name}"), actor, &ts)?;
            l.record_change(ChangeKind::Category, name.as_str())?;
            Ok(())
        });
        Ok(Committed {
            id,
            version,
            hash: if tombstone { None } else { hash },
            ts,
            content: entry.content,
            bytes: written,
        })
    }

    /// The patch a new version may be written as: `delta` on the current head, when the head
    /// is the file being replaced, has content, is not forgotten, fewer than
    /// [`store::history::MAX_DEPTH`] patches lead to it and the change is small against the
    /// new content (`size` bytes). `None`: the version is written whole.
    fn patch_of(
        &self,
        name: &CategoryName,
        base: &CatState,
        delta: Delta,
        size: usize,
        hash: &str,
    ) -> Option<memdir_store::model::Patch> {
        let head = base.row.head_id.as_deref()?;
        let file_hash = base.file.as_ref().filter(|_| base.exists())?.hash.as_str();
        if file_hash == hash {
            return None;
        }
        let cached = self.categories.last_head.lock().ok()?.clone();
        let depth = match cached {
            Some((id, h, d)) if id == head && h == file_hash => d,
            _ => store::history::patch_base(self.layout(), name, head, file_hash)?,
        };
        if depth >= store::history::MAX_DEPTH {
            return None;
        }
        let changed = serde_json::to_vec(&delta.set).map_or(usize::MAX, |v| v.len())
            + delta.remove.iter().map(|k| k.len() + 8).sum::<usize>();
        if changed.saturating_mul(store::history::SMALL_RATIO) > size {
            return None;
        }
        Some(memdir_store::model::Patch {
            base: head.to_string(),
            depth: depth + 1,
            set: delta.set,
            remove: delta.remove,
        })
    }

    /// Reads a category file; when its bytes are the ones this process last wrote or read
    /// there ([`FileCache`]), their hash and content are taken from memory instead of computed
    /// again (comparing the file with them costs far less than hashing and parsing it). A
    /// large category's merge write would otherwise spend much of its time on the file it
    /// wrote before.
    pub(in crate::service) fn read_category_cached(
        &self,
        name: &CategoryName,
    ) -> Result<Option<store::CategoryFile>> {
        let path = self.layout().root.join(Layout::category_rel(name));
        let remembered = self
            .categories
            .file_cache
            .lock()
            .ok()
            .and_then(|mut c| c.take(name));
        // An error (a link, a directory in its place) is the plain read's to report; a file
        // that differs was changed behind this process's back, and is read afresh.
        if let Some(w) = remembered
            && matches!(store::fsx::holds(&path, &w.file.bytes), Ok(true))
        {
            return Ok(Some(w.file));
        }
        Ok(store::read_category(self.layout(), name)?)
    }

    /// Takes out the file remembered for `name` when it is at least
    /// [`FileCache::DEFER_FROM`] bytes and `fits`, without comparing it with the disk: the
    /// caller must ([`Sync::Deferred`](crate::service::categories::adoption::Sync::Deferred)).
    pub(in crate::service) fn take_remembered_large(
        &self,
        name: &CategoryName,
        fits: impl FnOnce(&store::CategoryFile) -> bool,
    ) -> Option<store::CategoryFile> {
        let mut cache = self.categories.file_cache.lock().ok()?;
        let w = cache.files.iter().find(|w| &w.name == name)?;
        if w.file.bytes.len() < FileCache::DEFER_FROM || !fits(&w.file) {
            return None;
        }
        cache.take(name).map(|w| w.file)
    }

    /// Remembers the category file just written: its hash, bytes and content (and the
    /// chaining values of its leaves, when the writer computed them).
    pub(in crate::service) fn remember_written(
        &self,
        name: &CategoryName,
        c: &mut Committed,
        leaves: Option<store::treehash::Leaves>,
    ) {
        if let (Some(hash), Some(bytes)) = (&c.hash, c.bytes.take())
            && !c.content.is_null()
            && let Ok(mut cache) = self.categories.file_cache.lock()
        {
            cache.put(Written {
                name: name.clone(),
                file: store::CategoryFile {
                    hash: hash.clone(),
                    bytes,
                    content: Ok(std::mem::take(&mut c.content)),
                    canonical: true,
                    leaves,
                },
            });
        }
    }

    /// Puts back a category file that a read took from [`Categories::read_category_cached`] (or
    /// parsed): a read between two writes must not cost the next write a parse of the file.
    pub(in crate::service) fn remember_read(&self, name: &CategoryName, file: store::CategoryFile) {
        if file.content.is_ok()
            && let Ok(mut cache) = self.categories.file_cache.lock()
        {
            cache.put(Written {
                name: name.clone(),
                file,
            });
        }
    }

    /// Every readable history entry of a category, oldest first, patches resolved.
    pub(in crate::service) fn history_entries(
        &self,
        name: &CategoryName,
    ) -> Result<Vec<HistoryEntry>> {
        Ok(store::history::entries(self.layout(), name)?)
    }

    /// One version, by ordinal or id, after bringing the category in line with its file.
    pub(in crate::service) fn find_version(
        &self,
        inner: &Inner,
        name: &CategoryName,
        v: &VersionRef,
    ) -> Result<HistoryEntry> {
        let found = self.find_version_unresolved(inner, name, v)?;
        let ordinal = found.ordinal();
        store::history::resolve(self.layout(), name, found).map_err(|why| {
            Error::new(
                ErrorKind::Corrupt,
                format!(
                    "version {ordinal} of {:?} cannot be read: {why}",
                    name.as_str()
                ),
            )
            .field("version")
            .hint("memdir verify-store lists what is damaged")
        })
    }

    /// [`Categories::find_version`] as written: a patch stays a patch (forget needs no content).
    pub(in crate::service) fn find_version_unresolved(
        &self,
        inner: &Inner,
        name: &CategoryName,
        v: &VersionRef,
    ) -> Result<HistoryEntry> {
        self.sync_category(inner, name, None, Sync::Fast)?;
        // Found among the entries as written (a patch is small), then only the one found is
        // resolved: reading one version of a long history builds one content, not all.
        let entries = store::history::unresolved_entries(self.layout(), name)?;
        if entries.is_empty() {
            return Err(not_found(name, self.available_names(inner)?));
        }
        // A number given as a string ("3") is an ordinal on every surface; a hash (or its
        // first 12 or more digits, as `history` shows it) names the version holding it.
        // A hash prefix of all decimal digits is a hash too: no version number has 12 digits.
        let by_hash = |id: &str| -> Vec<&HistoryEntry> {
            entries
                .iter()
                .filter(|e| e.hash.as_deref().is_some_and(|h| h.starts_with(id)))
                .collect()
        };
        let matches: Vec<&HistoryEntry> = match v {
            VersionRef::Ordinal(n) => entries.iter().filter(|e| e.ordinal() == *n).collect(),
            VersionRef::Id(id) => match entries.iter().find(|e| &e.id == id) {
                Some(e) => vec![e],
                None if memdir_store::model::is_hash_prefix(id) => by_hash(id),
                None => match id.parse::<u64>() {
                    Ok(n) => entries.iter().filter(|e| e.ordinal() == n).collect(),
                    Err(_) => Vec::new(),
                },
            },
        };
        // Versions of one content (a restore, a revert) are that content: the newest of them.
        let one_content = matches
            .windows(2)
            .all(|w| w[0].hash.is_some() && w[0].hash == w[1].hash);
        if matches.len() > 1 && !one_content {
            return Err(ambiguous(name, v, &matches));
        }
        let found = matches.last();
        let Some(found) = found else {
            let have: Vec<u64> = entries.iter().map(HistoryEntry::ordinal).collect();
            return Err(Error::new(
                ErrorKind::NotFound,
                format!(
                    "category {:?} has no version {}",
                    name.as_str(),
                    match v {
                        VersionRef::Ordinal(n) => n.to_string(),
                        VersionRef::Id(id) => id.clone(),
                    }
                ),
            )
            .field("version")
            .detail("versions", Value::from(have))
            .hint("{op:history} lists the versions"));
        };
        Ok((*found).clone())
    }

    /// Versions of a category, newest first.
    pub fn history(&self, req: &HistoryRequest) -> Result<HistoryResponse> {
        let name = CategoryName::new(&req.category)?;
        let limit = req.limit;
        check_limit("limit", limit)?;
        let mut guard = self.inner()?;
        let Some(inner) = guard.as_mut() else {
            return Err(not_found(&name, Vec::new()));
        };
        let st = self.sync_category(inner, &name, None, Sync::Fast)?;
        let ids = store::list_history_ids(self.layout(), &name)?;
        if ids.is_empty() {
            return Err(not_found(&name, self.available_names(inner)?));
        }
        let mut versions = Vec::new();
        for id in ids.iter().rev() {
            if versions.len() >= limit {
                break;
            }
            let file = store::read_history(self.layout(), &name, id)?;
            match file.entry {
                Ok(e) => versions.push(HistoryVersion {
                    version: Some(e.ordinal()),
                    id: e.id,
                    hash: e.hash,
                    op: Some(e.op),
                    actor: Some(e.actor),
                    reason: e.reason,
                    timestamp: Some(e.ts),
                    parents: Some(e.parents),
                    malformed: None,
                }),
                Err(why) => versions.push(HistoryVersion::malformed(id, &why)),
            }
        }
        drop(guard);
        let diff = if req.diff_from.is_some() || req.diff_to.is_some() {
            Some(
                self.diff(&DiffRequest {
                    category: req.category.clone(),
                    from: req.diff_from.clone(),
                    to: req.diff_to.clone(),
                })
                .map_err(|e| {
                    match e.details.get("field").and_then(Value::as_str) {
                        Some("from") => e.field("diff_from"),
                        Some("to") => e.field("diff_to"),
                        _ => e,
                    }
                })?,
            )
        } else {
            None
        };
        Ok(HistoryResponse {
            category: name.to_string(),
            status: st.row.status.as_str().to_string(),
            total: ids.len(),
            versions,
            diff,
        })
    }

    /// Unified diff between two versions (default: the head and its parent).
    pub fn diff(&self, req: &DiffRequest) -> Result<DiffResponse> {
        let (from, to) = (req.from.as_ref(), req.to.as_ref());
        let name = CategoryName::new(&req.category)?;
        let mut guard = self.inner()?;
        let Some(inner) = guard.as_mut() else {
            return Err(not_found(&name, Vec::new()));
        };
        let entries = {
            self.sync_category(inner, &name, None, Sync::Fast)?;
            self.history_entries(&name)?
        };
        let Some(head) = entries.last() else {
            return Err(not_found(&name, self.available_names(inner)?));
        };
        let to_e = match to {
            Some(v) => self
                .find_version(inner, &name, v)
                .map_err(|e| e.field("to"))?,
            None => head.clone(),
        };
        let from_e = match from {
            Some(v) => Some(
                self.find_version(inner, &name, v)
                    .map_err(|e| e.field("from"))?,
            ),
            None => to_e
                .parents
                .first()
                .and_then(|p| entries.iter().find(|e| &e.id == p))
                .cloned(),
        };
        let text = |e: Option<&HistoryEntry>| -> String {
            match e {
                Some(e) if !e.content.is_null() => {
                    String::from_utf8(codec::to_pretty(&e.content)).unwrap_or_default()
                }
                _ => String::new(),
            }
        };
        let (a, b) = (text(from_e.as_ref()), text(Some(&to_e)));
        let label = |e: Option<&HistoryEntry>| {
            e.map(|e| format!("{}@{}", name, e.ordinal()))
                .unwrap_or_else(|| "/dev/null".into())
        };
        let diff = similar::TextDiff::from_lines(&a, &b)
            .unified_diff()
            .context_radius(3)
            .header(&label(from_e.as_ref()), &label(Some(&to_e)))
            .to_string();
        Ok(DiffResponse {
            category: name.to_string(),
            from: from_e.as_ref().map(|e| e.ordinal()),
            to: to_e.ordinal(),
            diff,
        })
    }

    /// Restores an old version as a new version.
    pub fn restore(&self, req: &RestoreRequest) -> Result<RestoreResponse> {
        let version = &req.version;
        let (name, expect, reason) = self.existing_target(
            &req.category,
            req.expected_hash.as_deref(),
            req.reason.as_deref(),
        )?;
        self.with_write(|tx| {
            let entry = self.find_version(tx.inner, &name, version)?;
            if entry.forgotten.is_some() {
                return Err(Error::invalid(
                    "version",
                    format!(
                        "version {} was forgotten: its content is gone; pick another version",
                        entry.ordinal()
                    ),
                ));
            }
            if entry.is_tombstone() {
                return Err(Error::invalid(
                    "version",
                    format!(
                        "version {} is a delete tombstone; pick a version with content",
                        entry.ordinal()
                    ),
                ));
            }
            let st = self.sync_category(tx.inner, &name, Some(tx.lock), Sync::Full)?;
            if st.row.status == CategoryStatus::Malformed && expect == Expect::Any {
                // Restoring over a malformed hand edit is the documented way out of it, but the
                // caller must still say so explicitly.
                if let Some(f) = &st.file {
                    return Err(malformed_error(&name, f));
                }
            }
            check_expect(&name, &st, &expect)?;
            let previous = st.row.file_hash.clone().filter(|_| st.exists());
            let reason = reason
                .clone()
                .or_else(|| Some(format!("restore of version {}", entry.ordinal())));
            let c = self.commit_version(
                tx,
                NewVersion {
                    reason,
                    ..NewVersion::new(
                        &name,
                        &st,
                        VersionOp::Restore,
                        self.actor(),
                        Some(entry.content.clone()),
                    )
                },
            )?;
            Ok(RestoreResponse {
                category: name.to_string(),
                restored_from: entry.ordinal(),
                previous_hash: previous,
                new_hash: c.hash,
                version: c.version,
                version_id: c.id,
                timestamp: c.ts,
            })
        })
    }

    /// Trims history to the newest `keep` versions per category, keeping heads and tombstones.
    pub fn compact(&self, req: &CompactRequest) -> Result<CompactResponse> {
        let category = req.category.as_deref();
        let keep = req.keep_versions;
        if keep == 0 || keep > 100_000 {
            return Err(Error::invalid(
                "keep_versions",
                format!("keep_versions must be between 1 and 100000; got {keep}"),
            ));
        }
        let names = match category {
            Some(c) => vec![CategoryName::new(c)?],
            None => store::list_history_names(self.layout())?,
        };
        if !self.layout().exists() {
            return Ok(CompactResponse {
                dry_run: req.dry_run,
                removed: 0,
                keep_versions: keep,
                categories: Vec::new(),
            });
        }
        self.with_write(|tx| {
            let mut report = Vec::new();
            let mut total = 0usize;
            for name in &names {
                self.sync_category(tx.inner, name, Some(tx.lock), Sync::Full)?;
                let ids = store::list_history_ids(self.layout(), name)?;
                if ids.is_empty() && category.is_some() {
                    return Err(not_found(name, self.available_names(tx.inner)?));
                }
                let head = ids.last().cloned();
                let cut = ids.len().saturating_sub(keep);
                let mut removed = Vec::new();
                for id in &ids[..cut] {
                    if Some(id) == head.as_ref() {
                        continue;
                    }
                    let file = store::read_history(self.layout(), name, id)?;
                    if file.entry.as_ref().is_ok_and(HistoryEntry::is_tombstone) {
                        continue;
                    }
                    removed.push(id.clone());
                }
                if !removed.is_empty() && !req.dry_run {
                    let txid = format!("{}_compact", self.tick(tx.inner, clock::now_ms())?);
                    let writes: Vec<txn::FileWrite> = removed
                        .iter()
                        .map(|id| txn::FileWrite {
                            rel: Layout::history_rel(name).join(format!("{id}.json")),
                            bytes: None,
                            hash: None,
                        })
                        .collect();
                    // DURABILITY: one staged transaction, in which a kept version written as
                    // a patch of a removed one is written whole; the removals are reported
                    // only once durable.
                    store::history::commit_keeping_chains(self.layout(), &txid, writes)?;
                    tx.inner.ledger.record_txn(
                        &format!("compact-{}", removed.len()),
                        "compact",
                        &format!("category:{name}"),
                        &self.actor(),
                        &clock::rfc3339(clock::now_ms()),
                    )?;
                }
                total += removed.len();
                report.push(Compacted {
                    category: name.to_string(),
                    removed: removed.len(),
                    kept: ids.len() - removed.len(),
                });
            }
            Ok(CompactResponse {
                dry_run: req.dry_run,
                removed: total,
                keep_versions: keep,
                categories: report,
            })
        })
    }
}

/// The error for a version number (or hash prefix) that names several versions: two devices
/// each wrote a version with that number before a sync brought them together.
fn ambiguous(name: &CategoryName, v: &VersionRef, found: &[&HistoryEntry]) -> Error {
    let said = match v {
        VersionRef::Ordinal(n) => n.to_string(),
        VersionRef::Id(id) => id.clone(),
    };
    let each: Vec<String> = found
        .iter()
        .map(|e| {
            format!(
                "{}'s {} (id {})",
                e.actor,
                e.hash
                    .as_deref()
                    .map_or("delete", |h| h.get(..12).unwrap_or(h)),
                e.id
            )
        })
        .collect();
    Error::invalid(
        "version",
        format!(
            "version {said} of {:?} names {} versions written on different devices before a sync: {}",
            name.as_str(),
            found.len(),
            each.join(", ")
        ),
    )
    .detail(
        "candidates",
        Value::from(found.iter().map(|e| e.id.clone()).collect::<Vec<_>>()),
    )
    .hint("name one by its hash as history shows it (12 digits or more) or by its id")
}

/// A version's stamp sorts after its parent's even when the parent carries a stamp the clock
/// did not admit (far ahead of the wall clock): ids order history, and the head is the newest
/// id.
fn after_parent(hlc: clock::Hlc, name: &CategoryName, base: &CatState) -> Result<clock::Hlc> {
    let Some(parent) = base
        .row
        .head_id
        .as_deref()
        .and_then(|p| p.get(..24))
        .and_then(clock::Hlc::parse)
        .filter(|p| hlc <= *p)
    else {
        return Ok(hlc);
    };
    let next = parent.tick(parent.ms);
    if next <= parent {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "the newest version of {:?} carries the last possible stamp ({parent}); no later version can be recorded",
                name.as_str()
            ),
        )
        .hint("move that history file aside (it was not written by memdir's clock), then retry"));
    }
    Ok(next)
}

/// The category file's bytes for `content` (`None` for a tombstone), with their hash when the
/// writer had both already (`serialized`); refuses a file over the size limit when it is to be
/// written.
fn file_bytes(
    content: &Value,
    serialized: Option<(Vec<u8>, String)>,
    write_file: bool,
) -> Result<(Option<Vec<u8>>, Option<String>)> {
    let tombstone = content.is_null();
    let (bytes, known_hash) = match serialized {
        Some((b, h)) if !tombstone => (Some(b), Some(h)),
        _ => ((!tombstone).then(|| codec::to_pretty(content)), None),
    };
    // The limit guards what memdir is asked to write; a larger file placed by hand is
    // still adopted into history as it is.
    if write_file
        && let Some(b) = &bytes
        && b.len() > limits::MAX_CATEGORY_BYTES
    {
        return Err(Error::too_large(
            "data",
            b.len(),
            limits::MAX_CATEGORY_BYTES,
            "bytes",
        ));
    }
    Ok((bytes, known_hash))
}

/// Refuses a version id whose history file exists already.
fn refuse_recorded(layout: &Layout, name: &CategoryName, id: &str) -> Result<()> {
    let history_path = layout
        .root
        .join(Layout::history_rel(name))
        .join(format!("{id}.json"));
    // History is write-once: a version id is never reused, whatever the clock says.
    if std::fs::symlink_metadata(&history_path).is_ok() {
        return Err(Error::internal(format!(
            "history file {} already exists; refusing to overwrite a recorded version",
            history_path.display()
        )));
    }
    Ok(())
}

/// The bytes of a history entry whose content is still null: `content` (the category file's
/// bytes) is put in its place unless the entry is a patch.
fn entry_bytes(entry: &HistoryEntry, content: Option<&[u8]>) -> Vec<u8> {
    // A whole entry is the entry around a null content, with the content's bytes put in
    // its place: the same bytes as serializing the whole entry, without copying or
    // serializing the content again.
    let outer = serde_json::to_value(entry).expect("invariant: history entries serialize");
    match content {
        Some(b) if entry.patch.is_none() => codec::to_pretty_with(&outer, "content", b),
        _ => codec::to_pretty(&outer),
    }
}

/// The files a version commits: its history entry `id` and, when the category file is
/// written too, that file's bytes (`None` for a tombstone) with their hash.
fn version_files(
    name: &CategoryName,
    id: &str,
    entry_bytes: Vec<u8>,
    category: Option<(Option<Vec<u8>>, Option<String>)>,
) -> Vec<txn::FileWrite> {
    let mut files = vec![txn::FileWrite {
        rel: Layout::history_rel(name).join(format!("{id}.json")),
        bytes: Some(entry_bytes),
        hash: None,
    }];
    if let Some((bytes, hash)) = category {
        files.push(txn::FileWrite {
            rel: Layout::category_rel(name),
            // Computed from these bytes above, so the commit does not hash them again.
            hash: bytes.as_ref().and(hash),
            bytes,
        });
    }
    files
}

/// The ledger row of the version `entry` just committed, whose category file has `hash`.
fn committed_row(
    layout: &Layout,
    name: &CategoryName,
    entry: &HistoryEntry,
    hash: Option<&str>,
) -> Result<CategoryRow> {
    // The row comes from what was just written; re-reading the file would only cost time.
    let stat = store::stat(&layout.root.join(Layout::category_rel(name)))?;
    let mut row = row_from(name, Some(entry), None, stat, hist_stamp(layout, name)?);
    if stat.is_some() {
        row.status = CategoryStatus::Ok;
        row.file_hash = hash.map(str::to_string);
        row.kind = CategoryKind::of(&entry.content).as_str().to_string();
    }
    Ok(row)
}

fn base_file_hash(layout: &Layout, name: &CategoryName) -> Result<Option<String>> {
    Ok(store::read_category(layout, name)?.map(|f| f.hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, len: usize) -> Written {
        Written {
            name: CategoryName::new(name).unwrap(),
            file: store::CategoryFile {
                hash: String::new(),
                bytes: vec![b' '; len],
                content: Ok(Value::Null),
                canonical: true,
                leaves: None,
            },
        }
    }

    #[test]
    fn the_file_cache_keeps_the_newest_files_within_its_bounds() {
        let mut c = FileCache::default();
        for i in 0..20 {
            c.put(file(&format!("c{i}"), 10));
        }
        assert_eq!(c.files.len(), FileCache::FILES);
        assert!(
            c.take(&CategoryName::new("c3").unwrap()).is_none(),
            "the oldest went"
        );
        assert!(c.take(&CategoryName::new("c19").unwrap()).is_some());
        assert!(
            c.take(&CategoryName::new("c19").unwrap()).is_none(),
            "taken out"
        );
        // Remembering a name again replaces its file.
        c.put(file("c18", 20));
        assert_eq!(
            c.files.iter().filter(|w| w.name.as_str() == "c18").count(),
            1
        );
        // Larger than the byte bound: kept alone, as the newest.
        c.put(file("big", FileCache::BYTES + 1));
        assert_eq!(c.files.len(), 1);
        c.put(file("small", 10));
        assert_eq!(c.files.len(), 1, "the big one is past the bound now");
        assert_eq!(c.files[0].name.as_str(), "small");
    }
}
