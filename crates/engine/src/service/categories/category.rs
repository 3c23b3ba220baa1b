//! Categories as documents: named JSON objects, read whole or by field, written whole or
//! merged by key under compare-and-swap, listed and deleted.
//!
//! Each operation brings the category in line with its file first
//! ([`Categories::sync_category`]) and makes every change as a new version
//! ([`Categories::commit_version`]). `context` reads several categories at once; `delta` tells
//! whether one changed since a hash the caller holds.
use crate::service::Categories;

use serde_json::{Map, Value};

use crate::service::categories::adoption::{
    CatState, Sync, check_expect, malformed_error, not_found,
};
use crate::service::shape::check_object;
use crate::service::state::{Delta, NewVersion};
use crate::service::{Memdir, check_reason, limits};
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::*;
use memdir_store::model::{
    CategoryKind, CategoryName, CategoryStatus, Expect, HistoryEntry, VersionOp, content_hash,
};
use memdir_store::{self as store, Layout, codec};

/// A write's request, checked: what [`Categories::prepare_write`] needs besides the category.
struct Writing<'a> {
    name: &'a CategoryName,
    req: &'a WriteRequest,
    data: &'a Map<String, Value>,
    /// The size of `data` serialized.
    raw: usize,
    expect: &'a Expect,
    redacted: std::collections::BTreeMap<String, u64>,
}

/// What a write would do (see [`Categories::prepare_write`]).
enum Prepared {
    /// The category already holds these bytes: the answer, nothing to commit.
    Unchanged(WriteResponse),
    /// A new version: its content, bytes, hash (with the leaves of that hash), and the keys a
    /// merge set and removed.
    Changed {
        op: VersionOp,
        content: Value,
        bytes: Vec<u8>,
        hash: String,
        leaves: store::treehash::Leaves,
        delta: Option<Delta>,
    },
}

/// Takes the content out of `st`'s file (not copied: nothing after this reads it from `st`),
/// when the category exists and its file was read.
fn take_content(st: &mut CatState) -> Option<Value> {
    let exists = st.exists();
    st.file
        .as_mut()
        .filter(|_| exists)
        .and_then(|f| f.content.as_mut().ok())
        .map(std::mem::take)
}

fn select_fields(content: &Value, fields: Option<&Fields>) -> (Value, Vec<String>) {
    let Some(fields) = fields else {
        return (content.clone(), Vec::new());
    };
    let keys = fields.0.clone();
    if keys.is_empty() {
        return (content.clone(), Vec::new());
    }
    let mut out = Map::new();
    let mut missing = Vec::new();
    for k in keys {
        match content.get(&k) {
            Some(v) => {
                out.insert(k, v.clone());
            }
            None => missing.push(k),
        }
    }
    (Value::Object(out), missing)
}

