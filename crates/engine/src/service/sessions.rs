//! Session memory: ingest, fetch, and the session catalog.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Inner, Sessions, check_limit, limits};
use crate::ledger::ChangeKind;
use crate::ledger::{SegmentRow, SourceKey};
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::*;
use memdir_store::clock;
use memdir_store::lock::WriteLock;
use memdir_store::model::{ChunkRecord, SessionId, validate_project};
use memdir_store::segment::{self, SegmentAppend};
use memdir_store::{self as store, Layout, codec};

/// A chunk with its position in its session.
#[derive(Clone, Debug)]
pub struct PositionedChunk {
    pub position: u64,
    pub chunk: ChunkRecord,
}

impl PositionedChunk {
    /// The row of a fetched chunk.
    pub fn to_fetched(&self) -> FetchedChunk {
        let c = &self.chunk;
        FetchedChunk {
            position: self.position,
            chunk_id: c.chunk_id(),
            content: c.content.clone(),
            ts: c.ts.clone(),
            hlc: c.hlc.clone(),
            project: c.project.clone(),
            metadata: c.metadata.clone(),
            superseded_by: None,
        }
    }
}

fn title_of(metadata: &Value, content: &str) -> String {
    if let Some(t) = metadata.get("title").and_then(Value::as_str)
        && !t.trim().is_empty()
    {
        return t.trim().chars().take(80).collect();
    }
    let line = content
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut t: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        t.push('…');
    }
    t
}

/// Whether a segment read again is what its row recorded, its stamp aside: same length and a
/// known, equal signature (a copied or restored store sets every file's status-change time).
/// Nothing then needs re-reading by the index or the idempotency keys.
fn only_touched(old: &SegmentRow, new: &SegmentRow) -> bool {
    !old.sig.is_empty() && old.sig == new.sig && old.len == new.len
}

fn segment_row(
    rel: &str,
    session_id: &str,
    replica: &str,
    stat: (u64, i64),
    seg: &segment::Segment,
) -> SegmentRow {
    let first = seg.chunks.iter().min_by(|a, b| a.hlc.cmp(&b.hlc));
    SegmentRow {
        rel: rel.to_string(),
        session_id: seg
            .chunks
            .first()
            .map(|c| c.session_id.clone())
            .unwrap_or_else(|| session_id.to_string()),
        replica: replica.to_string(),
        len: stat.0 as i64,
        mtime_ns: stat.1,
        // Known only when it covers exactly the bytes the row describes.
        sig: if seg.tail_len == 0 && seg.committed_len == stat.0 {
            seg.sig.clone()
        } else {
            String::new()
        },
        chunks: seg.chunks.len() as i64,
        next_seq: seg.next_seq() as i64,
        project: seg
            .chunks
            .iter()
            .map(|c| c.project.as_str())
            .find(|p| !p.is_empty())
            .unwrap_or("")
            .to_string(),
        title: first
            .map(|c| title_of(&c.metadata, &c.content))
            .unwrap_or_default(),
        first_ts: seg
            .chunks
            .iter()
            .map(|c| c.ts.as_str())
            .min()
            .unwrap_or("")
            .to_string(),
        last_ts: seg
            .chunks
            .iter()
            .map(|c| c.ts.as_str())
            .max()
            .unwrap_or("")
            .to_string(),
        bad_lines: seg.bad_lines.len() as i64,
        max_hlc: seg
            .chunks
            .iter()
            .map(|c| c.hlc.as_str())
            .max()
            .unwrap_or("")
            .to_string(),
    }
}

/// Orders chunks of all segments of a session and numbers them: the position is the rank of
/// `(hlc, replica, seq)`, which on a single device equals `seq`.
pub fn order_chunks(mut chunks: Vec<ChunkRecord>) -> Vec<PositionedChunk> {
    chunks.sort_by(|a, b| (&a.hlc, &a.replica, a.seq).cmp(&(&b.hlc, &b.replica, b.seq)));
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, chunk)| PositionedChunk {
            position: i as u64,
            chunk,
        })
        .collect()
}

pub use memdir_index::search::supersede::SUPERSEDES_KEY;

/// The metadata key that holds a chunk's idempotency key.
pub const SOURCE_ID_KEY: &str = "source_id";

/// Longest idempotency key, in bytes.
pub const MAX_SOURCE_ID_BYTES: usize = 512;

