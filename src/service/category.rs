//! Curated state: categories (JSON documents and logs), their history, and hand-edit adoption.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{Inner, Memdir, check_limit, check_reason, limits};
use crate::api::*;
use crate::clock;
use crate::error::{Error, ErrorKind, Result};
use crate::ledger::CategoryRow;
use crate::ledger::ChangeKind;
use crate::model::{CategoryKind, CategoryName, Expect, HistoryEntry, content_hash};
use crate::store::lock::WriteLock;
use crate::store::{self, CategoryFile, Layout, codec, failpoint, txn};

/// How hard `sync_category` looks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sync {
    /// Trust the cached row when the file's size and mtime match it.
    Fast,
    /// Always read and hash the file.
    Full,
}

/// A category as it stands after adopting external changes.
pub(crate) struct CatState {
    /// The current file, when it was read (`Sync::Full`, or the cache was stale).
    pub file: Option<CategoryFile>,
    pub row: CategoryRow,
}

impl CatState {
    fn exists(&self) -> bool {
        self.row.status == "ok" || self.row.status == "malformed"
    }
}

struct Committed {
    id: String,
    version: u64,
    hash: Option<String>,
    ts: String,
}

fn parse_vv(s: &str) -> BTreeMap<String, u64> {
    serde_json::from_str(s).unwrap_or_default()
}

fn row_from(
    name: &CategoryName,
    head: Option<&HistoryEntry>,
    file: Option<&CategoryFile>,
    stat: Option<(u64, i64)>,
    hist_stamp: i64,
) -> CategoryRow {
    let (len, mtime) = stat.unwrap_or((0, 0));
    let status = match file {
        None if head.is_some() => "deleted",
        None => "absent",
        Some(f) if f.content.is_err() => "malformed",
        Some(_) => "ok",
    };
    let kind = file
        .and_then(|f| f.content.as_ref().ok())
        .map(CategoryKind::of)
        .unwrap_or(CategoryKind::Document);
    CategoryRow {
        name: name.to_string(),
        status: status.to_string(),
        file_hash: file.map(|f| f.hash.clone()),
        file_len: len as i64,
        mtime_ns: mtime,
        head_id: head.map(|h| h.id.clone()),
        vv: serde_json::to_string(&head.map(|h| h.vv.clone()).unwrap_or_default())
            .expect("invariant: a map serializes"),
        version: head.map(|h| h.ordinal()).unwrap_or(0) as i64,
        kind: kind.as_str().to_string(),
        updated_at: head.map(|h| h.ts.clone()).unwrap_or_default(),
        updated_by: head.map(|h| h.actor.clone()).unwrap_or_default(),
        hist_stamp,
    }
}

fn hist_stamp(layout: &Layout, name: &CategoryName) -> Result<i64> {
    Ok(store::stat(&layout.root.join(Layout::history_rel(name)))?
        .map(|s| s.1)
        .unwrap_or(0))
}

fn row_matches(row: &CategoryRow, file: Option<&CategoryFile>) -> bool {
    match file {
        None => row.status == "deleted" || row.status == "absent",
        Some(f) => {
            row.file_hash.as_deref() == Some(&f.hash)
                && (row.status == "ok" || row.status == "malformed")
        }
    }
}

fn not_found(name: &CategoryName, available: Vec<String>) -> Error {
    let shown: Vec<String> = available.iter().take(50).cloned().collect();
    let msg = if shown.is_empty() {
        format!(
            "category {:?} does not exist; the store has no categories yet",
            name.as_str()
        )
    } else {
        format!(
            "category {:?} does not exist; available: {}",
            name.as_str(),
            shown.join(", ")
        )
    };
    Error::new(ErrorKind::NotFound, msg)
        .detail("category", Value::from(name.as_str()))
        .detail("available", Value::from(shown))
        .hint("{op:list} shows every category; {op:write} creates one")
}

