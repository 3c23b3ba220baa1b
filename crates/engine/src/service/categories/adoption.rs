//! Where a category stands: its file held against its history, and the adoption of files
//! changed behind memdir's back.
//!
//! Every operation on a category starts with [`Categories::sync_category`]. It stats the file and
//! trusts the ledger's cached row while the file's size and mtime and the history directory's
//! stamp still match it; otherwise it reads and hashes the file and compares it with the newest
//! history entry. A difference is a change made by hand: it is adopted as a version of its own
//! (op `external`, or a delete tombstone), so a hand edit is never overwritten; a file that does
//! not parse is reported and left untouched. The result, [`CatState`], is what every operation
//! then judges: whether the category exists, the compare-and-swap precondition
//! ([`check_expect`]), and the errors for a missing or malformed category.
use crate::service::Categories;

use serde_json::Value;

use crate::ledger::CategoryRow;
use crate::ledger::ChangeKind;
pub(crate) use crate::service::state::CatState;
use crate::service::state::NewVersion;
use crate::service::{Inner, WriteTxn};
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_store::lock::WriteLock;
use memdir_store::model::{
    CategoryKind, CategoryName, CategoryStatus, Expect, HistoryEntry, VersionOp,
};
use memdir_store::{self as store, CategoryFile, Layout};

/// How hard `sync_category` looks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sync {
    /// Trust the cached row when the file's size and mtime match it.
    Fast,
    /// Always read and hash the file.
    Full,
    /// As `Full`, except that a large file this process remembers (`FileCache`), whose size,
    /// change stamp (`store::mtime_ns`: the later of mtime and ctime on unix) and history
    /// still match the row, is returned as remembered without reading it
    /// (`CatState::unverified`): the caller compares it with the file while it works, and
    /// starts over with `Full` when they differ. Nothing is recorded in the ledger meanwhile.
    Deferred,
}

