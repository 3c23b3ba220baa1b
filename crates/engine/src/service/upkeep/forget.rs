//! Forget: removing what was remembered, leaving tombstones so that nothing else moves.
//!
//! A forgotten chunk's line is rewritten in place as a tombstone: the same `session_id`,
//! `replica`, `seq`, `hlc` and `ts`, an empty `project` and `content`, and metadata
//! `{"forgotten": <time>}`. Positions are ranks of `(hlc, replica, seq)`, so every other chunk
//! keeps its position, and the segment still verifies (seqs gap-free, stamps increasing). The
//! rewritten segments are committed as one staged transaction (`store::txn`), so a crash leaves
//! the old or the new lines. A forgotten category version keeps its history file, its hash and
//! its place in the version chain; only its content goes (`content: null`, `forgotten: <time>`).
//! The current version cannot be forgotten: a new version (or a delete) must replace it first.
//!
//! After the files, the index catches up at once and merges away the deleted documents, the
//! ledger's log is checkpointed, and every model's vector cache drops the vectors of texts the
//! index no longer holds (their BLAKE3 hashes would confirm a guess of the text), so that no
//! file under the store keeps the text.
use crate::service::Upkeep;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::ledger::ChangeKind;
use crate::service::{Memdir, PositionedChunk, check_limit, from_args};
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::{ForgetRequest, ForgetResponse, ForgottenChunk, ForgottenVersion, SearchHit};
use memdir_store::clock;
use memdir_store::model::{CategoryName, ChunkRecord, SessionId, TOMBSTONE_KEY};
use memdir_store::{self as store, Layout, codec, fsx, segment, txn};

/// The marker of a purge a sync owes (see [`mark_purge_pending`]), in `.memdir/`.
const PURGE_PENDING: &str = "purge-pending";

/// Hits a query forgets at most unless `limit` says otherwise.
const DEFAULT_QUERY_LIMIT: usize = 20;

enum Target {
    /// Chunks by session: `None` means every chunk of the session.
    Chunks(BTreeMap<String, Option<BTreeSet<String>>>),
    Version(CategoryName, memdir_api::VersionRef),
    NoteVersion(memdir_store::note::NotePath, memdir_api::VersionRef),
}

/// The tombstone that replaces a chunk's line.
pub(crate) fn tombstone(c: &ChunkRecord, at: &str) -> ChunkRecord {
    ChunkRecord {
        session_id: c.session_id.clone(),
        replica: c.replica.clone(),
        seq: c.seq,
        hlc: c.hlc.clone(),
        ts: c.ts.clone(),
        project: String::new(),
        metadata: json!({ TOMBSTONE_KEY: at }),
        content: String::new(),
    }
}

fn preview(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut p: String = line.trim().chars().take(80).collect();
    if line.trim().chars().count() > 80 {
        p.push('…');
    }
    p
}

/// The live chunks of session `sid` that `ids` names (every one when `None`). Checked
/// before anything changes: an unknown session or chunk id is an error, and changes nothing.
fn select_chunks(
    up: &Upkeep<'_>,
    sid: &str,
    ids: &Option<BTreeSet<String>>,
) -> Result<Vec<PositionedChunk>> {
    let chunks = up.sessions().session_chunks(sid)?;
    if chunks.is_empty() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("session {sid:?} does not exist"),
        )
        .field("session_id")
        .hint("{op:overview} lists sessions"));
    }
    if let Some(ids) = ids {
        let have: BTreeSet<String> = chunks.iter().map(|c| c.chunk.chunk_id()).collect();
        if let Some(missing) = ids.iter().find(|i| !have.contains(*i)) {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("session {sid:?} has no chunk {missing:?}"),
            )
            .field("chunk_ids")
            .hint("{op:fetch} shows each chunk's chunk_id"));
        }
    }
    Ok(chunks
        .into_iter()
        .filter(|c| !c.chunk.is_tombstone())
        .filter(|c| ids.as_ref().is_none_or(|s| s.contains(&c.chunk.chunk_id())))
        .collect())
}