fn malformed_error(name: &CategoryName, f: &CategoryFile) -> Error {
    let why = f.content.as_ref().err().cloned().unwrap_or_default();
    Error::new(
        ErrorKind::Corrupt,
        format!(
            "categories/{}.json is malformed ({why}); memdir left it untouched",
            name.file_stem()
        ),
    )
    .detail("category", Value::from(name.as_str()))
    .detail("current_hash", Value::from(f.hash.clone()))
    .hint("fix the file by hand, or {op:restore} an earlier version")
    .hint("to overwrite it anyway, write with {arg:expected_hash} set to current_hash")
}

fn conflict(name: &CategoryName, msg: String, current: Option<&str>) -> Error {
    Error::new(ErrorKind::Conflict, msg)
        .detail("category", Value::from(name.as_str()))
        .detail(
            "current_hash",
            current.map(Value::from).unwrap_or(Value::Null),
        )
        .hint(
            "read the category again, re-apply your change, and pass the new hash as {arg:expected_hash}",
        )
}

fn check_expect(name: &CategoryName, st: &CatState, expect: &Expect) -> Result<()> {
    let current = st.row.file_hash.as_deref().filter(|_| st.exists());
    match expect {
        Expect::Any => {
            if st.row.status == "malformed"
                && let Some(f) = &st.file
            {
                return Err(malformed_error(name, f));
            }
            Ok(())
        }
        Expect::Absent => match current {
            None => Ok(()),
            Some(h) => Err(conflict(
                name,
                format!("category {:?} already exists (hash {h})", name.as_str()),
                Some(h),
            )),
        },
        Expect::Hash(want) => match current {
            Some(h) if h == want => Ok(()),
            Some(h) => Err(conflict(
                name,
                format!(
                    "category {:?} changed: expected hash {want}, current hash {h}",
                    name.as_str()
                ),
                Some(h),
            )),
            None => Err(conflict(
                name,
                format!(
                    "category {:?} does not exist, but expected_hash was given",
                    name.as_str()
                ),
                None,
            )),
        },
    }
}

fn check_object<'a>(field: &str, v: &'a Value) -> Result<&'a Map<String, Value>> {
    let obj = v.as_object().ok_or_else(|| {
        Error::invalid(
            field,
            format!("{field} must be a JSON object, got {}", type_name(v)),
        )
        .hint("wrap the value in an object, e.g. {\"note\": \"...\"}")
    })?;
    super::check_depth(field, v)?;
    Ok(obj)
}

/// The JSON type name of a value, for error messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
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