/// A chunk's idempotency key: a string `source_id` in its metadata.
pub fn source_id_of(metadata: &Value) -> Option<&str> {
    metadata
        .get(SOURCE_ID_KEY)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The idempotency keys a segment holds.
fn source_keys(seg: &segment::Segment) -> Vec<SourceKey> {
    seg.chunks
        .iter()
        .filter_map(|c| {
            source_id_of(&c.metadata).map(|k| SourceKey {
                session_id: c.session_id.clone(),
                source_id: k.to_string(),
                chunk_id: c.chunk_id(),
            })
        })
        .collect()
}

/// Checks an idempotency key: 1 to 512 bytes, no control characters.
fn check_source_id(k: &str) -> Result<()> {
    if k.is_empty() {
        return Err(Error::invalid("source_id", "source_id must not be empty"));
    }
    if k.len() > MAX_SOURCE_ID_BYTES {
        return Err(Error::too_large(
            "source_id",
            k.len(),
            MAX_SOURCE_ID_BYTES,
            "bytes",
        ));
    }
    if k.chars().any(char::is_control) {
        return Err(Error::invalid(
            "source_id",
            "source_id must not contain control characters",
        ));
    }
    Ok(())
}

/// A chunk checked and ready to write.
struct Prepared {
    id: SessionId,
    ts: Option<i64>,
    meta: Value,
    key: Option<String>,
}

/// Checks one chunk of an ingest (`at` adds where it sits in a batch) without writing.
fn prepare(c: &NewChunk, at: impl Fn(Error) -> Error) -> Result<Prepared> {
    let id = SessionId::new(&c.session_id).map_err(&at)?;
    if c.content.trim().is_empty() {
        return Err(at(Error::invalid("content", "content must not be empty")));
    }
    if c.content.len() > limits::MAX_CHUNK_BYTES {
        return Err(at(Error::too_large(
            "content",
            c.content.len(),
            limits::MAX_CHUNK_BYTES,
            "bytes",
        )));
    }
    validate_project(c.project.as_deref().unwrap_or("")).map_err(&at)?;
    if let Some(m) = &c.metadata {
        if !m.is_object() && !m.is_null() {
            return Err(at(Error::invalid(
                "metadata",
                format!(
                    "metadata must be a JSON object, got {}",
                    super::type_name(m)
                ),
            )));
        }
        super::check_depth("metadata", m).map_err(&at)?;
    }
    // The idempotency key is kept in the metadata, so it survives in the plain files
    // and the ledger's key index can be rebuilt from them.
    let mut meta = c
        .metadata
        .clone()
        .filter(|m| !m.is_null())
        .unwrap_or_else(|| json!({}));
    if let Some(k) = c.source_id.as_deref() {
        check_source_id(k).map_err(&at)?;
        if meta
            .get(SOURCE_ID_KEY)
            .is_some_and(|v| v.as_str() != Some(k))
        {
            return Err(at(Error::invalid(
                "source_id",
                "source_id differs from metadata.source_id: give the key once",
            )));
        }
        meta[SOURCE_ID_KEY] = Value::from(k);
    }
    let key = source_id_of(&meta).map(str::to_string);
    if let Some(k) = &key {
        check_source_id(k).map_err(&at)?;
    }
    let size = codec::to_compact(&meta).len();
    if size > limits::MAX_METADATA_BYTES {
        return Err(at(Error::too_large(
            "metadata",
            size,
            limits::MAX_METADATA_BYTES,
            "bytes",
        )));
    }
    // An original time (an import's) is kept as the chunk's time; order and positions
    // still follow ingest, through the clock stamp.
    let ts = match c.ts.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            None => None,
            Some(t) => Some(clock::parse_time(t).ok_or_else(|| {
                at(Error::invalid(
                    "ts",
                    format!("ts {t:?} is not a time: use RFC 3339 (2026-11-29T10:00:00Z), a date (2026-11-29) or epoch milliseconds"),
                ))
            })?),
        };
    Ok(Prepared { id, ts, meta, key })
}

/// An error about chunk `i` of a batch of `n`: in a batch of several it names the chunk's index.
fn in_batch(n: usize, i: usize, e: Error) -> Error {
    if n > 1 {
        e.detail("index", Value::from(i))
    } else {
        e
    }
}

/// A chunk's clock stamp in ms (0 for a stamp that does not parse: it sorts first).
fn clock_ms(hlc: &str) -> i64 {
    clock::Hlc::parse(hlc).map_or(0, |h| h.ms)
}

/// The most chunks one chunk may say it corrects.
pub const MAX_SUPERSEDES: usize = 64;

/// What a chunk says it corrects, checked for shape: `supersedes`, or `supersedes` in its
/// metadata (a hand-made line's way), not both unless they agree. Each is a chunk's uri, its
/// chunk id, or a source_id.
fn corrections_asked(c: &NewChunk, meta: &Value) -> Result<Option<Vec<String>>> {
    let in_meta = match meta.get(SUPERSEDES_KEY) {
        None => None,
        Some(Value::Array(a)) => Some(
            a.iter()
                .map(|v| {
                    v.as_str().map(str::to_string).ok_or_else(|| {
                        Error::invalid(
                            "metadata",
                            "metadata.supersedes must be a list of chunk uris, chunk ids or source_ids",
                        )
                    })
                })
                .collect::<Result<Vec<String>>>()?,
        ),
        Some(_) => {
            return Err(Error::invalid(
                "metadata",
                "metadata.supersedes must be a list of chunk uris, chunk ids or source_ids",
            ));
        }
    };
    let refs = match (&c.supersedes, in_meta) {
        (Some(a), Some(b)) if *a != b => {
            return Err(Error::invalid(
                "supersedes",
                "supersedes differs from metadata.supersedes: give the list once",
            ));
        }
        (Some(a), _) => a.clone(),
        (None, Some(b)) => b,
        (None, None) => return Ok(None),
    };
    if refs.is_empty() {
        return Err(Error::invalid(
            "supersedes",
            "supersedes must name at least one chunk (or be left out)",
        ));
    }
    if refs.len() > MAX_SUPERSEDES {
        return Err(Error::too_large(
            "supersedes",
            refs.len(),
            MAX_SUPERSEDES,
            "chunks",
        ));
    }
    for r in &refs {
        if r.trim().is_empty() || r.len() > 512 || r.chars().any(char::is_control) {
            return Err(Error::invalid(
                "supersedes",
                format!(
                    "supersedes holds {r:?}: a chunk id or source_id is a non-empty line of at most 512 bytes"
                ),
            ));
        }
    }
    Ok(Some(refs))
}

/// Refuses an empty batch, or one of more than [`limits::MAX_BATCH_CHUNKS`] chunks.
fn check_batch_len(chunks: &[NewChunk]) -> Result<()> {
    if chunks.is_empty() {
        return Err(Error::invalid(
            "chunks",
            "nothing to ingest: the batch is empty",
        ));
    }
    if chunks.len() > limits::MAX_BATCH_CHUNKS {
        return Err(Error::too_large(
            "chunks",
            chunks.len(),
            limits::MAX_BATCH_CHUNKS,
            "chunks",
        ));
    }
    Ok(())
}

/// Checks every chunk of a batch (an error names the chunk's index when there are several),
/// then the batch's total size.
fn prepare_batch(chunks: &[NewChunk]) -> Result<Vec<Prepared>> {
    let mut total = 0usize;
    let mut prepared = Vec::with_capacity(chunks.len());
    for (i, c) in chunks.iter().enumerate() {
        prepared.push(prepare(c, |e| in_batch(chunks.len(), i, e))?);
        total += c.content.len();
    }
    if total > limits::MAX_BATCH_BYTES {
        return Err(Error::too_large(
            "chunks",
            total,
            limits::MAX_BATCH_BYTES,
            "bytes",
        ));
    }
    Ok(prepared)
}

/// What a batch appends to one segment.
struct Pending {
    append: SegmentAppend,
    /// The seq of the next chunk.
    next_seq: u64,
    /// The segment's row as it will be after the append (its size and mtime aside).
    row: SegmentRow,
}

