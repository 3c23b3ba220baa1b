//! Reading hits back from the index: stored fields of a document, the session and position
//! of many chunks at once from the fast columns, the tie-break key, and a chunk by its place.

use tantivy::schema::{Field, Value as _};
use tantivy::{DocAddress, Searcher, TantivyDocument};

use super::query::{filter_clauses, session_range, top, with_filters};
use super::{Filters, View};
use memdir_api::error::{Error, Result};

pub(super) fn doc(searcher: &Searcher, addr: DocAddress) -> Result<TantivyDocument> {
    searcher
        .doc(addr)
        .map_err(|e| Error::internal(format!("stored document: {e}")))
}

pub(super) fn get_str(d: &TantivyDocument, f: Field) -> String {
    d.get_first(f)
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_string()
}

pub(super) fn get_u64(d: &TantivyDocument, f: Field) -> u64 {
    d.get_first(f).and_then(|v| v.as_u64()).unwrap_or(0)
}

pub(super) fn get_i64(d: &TantivyDocument, f: Field) -> i64 {
    d.get_first(f).and_then(|v| v.as_i64()).unwrap_or(0)
}

/// When the chunk document at `addr` was saved (its `clock` column), if the index has it.
pub(super) fn clock_of(s: &Searcher, addr: DocAddress) -> Option<i64> {
    s.segment_reader(addr.segment_ord)
        .fast_fields()
        .i64("clock")
        .ok()?
        .first(addr.doc_id)
}

/// The session and position of each document, from the fast columns. Each column is opened
/// once per segment, and a segment's session names are decoded in one pass over its sorted
/// ordinals (decoding each name alone re-reads its dictionary block from the start).
pub(super) fn places_of(s: &Searcher, addrs: &[DocAddress]) -> Result<Vec<(String, u64)>> {
    let mut out: Vec<Option<(String, u64)>> = vec![None; addrs.len()];
    let mut by_segment: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
    for (i, a) in addrs.iter().enumerate() {
        by_segment.entry(a.segment_ord).or_default().push(i);
    }
    for (segment, members) in by_segment {
        let ff = s.segment_reader(segment).fast_fields();
        let (Ok(positions), Ok(Some(sessions))) = (ff.u64("position"), ff.str("session")) else {
            continue;
        };
        // (ordinal, position, slot) of each document with both columns.
        let mut wanted: Vec<(u64, u64, usize)> = members
            .iter()
            .filter_map(|&i| {
                let doc = addrs[i].doc_id;
                Some((sessions.term_ords(doc).next()?, positions.first(doc)?, i))
            })
            .collect();
        wanted.sort_unstable();
        let mut ords: Vec<u64> = wanted.iter().map(|w| w.0).collect();
        ords.dedup();
        let mut names = Vec::with_capacity(ords.len());
        let found = sessions
            .dictionary()
            .sorted_ords_to_term_cb(&ords, |b| {
                names.push(String::from_utf8_lossy(b).into_owned())
            })
            .map_err(|e| Error::internal(format!("session column: {e}")))?;
        if !found || names.len() != ords.len() {
            continue;
        }
        for (ord, position, slot) in wanted {
            let k = ords
                .binary_search(&ord)
                .expect("invariant: every ordinal was decoded");
            out[slot] = Some((names[k].clone(), position));
        }
    }
    out.into_iter()
        .zip(addrs)
        .map(|(place, &addr)| match place {
            Some(p) => Ok(p),
            None => {
                // An index without the fast columns (never after a rebuild): the stored fields.
                let d = doc(s, addr)?;
                Ok((
                    get_str(&d, idx_session_field(s)?),
                    get_u64(&d, idx_position_field(s)?),
                ))
            }
        })
        .collect()
}

fn idx_session_field(s: &Searcher) -> Result<Field> {
    s.schema()
        .get_field("session")
        .map_err(|e| Error::internal(format!("schema: {e}")))
}

fn idx_position_field(s: &Searcher) -> Result<Field> {
    s.schema()
        .get_field("position")
        .map_err(|e| Error::internal(format!("schema: {e}")))
}

/// A chunk's `ts` (milliseconds since the epoch) from its fast field.
pub(super) fn fast_ts(s: &Searcher, addr: DocAddress) -> Option<i64> {
    s.segment_reader(addr.segment_ord)
        .fast_fields()
        .i64("ts")
        .ok()
        .and_then(|col| col.first(addr.doc_id))
}

pub(super) fn fast_order(s: &Searcher, addr: DocAddress) -> u64 {
    s.segment_reader(addr.segment_ord)
        .fast_fields()
        .u64("order")
        .ok()
        .and_then(|col| col.first(addr.doc_id))
        .unwrap_or(u64::MAX)
}

pub(super) fn chunk_at(
    idx: &View<'_>,
    s: &Searcher,
    session: &str,
    position: u64,
    filters: &Filters,
) -> Result<Option<(DocAddress, TantivyDocument)>> {
    let f = &idx.chunk_fields;
    let q = with_filters(
        session_range(f, session, position, position),
        filter_clauses(filters, Some(f), None, f.ts),
    );
    match top(s, q.as_ref(), 1, 0)?.into_iter().next() {
        Some((_, _, addr)) => Ok(Some((addr, doc(s, addr)?))),
        None => Ok(None),
    }
}

/// The stored content of the chunk at `position` in `session`, if indexed.
pub fn stored_content_at(idx: &View<'_>, session: &str, position: u64) -> Result<Option<String>> {
    let s = &idx.cs;
    Ok(chunk_at(idx, s, session, position, &Filters::default())?
        .map(|(_, d)| get_str(&d, idx.chunk_fields.content)))
}