impl Memdir {
    /// Brings the ledger's view of `name` in line with the files, adopting external changes
    /// (which takes the write lock when `lock` is `None`).
    pub(crate) fn sync_category(
        &self,
        inner: &Inner,
        name: &CategoryName,
        lock: Option<&WriteLock>,
        mode: Sync,
    ) -> Result<CatState> {
        let layout = self.layout();
        let path = layout.root.join(Layout::category_rel(name));
        // The stat comes before the read, so a cached row can only be stale towards "re-check".
        let stat = store::stat(&path)?;
        let hstamp = hist_stamp(layout, name)?;
        let row = inner.ledger.category(name.as_str())?;
        if mode == Sync::Fast
            && let Some(r) = &row
        {
            let fresh = match stat {
                None => r.status == "deleted",
                Some((len, m)) => {
                    r.file_len == len as i64 && r.mtime_ns == m && r.status != "deleted"
                }
            };
            if fresh && r.head_id.is_some() && r.hist_stamp == hstamp {
                return Ok(CatState {
                    file: None,
                    row: r.clone(),
                });
            }
        }
        let file = store::read_category(layout, name)?;
        if let Some(r) = &row
            && row_matches(r, file.as_ref())
            && r.head_id.is_some()
            && (r.hist_stamp == hstamp
                || store::list_history_ids(layout, name)?.last() == r.head_id.as_ref())
        {
            let mut r = r.clone();
            let (len, m) = stat.unwrap_or((0, 0));
            if r.file_len != len as i64 || r.mtime_ns != m || r.hist_stamp != hstamp {
                r.file_len = len as i64;
                r.mtime_ns = m;
                r.hist_stamp = hstamp;
                inner.ledger.put_category(&r)?;
            }
            return Ok(CatState { file, row: r });
        }
        let head = store::history_head(layout, name)?;
        if let Some(h) = &head
            && let Some(stamp) = h.id.get(..24)
        {
            self.observe(inner, stamp)?;
        }
        if let Some(f) = &file
            && let Ok(c) = &f.content
            && let Some(max) = c.get("entries").and_then(Value::as_array).and_then(|e| {
                e.iter()
                    .filter_map(|x| x.get("id")?.as_str()?.get(..24))
                    .max()
            })
        {
            self.observe(inner, max)?;
        }
        let consistent = match (&file, &head) {
            (None, None) => true,
            (None, Some(h)) => h.is_tombstone(),
            (Some(f), Some(h)) => h.hash.as_deref() == Some(f.hash.as_str()),
            (Some(_), None) => false,
        };
        let malformed = file.as_ref().is_some_and(|f| f.content.is_err());
        // A store served read-only adopts nothing: the file is served as it is.
        if consistent || malformed || self.read_only().is_some() {
            let r = row_from(name, head.as_ref(), file.as_ref(), stat, hstamp);
            // A head the ledger had not recorded (a write whose ledger update failed after
            // its files were durable): the index needs it too.
            if row.as_ref().and_then(|x| x.head_id.as_ref()) != r.head_id.as_ref() {
                inner
                    .ledger
                    .record_change(ChangeKind::Category, name.as_str())?;
            }
            if r.status != "absent" {
                inner.ledger.put_category(&r)?;
            } else if row.is_some() {
                inner.ledger.remove_category(name.as_str())?;
            }
            return Ok(CatState { file, row: r });
        }
        // Changed behind memdir's back: adopt it as a version of its own.
        let Some(lock) = lock else {
            // A crash may have left a committed transaction half published: recover it before
            // judging what changed behind memdir's back.
            let lock = self.lock_and_recover()?;
            return self.sync_category(inner, name, Some(&lock), Sync::Full);
        };
        let base = CatState {
            file: None,
            row: row_from(name, head.as_ref(), None, None, 0),
        };
        let (op, reason, content) = match &file {
            Some(f) => (
                "external",
                "changed outside memdir",
                f.content.clone().map_err(Error::internal)?,
            ),
            None => ("delete", "file deleted outside memdir", Value::Null),
        };
        self.commit_version(
            inner,
            lock,
            name,
            &base,
            op,
            "external",
            Some(reason.to_string()),
            Some(content),
            false,
        )?;
        self.sync_category(inner, name, Some(lock), Sync::Full)
    }

