//! Notes: the text files under `notes/`, versioned like categories.
//!
//! Every change is a write-once history entry under `note-history/` committed with the file
//! as one staged transaction ([`Notes::commit`]), under the write lock and a compare-and-swap
//! on the file's hash. A file changed behind memdir's back (an editor, `git pull`) is adopted
//! as an `external` version before the next change is made to it ([`Notes::adopt`]), so a hand
//! edit is never overwritten unseen; the scan ([`Notes::scan`]) tells the index about such files
//! by their size and mtime. The text operations are in [`text`], the memory-tool protocol on
//! top of these operations in [`memory_tool`].

mod export;
pub mod memory_tool;
pub mod text;

use serde_json::Value;

use crate::ledger::ChangeKind;
use crate::service::{Inner, Notes, WriteTxn, check_limit, check_reason};
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::*;
use memdir_store::model::{HistoryEntry, VersionOp, content_hash};
use memdir_store::note::{self, NoteFile, NotePath};
use memdir_store::{self as store, clock, codec, txn};

/// The ledger's record of when the last full scan of notes started (ms since the epoch).
const SCANNED_AT: &str = "notes_scanned_at_ms";

/// A note as it stands: its file and its newest version.
pub(crate) struct Current {
    pub path: NotePath,
    pub file: Option<NoteFile>,
    pub head: Option<HistoryEntry>,
}

impl Current {
    /// The file's text, when it exists and is readable.
    fn text(&self) -> Option<&str> {
        self.file.as_ref().and_then(|f| f.text.as_deref().ok())
    }

    /// The file's hash, when it exists.
    fn hash(&self) -> Option<&str> {
        self.file.as_ref().map(|f| f.hash.as_str())
    }

    /// Whether the file is what its newest version recorded.
    fn consistent(&self) -> bool {
        match (&self.file, &self.head) {
            (None, None) => true,
            (None, Some(h)) => h.is_tombstone(),
            (Some(f), Some(h)) => h.hash.as_deref() == Some(f.hash.as_str()),
            (Some(_), None) => false,
        }
    }
}

/// One change of a transaction: a note's new text (`None`: it is removed).
struct Change<'a> {
    base: &'a Current,
    op: VersionOp,
    text: Option<String>,
    actor: String,
    reason: Option<String>,
    /// The version's time when it is not now (an import keeps its source file's).
    ts: Option<String>,
}

/// A refusal: the note is not what the caller expected.
pub(crate) fn conflict(path: &NotePath, msg: String, current: Option<&str>) -> Error {
    Error::new(ErrorKind::Conflict, msg)
        .detail("path", Value::from(path.as_str()))
        .detail(
            "current_hash",
            current.map(Value::from).unwrap_or(Value::Null),
        )
        .hint("read the note again, re-apply your change, and pass the new hash as {arg:expected_hash}")
}

pub(crate) fn not_found(path: &NotePath) -> Error {
    Error::new(
        ErrorKind::NotFound,
        format!("note {:?} does not exist", path.as_str()),
    )
    .field("path")
    .hint("{op:note_list} lists the notes")
}

fn unreadable(path: &NotePath, why: &str) -> Error {
    Error::new(ErrorKind::Corrupt, format!("note file notes/{path} {why}"))
        .field("path")
        .hint("fix or remove the file by hand; memdir never writes over a file it cannot read")
}

fn check_expect(cur: &Current, expect: &Expect) -> Result<()> {
    let current = cur.hash();
    match expect {
        Expect::Any => Ok(()),
        Expect::Absent => match current {
            None => Ok(()),
            Some(h) => Err(conflict(
                &cur.path,
                format!("note {:?} already exists (hash {h})", cur.path.as_str()),
                Some(h),
            )),
        },
        Expect::Hash(want) => match current {
            Some(h) if h.starts_with(want.as_str()) => Ok(()),
            Some(h) => Err(conflict(
                &cur.path,
                format!(
                    "note {:?} changed: expected hash {want}, current hash {h}",
                    cur.path.as_str()
                ),
                Some(h),
            )),
            None => Err(conflict(
                &cur.path,
                format!(
                    "note {:?} does not exist, but expected_hash was given",
                    cur.path.as_str()
                ),
                None,
            )),
        },
    }
}

/// The `expected_hash` of a note change, with a hint in the words of notes.
fn expect(h: Option<&str>) -> Result<Expect> {
    Expect::parse(h).map_err(|mut e| {
        e.hints = vec![
            "pass the hash {op:note_read} returned, or \"absent\" to create only if the note does not exist"
                .into(),
        ];
        e
    })
}

use memdir_store::model::Expect;

fn check_size(text: &str) -> Result<()> {
    if text.len() > note::MAX_NOTE_BYTES {
        return Err(
            Error::too_large("text", text.len(), note::MAX_NOTE_BYTES, "bytes")
                .hint("split the note into several notes"),
        );
    }
    Ok(())
}

/// The folder `path` names, checked like a note path (`""` or `/` for the top).
pub(crate) fn folder_of(path: &str) -> Result<String> {
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() {
        return Ok(String::new());
    }
    Ok(NotePath::new(trimmed)
        .map_err(|e| e.field("folder"))?
        .as_str()
        .to_string())
}

/// A history entry as `note_history` lists it.
fn listed(e: &HistoryEntry) -> HistoryVersion {
    HistoryVersion {
        id: e.id.clone(),
        version: Some(e.ordinal()),
        hash: e.hash.clone(),
        op: Some(e.op.clone()),
        actor: Some(e.actor.clone()),
        reason: e.reason.clone(),
        timestamp: Some(e.ts.clone()),
        parents: Some(e.parents.clone()),
        malformed: None,
    }
}

