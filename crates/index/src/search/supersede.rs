//! Supersession: a chunk that corrects earlier ones names them (`supersedes` in its metadata:
//! their chunk URIs, `memdir://sessions/{session}/{position}`), and the index derives the link
//! from its files: every chunk's document carries the term `i:<its chunk id>`, and a live
//! correction the term `r:<place>` for the place (session and position) of each chunk it
//! corrects. A search marks a corrected candidate with the URIs of the chunks correcting it
//! (`superseded_by`) and, unless asked to show it at its own rank, ranks it below every
//! candidate that is not corrected. A forgotten correction is a tombstone without terms: what
//! it corrected stands again.
//!
//! Cost: one look at the term dictionary per segment when the store holds no correction;
//! otherwise one term lookup per candidate.

use std::collections::HashMap;

use tantivy::collector::DocSetCollector;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::IndexRecordOption;
use tantivy::{DocAddress, Searcher, Term};

use super::document::{chunk_at, doc, get_str, get_u64};
use super::{Filters, Hit, View};
use crate::index::{ChunkFields, place_key};
pub use crate::index::{SUPERSEDES_KEY, corrected_places};
use memdir_api::error::{Error, Result};

fn ix(e: impl std::fmt::Display) -> Error {
    Error::internal(format!("search: {e}"))
}

/// Corrected candidates: (session, position) to the URIs of the chunks correcting it.
pub type Superseded = HashMap<(String, u64), Vec<String>>;

/// The `key` term naming a chunk by its id (unique within its session).
pub fn id_term(f: &ChunkFields, chunk_id: &str) -> Term {
    Term::from_field_text(f.key, &format!("i:{chunk_id}"))
}

/// The `key` term a correction of the chunk at `position` of `session` carries.
pub fn corrects_term(f: &ChunkFields, session: &str, position: u64) -> Term {
    Term::from_field_text(f.key, &format!("r:{}", place_key(session, position)))
}

/// Whether any segment holds a correction term (a deleted document's may linger until a
/// merge: a false yes costs only the lookups that then find nothing).
fn any_correction(s: &Searcher, f: &ChunkFields) -> Result<bool> {
    for seg in s.segment_readers() {
        let inv = seg.inverted_index(f.key).map_err(ix)?;
        let mut stream = inv
            .terms()
            .range()
            .ge(b"r:")
            .lt(b"r;")
            .into_stream()
            .map_err(ix)?;
        if stream.advance() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The live documents holding `term`.
fn holders(s: &Searcher, term: Term) -> Result<Vec<DocAddress>> {
    let mut found: Vec<DocAddress> = s
        .search(
            &TermQuery::new(term, IndexRecordOption::Basic),
            &DocSetCollector,
        )
        .map_err(ix)?
        .into_iter()
        .collect();
    found.sort();
    Ok(found)
}

/// The URIs of the live chunks that correct the chunk at `position` of `session`, in order.
pub fn correcting(idx: &View<'_>, session: &str, position: u64) -> Result<Vec<String>> {
    let f = &idx.chunk_fields;
    let mut uris = Vec::new();
    // As of a time, only the corrections saved by then.
    for a in holders(&idx.cs, corrects_term(f, session, position))? {
        if !idx.saved(a) {
            continue;
        }
        let d = doc(&idx.cs, a)?;
        uris.push(memdir_api::uri::chunk(
            &get_str(&d, f.session),
            get_u64(&d, f.position),
        ));
    }
    uris.sort();
    uris.dedup();
    Ok(uris)
}

/// For each place, the URIs of the chunks correcting it (only corrected places appear).
pub fn correcting_all(idx: &View<'_>, places: &[(String, u64)]) -> Result<Superseded> {
    superseded(idx, places.iter().map(|(s, p)| (s.clone(), *p, None)))
}

/// The places of the live chunks with this chunk id, at most `most` of them (a chunk id is
/// unique within its session only: asking for two tells one from many).
pub fn places_of_id(idx: &View<'_>, chunk_id: &str, most: usize) -> Result<Vec<(String, u64)>> {
    let f = &idx.chunk_fields;
    let q = TermQuery::new(id_term(f, chunk_id), IndexRecordOption::Basic);
    places_of(idx, &q, most)
}

/// The place of the live chunk `chunk_id` of `session`, if there is one.
pub fn place_in_session(
    idx: &View<'_>,
    session: &str,
    chunk_id: &str,
) -> Result<Option<(String, u64)>> {
    let f = &idx.chunk_fields;
    let q = BooleanQuery::new(vec![
        (
            Occur::Must,
            Box::new(TermQuery::new(
                id_term(f, chunk_id),
                IndexRecordOption::Basic,
            )) as Box<dyn Query>,
        ),
        (
            Occur::Must,
            Box::new(TermQuery::new(
                crate::index::session_key(f, session),
                IndexRecordOption::Basic,
            )),
        ),
    ]);
    Ok(places_of(idx, &q, 1)?.into_iter().next())
}

/// The places of at most `most` live chunks matching `q`.
fn places_of(idx: &View<'_>, q: &dyn Query, most: usize) -> Result<Vec<(String, u64)>> {
    let f = &idx.chunk_fields;
    let mut out = Vec::new();
    for (_, a) in idx
        .cs
        .search(q, &TopDocs::with_limit(most.max(1)).order_by_score())
        .map_err(ix)?
    {
        let d = doc(&idx.cs, a)?;
        out.push((get_str(&d, f.session), get_u64(&d, f.position)));
    }
    out.sort();
    Ok(out)
}

/// Whether a live chunk sits at `position` of `session`.
pub fn place_exists(idx: &View<'_>, session: &str, position: u64) -> Result<bool> {
    Ok(chunk_at(idx, &idx.cs, session, position, &Filters::default())?.is_some())
}

/// Which of these candidates a live chunk corrects.
pub(super) fn superseded(
    idx: &View<'_>,
    places: impl Iterator<Item = (String, u64, Option<DocAddress>)>,
) -> Result<Superseded> {
    let mut out = Superseded::new();
    let s = &idx.cs;
    let f = &idx.chunk_fields;
    if !any_correction(s, f)? {
        return Ok(out);
    }
    for (session, position, _) in places {
        let by = correcting(idx, &session, position)?;
        if !by.is_empty() {
            out.insert((session, position), by);
        }
    }
    Ok(out)
}

/// Hits in their order with every corrected chunk moved below the others.
pub(super) fn demote_hits(hits: &mut Vec<Hit>, sup: &Superseded) {
    if sup.is_empty() {
        return;
    }
    let corrected = |h: &Hit| match h {
        Hit::Chunk {
            session, position, ..
        } => sup.contains_key(&(session.clone(), *position)),
        Hit::Category { .. } => false,
    };
    let (kept, moved): (Vec<Hit>, Vec<Hit>) = std::mem::take(hits)
        .into_iter()
        .partition(|h| !corrected(h));
    hits.extend(kept);
    hits.extend(moved);
}