    /// Writes one new version: a history entry and (when `write_file`) the category file, as
    /// one transaction; then records it in the ledger.
    #[allow(clippy::too_many_arguments)]
    fn commit_version(
        &self,
        inner: &Inner,
        lock: &WriteLock,
        name: &CategoryName,
        base: &CatState,
        op: &str,
        actor: &str,
        reason: Option<String>,
        content: Option<Value>,
        write_file: bool,
    ) -> Result<Committed> {
        let layout = self.layout();
        let content = content.unwrap_or(Value::Null);
        let tombstone = content.is_null();
        let bytes = (!tombstone).then(|| codec::to_pretty(&content));
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
        let hash = if write_file {
            bytes.as_deref().map(content_hash)
        } else {
            base_file_hash(layout, name)?
        };
        let replica = self.replica(lock)?;
        let now = clock::now_ms();
        let mut hlc = self.tick(inner, now)?;
        // A version sorts after its parent even when the parent carries a stamp the clock did
        // not admit (far ahead of the wall clock): ids order history, and the head is the
        // newest id.
        if let Some(parent) = base
            .row
            .head_id
            .as_deref()
            .and_then(|p| p.get(..24))
            .and_then(clock::Hlc::parse)
            && hlc <= parent
        {
            hlc = parent.tick(parent.ms);
            if hlc <= parent {
                return Err(Error::new(
                    ErrorKind::Corrupt,
                    format!(
                        "the newest version of {:?} carries the last possible stamp ({parent}); no later version can be recorded",
                        name.as_str()
                    ),
                )
                .hint("move that history file aside (it was not written by memdir's clock), then retry"));
            }
        }
        let id = format!("{hlc}_{replica}");
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
        let mut vv = parse_vv(&base.row.vv);
        *vv.entry(replica.clone()).or_insert(0) += 1;
        let ts = clock::rfc3339(now);
        let entry = HistoryEntry {
            id: id.clone(),
            parents: base.row.head_id.iter().cloned().collect(),
            vv,
            op: op.to_string(),
            hash: if tombstone { None } else { hash.clone() },
            actor: actor.to_string(),
            reason,
            ts: ts.clone(),
            content,
        };
        let version = entry.ordinal();
        let entry_bytes = codec::to_pretty(
            &serde_json::to_value(&entry).expect("invariant: history entries serialize"),
        );
        let mut files = vec![txn::FileWrite {
            rel: Layout::history_rel(name).join(format!("{id}.json")),
            bytes: Some(entry_bytes),
        }];
        if write_file {
            files.push(txn::FileWrite {
                rel: Layout::category_rel(name),
                bytes,
            });
        }
        txn::commit(&layout.root, &layout.staging(), &id, &files)?;
        failpoint::hit("ledger.before_update");
        // The row comes from what was just written; re-reading the file would only cost time.
        let stat = store::stat(&layout.root.join(Layout::category_rel(name)))?;
        let mut row = row_from(name, Some(&entry), None, stat, hist_stamp(layout, name)?);
        if stat.is_some() {
            row.status = "ok".to_string();
            row.file_hash = hash.clone();
            row.kind = CategoryKind::of(&entry.content).as_str().to_string();
        }
        let recorded = failpoint::io("ledger.update")
            .map_err(|e| {
                Error::from(crate::error::IoError {
                    op: "record",
                    path: layout.ledger_path(),
                    source: e,
                })
            })
            .and_then(|_| {
                inner.ledger.atomically(|l| {
                    l.put_category(&row)?;
                    l.record_txn(&id, op, &format!("category:{name}"), actor, &ts)?;
                    l.record_change(ChangeKind::Category, name.as_str())?;
                    Ok(())
                })
            });
        if let Err(e) = recorded {
            self.ledger_missed(&e);
        }
        Ok(Committed {
            id,
            version,
            hash: if tombstone { None } else { hash },
            ts,
        })
    }

    fn available_names(&self, inner: &Inner) -> Result<Vec<String>> {
        let _ = inner;
        Ok(store::list_category_files(self.layout())?
            .0
            .into_iter()
            .map(|n| n.to_string())
            .collect())
    }