/// The dry run of a chunk forget: the chunks it would replace, with a preview of each.
fn list_chunks(
    up: &Upkeep<'_>,
    sessions: &BTreeMap<String, Option<BTreeSet<String>>>,
) -> Result<ForgetResponse> {
    let mut out = Vec::new();
    for (sid, ids) in sessions {
        for c in select_chunks(up, sid, ids)? {
            out.push(ForgottenChunk {
                session_id: sid.clone(),
                chunk_id: c.chunk.chunk_id(),
                position: c.position,
                preview: Some(preview(&c.chunk.content)),
            });
        }
    }
    Ok(ForgetResponse {
        dry_run: true,
        count: out.len(),
        chunks: out,
        versions: Vec::new(),
    })
}

impl Upkeep<'_> {
    /// Replaces chunks or a category version by tombstones (or, with `dry_run`, lists them).
    pub fn forget(&self, req: &ForgetRequest) -> Result<ForgetResponse> {
        let target = self.forget_target(req)?;
        let out = match target {
            Target::Chunks(sessions) => self.forget_chunks(&sessions, req.dry_run)?,
            Target::Version(name, v) => self.forget_version(&name, &v, req.dry_run)?,
            Target::NoteVersion(path, v) => {
                (**self).notes().forget_version(&path, &v, req.dry_run)?
            }
        };
        if !req.dry_run {
            // A category write leaves the large file it replaced for the reaper to free
            // (`txn::Replaced::FreeLater`); the text forgotten may be in one still. Every such
            // file, this process's or one a killed process left, is gone before the answer.
            memdir_store::txn::sweep_trash(&self.layout().staging());
            memdir_store::txn::finish_reaping(std::time::Duration::from_secs(30));
        }
        Ok(out)
    }

    /// Checks that the request names exactly one kind of target and resolves a query to the
    /// chunks it hits.
    fn forget_target(&self, req: &ForgetRequest) -> Result<Target> {
        let usage = "forget takes one of: session_id (with chunk_ids, or alone for the whole session), query (with project and limit), or category (or note) with version";
        let chunk_mode = req.session_id.is_some() || req.chunk_ids.is_some();
        let query_mode = req.query.is_some() || req.project.is_some() || req.limit.is_some();
        let version_mode = req.category.is_some() || req.note.is_some() || req.version.is_some();
        if [chunk_mode, query_mode, version_mode]
            .iter()
            .filter(|m| **m)
            .count()
            != 1
        {
            return Err(Error::invalid("arguments", usage));
        }
        if version_mode && req.note.is_some() {
            let (None, Some(n), Some(v)) = (&req.category, &req.note, &req.version) else {
                return Err(Error::invalid(
                    if req.category.is_some() {
                        "note"
                    } else {
                        "version"
                    },
                    "a note's version is forgotten by note and version together (not with category)",
                ));
            };
            let path = memdir_store::note::NotePath::new(n).map_err(|e| e.field("note"))?;
            return Ok(Target::NoteVersion(path, v.clone()));
        }
        if version_mode {
            let (Some(c), Some(v)) = (&req.category, &req.version) else {
                return Err(Error::invalid(
                    if req.category.is_none() {
                        "category"
                    } else {
                        "version"
                    },
                    "a category's version is forgotten by category and version together",
                ));
            };
            return Ok(Target::Version(CategoryName::new(c)?, v.clone()));
        }
        let mut sessions: BTreeMap<String, Option<BTreeSet<String>>> = BTreeMap::new();
        if chunk_mode {
            let Some(sid) = &req.session_id else {
                return Err(Error::invalid(
                    "session_id",
                    "chunk ids are forgotten within a session: pass session_id too",
                ));
            };
            SessionId::new(sid)?;
            let ids = match &req.chunk_ids {
                None => None,
                Some(ids) if ids.is_empty() => {
                    return Err(Error::invalid(
                        "chunk_ids",
                        "chunk_ids is empty: name chunks, or leave it out to forget the whole session",
                    ));
                }
                Some(ids) => Some(ids.iter().cloned().collect()),
            };
            sessions.insert(sid.clone(), ids);
            return Ok(Target::Chunks(sessions));
        }
        let Some(query) = req.query.as_deref().filter(|q| !q.trim().is_empty()) else {
            return Err(Error::invalid(
                "query",
                "the query is empty: it would match nothing",
            ));
        };
        let limit = check_limit("limit", req.limit.unwrap_or(DEFAULT_QUERY_LIMIT))?;
        // Only chunks whose own text matches: a match in the turn before (the context field)
        // must not take the neighbour with it.
        let mut args =
            json!({"query": query, "limit": limit, "kind": "chunk", "context": 0, "full": true});
        if let Some(p) = &req.project {
            args["project"] = Value::from(p.clone());
        }
        let search = memdir_api::SearchRequest {
            context_weight: Some(0.0),
            ..from_args(args)?
        };
        // Nor may a neighbour lifted by the match beside it go: plain BM25 order, no spreading.
        // And a chunk goes only when it holds every word of the query (`pool timeout` does
        // not take a turn that only says "pool"); a quoted phrase must occur as written.
        let found = self.indexing().search_tuned(&search, |plan| {
            plan.neighbour_share = 0.0;
            plan.session_share = 0.0;
            plan.all_words = true;
        })?;
        for hit in found.results {
            if let SearchHit::Chunk {
                session_id,
                chunk_id,
                content,
                ..
            } = hit
                && holds_every_word(&content, query)
            {
                sessions
                    .entry(session_id)
                    .or_insert_with(|| Some(BTreeSet::new()))
                    .get_or_insert_with(BTreeSet::new)
                    .insert(chunk_id);
            }
        }
        Ok(Target::Chunks(sessions))
    }

    /// Replaces the chosen chunks of each session by tombstones (or, with `dry_run`, lists
    /// them), then purges their text from everything derived.
    fn forget_chunks(
        &self,
        sessions: &BTreeMap<String, Option<BTreeSet<String>>>,
        dry_run: bool,
    ) -> Result<ForgetResponse> {
        if dry_run {
            return list_chunks(self, sessions);
        }
        if sessions.is_empty() {
            // A query that hits nothing: nothing to do, and no store is created for it.
            return Ok(ForgetResponse {
                dry_run: false,
                count: 0,
                chunks: Vec::new(),
                versions: Vec::new(),
            });
        }
        let forgotten = self.with_write(|tx| {
            let layout = self.layout();
            let at = clock::rfc3339(clock::now_ms());
            let mut out = Vec::new();
            let mut files = Vec::new();
            for (sid, ids) in sessions {
                let chosen = select_chunks(self, sid, ids)?;
                let mut by_replica: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
                for c in &chosen {
                    by_replica
                        .entry(c.chunk.replica.clone())
                        .or_default()
                        .insert(c.chunk.seq);
                    out.push(ForgottenChunk {
                        session_id: sid.clone(),
                        chunk_id: c.chunk.chunk_id(),
                        position: c.position,
                        preview: None,
                    });
                }
                let dir = Layout::session_rel(&SessionId::new(sid)?);
                for f in store::list_segments(layout, &dir)? {
                    let Some(seqs) = by_replica.get(&f.replica) else {
                        continue;
                    };
                    let path = layout.root.join(&f.rel);
                    let seg = segment::read(&path)?;
                    if segment::repair_tail(&layout.root, &path, &seg)? {
                        self.sessions().sync_sessions(tx.inner, Some(tx.lock))?;
                    }
                    let bytes =
                        store::fsx::read(&path, store::fsx::MAX_SEGMENT_FILE)?.unwrap_or_default();
                    files.push(txn::FileWrite {
                        rel: f.rel.clone(),
                        bytes: Some(rewrite_segment(&bytes, seqs, &at)),
                        hash: None,
                    });
                }
            }
            if files.is_empty() {
                return Ok(out);
            }
            let txid = format!("{}_forget", self.tick(tx.inner, clock::now_ms())?);
            crate::sync::seal::settle(&layout.root, None, &mut files);
            txn::commit(&layout.root, &layout.staging(), &txid, &files)?;
            // The next scan refreshes the ledger's rows; the change record makes indexes re-read.
            self.record_durable(tx.inner, |l| {
                for f in &files {
                    l.record_change(ChangeKind::Segment, &f.rel.to_string_lossy())?;
                }
                l.record_txn(
                    &txid,
                    "forget",
                    &format!("chunks:{}", out.len()),
                    &self.actor(),
                    &at,
                )?;
                Ok(())
            });
            self.sessions().sync_sessions(tx.inner, Some(tx.lock))?;
            Ok(out)
        })?;
        self.purge_derived()?;
        Ok(ForgetResponse {
            dry_run: false,
            count: forgotten.len(),
            chunks: forgotten,
            versions: Vec::new(),
        })
    }

    fn forget_version(
        &self,
        name: &CategoryName,
        v: &memdir_api::VersionRef,
        dry_run: bool,
    ) -> Result<ForgetResponse> {
        let check = |inner: &crate::service::Inner| -> Result<memdir_store::model::HistoryEntry> {
            // As written: a version whose patch no longer resolves can still be forgotten.
            let entry = self.categories().find_version_unresolved(inner, name, v)?;
            if entry.is_tombstone() {
                return Err(Error::invalid(
                    "version",
                    format!(
                        "version {} is a delete tombstone: it holds no content",
                        entry.ordinal()
                    ),
                ));
            }
            let head = inner
                .ledger
                .category(name.as_str())?
                .and_then(|r| r.head_id);
            if head.as_deref() == Some(entry.id.as_str()) {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "version {} is the current content of {:?}: write a new version or delete the category first, then forget this one",
                        entry.ordinal(),
                        name.as_str()
                    ),
                )
                .field("version")
                .hint("{op:write} or {op:delete} replaces the current version"));
            }
            Ok(entry)
        };
        let row = |e: &memdir_store::model::HistoryEntry| ForgottenVersion {
            category: name.to_string(),
            version: e.ordinal(),
            id: e.id.clone(),
        };
        if dry_run {
            let mut guard = self.inner()?;
            let Some(inner) = guard.as_mut() else {
                return Err(crate::service::categories::adoption::not_found(
                    name,
                    Vec::new(),
                ));
            };
            let e = check(inner)?;
            let versions: Vec<_> = if e.forgotten.is_some() {
                Vec::new()
            } else {
                vec![row(&e)]
            };
            return Ok(ForgetResponse {
                dry_run: true,
                count: versions.len(),
                chunks: Vec::new(),
                versions,
            });
        }
        let versions = self.with_write(|tx| {
            let mut e = check(tx.inner)?;
            if e.forgotten.is_some() {
                return Ok(Vec::new());
            }
            let at = clock::rfc3339(clock::now_ms());
            e.content = Value::Null;
            e.patch = None;
            e.forgotten = Some(at.clone());
            let txid = format!("{}_forget", self.tick(tx.inner, clock::now_ms())?);
            // The versions written as patches of this one are written whole in the same
            // transaction: they stay readable without its content.
            store::history::commit_keeping_chains(
                self.layout(),
                &txid,
                vec![txn::FileWrite {
                    rel: Layout::history_rel(name).join(format!("{}.json", e.id)),
                    bytes: Some(store::history::whole_bytes(&e)),
                    hash: None,
                }],
            )?;
            self.record_durable(tx.inner, |l| {
                l.record_txn(
                    &txid,
                    "forget",
                    &format!("{}@{}", name.as_str(), e.ordinal()),
                    &self.actor(),
                    &at,
                )
            });
            Ok(vec![row(&e)])
        })?;
        if !versions.is_empty() {
            // The version is not indexed (only current ones are), but its values were while it
            // was current, and may have been embedded then.
            self.indexing().catch_up(false, None)?;
            self.indexing().purge_vectors()?;
        }
        Ok(ForgetResponse {
            dry_run: false,
            count: versions.len(),
            chunks: Vec::new(),
            versions,
        })
    }

    /// After a forget: the index absorbs the tombstones and drops the deleted documents from
    /// its files, and the ledger's write-ahead log is folded in, so no derived file keeps the
    /// forgotten text.
    pub(in crate::service) fn purge_derived(&self) -> Result<()> {
        self.indexing().catch_up(false, None)?;
        {
            let g = self.indexing().index_guard()?;
            if let Some(idx) = g.as_ref() {
                idx.chunks.purge_deleted(self.settings.lock_timeout)?;
                // A forgotten category value too: merged away in a server's memory, it stays
                // in the files `meta.json` on disk names until those commits land.
                idx.categories.purge_deleted(self.settings.lock_timeout)?;
            }
        }
        if let Some(inner) = self.inner()?.as_ref() {
            inner.ledger.checkpoint()?;
        }
        self.indexing().purge_vectors()?;
        match std::fs::remove_file(self.layout().meta_dir().join(PURGE_PENDING)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::from(memdir_api::error::IoError {
                    op: "remove",
                    path: self.layout().meta_dir().join(PURGE_PENDING),
                    source: e,
                }))
            }
            _ => Ok(()),
        }
    }
}