impl Categories<'_> {
    /// Reads a category (or one old version), optionally only some top-level fields.
    pub fn read(&self, req: &ReadRequest) -> Result<ReadResponse> {
        let name = CategoryName::new(&req.category)?;
        let mut guard = self.inner()?;
        let Some(inner) = guard.as_mut() else {
            return Err(not_found(&name, Vec::new()));
        };
        if let Some(at) = crate::service::as_of_ms(req.as_of.as_deref())? {
            if req.version.is_some() {
                return Err(Error::invalid("as_of", "give version or as_of, not both"));
            }
            let st = self.sync_category(inner, &name, None, Sync::Fast)?;
            let entry = version_at(&self.history_entries(&name)?, &name, at)?;
            let current = st.row.head_id.as_deref() == Some(entry.id.as_str());
            return version_read(&name, &entry, req.fields.as_ref(), current);
        }
        if let Some(v) = &req.version {
            let entry = self.find_version(inner, &name, v)?;
            if entry.is_tombstone() {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    format!(
                        "version {} of {:?} is a delete tombstone",
                        entry.ordinal(),
                        name.as_str()
                    ),
                )
                .hint("{op:history} lists the versions with content"));
            }
            return version_read(&name, &entry, req.fields.as_ref(), false);
        }
        let st = self.sync_category(inner, &name, None, Sync::Full)?;
        let Some(file) = st.file.as_ref().filter(|_| st.exists()) else {
            return Err(not_found(&name, self.available_names(inner)?));
        };
        let content = file
            .content
            .as_ref()
            .map_err(|_| malformed_error(&name, file))?;
        let (data, missing) = select_fields(content, req.fields.as_ref());
        let response = ReadResponse {
            category: name.to_string(),
            data,
            missing_fields: missing,
            meta: CategoryMeta {
                hash: Some(file.hash.clone()),
                version: st.row.version as u64,
                version_id: st.row.head_id.clone(),
                updated_at: st.row.updated_at.clone(),
                updated_by: st.row.updated_by.clone(),
                size_bytes: Some(file.bytes.len() as u64),
                kind: st.row.kind.clone(),
                op: None,
                current: true,
            },
        };
        if let Some(file) = st.file {
            self.remember_read(&name, file);
        }
        Ok(response)
    }

    /// Replaces or merges a category, with compare-and-swap.
    pub fn write(&self, req: &WriteRequest) -> Result<WriteResponse> {
        let (data, reason, redacted) = self.redact_data(&req.data, req.reason.as_deref());
        let redacted_req;
        let req = if data.is_some() || reason.is_some() {
            redacted_req = WriteRequest {
                data: data.unwrap_or_else(|| req.data.clone()),
                reason: reason.or_else(|| req.reason.clone()),
                ..req.clone()
            };
            &redacted_req
        } else {
            req
        };
        let name = CategoryName::new(&req.category)?;
        let data = check_object("data", &req.data)?;
        if data.contains_key("_kind") {
            return Err(Error::invalid(
                "data",
                "the key _kind is reserved: logs are created and grown by {op:append}",
            ));
        }
        let expect = Expect::parse(req.expected_hash.as_deref())?;
        let reason = check_reason(req.reason.as_deref())?;
        let raw = serde_json::to_vec(&req.data).map(|v| v.len()).unwrap_or(0);
        if raw > limits::MAX_CATEGORY_BYTES {
            return Err(Error::too_large(
                "data",
                raw,
                limits::MAX_CATEGORY_BYTES,
                "bytes",
            ));
        }
        let w = Writing {
            name: &name,
            req,
            data,
            raw,
            expect: &expect,
            redacted,
        };
        self.with_write(|tx| {
            let mut st = self.sync_category(tx.inner, &name, Some(tx.lock), Sync::Deferred)?;
            let prepared = if st.unverified {
                // A large file remembered from this process's last write or read: compared
                // with the disk on the other core while the new bytes are built and hashed.
                let path = self.layout().root.join(Layout::category_rel(&name));
                let current = take_content(&mut st);
                let (same, prepared) = std::thread::scope(|s| {
                    let file = st
                        .file
                        .as_ref()
                        .expect("invariant: unverified means remembered");
                    let holds = || matches!(store::fsx::holds(&path, &file.bytes), Ok(true));
                    // No thread to be had (a process at its limit): compared here, first.
                    let Ok(check) = std::thread::Builder::new().spawn_scoped(s, holds) else {
                        return (holds(), self.prepare_write(&w, &st, current));
                    };
                    let prepared = self.prepare_write(&w, &st, current);
                    (check.join().unwrap_or(false), prepared)
                });
                if same {
                    prepared
                } else {
                    // Changed behind memdir's back meanwhile: read, adopt, and start over.
                    st = self.sync_category(tx.inner, &name, Some(tx.lock), Sync::Full)?;
                    let current = take_content(&mut st);
                    self.prepare_write(&w, &st, current)
                }
            } else {
                let current = take_content(&mut st);
                self.prepare_write(&w, &st, current)
            };
            let (op, new_content, new_bytes, new_hash, leaves, delta) = match prepared? {
                Prepared::Unchanged(r) => return Ok(r),
                Prepared::Changed {
                    op,
                    content,
                    bytes,
                    hash,
                    leaves,
                    delta,
                } => (op, content, bytes, hash, leaves, delta),
            };
            let previous = st.row.file_hash.clone().filter(|_| st.exists());
            let mut c = self.commit_version(
                tx,
                NewVersion {
                    reason: reason.clone(),
                    serialized: Some((new_bytes, new_hash)),
                    delta,
                    ..NewVersion::new(&name, &st, op, self.actor(), Some(new_content))
                },
            )?;
            self.remember_written(&name, &mut c, Some(leaves));
            Ok(WriteResponse {
                category: name.to_string(),
                unchanged: false,
                previous_hash: previous,
                new_hash: c.hash,
                version: c.version,
                version_id: Some(c.id),
                timestamp: c.ts,
                op: Some(op.as_str().to_string()),
                redacted: w.redacted.clone(),
            })
        })
    }

    /// What a write makes of the category as it stands (`st`, its content taken out as
    /// `current`): the new content, its bytes and hash, or that nothing changes. Nothing is
    /// written here.
    fn prepare_write(
        &self,
        w: &Writing<'_>,
        st: &CatState,
        current: Option<Value>,
    ) -> Result<Prepared> {
        let (name, req, data, raw) = (w.name, w.req, w.data, w.raw);
        check_expect(name, st, w.expect)?;
        let exists = st.exists();
        if let Some(c) = &current
            && CategoryKind::of(c) == CategoryKind::Log
        {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("category {:?} is a log: add entries with {{op:append}}; a write would replace them", name.as_str()),
            )
            .detail("kind", Value::from("log"))
            .detail("category", Value::from(name.as_str())));
        }
        let mut delta = None;
        let new_content = if req.merge {
            if st.row.status == CategoryStatus::Malformed {
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    format!(
                        "category {:?} is malformed: a merge needs a readable base; write it whole instead",
                        name.as_str()
                    ),
                ));
            }
            let mut base = match current {
                Some(Value::Object(m)) => m,
                _ => Default::default(),
            };
            let mut d = Delta {
                set: Default::default(),
                remove: Vec::new(),
            };
            for (k, v) in data {
                if v.is_null() {
                    if base.remove(k).is_some() {
                        d.remove.push(k.clone());
                    }
                } else {
                    base.insert(k.clone(), v.clone());
                    d.set.insert(k.clone(), v.clone());
                }
            }
            delta = Some(d);
            Value::Object(base)
        } else {
            req.data.clone()
        };
        let previous = st.row.file_hash.clone().filter(|_| exists);
        // A merge into a file memdir wrote splices the changed keys into its bytes;
        // otherwise the content is serialized whole, into a buffer about the size of the
        // file it replaces (it does not regrow as it fills).
        let spliced = match (&delta, st.file.as_ref().filter(|f| f.canonical && exists)) {
            (Some(d), Some(f)) => codec::splice_pretty(&f.bytes, &d.set, &d.remove),
            _ => None,
        };
        let new_bytes = spliced.unwrap_or_else(|| {
            codec::to_pretty_sized(&new_content, st.row.file_len.max(0) as usize + raw + 64)
        });
        debug_assert_eq!(new_bytes, codec::to_pretty(&new_content));
        // The hash takes the leaves of the bytes this file shares with the one it replaces
        // from the last time they were hashed.
        let reuse = st.file.as_ref().filter(|_| exists).and_then(|f| {
            let leaves = f.leaves.as_ref()?;
            Some((leaves, store::treehash::shared_prefix(&f.bytes, &new_bytes)))
        });
        let (new_hash, leaves) = store::treehash::hash(&new_bytes, reuse);
        debug_assert_eq!(new_hash, content_hash(&new_bytes));
        if previous.as_deref() == Some(new_hash.as_str()) {
            return Ok(Prepared::Unchanged(WriteResponse {
                category: name.to_string(),
                unchanged: true,
                previous_hash: previous.clone(),
                new_hash: previous,
                version: st.row.version as u64,
                version_id: None,
                timestamp: st.row.updated_at.clone(),
                op: None,
                redacted: w.redacted.clone(),
            }));
        }
        Ok(Prepared::Changed {
            op: if req.merge {
                VersionOp::Merge
            } else {
                VersionOp::Write
            },
            content: new_content,
            bytes: new_bytes,
            hash: new_hash,
            leaves,
            delta,
        })
    }

    /// Every category with a current file.
    pub fn list(&self) -> Result<ListResponse> {
        let mut guard = self.inner()?;
        let Some(inner) = guard.as_mut() else {
            return Ok(ListResponse {
                count: 0,
                categories: Vec::new(),
            });
        };
        let mut out = Vec::new();
        for name in store::list_category_files(self.layout())?.0 {
            let st = self.sync_category(inner, &name, None, Sync::Fast)?;
            out.push(CategorySummary {
                name: name.to_string(),
                kind: st.row.kind,
                status: st.row.status.as_str().to_string(),
                hash: st.row.file_hash,
                version: st.row.version as u64,
                size_bytes: st.row.file_len,
                updated_at: st.row.updated_at,
                updated_by: st.row.updated_by,
            });
        }
        Ok(ListResponse {
            count: out.len(),
            categories: out,
        })
    }

    /// Every category, or with `as_of` every category as it stood then (its version current
    /// then, from history).
    pub fn list_at(&self, req: &ListRequest) -> Result<ListResponse> {
        let Some(at) = crate::service::as_of_ms(req.as_of.as_deref())? else {
            return self.list();
        };
        let categories: Vec<CategorySummary> = self
            .all_at(at)?
            .into_iter()
            .map(|c| CategorySummary {
                kind: CategoryKind::of(&c.content).as_str().to_string(),
                status: "ok".to_string(),
                size_bytes: codec::to_pretty(&c.content).len() as i64,
                hash: Some(c.hash),
                version: c.version,
                updated_at: c.ts,
                updated_by: c.actor,
                name: c.name,
            })
            .collect();
        Ok(ListResponse {
            count: categories.len(),
            categories,
        })
    }

    /// Deletes a category's current file, keeping its history and recording a tombstone.
    pub fn delete(&self, req: &DeleteRequest) -> Result<DeleteResponse> {
        let (name, expect, reason) = self.existing_target(
            &req.category,
            req.expected_hash.as_deref(),
            req.reason.as_deref(),
        )?;
        self.with_write(|tx| {
            let st = self.sync_category(tx.inner, &name, Some(tx.lock), Sync::Full)?;
            if !st.exists() {
                return Err(not_found(&name, self.available_names(tx.inner)?));
            }
            check_expect(&name, &st, &expect)?;
            let previous = st.row.file_hash.clone();
            let c = self.commit_version(
                tx,
                NewVersion {
                    reason: reason.clone(),
                    ..NewVersion::new(&name, &st, VersionOp::Delete, self.actor(), None)
                },
            )?;
            Ok(DeleteResponse {
                category: name.to_string(),
                deleted: true,
                previous_hash: previous,
                version: c.version,
                version_id: c.id,
                timestamp: c.ts,
                restore_version: st.row.version as u64,
            })
        })
    }

    /// Several categories at once (session warm-up); missing ones are listed, not fatal.
    pub fn context(&self, req: &ContextRequest) -> Result<ContextResponse> {
        self.context_hiding(req, &[])
    }

    /// [`Self::context`] for a caller who may not read `hidden`: those count as missing, and
    /// take no part of the token budget.
    pub fn context_hiding(
        &self,
        req: &ContextRequest,
        hidden: &[String],
    ) -> Result<ContextResponse> {
        memdir_index::budget::check(req.max_tokens)?;
        let (categories, fields) = (&req.categories, req.fields.as_ref());
        let mut found = std::collections::BTreeMap::new();
        let mut missing = Vec::new();
        let mut errors = Map::new();
        for c in categories {
            if hidden.contains(c) {
                missing.push(c.clone());
                continue;
            }
            let req = ReadRequest {
                category: c.clone(),
                fields: fields.cloned(),
                version: None,
                as_of: req.as_of.clone(),
            };
            match self.read(&req) {
                Ok(v) => {
                    found.insert(c.clone(), v);
                }
                Err(e) if e.kind == ErrorKind::NotFound => missing.push(c.clone()),
                Err(e) => {
                    errors.insert(c.clone(), e.to_json());
                }
            }
        }
        let mut resp = ContextResponse {
            categories: found,
            missing,
            errors,
            omitted: None,
        };
        if let Some(max) = req.max_tokens {
            memdir_index::budget::fit_context(&mut resp, categories, max);
        }
        Ok(resp)
    }

    /// Whether a category changed since `since_hash`: unchanged, changed (with data) or deleted.
    pub fn delta(&self, req: &DeltaRequest) -> Result<DeltaResponse> {
        let name = CategoryName::new(&req.category)?;
        let read = ReadRequest {
            category: req.category.clone(),
            fields: None,
            version: None,
            as_of: None,
        };
        match self.read(&read) {
            Ok(v) => {
                let hash = v.meta.hash.clone().unwrap_or_default();
                if hash == req.since_hash {
                    Ok(DeltaResponse {
                        category: name.to_string(),
                        status: "unchanged".into(),
                        hash: Some(hash),
                        data: None,
                        meta: None,
                    })
                } else {
                    Ok(DeltaResponse {
                        category: name.to_string(),
                        status: "changed".into(),
                        hash: Some(hash),
                        data: Some(v.data),
                        meta: Some(v.meta),
                    })
                }
            }
            Err(e) if e.kind == ErrorKind::NotFound => {
                let had_history = self.layout().root.join(Layout::history_rel(&name)).is_dir();
                if had_history {
                    Ok(DeltaResponse {
                        category: name.to_string(),
                        status: "deleted".into(),
                        hash: None,
                        data: None,
                        meta: None,
                    })
                } else {
                    Err(e)
                }
            }
            Err(e) => Err(e),
        }
    }
}