    /// Reads a category (or one old version), optionally only some top-level fields.
    pub fn read(&self, req: &ReadRequest) -> Result<ReadResponse> {
        let name = CategoryName::new(&req.category)?;
        let mut guard = self.inner()?;
        let Some(inner) = guard.as_mut() else {
            return Err(not_found(&name, Vec::new()));
        };
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
            let (data, missing) = select_fields(&entry.content, req.fields.as_ref());
            return Ok(ReadResponse {
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
                    current: false,
                },
            });
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
        Ok(ReadResponse {
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
        })
    }

    /// Replaces or merges a category, with compare-and-swap.
    pub fn write(&self, req: &WriteRequest) -> Result<WriteResponse> {
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
        self.with_write(|inner, lock| {
            let st = self.sync_category(inner, &name, Some(lock), Sync::Full)?;
            check_expect(&name, &st, &expect)?;
            let current = st.file.as_ref().filter(|_| st.exists()).and_then(|f| f.content.as_ref().ok());
            if let Some(c) = current
                && CategoryKind::of(c) == CategoryKind::Log
            {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("category {:?} is a log: add entries with {{op:append}}; a write would replace them", name.as_str()),
                )
                .detail("kind", Value::from("log"))
                .detail("category", Value::from(name.as_str())));
            }
            let new_content = if req.merge {
                if st.row.status == "malformed" {
                    return Err(Error::new(ErrorKind::Corrupt, format!("category {:?} is malformed: a merge needs a readable base; write it whole instead", name.as_str())));
                }
                let mut base = current.and_then(Value::as_object).cloned().unwrap_or_default();
                for (k, v) in data {
                    if v.is_null() {
                        base.remove(k);
                    } else {
                        base.insert(k.clone(), v.clone());
                    }
                }
                Value::Object(base)
            } else {
                req.data.clone()
            };
            let previous = st.row.file_hash.clone().filter(|_| st.exists());
            let new_bytes = codec::to_pretty(&new_content);
            if previous.as_deref() == Some(content_hash(&new_bytes).as_str()) {
                return Ok(WriteResponse {
                    category: name.to_string(),
                    unchanged: true,
                    previous_hash: previous.clone(),
                    new_hash: previous,
                    version: st.row.version as u64,
                    version_id: None,
                    timestamp: st.row.updated_at.clone(),
                    op: None,
                });
            }
            let op = if req.merge { "merge" } else { "write" };
            let c = self.commit_version(inner, lock, &name, &st, op, self.actor(), reason.clone(), Some(new_content), true)?;
            Ok(WriteResponse {
                category: name.to_string(),
                unchanged: false,
                previous_hash: previous,
                new_hash: c.hash,
                version: c.version,
                version_id: Some(c.id),
                timestamp: c.ts,
                op: Some(op.to_string()),
            })
        })
    }

    /// Appends an entry to a log category, creating it, and applies retention.
    pub fn append(&self, req: &AppendRequest) -> Result<AppendResponse> {
        let name = CategoryName::new(&req.category)?;
        check_object("data", &req.data)?;
        let size = serde_json::to_vec(&req.data).map(|v| v.len()).unwrap_or(0);
        if size > limits::MAX_LOG_ENTRY_BYTES {
            return Err(Error::too_large(
                "data",
                size,
                limits::MAX_LOG_ENTRY_BYTES,
                "bytes",
            ));
        }
        if let Some(n) = req.max_entries
            && !(1..=limits::MAX_LOG_ENTRIES).contains(&n)
        {
            return Err(Error::invalid(
                "max_entries",
                format!(
                    "max_entries must be between 1 and {}; got {n}",
                    limits::MAX_LOG_ENTRIES
                ),
            ));
        }
        if let Some(d) = req.max_age_days
            && !(1..=36_500).contains(&d)
        {
            return Err(Error::invalid(
                "max_age_days",
                format!("max_age_days must be between 1 and 36500; got {d}"),
            ));
        }
        let reason = check_reason(req.reason.as_deref())?;
        self.with_write(|inner, lock| {
            let st = self.sync_category(inner, &name, Some(lock), Sync::Full)?;
            if st.row.status == "malformed"
                && let Some(f) = &st.file
            {
                return Err(malformed_error(&name, f));
            }
            let current = st.file.as_ref().filter(|_| st.exists()).and_then(|f| f.content.as_ref().ok()).cloned();
            let mut log = match current {
                Some(c) if CategoryKind::of(&c) == CategoryKind::Log => c,
                Some(_) => {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!("category {:?} is a document, not a log: use {{op:write}} to change it", name.as_str()),
                    )
                    .detail("kind", Value::from("document"))
                    .detail("category", Value::from(name.as_str())));
                }
                None => json!({"_kind": "log", "_retention": {"max_entries": limits::DEFAULT_LOG_ENTRIES, "max_age_days": null}, "entries": []}),
            };
            let obj = log.as_object_mut().expect("invariant: a log is an object");
            let mut retention = obj.get("_retention").and_then(Value::as_object).cloned().unwrap_or_default();
            if let Some(n) = req.max_entries {
                retention.insert("max_entries".into(), Value::from(n));
            }
            if let Some(d) = req.max_age_days {
                retention.insert("max_age_days".into(), Value::from(d));
            }
            retention.entry("max_entries").or_insert(Value::from(limits::DEFAULT_LOG_ENTRIES));
            retention.entry("max_age_days").or_insert(Value::Null);
            let max_entries = retention["max_entries"].as_u64().unwrap_or(limits::DEFAULT_LOG_ENTRIES).max(1) as usize;
            let max_age_days = retention["max_age_days"].as_u64();
            obj.insert("_retention".into(), Value::Object(retention));
            let mut entries = match obj.remove("entries") {
                Some(Value::Array(a)) => a,
                None => Vec::new(),
                Some(other) => {
                    return Err(Error::new(ErrorKind::Corrupt, format!("log {:?} has entries of type {}, not an array; fix the file by hand", name.as_str(), type_name(&other))));
                }
            };
            let replica = self.replica(lock)?;
            let now = clock::now_ms();
            let hlc = self.tick(inner, now)?;
            let id = format!("{hlc}-{replica}");
            let ts = clock::rfc3339(now);
            entries.push(json!({"id": id, "ts": ts, "data": req.data}));
            let key = |e: &Value| e.get("id").and_then(Value::as_str).unwrap_or("").to_string();
            if entries.windows(2).any(|w| key(&w[0]) > key(&w[1])) {
                entries.sort_by_key(key);
            }
            let before = entries.len();
            if let Some(days) = max_age_days {
                // Age is measured from the newest entry, so replicas trimming the same log agree.
                let newest = entries.iter().filter_map(|e| e.get("ts").and_then(Value::as_str).and_then(clock::parse_time)).max();
                if let Some(newest) = newest {
                    let cutoff = newest - days as i64 * 86_400_000;
                    entries.retain(|e| e.get("ts").and_then(Value::as_str).and_then(clock::parse_time).is_none_or(|t| t >= cutoff));
                }
            }
            if entries.len() > max_entries {
                entries.drain(..entries.len() - max_entries);
            }
            let dropped = before - entries.len();
            let count = entries.len();
            obj.insert("entries".into(), Value::Array(entries));
            let previous = st.row.file_hash.clone().filter(|_| st.exists());
            let c = self.commit_version(inner, lock, &name, &st, "append", self.actor(), reason.clone(), Some(log), true)?;
            Ok(AppendResponse {
                category: name.to_string(),
                id,
                ts,
                entries: count,
                dropped,
                previous_hash: previous,
                new_hash: c.hash,
                version: c.version,
                timestamp: c.ts,
            })
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
                status: st.row.status,
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

    /// Deletes a category's current file, keeping its history and recording a tombstone.
    pub fn delete(&self, req: &DeleteRequest) -> Result<DeleteResponse> {
        let name = CategoryName::new(&req.category)?;
        let expect = Expect::parse(req.expected_hash.as_deref())?;
        let reason = check_reason(req.reason.as_deref())?;
        if !self.layout().exists() {
            return Err(not_found(&name, Vec::new()));
        }
        self.with_write(|inner, lock| {
            let st = self.sync_category(inner, &name, Some(lock), Sync::Full)?;
            if !st.exists() {
                return Err(not_found(&name, self.available_names(inner)?));
            }
            check_expect(&name, &st, &expect)?;
            let previous = st.row.file_hash.clone();
            let c = self.commit_version(
                inner,
                lock,
                &name,
                &st,
                "delete",
                self.actor(),
                reason.clone(),
                None,
                true,
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

    fn history_entries(&self, name: &CategoryName) -> Result<Vec<HistoryEntry>> {
        let mut out = Vec::new();
        for id in store::list_history_ids(self.layout(), name)? {
            if let Ok(e) = store::read_history(self.layout(), name, &id)?.entry {
                out.push(e);
            }
        }
        Ok(out)
    }

    fn find_version(
        &self,
        inner: &Inner,
        name: &CategoryName,
        v: &VersionRef,
    ) -> Result<HistoryEntry> {
        self.sync_category(inner, name, None, Sync::Fast)?;
        let entries = self.history_entries(name)?;
        if entries.is_empty() {
            return Err(not_found(name, self.available_names(inner)?));
        }
        let found = match v {
            VersionRef::Ordinal(n) => entries.iter().find(|e| e.ordinal() == *n),
            // A number given as a string ("3") is an ordinal on every surface.
            VersionRef::Id(id) => match id.parse::<u64>() {
                Ok(n) => entries.iter().find(|e| e.ordinal() == n),
                Err(_) => entries.iter().find(|e| &e.id == id),
            },
        };
        found.cloned().ok_or_else(|| {
            let have: Vec<u64> = entries.iter().map(HistoryEntry::ordinal).collect();
            Error::new(
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
            .hint("{op:history} lists the versions")
        })
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
                Err(why) => versions.push(HistoryVersion {
                    id: id.clone(),
                    version: None,
                    hash: None,
                    op: None,
                    actor: None,
                    reason: None,
                    timestamp: None,
                    parents: None,
                    malformed: Some(why),
                }),
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
            status: st.row.status,
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
        let name = CategoryName::new(&req.category)?;
        let expect = Expect::parse(req.expected_hash.as_deref())?;
        let reason = check_reason(req.reason.as_deref())?;
        if !self.layout().exists() {
            return Err(not_found(&name, Vec::new()));
        }
        self.with_write(|inner, lock| {
            let entry = self.find_version(inner, &name, version)?;
            if entry.is_tombstone() {
                return Err(Error::invalid(
                    "version",
                    format!(
                        "version {} is a delete tombstone; pick a version with content",
                        entry.ordinal()
                    ),
                ));
            }
            let st = self.sync_category(inner, &name, Some(lock), Sync::Full)?;
            if st.row.status == "malformed" && expect == Expect::Any {
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
                inner,
                lock,
                &name,
                &st,
                "restore",
                self.actor(),
                reason,
                Some(entry.content.clone()),
                true,
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
                removed: 0,
                keep_versions: keep,
                categories: Vec::new(),
            });
        }
        self.with_write(|inner, lock| {
            let mut report = Vec::new();
            let mut total = 0usize;
            for name in &names {
                self.sync_category(inner, name, Some(lock), Sync::Full)?;
                let ids = store::list_history_ids(self.layout(), name)?;
                if ids.is_empty() && category.is_some() {
                    return Err(not_found(name, self.available_names(inner)?));
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
                    std::fs::remove_file(&file.path).map_err(|e| crate::error::IoError {
                        op: "remove",
                        path: file.path.clone(),
                        source: e,
                    })?;
                    removed.push(id.clone());
                }
                if !removed.is_empty() {
                    // DURABILITY: the removals are reported only once durable.
                    txn::sync_dir(&self.layout().root.join(Layout::history_rel(name)))?;
                    inner.ledger.record_txn(
                        &format!("compact-{}", removed.len()),
                        "compact",
                        &format!("category:{name}"),
                        self.actor(),
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
                removed: total,
                keep_versions: keep,
                categories: report,
            })
        })
    }

    /// Several categories at once (session warm-up); missing ones are listed, not fatal.
    pub fn context(&self, req: &ContextRequest) -> Result<ContextResponse> {
        let (categories, fields) = (&req.categories, req.fields.as_ref());
        let mut found = std::collections::BTreeMap::new();
        let mut missing = Vec::new();
        let mut errors = Map::new();
        for c in categories {
            let req = ReadRequest {
                category: c.clone(),
                fields: fields.cloned(),
                version: None,
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
        Ok(ContextResponse {
            categories: found,
            missing,
            errors,
        })
    }

    /// Whether a category changed since `since_hash`: unchanged, changed (with data) or deleted.
    pub fn delta(&self, req: &DeltaRequest) -> Result<DeltaResponse> {
        let name = CategoryName::new(&req.category)?;
        let read = ReadRequest {
            category: req.category.clone(),
            fields: None,
            version: None,
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

fn base_file_hash(layout: &Layout, name: &CategoryName) -> Result<Option<String>> {
    Ok(store::read_category(layout, name)?.map(|f| f.hash))
}