/// Records, durably and before the tombstones a sync brings are written, that derived files
/// must be purged: a process that crashes between those writes and its purge leaves the
/// marker, and the next sync or search purges ([`purge_if_pending`]).
pub(in crate::service) fn mark_purge_pending(layout: &Layout) -> Result<()> {
    let path = layout.meta_dir().join(PURGE_PENDING);
    fsx::write_synced(&path, b"")?;
    fsx::sync_dir(&layout.meta_dir())?;
    Ok(())
}

/// [`Upkeep::purge_derived`] when a sync that brought a forget did not finish its own.
pub(in crate::service) fn purge_if_pending(memdir: &Memdir) -> Result<()> {
    if memdir
        .layout()
        .meta_dir()
        .join(PURGE_PENDING)
        .symlink_metadata()
        .is_ok()
    {
        memdir.upkeep().purge_derived()?;
    }
    Ok(())
}

/// The segment's bytes with the lines of `seqs` replaced by tombstones; every other line (a
/// malformed one included) stays byte for byte.
fn rewrite_segment(bytes: &[u8], seqs: &BTreeSet<u64>, at: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        match codec::parse_chunk_line(body) {
            Ok(c) if seqs.contains(&c.seq) && line.ends_with(b"\n") => {
                out.extend_from_slice(codec::chunk_line(&tombstone(&c, at)).as_bytes());
            }
            _ => out.extend_from_slice(line),
        }
    }
    out
}
/// Whether `text` holds every word of `query` as it was typed (case aside), stop words
/// included: the index drops words like "not", and a forget must not widen because of it
/// (`not production` takes only a text that says both). A check that can only narrow what
/// the search found.
fn holds_every_word(text: &str, query: &str) -> bool {
    fn words(s: &str) -> Vec<String> {
        s.to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    }
    let have = words(text);
    // A word of the text is the query's word, or it with a short ending (pool: pools,
    // pooled, pooling); nothing longer ("not" is not "nothing").
    words(query).iter().all(|w| {
        have.iter().any(|t| {
            t.strip_prefix(w.as_str())
                .is_some_and(|rest| rest.chars().count() <= 3)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::holds_every_word;

    #[test]
    fn every_typed_word_must_be_in_the_text_stop_words_too() {
        assert!(holds_every_word(
            "The POOL timeout was raised",
            "pool timeout"
        ));
        assert!(!holds_every_word("production is down", "not production"));
        assert!(holds_every_word(
            "this is not production",
            "\"not production\""
        ));
        assert!(!holds_every_word("pool password", "pool timeout"));
        assert!(holds_every_word("Größe der Datei", "größe"));
        assert!(holds_every_word("pools were resized", "pool"));
        assert!(!holds_every_word("nothing in production", "not production"));
        assert!(!holds_every_word(
            "another production day",
            "not production"
        ));
    }
}