impl Categories<'_> {
    /// Imports one version of a category from another tool (`memdir import`): `content` (a
    /// document, or a log whose entries have memdir's shape) becomes a new version, through the
    /// same redaction, checks and history as a write, unless a version with the same content is
    /// anywhere in the category's history already; so importing the same source again adds
    /// nothing, even after the category changed since. With `dry_run`, only tells. Returns
    /// whether a version was (or would be) written.
    pub fn import_version(
        &self,
        category: &str,
        content: &Value,
        reason: &str,
        dry_run: bool,
    ) -> Result<bool> {
        let name = CategoryName::new(category)?;
        let (redacted, reason_redacted, _) = self.redact_data(content, Some(reason));
        let content = redacted.unwrap_or_else(|| content.clone());
        let reason = check_reason(Some(reason_redacted.as_deref().unwrap_or(reason)))?;
        check_object("data", &content)?;
        if CategoryKind::of(&content) == CategoryKind::Log {
            crate::service::categories::log::check_log_shape(&content)
                .map_err(|why| Error::invalid("data", format!("{}: {why}", name.as_str())))?;
        }
        let bytes = codec::to_pretty(&content);
        if bytes.len() > limits::MAX_CATEGORY_BYTES {
            return Err(Error::too_large(
                "data",
                bytes.len(),
                limits::MAX_CATEGORY_BYTES,
                "bytes",
            ));
        }
        let hash = content_hash(&bytes);
        let known = |memdir: &Memdir| -> Result<bool> {
            for id in store::list_history_ids(memdir.layout(), &name)? {
                let file = store::read_history(memdir.layout(), &name, &id)?;
                if file
                    .entry
                    .is_ok_and(|e| e.hash.as_deref() == Some(hash.as_str()))
                {
                    return Ok(true);
                }
            }
            Ok(false)
        };
        if dry_run {
            return Ok(!known(self)?);
        }
        self.with_write(|tx| {
            let st = self.sync_category(tx.inner, &name, Some(tx.lock), Sync::Full)?;
            // Under the write lock: a concurrent import of the same source adds it once.
            let head = st.exists() && st.row.file_hash.as_deref() == Some(hash.as_str());
            if head || known(self)? {
                return Ok(false);
            }
            self.commit_version(
                tx,
                NewVersion {
                    reason: reason.clone(),
                    ..NewVersion::new(
                        &name,
                        &st,
                        VersionOp::Write,
                        self.actor(),
                        Some(content.clone()),
                    )
                },
            )?;
            Ok(true)
        })
    }
}