impl Pending {
    /// Adds the line of `rec` (whose content is `content`) to the append and the row.
    fn add(&mut self, rec: &ChunkRecord, content: &str) {
        self.next_seq += 1;
        self.append
            .lines
            .extend_from_slice(codec::chunk_line_with(rec, content).as_bytes());
        let row = &mut self.row;
        row.chunks += 1;
        row.next_seq = self.next_seq as i64;
        if row.project.is_empty() {
            row.project = rec.project.clone();
        }
        if row.title.is_empty() {
            row.title = title_of(&rec.metadata, content);
        }
        if row.first_ts.is_empty() || rec.ts < row.first_ts {
            row.first_ts = rec.ts.clone();
        }
        if rec.ts > row.last_ts {
            row.last_ts = rec.ts.clone();
        }
    }
}

/// An ingest as planned under the write lock, before anything is written.
struct Plan<'c> {
    /// The keys of the segments written to, in the order the batch first reaches them.
    order: Vec<String>,
    /// What the batch appends to each segment, by key.
    state: BTreeMap<String, Pending>,
    /// Segments whose cached state was stale (a hand edit, or a writer that died before
    /// recording its append): the index re-reads them whole.
    resync: std::collections::BTreeSet<String>,
    /// The records written, in batch order.
    out: Vec<ChunkRecord>,
    /// Each record's rank in its segment: its position when its session has no other segment.
    single_positions: Vec<u64>,
    /// The stamp of the last record.
    last_hlc: Option<clock::Hlc>,
    /// The clock as the batch leaves it.
    clock_state: clock::Hlc,
    /// The chunks not written: their idempotency key was held already.
    skipped: Vec<SkippedChunk>,
    /// The keys written so far by the batch, with the chunk that holds each.
    batch_keys: std::collections::HashMap<(&'c str, &'c str), String>,
    /// The keys the batch adds, by segment key.
    new_keys: BTreeMap<String, Vec<SourceKey>>,
}

/// Stamps the next chunk of the segment whose row is `row`, ticking `clock` at `now`: the
/// stamp becomes the row's newest, and the clock's too when it is admissible.
fn next_stamp(clock: &mut clock::Hlc, row: &mut SegmentRow, now: i64) -> clock::Hlc {
    let mut hlc = clock.tick(now);
    // Within a segment, stamps follow seq, so that positions (the rank of the
    // stamp) keep ingest order, even after a line with a stamp the clock did not
    // admit. Such a stamp moves only this segment on, never the clock.
    if let Some(last) = clock::Hlc::parse(&row.max_hlc)
        && hlc <= last
    {
        hlc = last.tick(last.ms);
    }
    if hlc.admissible(now) {
        *clock = hlc;
    }
    row.max_hlc = hlc.to_string();
    hlc
}

/// Takes the lines planned for each segment, in the order the batch reached them; each row's
/// signature is extended by its lines and its length set to what the append will leave
/// (the ledger update compares it with the file's).
fn take_appends(plan: &mut Plan<'_>) -> Vec<SegmentAppend> {
    plan.order
        .iter()
        .map(|k| {
            let p = plan
                .state
                .get_mut(k)
                .expect("invariant: every ordered key has a state");
            p.row.sig = if p.row.len == p.append.len_before as i64 {
                segment::sign(&p.row.sig, &p.append.lines)
            } else {
                String::new()
            };
            p.row.len = (p.append.len_before + p.append.lines.len() as u64) as i64;
            let a = &mut p.append;
            SegmentAppend {
                rel: a.rel.clone(),
                lines: std::mem::take(&mut a.lines),
                len_before: a.len_before,
            }
        })
        .collect()
}

/// Checks a chunk as an ingest would, without writing anything: a caller streaming a large
/// input can refuse a bad line before its first batch is saved.
pub fn check_chunk(c: &NewChunk) -> Result<()> {
    prepare(c, |e| e).map(|_| ())
}