impl Notes<'_> {
    /// The note at `path` as it stands now.
    pub(crate) fn current(&self, path: &NotePath) -> Result<Current> {
        let layout = self.layout();
        Ok(Current {
            path: path.clone(),
            file: note::read(layout, path)?,
            head: note::head(layout, path)?,
        })
    }

    /// Every readable version of a note, oldest first.
    fn versions(&self, path: &NotePath) -> Result<Vec<HistoryEntry>> {
        Ok(note::history(self.layout(), path)?
            .into_iter()
            .filter_map(|f| f.entry.ok())
            .collect())
    }

    /// Brings the note's history in line with its file: a file edited, created or removed by
    /// hand becomes an `external` version. Caller holds the lock.
    fn adopt(&self, tx: &WriteTxn<'_>, cur: Current) -> Result<Current> {
        if cur.consistent() {
            return Ok(cur);
        }
        let text = match &cur.file {
            None => None,
            Some(f) => match &f.text {
                Ok(t) => Some(t.clone()),
                Err(why) => return Err(unreadable(&cur.path, why)),
            },
        };
        let op = if text.is_some() {
            VersionOp::External
        } else {
            VersionOp::Delete
        };
        self.commit(
            tx,
            vec![Change {
                base: &cur,
                op,
                text,
                actor: "external".into(),
                reason: Some("changed outside memdir".into()),
                ts: None,
            }],
            false,
        )?;
        self.current(&cur.path)
    }

    /// Adopts the hand edits of every note (with a file or a history), each as a version of
    /// its own, under the write lock: what a sync does before it exchanges anything.
    pub(in crate::service) fn adopt_hand_edits(&self, tx: &WriteTxn<'_>) -> Result<()> {
        let layout = self.layout();
        let mut paths: Vec<NotePath> = note::list(layout)?
            .0
            .iter()
            .filter_map(|l| NotePath::new(&l.path).ok())
            .collect();
        paths.extend(note::history_paths(layout)?);
        paths.sort();
        paths.dedup();
        for p in &paths {
            let cur = self.current(p)?;
            if cur.file.as_ref().is_none_or(|f| f.text.is_ok()) {
                self.adopt(tx, cur)?;
            }
        }
        Ok(())
    }

    /// Adopts a hand edit of one note (a file a sync took from a plain commit).
    pub(in crate::service) fn adopt_hand_edits_of(
        &self,
        tx: &WriteTxn<'_>,
        path: &NotePath,
    ) -> Result<()> {
        let cur = self.current(path)?;
        if cur.file.as_ref().is_none_or(|f| f.text.is_ok()) {
            self.adopt(tx, cur)?;
        }
        Ok(())
    }

    /// Tells the ledger (and so the index) about notes a sync settled.
    pub(in crate::service) fn record_settled(
        &self,
        tx: &WriteTxn<'_>,
        paths: &std::collections::BTreeSet<NotePath>,
    ) -> Result<()> {
        let root = &self.layout().root;
        tx.inner.ledger.atomically(|l| {
            for p in paths {
                l.record_change(ChangeKind::Note, p.as_str())?;
                let stat = store::stat(&root.join(p.rel()))?;
                l.put_note_stat(p.as_str(), stat.map(|(len, m)| (len as i64, m)), "")?;
            }
            Ok(())
        })
    }

    /// Every readable version of a note, oldest first (what a sync merges).
    pub(in crate::service) fn history_entries(&self, path: &NotePath) -> Result<Vec<HistoryEntry>> {
        self.versions(path)
    }

    /// The note as it stands, a hand edit of it adopted first (the lock taken only then), so
    /// that read, history and diff never wait for the next scan. A store served read-only,
    /// or a file that is not text, adopts nothing.
    fn settled(&self, path: &NotePath) -> Result<Current> {
        let cur = self.current(path)?;
        let readable = cur.file.as_ref().is_none_or(|f| f.text.is_ok());
        if cur.consistent() || !readable || self.read_only().is_some() {
            return Ok(cur);
        }
        // A lock held elsewhere, or a store this process may not write, leaves the edit for
        // the next change or scan: the read shows the file as it is.
        match self.with_write(|tx| self.for_change(tx, path)) {
            Err(e) if e.kind == ErrorKind::Busy || e.write_denied() => Ok(cur),
            r => r,
        }
    }

    /// The note at `path`, adopted, for a change. Caller holds the lock.
    fn for_change(&self, tx: &WriteTxn<'_>, path: &NotePath) -> Result<Current> {
        let cur = self.current(path)?;
        self.adopt(tx, cur)
    }

    /// Commits versions of one or more notes as one transaction (the history entries and the
    /// files), then records them in the ledger. With `write_files` false only the history is
    /// written (adoption: the file is already what the version says).
    fn commit(
        &self,
        tx: &WriteTxn<'_>,
        changes: Vec<Change<'_>>,
        write_files: bool,
    ) -> Result<Vec<NoteWriteResponse>> {
        let layout = self.layout();
        let replica = self.replica(tx.lock)?;
        let mut files = Vec::new();
        let mut out = Vec::new();
        let mut ids = Vec::new();
        for c in changes {
            let now = clock::now_ms();
            let mut hlc = self.tick(tx.inner, now)?;
            if let Some(parent) = c
                .base
                .head
                .as_ref()
                .and_then(|h| h.id.get(..24))
                .and_then(clock::Hlc::parse)
                && hlc <= parent
            {
                hlc = parent.tick(now);
                tx.inner.ledger.observe_hlc(&hlc.to_string())?;
            }
            let id = format!("{hlc}_{replica}");
            let hist = c.base.path.history_rel().join(format!("{id}.json"));
            if std::fs::symlink_metadata(layout.root.join(&hist)).is_ok() {
                return Err(Error::internal(format!(
                    "history file {} already exists; refusing to overwrite a recorded version",
                    hist.display()
                )));
            }
            let mut vv = c
                .base
                .head
                .as_ref()
                .map(|h| h.vv.clone())
                .unwrap_or_default();
            *vv.entry(replica.clone()).or_insert(0) += 1;
            let bytes = c.text.as_ref().map(|t| t.as_bytes().to_vec());
            let hash = bytes.as_deref().map(content_hash);
            let ts = c.ts.clone().unwrap_or_else(|| clock::rfc3339(now));
            let entry = HistoryEntry {
                id: id.clone(),
                parents: c.base.head.iter().map(|h| h.id.clone()).collect(),
                vv,
                op: c.op.as_str().to_string(),
                hash: hash.clone(),
                actor: c.actor.clone(),
                reason: c.reason.clone(),
                ts: ts.clone(),
                content: c.text.clone().map_or(Value::Null, Value::String),
                forgotten: None,
                patch: None,
            };
            let entry_json =
                serde_json::to_value(&entry).expect("invariant: history entries serialize");
            files.push(txn::FileWrite {
                rel: hist,
                bytes: Some(codec::to_pretty(&entry_json)),
                hash: None,
            });
            if write_files {
                files.push(txn::FileWrite {
                    rel: c.base.path.rel(),
                    hash: hash.clone(),
                    bytes,
                });
            }
            ids.push((
                id.clone(),
                c.op,
                c.base.path.clone(),
                c.actor.clone(),
                ts,
                hash.clone().unwrap_or_default(),
            ));
            out.push(NoteWriteResponse {
                path: c.base.path.to_string(),
                hash,
                version: entry.ordinal(),
                version_id: id,
                op: c.op.as_str().to_string(),
                unchanged: false,
                line: None,
            });
        }
        // The first note and the format that names notes land together.
        store::format::raise_to(layout, &mut files, store::format::NOTES);
        let txid = ids.first().map(|(id, ..)| id.clone()).unwrap_or_default();
        txn::commit_replacing(
            &layout.root,
            &layout.staging(),
            &txid,
            &files,
            txn::Replaced::FreeLater,
        )?;
        for (_, _, path, ..) in &ids {
            self.remove_empty_folders(path);
        }
        store::failpoint::hit("ledger.before_update");
        self.record_durable(tx.inner, |l| {
            for (id, op, path, actor, ts, hash) in &ids {
                l.record_txn(id, op.as_str(), &format!("note:{path}"), actor, ts)?;
                l.record_change(ChangeKind::Note, path.as_str())?;
                let stat = store::stat(&layout.root.join(path.rel()))?;
                l.put_note_stat(path.as_str(), stat.map(|(len, m)| (len as i64, m)), hash)?;
            }
            Ok(())
        });
        Ok(out)
    }

    /// Removes the folders a removed note leaves empty (never `notes/` itself).
    fn remove_empty_folders(&self, path: &NotePath) {
        let root = self.layout().root.join(note::NOTES_DIR);
        let mut dir = self.layout().root.join(path.rel());
        while dir.pop() && dir != root && dir.starts_with(&root) {
            if std::fs::remove_dir(&dir).is_err() {
                break;
            }
        }
    }

    /// Reads a note (or one old version, or the note as of a time), optionally some lines.
    pub fn read(&self, req: &NoteReadRequest) -> Result<NoteReadResponse> {
        let path = NotePath::new(&req.path)?;
        let at = crate::service::as_of_ms(req.as_of.as_deref())?;
        if at.is_some() && req.version.is_some() {
            return Err(Error::invalid("as_of", "give version or as_of, not both"));
        }
        let cur = self.settled(&path)?;
        let old = match (&req.version, at) {
            (Some(v), _) => Some(self.find_version(&path, v)?),
            (None, Some(at)) => Some(self.version_at(&path, at)?),
            _ => None,
        };
        let (text, hash, version, updated_at, updated_by, current) = match old {
            Some(e) => {
                let Some(t) = note::entry_text(&e) else {
                    return Err(Error::new(
                        ErrorKind::NotFound,
                        format!(
                            "version {} of note {:?} has no text (a delete, or forgotten)",
                            e.ordinal(),
                            path.as_str()
                        ),
                    )
                    .hint("{op:note_history} lists the versions"));
                };
                let is_current = cur.hash() == e.hash.as_deref()
                    && cur.consistent()
                    && cur.head.as_ref().map(|h| &h.id) == Some(&e.id);
                (
                    t.to_string(),
                    e.hash.clone().unwrap_or_default(),
                    e.ordinal(),
                    e.ts.clone(),
                    e.actor.clone(),
                    is_current,
                )
            }
            None => {
                let Some(file) = &cur.file else {
                    return Err(not_found(&path));
                };
                let t = file.text.as_ref().map_err(|why| unreadable(&path, why))?;
                let head = cur.head.as_ref();
                let (version, at, by) = match head {
                    Some(h) if cur.consistent() => (h.ordinal(), h.ts.clone(), h.actor.clone()),
                    // Changed by hand and not adopted yet: the version adoption will make.
                    _ => (
                        head.map_or(0, HistoryEntry::ordinal) + 1,
                        file_time(&self.layout().root.join(path.rel())),
                        "external".into(),
                    ),
                };
                (t.clone(), file.hash.clone(), version, at, by, true)
            }
        };
        let total = text::lines(&text).len() as u64;
        let (text_out, range) = if req.view_range.is_some() {
            let (ls, range) = text::cut(&text, req.view_range.as_deref())
                .map_err(|m| Error::invalid("view_range", m))?;
            let mut t: String = ls.into_iter().map(|(_, l)| l + "\n").collect();
            if range[1] == total && !text.ends_with('\n') {
                t.pop();
            }
            (t, range)
        } else {
            (text, if total == 0 { [0, 0] } else { [1, total] })
        };
        Ok(NoteReadResponse {
            path: path.to_string(),
            text: text_out,
            hash,
            lines: total,
            range,
            version,
            updated_at,
            updated_by,
            current,
        })
    }

    /// Writes a note's whole text.
    pub fn write(&self, req: &NoteWriteRequest) -> Result<NoteWriteResponse> {
        let path = NotePath::new(&req.path)?;
        let expect = expect(req.expected_hash.as_deref())?;
        let reason = check_reason(req.reason.as_deref())?;
        let text = self.redacted(&req.text);
        check_size(&text)?;
        self.with_write(|tx| {
            let cur = self.for_change(tx, &path)?;
            check_expect(&cur, &expect)?;
            self.change(tx, &cur, VersionOp::Write, text, reason)
        })
    }

    /// Adds text at the end of a note (created when absent).
    pub fn append(&self, req: &NoteAppendRequest) -> Result<NoteWriteResponse> {
        let path = NotePath::new(&req.path)?;
        let expect = expect(req.expected_hash.as_deref())?;
        let reason = check_reason(req.reason.as_deref())?;
        let more = self.redacted(&req.text);
        if more.is_empty() {
            return Err(Error::invalid("text", "the text to append is empty"));
        }
        self.with_write(|tx| {
            let cur = self.for_change(tx, &path)?;
            check_expect(&cur, &expect)?;
            let before = cur.text().unwrap_or("");
            let line = text::lines(before).len() as u64 + 1;
            let next = text::append(before, &more);
            check_size(&next)?;
            let mut out = self.change(tx, &cur, VersionOp::Append, next, reason)?;
            out.line = Some(line);
            Ok(out)
        })
    }

    /// Replaces one occurrence of a string in a note, or inserts text after a line.
    pub fn edit(&self, req: &NoteEditRequest) -> Result<NoteWriteResponse> {
        let path = NotePath::new(&req.path)?;
        let expect = expect(req.expected_hash.as_deref())?;
        let reason = check_reason(req.reason.as_deref())?;
        if req.old_str.as_deref() == Some("") {
            return Err(Error::invalid(
                "old_str",
                "old_str is empty: give the text to replace",
            ));
        }
        let edit = match (&req.old_str, req.insert_line, &req.insert_text) {
            (Some(old), None, None) => Edit::Replace(
                old.clone(),
                self.redacted(req.new_str.as_deref().unwrap_or("")),
            ),
            (None, Some(line), Some(t)) if req.new_str.is_none() => {
                Edit::Insert(line, self.redacted(t))
            }
            _ => {
                return Err(Error::invalid(
                    "old_str",
                    "give old_str (and new_str) to replace, or insert_line and insert_text to insert",
                ));
            }
        };
        self.with_write(|tx| {
            let cur = self.for_change(tx, &path)?;
            check_expect(&cur, &expect)?;
            let Some(before) = cur.text() else {
                return Err(match &cur.file {
                    Some(NoteFile { text: Err(why), .. }) => unreadable(&path, why),
                    _ => not_found(&path),
                });
            };
            let (next, line) = apply_edit(&path, before, &edit)?;
            check_size(&next)?;
            let mut out = self.change(tx, &cur, VersionOp::Edit, next, reason)?;
            out.line = Some(line);
            Ok(out)
        })
    }

    /// Makes `text` the note's new version (nothing when it holds `text` already); refuses to
    /// create a note whose path differs from another's only in case. Caller holds the lock.
    fn change(
        &self,
        tx: &WriteTxn<'_>,
        cur: &Current,
        op: VersionOp,
        text: String,
        reason: Option<String>,
    ) -> Result<NoteWriteResponse> {
        if cur.text() == Some(text.as_str()) {
            let head = cur.head.as_ref();
            return Ok(NoteWriteResponse {
                path: cur.path.to_string(),
                hash: cur.hash().map(str::to_string),
                version: head.map_or(0, HistoryEntry::ordinal),
                version_id: head.map(|h| h.id.clone()).unwrap_or_default(),
                op: op.as_str().to_string(),
                unchanged: true,
                line: None,
            });
        }
        if let Some(NoteFile { text: Err(why), .. }) = &cur.file {
            return Err(unreadable(&cur.path, why));
        }
        if cur.file.is_none() {
            self.check_new_path(&cur.path)?;
        }
        let actor = self.actor();
        let mut out = self.commit(
            tx,
            vec![Change {
                base: cur,
                op,
                text: Some(text),
                actor,
                reason,
                ts: None,
            }],
            true,
        )?;
        Ok(out.remove(0))
    }

    /// Refuses a new note where a file or folder of another case, or a file on the way,
    /// stands.
    fn check_new_path(&self, path: &NotePath) -> Result<()> {
        let layout = self.layout();
        if let Some(twin) = note::case_twin(layout, path)? {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "note {:?} would share a file with {twin:?} on a case-insensitive file system",
                    path.as_str()
                ),
            )
            .field("path")
            .hint("use the existing note's spelling"));
        }
        let mut prefix = layout.root.join(note::NOTES_DIR);
        let parts: Vec<&str> = path.parts().collect();
        for (i, part) in parts[..parts.len() - 1].iter().enumerate() {
            prefix.push(part);
            if let Ok(m) = std::fs::symlink_metadata(&prefix)
                && !m.is_dir()
            {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "note {:?} needs a folder {:?}, where a note stands",
                        path.as_str(),
                        parts[..=i].join("/")
                    ),
                )
                .field("path"));
            }
        }
        if fsx_is_dir(&layout.root.join(path.rel())) {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("{:?} is a folder of notes, not a note", path.as_str()),
            )
            .field("path"));
        }
        Ok(())
    }

    /// The notes at `path`: the note itself, or every note in the folder it names.
    fn under(&self, path: &str) -> Result<(Vec<NotePath>, bool)> {
        let p = NotePath::new(path.trim_end_matches('/'))?;
        let full = self.layout().root.join(p.rel());
        if fsx_is_dir(&full) {
            let notes = note::list_folder(self.layout(), p.as_str(), usize::MAX)?
                .into_iter()
                .filter(|l| !l.dir)
                .filter_map(|l| NotePath::new(&l.path).ok())
                .collect();
            return Ok((notes, true));
        }
        Ok((vec![p], false))
    }

    /// Deletes a note, or every note of a folder: each leaves a tombstone in its history.
    pub fn delete(&self, req: &NoteDeleteRequest) -> Result<NoteDeleteResponse> {
        let expect = expect(req.expected_hash.as_deref())?;
        let reason = check_reason(req.reason.as_deref())?;
        let (paths, folder) = self.under(&req.path)?;
        if folder && expect != Expect::Any {
            return Err(Error::invalid(
                "expected_hash",
                "expected_hash applies to one note, not to a folder",
            ));
        }
        self.with_write(|tx| {
            let mut curs = Vec::new();
            for p in &paths {
                let cur = self.for_change(tx, p)?;
                check_expect(&cur, &expect)?;
                if cur.file.is_none() {
                    return Err(not_found(p));
                }
                curs.push(cur);
            }
            let actor = self.actor();
            let changes = curs
                .iter()
                .map(|cur| Change {
                    base: cur,
                    op: VersionOp::Delete,
                    text: None,
                    actor: actor.clone(),
                    reason: reason.clone(),
                    ts: None,
                })
                .collect();
            let deleted = if paths.is_empty() {
                Vec::new()
            } else {
                self.commit(tx, changes, true)?
            };
            if folder {
                let _ = std::fs::remove_dir(
                    self.layout()
                        .root
                        .join(NotePath::new(req.path.trim_end_matches('/'))?.rel()),
                );
            }
            Ok(NoteDeleteResponse { deleted })
        })
    }

    /// Moves a note (or a folder's every note) to a new path: a `rename` version at the new
    /// path with the same text, and a tombstone at the old one, as one transaction.
    pub fn rename(&self, req: &NoteRenameRequest) -> Result<NoteRenameResponse> {
        let expect = expect(req.expected_hash.as_deref())?;
        let reason = check_reason(req.reason.as_deref())?;
        let (from, folder) = self.under(&req.from).map_err(|e| e.field("from"))?;
        if !folder && req.to.ends_with('/') {
            return Err(Error::invalid(
                "to",
                format!(
                    "{:?} names a folder; give the note's new path in full",
                    req.to
                ),
            ));
        }
        let to_root = NotePath::new(req.to.trim_end_matches('/')).map_err(|e| e.field("to"))?;
        let from_root = req.from.trim_end_matches('/');
        if to_root.as_str() == from_root || to_root.as_str().starts_with(&format!("{from_root}/")) {
            return Err(Error::invalid(
                "to",
                format!("cannot move {from_root:?} into itself"),
            ));
        }
        let pairs: Vec<(NotePath, NotePath)> = from
            .into_iter()
            .map(|p| {
                let rest = &p.as_str()[from_root.len()..];
                NotePath::new(&format!("{}{rest}", to_root.as_str()))
                    .map(|t| (p, t))
                    .map_err(|e| e.field("to"))
            })
            .collect::<Result<_>>()?;
        let dest = self.layout().root.join(to_root.rel());
        self.with_write(|tx| {
            if std::fs::symlink_metadata(&dest).is_ok() {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("the destination {:?} already exists", to_root.as_str()),
                )
                .field("to"));
            }
            let mut olds = Vec::new();
            let mut news = Vec::new();
            for (old, new) in &pairs {
                let cur = self.for_change(tx, old)?;
                if !folder {
                    check_expect(&cur, &expect)?;
                }
                let Some(t) = cur.text() else {
                    return Err(match &cur.file {
                        Some(NoteFile { text: Err(why), .. }) => unreadable(old, why),
                        _ => not_found(old),
                    });
                };
                let t = t.to_string();
                self.check_new_path(new).map_err(|e| e.field("to"))?;
                news.push((self.for_change(tx, new)?, t));
                olds.push(cur);
            }
            let actor = self.actor();
            let mut changes = Vec::new();
            for (i, (new_cur, t)) in news.iter().enumerate() {
                changes.push(Change {
                    base: new_cur,
                    op: VersionOp::Rename,
                    text: Some(t.clone()),
                    actor: actor.clone(),
                    reason: Some(
                        reason
                            .clone()
                            .unwrap_or_else(|| format!("renamed from {}", olds[i].path)),
                    ),
                    ts: None,
                });
                changes.push(Change {
                    base: &olds[i],
                    op: VersionOp::Delete,
                    text: None,
                    actor: actor.clone(),
                    reason: Some(format!("renamed to {}", new_cur.path)),
                    ts: None,
                });
            }
            let done = self.commit(tx, changes, true)?;
            if folder {
                let _ =
                    std::fs::remove_dir(self.layout().root.join(NotePath::new(from_root)?.rel()));
            }
            Ok(NoteRenameResponse {
                renamed: done.into_iter().step_by(2).collect(),
            })
        })
    }

    /// The notes (and folders) under a folder.
    pub fn list(&self, req: &NoteListRequest) -> Result<NoteListResponse> {
        let folder = folder_of(req.folder.as_deref().unwrap_or(""))?;
        let layout = self.layout();
        let depth = req.depth.unwrap_or(usize::MAX);
        if depth == 0 {
            return Err(Error::invalid("depth", "depth must be 1 or more"));
        }
        if !folder.is_empty() && !fsx_is_dir(&layout.root.join(NotePath::new(&folder)?.rel())) {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("folder {folder:?} holds no notes"),
            )
            .field("folder")
            .hint("{op:note_list} without a folder lists every note"));
        }
        let found = note::list_folder(layout, &folder, depth)?;
        let written = |l: &note::Listed| -> Result<Option<String>> {
            if l.dir {
                return Ok(None);
            }
            let head = match NotePath::new(&l.path) {
                Ok(p) => note::head(layout, &p)?.filter(|h| !h.is_tombstone()),
                Err(_) => None,
            };
            Ok(Some(head.map_or_else(
                || clock::rfc3339(l.mtime_ns / 1_000_000),
                |h| h.ts,
            )))
        };
        let mut notes = Vec::with_capacity(found.len());
        for l in found {
            notes.push(NoteEntry {
                modified: written(&l)?,
                path: if l.dir {
                    format!("{}/", l.path)
                } else {
                    l.path
                },
                size: l.len,
            });
        }
        Ok(NoteListResponse { folder, notes })
    }

    /// A note's versions, newest first.
    pub fn history(&self, req: &NoteHistoryRequest) -> Result<NoteHistoryResponse> {
        let path = NotePath::new(&req.path)?;
        check_limit("limit", req.limit)?;
        let cur = self.settled(&path)?;
        let files = note::history(self.layout(), &path)?;
        if files.is_empty() && cur.file.is_none() {
            return Err(not_found(&path));
        }
        let total = files.len();
        let versions = files
            .iter()
            .rev()
            .take(req.limit)
            .map(|f| match &f.entry {
                Ok(e) => listed(e),
                Err(why) => HistoryVersion::malformed(&f.id, why),
            })
            .collect();
        Ok(NoteHistoryResponse {
            path: path.to_string(),
            exists: cur.file.is_some(),
            total,
            versions,
        })
    }

    /// One version of a note, by number, id or hash.
    fn find_version(&self, path: &NotePath, v: &VersionRef) -> Result<HistoryEntry> {
        let entries = self.versions(path)?;
        if entries.is_empty() {
            return Err(not_found(path));
        }
        let found: Vec<&HistoryEntry> = match v {
            VersionRef::Ordinal(n) => entries.iter().filter(|e| e.ordinal() == *n).collect(),
            VersionRef::Id(id) => match entries.iter().find(|e| &e.id == id) {
                Some(e) => vec![e],
                None if memdir_store::model::is_hash_prefix(id) => entries
                    .iter()
                    .filter(|e| {
                        e.hash
                            .as_deref()
                            .is_some_and(|h| h.starts_with(id.as_str()))
                    })
                    .collect(),
                None => Vec::new(),
            },
        };
        found.last().map(|e| (*e).clone()).ok_or_else(|| {
            Error::new(
                ErrorKind::NotFound,
                format!(
                    "note {:?} has no version {}",
                    path.as_str(),
                    match v {
                        VersionRef::Ordinal(n) => n.to_string(),
                        VersionRef::Id(id) => id.clone(),
                    }
                ),
            )
            .field("version")
            .hint("{op:note_history} lists the versions")
        })
    }

    /// The version that was current at `at` (ms).
    fn version_at(&self, path: &NotePath, at: i64) -> Result<HistoryEntry> {
        let entries = self.versions(path)?;
        entries
            .into_iter()
            .rev()
            .find(|e| {
                e.id.get(..24)
                    .and_then(clock::Hlc::parse)
                    .is_some_and(|h| h.ms <= at)
            })
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::NotFound,
                    format!("note {:?} did not exist yet at that time", path.as_str()),
                )
                .field("as_of")
            })
    }

    /// A unified diff between two versions of a note.
    pub fn diff(&self, req: &NoteDiffRequest) -> Result<NoteDiffResponse> {
        let path = NotePath::new(&req.path)?;
        self.settled(&path)?;
        let entries = self.versions(&path)?;
        let Some(head) = entries.last() else {
            return Err(not_found(&path));
        };
        let to = match &req.to {
            Some(v) => self.find_version(&path, v).map_err(|e| e.field("to"))?,
            None => head.clone(),
        };
        let from = match &req.from {
            Some(v) => Some(self.find_version(&path, v).map_err(|e| e.field("from"))?),
            None => to
                .parents
                .first()
                .and_then(|p| entries.iter().find(|e| &e.id == p))
                .cloned(),
        };
        let text =
            |e: Option<&HistoryEntry>| e.and_then(note::entry_text).unwrap_or("").to_string();
        let label = |e: Option<&HistoryEntry>| {
            e.map(|e| format!("{path}@{}", e.ordinal()))
                .unwrap_or_else(|| "/dev/null".into())
        };
        let (a, b) = (text(from.as_ref()), text(Some(&to)));
        let diff = similar::TextDiff::from_lines(&a, &b)
            .unified_diff()
            .context_radius(3)
            .header(&label(from.as_ref()), &label(Some(&to)))
            .to_string();
        Ok(NoteDiffResponse {
            path: path.to_string(),
            from: from.as_ref().map(HistoryEntry::ordinal),
            to: to.ordinal(),
            diff,
        })
    }

    /// Writes an old version's text again, as a new version.
    pub fn restore(&self, req: &NoteRestoreRequest) -> Result<NoteWriteResponse> {
        let path = NotePath::new(&req.path)?;
        let expect = expect(req.expected_hash.as_deref())?;
        let reason = check_reason(req.reason.as_deref())?;
        let old = self.find_version(&path, &req.version)?;
        let Some(t) = note::entry_text(&old).map(str::to_string) else {
            return Err(Error::invalid(
                "version",
                format!(
                    "version {} of note {:?} has no text (a delete, or forgotten)",
                    old.ordinal(),
                    path.as_str()
                ),
            ));
        };
        self.with_write(|tx| {
            let cur = self.for_change(tx, &path)?;
            check_expect(&cur, &expect)?;
            let reason = reason.or_else(|| Some(format!("restored version {}", old.ordinal())));
            self.change(tx, &cur, VersionOp::Restore, t, reason)
        })
    }

    /// Forgets an old version's text (`forget --note --version`): its history file keeps its
    /// place, hash and the time it was forgotten, and no text. The current version cannot be
    /// forgotten (write or delete the note first).
    pub(crate) fn forget_version(
        &self,
        path: &NotePath,
        v: &VersionRef,
        dry_run: bool,
    ) -> Result<ForgetResponse> {
        let check = || -> Result<HistoryEntry> {
            let e = self.find_version(path, v)?;
            if e.is_tombstone() {
                return Err(Error::invalid(
                    "version",
                    format!(
                        "version {} is a delete tombstone: it holds no text",
                        e.ordinal()
                    ),
                ));
            }
            let cur = self.current(path)?;
            if cur.head.as_ref().map(|h| &h.id) == Some(&e.id) && cur.file.is_some() {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "version {} is the current text of note {:?}: write a new version or delete the note first, then forget this one",
                        e.ordinal(),
                        path.as_str()
                    ),
                )
                .field("version"));
            }
            Ok(e)
        };
        let row = |e: &HistoryEntry| ForgottenVersion {
            category: format!("notes/{path}"),
            version: e.ordinal(),
            id: e.id.clone(),
        };
        let versions = if dry_run {
            let e = check()?;
            if e.forgotten.is_some() {
                Vec::new()
            } else {
                vec![row(&e)]
            }
        } else {
            self.with_write(|tx| {
                let mut e = check()?;
                if e.forgotten.is_some() {
                    return Ok(Vec::new());
                }
                let at = clock::rfc3339(clock::now_ms());
                e.content = Value::Null;
                e.forgotten = Some(at.clone());
                let txid = format!("{}_forget", self.tick(tx.inner, clock::now_ms())?);
                let layout = self.layout();
                txn::commit_replacing(
                    &layout.root,
                    &layout.staging(),
                    &txid,
                    &[txn::FileWrite {
                        rel: path.history_rel().join(format!("{}.json", e.id)),
                        bytes: Some(store::history::whole_bytes(&e)),
                        hash: None,
                    }],
                    txn::Replaced::FreeNow,
                )?;
                self.record_durable(tx.inner, |l| {
                    l.record_txn(
                        &txid,
                        "forget",
                        &format!("note:{path}@{}", e.ordinal()),
                        &self.actor(),
                        &at,
                    )
                });
                Ok(vec![row(&e)])
            })?
        };
        Ok(ForgetResponse {
            dry_run,
            count: versions.len(),
            chunks: Vec::new(),
            versions,
        })
    }

    /// An imported file's text as the note at `path`, a new version (with the source's time
    /// `ts`) unless the note holds it already. Returns whether it is (or would be) written.
    pub(crate) fn import_text(
        &self,
        path: &NotePath,
        text: &str,
        ts: &str,
        reason: &str,
        dry_run: bool,
    ) -> Result<bool> {
        let text = self.redacted(text);
        check_size(&text)?;
        if dry_run {
            return Ok(self.current(path)?.text() != Some(text.as_str()));
        }
        self.with_write(|tx| {
            let cur = self.for_change(tx, path)?;
            if cur.text() == Some(text.as_str()) {
                return Ok(false);
            }
            if let Some(NoteFile { text: Err(why), .. }) = &cur.file {
                return Err(unreadable(path, why));
            }
            if cur.file.is_none() {
                self.check_new_path(path)?;
            }
            self.commit(
                tx,
                vec![Change {
                    base: &cur,
                    op: VersionOp::Write,
                    text: Some(text),
                    actor: self.actor(),
                    reason: Some(reason.to_string()),
                    ts: Some(ts.to_string()),
                }],
                true,
            )?;
            Ok(true)
        })
    }

    /// `text` with what the store's redaction rules drop or replace.
    fn redacted(&self, text: &str) -> String {
        self.settings()
            .redaction
            .text(text, &mut Default::default())
            .into_owned()
    }

    /// Notes whose files changed since memdir last saw them (by size and mtime): adopted as
    /// versions and told to the index through the change feed; a store without notes costs
    /// one `stat`. Skipped when a check by any process of this store started less than
    /// `interval` ago (its start time kept in the ledger; zero: never skipped). A hand edit
    /// made `interval` or more before a search is seen by it, as a running server's throttled
    /// scan already promised; one stat per note is what this spares each open (a store of
    /// 10,000 notes: ~35 ms).
    pub(crate) fn scan_every(&self, inner: &Inner, interval: std::time::Duration) -> Result<usize> {
        let started = clock::now_ms();
        let last = inner
            .ledger
            .meta(SCANNED_AT)?
            .and_then(|v| v.parse::<i64>().ok());
        let window = i64::try_from(interval.as_millis()).unwrap_or(i64::MAX);
        if last.is_some_and(|t| t <= started && started - t < window) {
            return Ok(0);
        }
        let layout = self.layout();
        if !fsx_is_dir(&layout.root.join(note::NOTES_DIR)) && inner.ledger.note_stats()?.is_empty()
        {
            return Ok(0);
        }
        let (found, _) = note::list(layout)?;
        let mut seen = inner.ledger.note_stats()?;
        let mut changed = Vec::new();
        // Listed notes whose stamp moved but not their size, with the hash recorded with the
        // stamp: a copy or a restore sets every status-change time, not the content.
        let mut recorded = std::collections::HashMap::new();
        for l in &found {
            let stat = (l.len as i64, l.mtime_ns);
            let was = seen.remove(&l.path);
            if was.as_ref().map(|w| (w.0, w.1)) != Some(stat) {
                if let Some((len, _, hash)) = was
                    && len == stat.0
                    && !hash.is_empty()
                {
                    recorded.insert(l.path.clone(), hash);
                }
                changed.push((l.path.clone(), Some(stat)));
            }
        }
        changed.extend(seen.into_keys().map(|p| (p, None)));
        // The start of this check, recorded once what it found is recorded: only a shortcut
        // for the next open (one not recorded, a full disk, costs a check).
        let stamp = || {
            if self.read_only().is_none() {
                let _ = inner.ledger.set_meta(SCANNED_AT, &started.to_string());
            }
        };
        if changed.is_empty() {
            stamp();
            return Ok(0);
        }
        // A note changed, created or removed by hand becomes a version of its own now, as a
        // category's does (a store served read-only adopts nothing).
        // A file whose bytes are those recorded with its stamp (a copied or restored store) is
        // what the index was last told: its new stamp is recorded, and no change goes to the
        // feed. Any other is told to the index (a write whose ledger update a crash cut off,
        // a hand edit, whatever its times say).
        let mut unchanged = std::collections::HashSet::new();
        let mut hashes = std::collections::HashMap::new();
        let mut lock = None;
        for (p, _) in &changed {
            let Ok(path) = NotePath::new(p) else {
                continue;
            };
            let cur = self.current(&path)?;
            let readable = cur.file.as_ref().is_none_or(|f| f.text.is_ok());
            if let Some(f) = cur.file.as_ref().filter(|f| f.text.is_ok()) {
                hashes.insert(p.clone(), f.hash.clone());
                if recorded.get(p) == Some(&f.hash) {
                    unchanged.insert(p.clone());
                }
            }
            if cur.consistent() && readable {
                continue;
            }
            if !readable || self.read_only().is_some() {
                continue;
            }
            if lock.is_none() {
                // Taking the lock finishes a sync a crash interrupted: judged again after.
                lock = Some(self.lock_and_recover()?);
            }
            let lock = lock.as_ref().expect("invariant: taken just above");
            let cur = self.current(&path)?;
            self.adopt(&WriteTxn { inner, lock }, cur)?;
        }
        inner.ledger.atomically(|l| {
            for (p, stat) in &changed {
                if !unchanged.contains(p) {
                    l.record_change(ChangeKind::Note, p)?;
                }
                let hash = hashes.get(p).map_or("", String::as_str);
                l.put_note_stat(p, *stat, hash)?;
            }
            Ok(())
        })?;
        stamp();
        Ok(changed.len() - unchanged.len())
    }
}