/// A read of one version of a category (`current`: it is also the current one).
fn version_read(
    name: &CategoryName,
    entry: &HistoryEntry,
    fields: Option<&Fields>,
    current: bool,
) -> Result<ReadResponse> {
    let (data, missing) = select_fields(&entry.content, fields);
    Ok(ReadResponse {
        category: name.to_string(),
        data,
        missing_fields: missing,
        meta: CategoryMeta {
            hash: entry.hash.clone(),
            version: entry.ordinal(),
            version_id: Some(entry.id.clone()),
            updated_at: entry.ts.clone(),
            updated_by: entry.actor.clone(),
            size_bytes: None,
            kind: CategoryKind::of(&entry.content).as_str().to_string(),
            op: Some(entry.op.clone()),
            current,
        },
    })
}

/// A category as it stood at a time: the content, hash, time and actor of its version current
/// then.
pub(crate) struct CategoryThen {
    pub name: String,
    /// The version's number (`HistoryEntry::ordinal`).
    pub version: u64,
    pub content: Value,
    pub hash: String,
    pub ts: String,
    pub actor: String,
}

impl Categories<'_> {
    /// Every category as it stood at `at` (ms), from history alone: the version current then
    /// of each category with one (a category not yet written, deleted or forgotten then, or
    /// whose history cannot be read, is left out).
    pub(crate) fn all_at(&self, at: i64) -> Result<Vec<CategoryThen>> {
        let mut out = Vec::new();
        // A category unchanged since `at` is its current file: no history to read.
        let mut done = std::collections::HashSet::new();
        for c in self.list()?.categories {
            let unchanged = c.status == "ok"
                && memdir_store::clock::parse_time(&c.updated_at).is_some_and(|t| t <= at);
            if !unchanged {
                continue;
            }
            let Ok(read) = self.read(&ReadRequest {
                category: c.name.clone(),
                ..ReadRequest::default()
            }) else {
                continue;
            };
            done.insert(c.name.clone());
            out.push(CategoryThen {
                hash: c.hash.unwrap_or_default(),
                version: c.version,
                ts: c.updated_at,
                actor: c.updated_by,
                content: read.data,
                name: c.name,
            });
        }
        for name in store::list_history_names(self.layout())? {
            if done.contains(name.as_str()) {
                continue;
            }
            let Ok(entries) = self.history_entries(&name) else {
                continue;
            };
            let Ok(e) = version_at(&entries, &name, at) else {
                continue;
            };
            out.push(CategoryThen {
                name: name.to_string(),
                version: e.ordinal(),
                hash: e.hash.unwrap_or_default(),
                ts: e.ts,
                actor: e.actor,
                content: e.content,
            });
        }
        Ok(out)
    }
}

/// The version of a category current at `at` (ms): of the versions written by then, the one
/// with the latest clock stamp (history ids begin with it). A category not yet written, deleted
/// or forgotten at that time is not found.
fn version_at(entries: &[HistoryEntry], name: &CategoryName, at: i64) -> Result<HistoryEntry> {
    let when = memdir_store::clock::rfc3339(at);
    let entry = entries
        .iter()
        .filter(|e| memdir_store::clock::parse_time(&e.ts).is_some_and(|t| t <= at))
        .max_by(|a, b| a.id.cmp(&b.id))
        .ok_or_else(|| {
            Error::new(
                ErrorKind::NotFound,
                format!("category {:?} did not exist at {when}", name.as_str()),
            )
            .field("as_of")
            .hint("{op:history} lists its versions and their times")
        })?;
    if entry.is_tombstone() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "category {:?} was deleted at {when} (version {})",
                name.as_str(),
                entry.ordinal()
            ),
        )
        .field("as_of"));
    }
    if entry.forgotten.is_some() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "the version of {:?} current at {when} (version {}) was forgotten",
                name.as_str(),
                entry.ordinal()
            ),
        )
        .field("as_of"));
    }
    Ok(entry.clone())
}