impl Sessions<'_> {
    /// Re-reads the segments of one session whose cached rows are stale (under the lock), so
    /// its idempotency keys in the ledger match the files.
    fn refresh_session(&self, inner: &Inner, id: &SessionId) -> Result<()> {
        let layout = self.layout();
        for f in store::list_segments(layout, &Layout::session_rel(id))? {
            let rel = f.rel.to_string_lossy().into_owned();
            let old = inner.ledger.segment(&rel)?;
            if old
                .as_ref()
                .is_some_and(|r| r.len == f.len as i64 && r.mtime_ns == f.mtime_ns)
            {
                continue;
            }
            let path = layout.root.join(&f.rel);
            let mut seg = segment::read_signed(&path)?;
            if seg.tail_len > 0 && segment::repair_tail(&layout.root, &path, &seg)? {
                seg = segment::read_signed(&path)?;
            }
            let stat = store::stat(&path)?.unwrap_or((0, 0));
            if let Some(max) = seg.chunks.iter().map(|c| c.hlc.as_str()).max() {
                self.observe(inner, max)?;
            }
            let row = segment_row(&rel, id.as_str(), &f.replica, stat, &seg);
            if old.as_ref().is_some_and(|old| only_touched(old, &row)) {
                inner.ledger.put_segment(&row)?;
                continue;
            }
            let keys = source_keys(&seg);
            inner.ledger.atomically(|l| {
                l.put_segment(&row)?;
                l.replace_source_keys(&rel, &keys)?;
                l.record_change(ChangeKind::Segment, &rel)?;
                Ok(())
            })?;
        }
        Ok(())
    }

    /// The saved position of an incremental import of `source` (see
    /// [`Sessions::save_import_cursor`]); `None` before the first save or after the ledger was
    /// rebuilt.
    pub fn import_cursor(&self, source: &str) -> Result<Option<String>> {
        let guard = self.inner()?;
        match guard.as_ref() {
            Some(inner) => inner.ledger.import_cursor(source),
            None => Ok(None),
        }
    }

    /// Saves the position of an incremental import of `source` (opaque JSON text), under the
    /// write lock, if the saved one is still `expected` (what the caller started from): of two
    /// imports of one source at once, the first to finish wins and the other's is dropped,
    /// which costs the next run a re-read that idempotency keys make harmless. Call it only
    /// after the chunks read up to the position are acknowledged. Returns whether it saved.
    pub fn save_import_cursor(
        &self,
        source: &str,
        expected: Option<&str>,
        state: &str,
    ) -> Result<bool> {
        self.with_write(|tx| {
            memdir_store::failpoint::hit("cursor.before_save");
            tx.inner.ledger.atomically(|l| {
                if l.import_cursor(source)?.as_deref() != expected {
                    return Ok(false);
                }
                l.put_import_cursor(source, state)?;
                Ok(true)
            })
        })
    }

    /// Turns what each chunk says it corrects (`supersedes`, or `supersedes` in its metadata:
    /// chunk ids or source_ids) into the chunk ids it names, kept in the chunk's metadata, so
    /// the link in the files is stable. A name that is no chunk of this store is an error
    /// and nothing is written.
    fn resolve_corrections(&self, chunks: &[NewChunk], prepared: &mut [Prepared]) -> Result<()> {
        let at = |i: usize, e: Error| in_batch(chunks.len(), i, e);
        let mut asked: Vec<(usize, Vec<String>)> = Vec::new();
        for (i, (c, p)) in chunks.iter().zip(prepared.iter()).enumerate() {
            if let Some(refs) = corrections_asked(c, &p.meta).map_err(|e| at(i, e))? {
                asked.push((i, refs));
            }
        }
        if asked.is_empty() {
            return Ok(());
        }
        // One look at the ledger and one at the index for the whole batch.
        let names: Vec<&str> = asked
            .iter()
            .flat_map(|(_, r)| r.iter().map(String::as_str))
            .collect();
        let by_source = self.chunks_with_source_ids(&names)?;
        let lists: Vec<&[String]> = asked.iter().map(|(_, r)| r.as_slice()).collect();
        let located = self.indexing().locate_chunks(&lists, &by_source)?;
        for ((i, _), uris) in asked.iter().zip(located) {
            let p = &mut prepared[*i];
            p.meta[SUPERSEDES_KEY] = Value::from(uris.map_err(|e| at(*i, e))?);
            let size = codec::to_compact(&p.meta).len();
            if size > limits::MAX_METADATA_BYTES {
                return Err(at(
                    *i,
                    Error::too_large("metadata", size, limits::MAX_METADATA_BYTES, "bytes"),
                ));
            }
        }
        Ok(())
    }

    /// Keeps, of each place's corrections, those saved by `t` (ms): the memory as it stood then.
    fn corrections_by(
        &self,
        by: &mut memdir_index::search::supersede::Superseded,
        t: i64,
    ) -> Result<()> {
        let mut clocks: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for uris in by.values_mut() {
            let mut kept = Vec::new();
            for uri in uris.drain(..) {
                let Some(memdir_api::uri::Resource::Chunk {
                    session_id,
                    position,
                }) = memdir_api::uri::parse(&uri)
                else {
                    continue;
                };
                if !clocks.contains_key(&session_id) {
                    let of: Vec<i64> = self
                        .session_chunks(&session_id)?
                        .iter()
                        .map(|c| clock_ms(&c.chunk.hlc))
                        .collect();
                    clocks.insert(session_id.clone(), of);
                }
                if clocks[&session_id]
                    .get(position as usize)
                    .is_some_and(|c| *c <= t)
                {
                    kept.push(uri);
                }
            }
            *uris = kept;
        }
        by.retain(|_, uris| !uris.is_empty());
        Ok(())
    }

    /// For each name, the chunks in any session whose idempotency key it is: (session, chunk
    /// id); names that are no key are left out.
    fn chunks_with_source_ids(
        &self,
        names: &[&str],
    ) -> Result<std::collections::HashMap<String, Vec<(String, String)>>> {
        let mut out = std::collections::HashMap::new();
        let mut guard = self.inner()?;
        let Some(inner) = guard.as_mut() else {
            return Ok(out);
        };
        self.sync_sessions(inner, None)?;
        for n in names {
            let found = inner.ledger.chunks_with_source_id(n)?;
            if !found.is_empty() {
                out.insert(n.to_string(), found);
            }
        }
        Ok(out)
    }

    /// Which of these `(session, source_id)` pairs a chunk already holds; writes nothing.
    pub fn source_ids_known(&self, pairs: &[(String, String)]) -> Result<Vec<bool>> {
        let mut guard = self.inner()?;
        let Some(inner) = guard.as_mut() else {
            return Ok(vec![false; pairs.len()]);
        };
        self.sync_sessions(inner, None)?;
        pairs
            .iter()
            .map(|(s, k)| Ok(inner.ledger.source_key(s, k)?.is_some()))
            .collect()
    }

    /// Reads every idempotency key again from the segments (under the lock): `reindex`
    /// rebuilds the ledger's key index from the files with it.
    pub(crate) fn rebuild_source_keys(&self) -> Result<()> {
        if self.read_only().is_some() || !self.layout().exists() {
            return Ok(());
        }
        self.with_write(|tx| {
            let layout = self.layout();
            let mut all = Vec::new();
            for (_, dir_rel) in store::list_session_dirs(layout)? {
                for f in store::list_segments(layout, &dir_rel)? {
                    let Ok(seg) = segment::read(&layout.root.join(&f.rel)) else {
                        continue;
                    };
                    all.push((f.rel.to_string_lossy().into_owned(), source_keys(&seg)));
                }
            }
            tx.inner.ledger.atomically(|l| {
                l.clear_source_keys()?;
                for (rel, keys) in &all {
                    l.add_source_keys(rel, keys)?;
                }
                Ok(())
            })
        })
    }

    /// Refreshes the cached rows of every session segment, repairing torn tails (under the
    /// lock). Records a change for every segment that changed behind memdir's back.
    pub(crate) fn sync_sessions(&self, inner: &Inner, lock: Option<&WriteLock>) -> Result<()> {
        let layout = self.layout();
        let mut seen = std::collections::HashSet::new();
        let mut rows: BTreeMap<String, SegmentRow> = inner
            .ledger
            .segments()?
            .into_iter()
            .map(|r| (r.rel.clone(), r))
            .collect();
        // Taken on the first mismatch: a mismatch seen without the lock may just be a writer
        // between its append and its ledger update, so it is re-checked under the lock.
        let mut held: Option<WriteLock> = None;
        // A directory's change stamp moves whenever an entry is added, removed or renamed in
        // it. A directory whose stamp is the one recorded after its last full listing holds
        // the segments the ledger has rows for, so only those files are checked: one stat per
        // file instead of opening and reading every session directory. A stamp is recorded
        // only once it is [`SETTLED_NS`] old, since two changes within one tick of the file
        // system's clock can leave the same stamp.
        let stamps = inner.ledger.session_dir_stamps()?;
        // The file system's clock, not the store's (which tests may set).
        let settled = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64)
            - SETTLED_NS;
        let mut new_stamps: Vec<(String, i64)> = Vec::new();
        for (id, dir_rel) in store::list_session_dirs(layout)? {
            let dir_key = dir_rel.to_string_lossy().into_owned();
            let dir_stamp = store::stat(&layout.root.join(&dir_rel))?.map(|s| s.1);
            let known = match (dir_stamp, stamps.get(&dir_key)) {
                (Some(now), Some(then)) if now == *then => known_segments(layout, &rows, &dir_key),
                _ => None,
            };
            let listed = known.is_none();
            let files = match known {
                Some(files) => files,
                None => store::list_segments(layout, &dir_rel)?,
            };
            // Whether every segment listed ended up with a current row (an unreadable one is
            // retried by every scan until it can be read).
            let mut complete = true;
            for f in files {
                let rel = f.rel.to_string_lossy().into_owned();
                seen.insert(rel.clone());
                let fresh = |r: Option<&SegmentRow>, len: u64, m: i64| {
                    r.is_some_and(|r| r.len == len as i64 && r.mtime_ns == m)
                };
                if fresh(rows.get(&rel), f.len, f.mtime_ns) {
                    continue;
                }
                let read_only = self.read_only().is_some();
                if lock.is_none() && held.is_none() && !read_only {
                    held = Some(self.lock_and_recover()?);
                }
                let path = layout.root.join(&f.rel);
                let Some(stat) = store::stat(&path)? else {
                    complete = false;
                    continue;
                };
                // A row gone meanwhile (another process saw the file missing): new to it now.
                match inner.ledger.segment(&rel)? {
                    Some(r) if fresh(Some(&r), stat.0, stat.1) => {
                        rows.insert(rel.clone(), r);
                        continue;
                    }
                    Some(r) => rows.insert(rel.clone(), r),
                    None => rows.remove(&rel),
                };
                // A segment that cannot be read (no permission, too large) is broken on its
                // own: verify-store reports it; every other segment is still refreshed.
                let Some((seg, stat)) = read_repaired(layout, &path, stat, read_only)? else {
                    complete = false;
                    continue;
                };
                // Stamps written elsewhere (a hand edit, another device) move this clock on, so
                // the next chunk sorts after them.
                if let Some(max) = seg.chunks.iter().map(|c| c.hlc.as_str()).max() {
                    self.observe(inner, max)?;
                }
                let row = segment_row(&rel, &id, &f.replica, stat, &seg);
                if rows
                    .remove(&rel)
                    .is_some_and(|old| only_touched(&old, &row))
                {
                    inner.ledger.put_segment(&row)?;
                    continue;
                }
                let keys = source_keys(&seg);
                inner.ledger.atomically(|l| {
                    l.put_segment(&row)?;
                    l.replace_source_keys(&rel, &keys)?;
                    // New to the ledger, changed behind memdir's back, or written by a process
                    // that crashed before recording it: the index re-reads the whole segment.
                    l.record_change(ChangeKind::Segment, &rel)?;
                    Ok(())
                })?;
            }
            if let Some(stamp) = dir_stamp
                && listed
                && complete
                && stamp < settled
            {
                new_stamps.push((dir_key, stamp));
            }
        }
        if !new_stamps.is_empty() {
            inner.ledger.put_session_dir_stamps(&new_stamps)?;
        }
        for rel in rows.keys() {
            if !seen.contains(rel) {
                inner.ledger.atomically(|l| {
                    l.remove_segment(rel)?;
                    l.record_change(ChangeKind::Segment, rel)?;
                    Ok(())
                })?;
            }
        }
        Ok(())
    }

    /// Ingests chunks as one transaction: every chunk is durable when this returns, or none is.
    pub fn ingest(&self, chunks: &[NewChunk]) -> Result<IngestedBatch> {
        check_batch_len(chunks)?;
        // Redaction comes first: what is validated, stored and indexed is the redacted text.
        let (chunks, redacted) = self.redact_chunks(chunks);
        let chunks: &[NewChunk] = &chunks;
        let mut prepared = prepare_batch(chunks)?;
        self.resolve_corrections(chunks, &mut prepared)?;
        self.with_write(|tx| {
            let layout = self.layout();
            let replica = self.replica(tx.lock)?;
            let mut plan = self.plan_batch(tx.inner, &replica, chunks, &prepared)?;
            let skipped = std::mem::take(&mut plan.skipped);
            if plan.out.is_empty() {
                // Every chunk was already there: nothing is written.
                return Ok(IngestedBatch {
                    ok: true,
                    count: 0,
                    chunks: Vec::new(),
                    skipped: skipped.len(),
                    skipped_chunks: skipped,
                    redacted,
                });
            }
            let appends = take_appends(&mut plan);
            let txid = format!(
                "{}_{}",
                plan.last_hlc.expect("invariant: a batch is not empty"),
                replica
            );
            segment::append(
                &layout.root,
                &layout.staging(),
                &txid,
                &appends,
                plan.out.len() > 1,
            )?;
            memdir_store::failpoint::hit("ledger.before_update");
            let positions = self.batch_positions(&plan)?;
            let at = clock::rfc3339(clock::now_ms());
            self.record_durable(tx.inner, |l| {
                for k in &plan.order {
                    let p = &plan.state[k];
                    let mut row = p.row.clone();
                    let path = layout.root.join(&p.append.rel);
                    let (len, m) = store::stat(&path)?.unwrap_or((0, 0));
                    if row.len != len as i64 {
                        row.sig.clear();
                    }
                    row.len = len as i64;
                    row.mtime_ns = m;
                    l.put_segment(&row)?;
                    if let Some(keys) = plan.new_keys.get(k) {
                        l.add_source_keys(k, keys)?;
                    }
                    if plan.resync.contains(k) {
                        l.record_change(ChangeKind::Segment, k)?;
                    } else {
                        let change = format!("{k}\n{}", p.append.len_before);
                        l.record_change(ChangeKind::Append, &change)?;
                    }
                }
                l.observe_hlc(&plan.clock_state.to_string())?;
                l.record_txn(
                    &txid,
                    "ingest",
                    &format!("chunks:{}", plan.out.len()),
                    &self.actor(),
                    &at,
                )?;
                Ok(())
            });
            let rows: Vec<Ingested> = plan
                .out
                .into_iter()
                .zip(&plan.single_positions)
                .map(|(r, single)| Ingested {
                    position: positions.get(&r.chunk_id()).copied().unwrap_or(*single),
                    chunk_id: r.chunk_id(),
                    session_id: r.session_id,
                    hlc: r.hlc,
                    ts: r.ts,
                    ok: true,
                    skipped: false,
                    redacted: BTreeMap::new(),
                })
                .collect();
            Ok(IngestedBatch {
                ok: true,
                count: rows.len(),
                chunks: rows,
                skipped: skipped.len(),
                skipped_chunks: skipped,
                redacted,
            })
        })
    }

    /// Plans a batch under the write lock, writing nothing yet: skips the chunks whose
    /// idempotency key their session (or the batch) holds already, stamps the others and
    /// lays out their lines per segment.
    fn plan_batch<'c>(
        &self,
        inner: &Inner,
        replica: &str,
        chunks: &'c [NewChunk],
        prepared: &'c [Prepared],
    ) -> Result<Plan<'c>> {
        let mut plan = Plan {
            order: Vec::new(),
            state: BTreeMap::new(),
            resync: std::collections::BTreeSet::new(),
            out: Vec::with_capacity(chunks.len()),
            single_positions: Vec::with_capacity(chunks.len()),
            last_hlc: None,
            clock_state: self.last_hlc(inner)?,
            skipped: Vec::new(),
            batch_keys: std::collections::HashMap::new(),
            new_keys: BTreeMap::new(),
        };
        // The ledger's rows (and keys) of the sessions written to must match their files.
        let mut refreshed = std::collections::BTreeSet::new();
        for p in prepared {
            if refreshed.insert(p.id.as_str()) {
                self.refresh_session(inner, &p.id)?;
            }
        }
        for (index, (c, p)) in chunks.iter().zip(prepared).enumerate() {
            let id = &p.id;
            let source_id = p.key.as_deref();
            if let Some(k) = source_id {
                let held = match plan.batch_keys.get(&(id.as_str(), k)) {
                    Some(chunk_id) => Some(chunk_id.clone()),
                    None => inner.ledger.source_key(id.as_str(), k)?,
                };
                if let Some(chunk_id) = held {
                    plan.skipped.push(SkippedChunk {
                        index,
                        session_id: id.to_string(),
                        source_id: k.to_string(),
                        chunk_id,
                    });
                    continue;
                }
            }
            let rel = Layout::segment_rel(id, replica);
            let key = rel.to_string_lossy().into_owned();
            if !plan.state.contains_key(&key) {
                let (pending, stale) = self.open_segment(inner, id, replica, rel, &key)?;
                if stale {
                    plan.resync.insert(key.clone());
                }
                plan.state.insert(key.clone(), pending);
                plan.order.push(key.clone());
            }
            let pending = plan.state.get_mut(&key).expect("invariant: inserted above");
            let now = clock::now_ms();
            let hlc = next_stamp(&mut plan.clock_state, &mut pending.row, now);
            // The record carries no copy of the content: the line is written from the
            // request's text directly.
            let rec = ChunkRecord {
                session_id: id.to_string(),
                replica: replica.to_string(),
                seq: pending.next_seq,
                hlc: hlc.to_string(),
                ts: clock::rfc3339(p.ts.unwrap_or(now)),
                project: c.project.clone().unwrap_or_default(),
                metadata: p.meta.clone(),
                content: String::new(),
            };
            if let Some(k) = source_id {
                plan.batch_keys.insert((id.as_str(), k), rec.chunk_id());
                plan.new_keys.entry(key).or_default().push(SourceKey {
                    session_id: rec.session_id.clone(),
                    source_id: k.to_string(),
                    chunk_id: rec.chunk_id(),
                });
            }
            plan.single_positions.push(pending.row.chunks as u64);
            pending.add(&rec, &c.content);
            plan.last_hlc = Some(hlc);
            plan.out.push(rec);
        }
        Ok(plan)
    }

    /// A segment of session `id` that a batch is about to append to (`rel`, its ledger key
    /// `key`), with its row: the ledger's while that still matches the file, otherwise read
    /// from the file (a torn tail repaired first), which the returned flag reports.
    fn open_segment(
        &self,
        inner: &Inner,
        id: &SessionId,
        replica: &str,
        rel: std::path::PathBuf,
        key: &str,
    ) -> Result<(Pending, bool)> {
        let layout = self.layout();
        let path = layout.root.join(&rel);
        let stat = store::stat(&path)?;
        let known = inner.ledger.segment(key)?;
        let cached = known
            .as_ref()
            .filter(|r| stat.is_some_and(|(len, m)| r.len == len as i64 && r.mtime_ns == m))
            .cloned();
        let mut stale = false;
        let row = match (cached, stat) {
            (Some(r), _) => r,
            (None, None) => segment_row(
                key,
                id.as_str(),
                replica,
                (0, 0),
                &segment::Segment {
                    sig: segment::EMPTY_SIG.to_string(),
                    ..segment::Segment::default()
                },
            ),
            (None, Some(_)) => {
                let seg = segment::read_signed(&path)?;
                let seg = if segment::repair_tail(&layout.root, &path, &seg)? {
                    segment::read_signed(&path)?
                } else {
                    seg
                };
                let st = store::stat(&path)?.unwrap_or((0, 0));
                if let Some(max) = seg.chunks.iter().map(|c| c.hlc.as_str()).max() {
                    self.observe(inner, max)?;
                }
                let row = segment_row(key, id.as_str(), replica, st, &seg);
                stale = !known.as_ref().is_some_and(|old| only_touched(old, &row));
                row
            }
        };
        let len_before = store::stat(&path)?.map(|s| s.0).unwrap_or(0);
        let pending = Pending {
            append: SegmentAppend {
                rel,
                lines: Vec::new(),
                len_before,
            },
            next_seq: row.next_seq as u64,
            row,
        };
        Ok((pending, stale))
    }

    /// The positions of a batch's chunks in the sessions that hold more than one segment (the
    /// rank over all of them), by chunk id; elsewhere a chunk's position is its seq.
    fn batch_positions(&self, plan: &Plan<'_>) -> Result<BTreeMap<String, u64>> {
        let mut positions: BTreeMap<String, u64> = BTreeMap::new();
        for k in &plan.order {
            let dir = plan.state[k]
                .append
                .rel
                .parent()
                .expect("invariant: segments live in a session directory");
            if store::list_segments(self.layout(), dir)?.len() > 1 {
                for pc in self.session_chunks_at(dir)? {
                    positions.insert(pc.chunk.chunk_id(), pc.position);
                }
            }
        }
        Ok(positions)
    }

    /// Ingests one chunk; the result has the compatibility shape `{session_id, position, ok}`.
    /// A chunk whose `source_id` is already in its session is not saved again: the result
    /// names the chunk that holds the key, with `skipped: true`.
    pub fn ingest_one(&self, chunk: NewChunk) -> Result<Ingested> {
        let v = self.ingest(std::slice::from_ref(&chunk))?;
        let redacted = v.redacted;
        if let Some(s) = v.skipped_chunks.into_iter().next() {
            let held = self
                .session_chunks(&s.session_id)?
                .into_iter()
                .find(|pc| pc.chunk.chunk_id() == s.chunk_id)
                .ok_or_else(|| {
                    Error::internal("invariant: a skipped chunk's key names a chunk on disk")
                })?;
            return Ok(Ingested {
                session_id: s.session_id,
                position: held.position,
                chunk_id: s.chunk_id,
                hlc: held.chunk.hlc,
                ts: held.chunk.ts,
                ok: true,
                skipped: true,
                redacted,
            });
        }
        v.chunks
            .into_iter()
            .next()
            .map(|c| Ingested { redacted, ..c })
            .ok_or_else(|| Error::internal("invariant: a one-chunk ingest returns one chunk"))
    }

    /// Ingests what an ingest request carries: one chunk, or a batch (`chunks`, nothing else).
    pub fn ingest_request(&self, req: IngestRequest) -> Result<IngestResponse> {
        match req.chunks {
            Some(chunks) => {
                if req.session_id.is_some()
                    || req.content.is_some()
                    || req.project.is_some()
                    || req.metadata.is_some()
                    || req.ts.is_some()
                    || req.source_id.is_some()
                    || req.supersedes.is_some()
                {
                    return Err(Error::invalid(
                        "chunks",
                        "a batch carries only chunks: put session_id, content, project, metadata, ts, source_id and supersedes in each chunk",
                    ));
                }
                Ok(IngestResponse::Batch(self.ingest(&chunks)?))
            }
            None => {
                let session_id = req.session_id.ok_or_else(|| {
                    Error::invalid(
                        "session_id",
                        "session_id is required (or a batch in chunks)",
                    )
                })?;
                let content = req
                    .content
                    .ok_or_else(|| Error::invalid("content", "content is required"))?;
                Ok(IngestResponse::One(self.ingest_one(NewChunk {
                    session_id,
                    content,
                    project: req.project,
                    metadata: req.metadata,
                    ts: req.ts,
                    source_id: req.source_id,
                    supersedes: req.supersedes,
                })?))
            }
        }
    }

    /// All chunks of a session directory, ordered and numbered.
    pub(crate) fn session_chunks_at(
        &self,
        dir_rel: &std::path::Path,
    ) -> Result<Vec<PositionedChunk>> {
        let mut all = Vec::new();
        for f in store::list_segments(self.layout(), dir_rel)? {
            all.extend(segment::read(&self.layout().root.join(&f.rel))?.chunks);
        }
        Ok(order_chunks(all))
    }

    /// All chunks of a session, ordered and numbered; empty when the session does not exist.
    pub fn session_chunks(&self, session_id: &str) -> Result<Vec<PositionedChunk>> {
        let id = SessionId::new(session_id)?;
        self.session_chunks_at(&Layout::session_rel(&id))
    }

    /// A page of one session's chunks.
    pub fn fetch(&self, req: &FetchRequest) -> Result<FetchResponse> {
        let (session_id, position, limit) = (req.session_id.as_str(), req.position, req.limit);
        check_limit("limit", limit)?;
        memdir_index::budget::check(req.max_tokens)?;
        let at = crate::service::as_of_ms(req.as_of.as_deref())?;
        let mut chunks = self.session_chunks(session_id)?;
        if let Some(t) = at {
            // Positions follow the clock: what the session held at `t` is a prefix of it.
            chunks.retain(|c| clock_ms(&c.chunk.hlc) <= t);
        }
        if chunks.is_empty() && at.is_some() {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!(
                    "session {session_id:?} held nothing at {}",
                    clock::rfc3339(at.unwrap_or_default())
                ),
            )
            .field("as_of")
            .hint("{op:overview} lists sessions"));
        }
        if chunks.is_empty() {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("session {session_id:?} does not exist"),
            )
            .detail("session_id", Value::from(session_id))
            .hint("{op:overview} lists sessions; {op:search} finds chunks across sessions"));
        }
        let total = chunks.len() as u64;
        let page: Vec<FetchedChunk> = chunks
            .iter()
            .skip(position as usize)
            .take(limit)
            .map(PositionedChunk::to_fetched)
            .collect();
        let mut page = page;
        let places: Vec<(String, u64)> = page
            .iter()
            .map(|c| (session_id.to_string(), c.position))
            .collect();
        let mut by = self.indexing().corrections(&places);
        if let Some(t) = at {
            self.corrections_by(&mut by, t)?;
        }
        for c in &mut page {
            c.superseded_by = by.remove(&(session_id.to_string(), c.position));
        }
        let end = position + page.len() as u64;
        let mut resp = FetchResponse {
            session_id: session_id.to_string(),
            total,
            position,
            next_position: (end < total).then_some(end),
            chunks: page,
            uri: memdir_api::uri::session(session_id),
            omitted: None,
        };
        if let Some(max) = req.max_tokens {
            memdir_index::budget::fit_fetch(&mut resp, max);
        }
        Ok(resp)
    }

    /// The session catalog: sessions active within `days` (or all), newest first.
    pub fn overview(&self, req: &OverviewRequest) -> Result<OverviewResponse> {
        check_limit("limit", req.limit)?;
        if req.days > 36_500 {
            let d = req.days;
            return Err(Error::invalid(
                "days",
                format!("days must be between 0 (all) and 36500; got {d}"),
            ));
        }
        let mut guard = self.inner()?;
        let Some(inner) = guard.as_mut() else {
            return Ok(OverviewResponse {
                sessions: Vec::new(),
                total: 0,
                next_offset: None,
            });
        };
        self.sync_sessions(inner, None)?;
        let mut by_id: BTreeMap<String, Vec<SegmentRow>> = BTreeMap::new();
        for r in inner.ledger.segments()? {
            if r.chunks > 0 {
                by_id.entry(r.session_id.clone()).or_default().push(r);
            }
        }
        drop(guard);
        let at = crate::service::as_of_ms(req.as_of.as_deref())?;
        let now = at.unwrap_or_else(clock::now_ms);
        let cutoff = (req.days > 0).then(|| now - req.days as i64 * 86_400_000);
        let mut sessions: Vec<SessionSummary> = Vec::new();
        for (id, segs) in by_id {
            let start = segs
                .iter()
                .map(|s| s.first_ts.as_str())
                .min()
                .unwrap_or("")
                .to_string();
            let last = segs
                .iter()
                .map(|s| s.last_ts.as_str())
                .max()
                .unwrap_or("")
                .to_string();
            let first_seg = segs
                .iter()
                .min_by(|a, b| a.first_ts.cmp(&b.first_ts))
                .expect("invariant: grouped rows are not empty");
            let project = segs
                .iter()
                .map(|s| s.project.as_str())
                .find(|p| !p.is_empty())
                .unwrap_or("")
                .to_string();
            let mut message_count = segs.iter().map(|s| s.chunks).sum::<i64>();
            let (mut start, mut last) = (start, last);
            if let Some(t) = at {
                // As of a time: the session's chunks saved by then, read from its files.
                let then: Vec<PositionedChunk> = self
                    .session_chunks(&id)?
                    .into_iter()
                    .filter(|c| clock_ms(&c.chunk.hlc) <= t)
                    .collect();
                let Some(first) = then.first() else {
                    continue;
                };
                message_count = then.len() as i64;
                start = first.chunk.ts.clone();
                last = then
                    .iter()
                    .map(|c| c.chunk.ts.as_str())
                    .max()
                    .unwrap_or("")
                    .to_string();
            }
            if let Some(cut) = cutoff
                && clock::parse_time(&last).is_none_or(|t| t < cut)
            {
                continue;
            }
            if let Some(p) = &req.project
                && !p.is_empty()
                && &project != p
            {
                continue;
            }
            sessions.push(SessionSummary {
                title: first_seg.title.clone(),
                project,
                message_count,
                start_time: start,
                last_active: last,
                id,
            });
        }
        sessions.sort_by(|a, b| b.last_active.cmp(&a.last_active).then(a.id.cmp(&b.id)));
        let total = sessions.len();
        let page: Vec<SessionSummary> = sessions
            .into_iter()
            .skip(req.offset)
            .take(req.limit)
            .collect();
        let end = req.offset + page.len();
        Ok(OverviewResponse {
            sessions: page,
            total,
            next_offset: (end < total).then_some(end),
        })
    }
}

