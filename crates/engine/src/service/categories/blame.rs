//! Blame: for each key of a category's current content (or of one nested object), the
//! version that set its current value.
//!
//! The walk is git blame's over the version graph: from the current version, step to a parent
//! whose value of the key is the same, until none is; the version reached set the value. A key
//! rewritten with an equal value therefore keeps its first author, and a value that came in
//! through a sync merge is blamed on the replica's version that wrote it, not on the merge.
//! History is write-once, so the answer is derived entirely from the files.

use std::collections::HashMap;

use serde_json::Value;

use crate::service::Categories;
use crate::service::Sync;
use crate::service::categories::adoption::not_found;
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::{BlameLine, BlameRequest, BlameResponse};
use memdir_store::model::{CategoryName, HistoryEntry};

impl Categories<'_> {
    /// Who set each key of a category's current content (or of the object at `path`).
    pub fn blame(&self, req: &BlameRequest) -> Result<BlameResponse> {
        let name = CategoryName::new(&req.category)?;
        let pointer = pointer(req.path.as_deref())?;
        let head_id = {
            let mut guard = self.inner()?;
            let Some(inner) = guard.as_mut() else {
                return Err(not_found(&name, Vec::new()));
            };
            let st = self.sync_category(inner, &name, None, Sync::Fast)?;
            if !st.exists() {
                return Err(not_found(&name, self.available_names(inner)?));
            }
            st.row.head_id.clone()
        };
        let entries = self.history_entries(&name)?;
        let by_id: HashMap<&str, &HistoryEntry> =
            entries.iter().map(|e| (e.id.as_str(), e)).collect();
        let head = head_id
            .as_deref()
            .and_then(|id| by_id.get(id).copied())
            .or(entries.last())
            .ok_or_else(|| not_found(&name, Vec::new()))?;
        let object = match head.content.pointer(pointer.unwrap_or("")) {
            Some(Value::Object(o)) => o,
            Some(_) | None => {
                return Err(Error::invalid(
                    "path",
                    format!(
                        "category {:?} has no object at {:?}",
                        name.as_str(),
                        pointer.unwrap_or("")
                    ),
                )
                .hint("{op:read} shows the category's content"));
            }
        };
        let keys = object
            .iter()
            .map(|(key, value)| {
                let (set_by, at_least) = setter(&by_id, head, pointer.unwrap_or(""), key, value);
                BlameLine {
                    key: key.clone(),
                    value: value.clone(),
                    version: set_by.ordinal(),
                    id: set_by.id.clone(),
                    op: set_by.op.clone(),
                    actor: set_by.actor.clone(),
                    reason: set_by.reason.clone(),
                    timestamp: set_by.ts.clone(),
                    at_least,
                }
            })
            .collect();
        Ok(BlameResponse {
            category: name.to_string(),
            path: pointer.map(str::to_string),
            version: head.ordinal(),
            keys,
        })
    }
}

/// The JSON Pointer asked for: `None` for the top level (no path, or an empty one).
fn pointer(path: Option<&str>) -> Result<Option<&str>> {
    match path {
        None | Some("") | Some("/") => Ok(None),
        Some(p) if p.starts_with('/') => Ok(Some(p)),
        Some(p) => Err(Error::new(
            ErrorKind::Invalid,
            format!(
                "path must be a JSON Pointer starting with '/' (like /editor/theme); got {p:?}"
            ),
        )
        .field("path")),
    }
}

/// The version that set `key` (of the object at `pointer`) to `value`, walking back from
/// `head` through parents that hold the same value; and whether the walk stopped at a parent
/// it could not read (forgotten, or trimmed by `compact`), so the value may be older still.
fn setter<'e>(
    by_id: &HashMap<&str, &'e HistoryEntry>,
    head: &'e HistoryEntry,
    pointer: &str,
    key: &str,
    value: &Value,
) -> (&'e HistoryEntry, bool) {
    let mut at = head;
    loop {
        let mut unknown = false;
        let mut same = None;
        for parent in &at.parents {
            match by_id.get(parent.as_str()) {
                None => unknown = true,
                Some(p) if p.forgotten.is_some() => unknown = true,
                Some(p) => {
                    let held = p.content.pointer(pointer).and_then(|o| o.get(key));
                    if held == Some(value) {
                        same = Some(*p);
                        break;
                    }
                }
            }
        }
        match same {
            Some(p) => at = p,
            None => return (at, unknown),
        }
    }
}