/// The ledger row of a category, built from its newest history entry and its file.
pub(in crate::service) fn row_from(
    name: &CategoryName,
    head: Option<&HistoryEntry>,
    file: Option<&CategoryFile>,
    stat: Option<(u64, i64)>,
    hist_stamp: i64,
) -> CategoryRow {
    let (len, mtime) = stat.unwrap_or((0, 0));
    let status = match file {
        None if head.is_some() => CategoryStatus::Deleted,
        None => CategoryStatus::Absent,
        Some(f) if f.content.is_err() => CategoryStatus::Malformed,
        Some(_) => CategoryStatus::Ok,
    };
    let kind = file
        .and_then(|f| f.content.as_ref().ok())
        .map(CategoryKind::of)
        .unwrap_or(CategoryKind::Document);
    CategoryRow {
        name: name.to_string(),
        status,
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

/// The change stamp of a category's history directory (0 when it has none).
pub(in crate::service) fn hist_stamp(layout: &Layout, name: &CategoryName) -> Result<i64> {
    Ok(store::stat(&layout.root.join(Layout::history_rel(name)))?
        .map(|s| s.1)
        .unwrap_or(0))
}

/// Whether a cached row still describes the file as it was just read.
fn row_matches(row: &CategoryRow, file: Option<&CategoryFile>) -> bool {
    match file {
        None => !row.status.has_file(),
        Some(f) => row.file_hash.as_deref() == Some(&f.hash) && row.status.has_file(),
    }
}

/// The error for a category that does not exist, naming those that do.
pub(in crate::service) fn not_found(name: &CategoryName, available: Vec<String>) -> Error {
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

/// The error for a category file that does not parse.
pub(in crate::service) fn malformed_error(name: &CategoryName, f: &CategoryFile) -> Error {
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

/// The compare-and-swap precondition, checked against the file as it is on disk.
pub(in crate::service) fn check_expect(
    name: &CategoryName,
    st: &CatState,
    expect: &Expect,
) -> Result<()> {
    let current = st.row.file_hash.as_deref().filter(|_| st.exists());
    match expect {
        Expect::Any => {
            if st.row.status == CategoryStatus::Malformed
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
            Some(h) if h.starts_with(want.as_str()) => Ok(()),
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

/// Whether a cached row, by the file's size and mtime (`stat`, `None`: no file) and the
/// history directory's stamp alone, still describes the category without reading the file.
fn stat_fresh(r: &CategoryRow, stat: Option<(u64, i64)>, hstamp: i64) -> bool {
    let fresh = match stat {
        None => r.status == CategoryStatus::Deleted,
        Some((len, m)) => {
            r.file_len == len as i64 && r.mtime_ns == m && r.status != CategoryStatus::Deleted
        }
    };
    fresh && r.head_id.is_some() && r.hist_stamp == hstamp
}

/// A cached row that still describes the file, with the file's current size and mtime and
/// the history directory's stamp; saved in the ledger when they moved.
fn restamp(
    inner: &Inner,
    r: &CategoryRow,
    stat: Option<(u64, i64)>,
    hstamp: i64,
) -> Result<CategoryRow> {
    let mut r = r.clone();
    let (len, m) = stat.unwrap_or((0, 0));
    if r.file_len != len as i64 || r.mtime_ns != m || r.hist_stamp != hstamp {
        r.file_len = len as i64;
        r.mtime_ns = m;
        r.hist_stamp = hstamp;
        inner.ledger.put_category(&r)?;
    }
    Ok(r)
}

/// The newest stamp among the ids of a log file's entries, if it is one.
fn newest_entry_stamp(f: &CategoryFile) -> Option<&str> {
    let c = f.content.as_ref().ok()?;
    c.get("entries").and_then(Value::as_array).and_then(|e| {
        e.iter()
            .filter_map(|x| x.get("id")?.as_str()?.get(..24))
            .max()
    })
}

/// Whether the file is what the newest history entry recorded (no file after a tombstone).
fn consistent(file: Option<&CategoryFile>, head: Option<&HistoryEntry>) -> bool {
    match (file, head) {
        (None, None) => true,
        (None, Some(h)) => h.is_tombstone(),
        (Some(f), Some(h)) => h.hash.as_deref() == Some(f.hash.as_str()),
        (Some(_), None) => false,
    }
}

/// Records `r`, the row of a category as found on disk, in place of the cached `row`.
fn record_found(
    inner: &Inner,
    name: &CategoryName,
    row: Option<&CategoryRow>,
    r: &CategoryRow,
) -> Result<()> {
    // A head the ledger had not recorded (a write whose ledger update failed after
    // its files were durable): the index needs it too.
    if row.and_then(|x| x.head_id.as_ref()) != r.head_id.as_ref() {
        inner
            .ledger
            .record_change(ChangeKind::Category, name.as_str())?;
    }
    if r.status != CategoryStatus::Absent {
        inner.ledger.put_category(r)?;
    } else if row.is_some() {
        inner.ledger.remove_category(name.as_str())?;
    }
    Ok(())
}

/// The version that adopts a change made behind memdir's back to `file` (`None`: deleted):
/// its op, its reason and its content.
fn external_change(file: Option<&CategoryFile>) -> Result<(VersionOp, &'static str, Value)> {
    Ok(match file {
        Some(f) => (
            VersionOp::External,
            "changed outside memdir",
            f.content.clone().map_err(Error::internal)?,
        ),
        None => (
            VersionOp::Delete,
            "file deleted outside memdir",
            Value::Null,
        ),
    })
}

impl Categories<'_> {
    /// What a change to an existing category (delete, restore) checks before it takes the
    /// lock: the name, the compare-and-swap precondition, the reason, and that there is a
    /// store at all.
    pub(in crate::service) fn existing_target(
        &self,
        category: &str,
        expected_hash: Option<&str>,
        reason: Option<&str>,
    ) -> Result<(CategoryName, Expect, Option<String>)> {
        let name = CategoryName::new(category)?;
        let expect = Expect::parse(expected_hash)?;
        let reason = crate::service::check_reason(reason)?;
        if !self.layout().exists() {
            return Err(not_found(&name, Vec::new()));
        }
        Ok((name, expect, reason))
    }

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
            && stat_fresh(r, stat, hstamp)
        {
            return Ok(CatState {
                file: None,
                row: r.clone(),
                unverified: false,
            });
        }
        if mode == Sync::Deferred
            && let Some(r) = &row
            && r.head_id.is_some()
            && r.hist_stamp == hstamp
            && r.status.has_file()
            && stat.is_some_and(|(len, m)| r.file_len == len as i64 && r.mtime_ns == m)
            && let Some(file) = self.take_remembered_large(name, |f| row_matches(r, Some(f)))
        {
            return Ok(CatState {
                file: Some(file),
                row: r.clone(),
                unverified: true,
            });
        }
        let file = self.read_category_cached(name)?;
        if let Some(r) = &row
            && row_matches(r, file.as_ref())
            && r.head_id.is_some()
            && (r.hist_stamp == hstamp
                || store::list_history_ids(layout, name)?.last() == r.head_id.as_ref())
        {
            return Ok(CatState {
                file,
                row: restamp(inner, r, stat, hstamp)?,
                unverified: false,
            });
        }
        let head = store::history_head(layout, name)?;
        if let Some(h) = &head
            && let Some(stamp) = h.id.get(..24)
        {
            self.observe(inner, stamp)?;
        }
        if let Some(max) = file.as_ref().and_then(newest_entry_stamp) {
            self.observe(inner, max)?;
        }
        let consistent = consistent(file.as_ref(), head.as_ref());
        let malformed = file.as_ref().is_some_and(|f| f.content.is_err());
        // A store served read-only adopts nothing: the file is served as it is.
        if consistent || malformed || self.read_only().is_some() {
            let r = row_from(name, head.as_ref(), file.as_ref(), stat, hstamp);
            record_found(inner, name, row.as_ref(), &r)?;
            return Ok(CatState {
                file,
                row: r,
                unverified: false,
            });
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
            unverified: false,
        };
        let (op, reason, content) = external_change(file.as_ref())?;
        self.commit_version(
            &WriteTxn { inner, lock },
            NewVersion {
                reason: Some(reason.to_string()),
                write_file: false,
                ..NewVersion::new(name, &base, op, "external", Some(content))
            },
        )?;
        self.sync_category(inner, name, Some(lock), Sync::Full)
    }

    /// Adopts the hand edits of every category (with a file or a history), each as a version of
    /// its own, under the write lock: what a sync does before it exchanges anything.
    pub(in crate::service) fn adopt_hand_edits(&self, tx: &WriteTxn<'_>) -> Result<()> {
        let layout = self.layout();
        let mut names = store::list_category_files(layout)?.0;
        names.extend(store::list_history_names(layout)?);
        names.sort();
        names.dedup();
        for name in &names {
            self.sync_category(tx.inner, name, Some(tx.lock), Sync::Fast)?;
        }
        Ok(())
    }

    /// Names of the categories with a current file, for a not-found error.
    pub(in crate::service) fn available_names(&self, inner: &Inner) -> Result<Vec<String>> {
        let _ = inner;
        Ok(store::list_category_files(self.layout())?
            .0
            .into_iter()
            .map(|n| n.to_string())
            .collect())
    }
}