/// Reads the segment at `path` (whose size and stamp were `stat`), repairing a torn tail
/// unless the store is served read-only; with its size and stamp after the repair. `None`
/// when it cannot be read or repaired.
fn read_repaired(
    layout: &Layout,
    path: &std::path::Path,
    stat: (u64, i64),
    read_only: bool,
) -> Result<Option<(segment::Segment, (u64, i64))>> {
    let Ok(mut seg) = segment::read_signed(path) else {
        return Ok(None);
    };
    let mut stat = stat;
    if seg.tail_len > 0 && !read_only {
        // Under the lock and after recovery: the tail may belong to a batch whose
        // intent has just cut it back.
        match segment::repair_tail(&layout.root, path, &seg) {
            Ok(true) => match segment::read_signed(path) {
                Ok(s) => seg = s,
                Err(_) => return Ok(None),
            },
            Ok(false) => {}
            Err(_) => return Ok(None),
        }
        stat = store::stat(path)?.unwrap_or((0, 0));
    }
    Ok(Some((seg, stat)))
}

/// How old a directory's change stamp must be before a scan trusts it (nanoseconds).
const SETTLED_NS: i64 = 2_000_000_000;

/// The segments of the session directory `dir` (relative) as the ledger's rows name them,
/// each with its current size and stamp; `None` when one of them is no longer a regular file,
/// or when the ledger has no row there at all (the directory is then listed).
fn known_segments(
    layout: &Layout,
    rows: &BTreeMap<String, SegmentRow>,
    dir: &str,
) -> Option<Vec<store::SegmentFile>> {
    let lo = format!("{dir}/");
    let hi = format!("{dir}0");
    let mut known = rows.range(lo..hi).peekable();
    known.peek()?;
    known
        .map(|(rel, row)| {
            let meta = std::fs::symlink_metadata(layout.root.join(rel)).ok()?;
            meta.is_file().then(|| store::SegmentFile {
                rel: std::path::PathBuf::from(rel),
                replica: row.replica.clone(),
                len: meta.len(),
                mtime_ns: store::mtime_ns(&meta),
            })
        })
        .collect()
}