/// An edit in place.
pub(crate) enum Edit {
    /// Replace the one occurrence of the first string with the second.
    Replace(String, String),
    /// Insert the text after the line (0: at the start).
    Insert(u64, String),
}

/// `before` with `edit` made, and the first line it touched.
fn apply_edit(path: &NotePath, before: &str, edit: &Edit) -> Result<(String, u64)> {
    match edit {
        Edit::Replace(old, new) => text::replace_once(before, old, new).map_err(|e| match e {
            text::ReplaceError::Absent => Error::new(
                ErrorKind::NotFound,
                format!("old_str does not occur in note {:?}", path.as_str()),
            )
            .field("old_str")
            .hint("{op:note_read} shows the note as it is now"),
            text::ReplaceError::Many(lines) => Error::new(
                ErrorKind::Conflict,
                format!(
                    "old_str occurs {} times in note {:?} (lines {}); it must occur once",
                    lines.len(),
                    path.as_str(),
                    lines
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .field("old_str")
            .detail("lines", Value::from(lines))
            .hint("include more of the surrounding text in old_str"),
        }),
        Edit::Insert(after, t) => text::insert_after(before, *after, t)
            .map(|s| (s, after + 1))
            .map_err(|n| {
                Error::invalid(
                    "insert_line",
                    format!("insert_line {after} is past the note's {n} lines; give 0 to {n}"),
                )
            }),
    }
}

fn fsx_is_dir(p: &std::path::Path) -> bool {
    store::fsx::is_real_dir(p)
}

/// A file's mtime as RFC 3339 (empty when it cannot be read).
fn file_time(p: &std::path::Path) -> String {
    std::fs::symlink_metadata(p)
        .map(|m| clock::rfc3339(store::mtime_ns(&m) / 1_000_000))
        .unwrap_or_default()
}
