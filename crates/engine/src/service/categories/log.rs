//! Logs: categories that grow by appended entries and are trimmed by retention.
//!
//! A log is a category whose content is `{"_kind": "log", "_retention": {...}, "entries":
//! [...]}`. Entries carry a hybrid-clock id and are kept sorted by it; retention keeps at most
//! `max_entries` and, with `max_age_days`, drops entries older than that measured from the
//! newest one, so replicas trimming the same log agree. Every append is a version of its own.
use crate::service::Categories;

use serde_json::{Value, json};

use crate::service::categories::adoption::{Sync, malformed_error};
use crate::service::shape::{check_object, type_name};
use crate::service::state::NewVersion;
use crate::service::{check_reason, limits};
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::*;
use memdir_store::clock;
use memdir_store::model::{CategoryKind, CategoryName, CategoryStatus, VersionOp};

/// Checks the structure of a log category's content.
pub fn check_log_shape(content: &Value) -> std::result::Result<(), String> {
    let entries = content
        .get("entries")
        .and_then(Value::as_array)
        .ok_or("a log needs an entries array")?;
    let mut last = "";
    for e in entries {
        let id = e
            .get("id")
            .and_then(Value::as_str)
            .ok_or("every log entry needs a string id")?;
        if e.get("ts").and_then(Value::as_str).is_none() || e.get("data").is_none() {
            return Err(format!("log entry {id} needs ts and data"));
        }
        if id <= last {
            return Err(format!("log entry ids are not strictly sorted at {id}"));
        }
        last = id;
    }
    Ok(())
}

/// An append's entry and retention, checked before anything is read or written.
fn check_append(req: &AppendRequest) -> Result<()> {
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
    Ok(())
}

impl Categories<'_> {
    /// Appends an entry to a log category, creating it, and applies retention.
    pub fn append(&self, req: &AppendRequest) -> Result<AppendResponse> {
        let (data, reason, redacted) = self.redact_data(&req.data, req.reason.as_deref());
        let redacted_req;
        let req = if data.is_some() || reason.is_some() {
            redacted_req = AppendRequest {
                data: data.unwrap_or_else(|| req.data.clone()),
                reason: reason.or_else(|| req.reason.clone()),
                ..req.clone()
            };
            &redacted_req
        } else {
            req
        };
        let name = CategoryName::new(&req.category)?;
        check_append(req)?;
        let reason = check_reason(req.reason.as_deref())?;
        self.with_write(|tx| {
            let st = self.sync_category(tx.inner, &name, Some(tx.lock), Sync::Full)?;
            if st.row.status == CategoryStatus::Malformed
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
                None => json!({"_kind": "log", "_retention": {"max_entries": self.settings.log_max_entries, "max_age_days": null}, "entries": []}),
            };
            let obj = log.as_object_mut().expect("invariant: a log is an object");
            let mut retention = obj.get("_retention").and_then(Value::as_object).cloned().unwrap_or_default();
            if let Some(n) = req.max_entries {
                retention.insert("max_entries".into(), Value::from(n));
            }
            if let Some(d) = req.max_age_days {
                retention.insert("max_age_days".into(), Value::from(d));
            }
            retention.entry("max_entries").or_insert(Value::from(self.settings.log_max_entries));
            retention.entry("max_age_days").or_insert(Value::Null);
            let max_entries = retention["max_entries"].as_u64().unwrap_or(self.settings.log_max_entries).max(1) as usize;
            let max_age_days = retention["max_age_days"].as_u64();
            obj.insert("_retention".into(), Value::Object(retention));
            let mut entries = match obj.remove("entries") {
                Some(Value::Array(a)) => a,
                None => Vec::new(),
                Some(other) => {
                    return Err(Error::new(ErrorKind::Corrupt, format!("log {:?} has entries of type {}, not an array; fix the file by hand", name.as_str(), type_name(&other))));
                }
            };
            let replica = self.replica(tx.lock)?;
            let now = clock::now_ms();
            let hlc = self.tick(tx.inner, now)?;
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
            let c = self.commit_version(tx, NewVersion {
                    reason: reason.clone(),
                    ..NewVersion::new(&name, &st, VersionOp::Append, self.actor(), Some(log))
                },
            )?;
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
                redacted,
            })
        })
    }
}
