//! Context windows: which windows an answer shows (a matching turn inside a window already
//! shown is not a hit of its own), and the turns around a hit, read by their place.

use tantivy::DocSet as _;
use tantivy::schema::IndexRecordOption;
use tantivy::{DocAddress, Searcher};

use super::document::{chunk_at, doc, get_str, get_u64};
use super::excerpt::{Terms, excerpt};
use super::rank::Ranked;
use super::{Hit, Request, View};
use memdir_api::ContextChunk;
use memdir_api::error::{Error, Result};

/// Characters of the excerpt of a context line, the same for every line of a window. 44-48 % of
/// the dev set's evidence turns are longer than 100 characters: cut there two or three turns
/// from the hit, as they once were, an answer showed them without the words that answer
/// (`bench/devset/README.md`). 200 costs about 30 tokens an answer.
pub const CONTEXT_CHARS: usize = 200;

/// Which windows to show: a matching turn inside the context window of a hit already chosen is
/// on screen there, so it is not a hit of its own (counted in `folded`), and the place goes to
/// a turn of another region. The choice follows the ranking, so a larger limit only shows more
/// of the same list.
pub(super) fn choose(
    idx: &View<'_>,
    s: &Searcher,
    ranked: Vec<Ranked>,
    req: &Request,
    folded: &mut usize,
) -> Result<Vec<Hit>> {
    let mut hits = Vec::new();
    let mut chosen: Vec<(String, u64)> = Vec::new();
    let mut inside: Vec<DocAddress> = Vec::new();
    for r in ranked {
        // Past the limit the rest of the ranking is read only for the matching turns the
        // windows shown already hold.
        let full = chosen.len() == req.limit;
        if full && req.context == 0 {
            break;
        }
        if req.context > 0
            && chosen
                .iter()
                .any(|(s, p)| *s == r.session && p.abs_diff(r.position) <= req.context as u64)
        {
            // Only a turn in the pool may be a matching turn: a place lifted by its
            // neighbours alone (which may not even exist) is not one.
            inside.extend(r.addr);
            continue;
        }
        if full {
            continue;
        }
        // A turn lifted only by its neighbours is a candidate the query did not reach: it
        // must exist and pass the filters.
        let addr = match r.addr {
            Some(a) => Some(a),
            None => match chunk_at(idx, s, &r.session, r.position, &req.filters)? {
                Some((a, _)) => Some(a),
                None => continue,
            },
        };
        chosen.push((r.session.clone(), r.position));
        hits.push(Hit::Chunk {
            addr,
            session: r.session,
            position: r.position,
            score: r.score,
            order: r.order,
            parts: Some(r.parts),
            demoted: r.demoted,
        });
    }
    // What the note calls a matching turn is one whose own text holds a word of the query: a
    // turn in the pool only for the words of the turn before it is not (a reader would see no
    // match in it). Asked of the postings of the text field: no stored document is read.
    if !inside.is_empty() {
        let words = super::query::query_words(idx, &req.query, req.all_words)?;
        let terms: Vec<tantivy::Term> = words
            .iter()
            .map(|(_, w)| tantivy::Term::from_field_text(idx.chunk_fields.content, w))
            .collect();
        for addr in inside {
            if holds_a_term(s, idx.chunk_fields.content, &terms, addr)? {
                *folded += 1;
            }
        }
    }
    Ok(hits)
}

/// Whether the document at `addr` holds one of `terms` in `field`.
pub(super) fn holds_a_term(
    s: &Searcher,
    field: tantivy::schema::Field,
    terms: &[tantivy::Term],
    addr: DocAddress,
) -> Result<bool> {
    let err = |e: tantivy::TantivyError| Error::internal(format!("window: {e}"));
    let inverted = s
        .segment_reader(addr.segment_ord)
        .inverted_index(field)
        .map_err(err)?;
    for t in terms {
        let postings = inverted
            .read_postings(t, IndexRecordOption::Basic)
            .map_err(|e| Error::internal(format!("window: {e}")))?;
        if let Some(mut p) = postings {
            // `seek` moves only forward: a list whose first document is past the one asked
            // for does not hold it.
            let at = if p.doc() < addr.doc_id {
                p.seek(addr.doc_id)
            } else {
                p.doc()
            };
            if at == addr.doc_id {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The live document at each position `lo..=hi` of `session` that the index holds, in
/// position order: direct lookups of the `place` key in each segment, with no query to weigh
/// or score (a window is not ranked).
fn docs_at(
    s: &Searcher,
    f: &crate::index::ChunkFields,
    session: &str,
    lo: u64,
    hi: u64,
) -> Result<Vec<DocAddress>> {
    fn err(e: impl std::fmt::Display) -> Error {
        Error::internal(format!("window: {e}"))
    }
    let mut out = Vec::new();
    let readers = s
        .segment_readers()
        .iter()
        .map(|r| Ok((r.inverted_index(f.key).map_err(err)?, r.alive_bitset())))
        .collect::<Result<Vec<_>>>()?;
    for p in lo..=hi {
        let t = crate::index::place_term(f, session, p);
        'segments: for (ord, (inverted, alive)) in readers.iter().enumerate() {
            let Some(mut postings) = inverted
                .read_postings(&t, IndexRecordOption::Basic)
                .map_err(err)?
            else {
                continue;
            };
            let mut doc = postings.doc();
            while doc != tantivy::TERMINATED {
                if alive.is_none_or(|a| a.is_alive(doc)) {
                    out.push(DocAddress::new(ord as u32, doc));
                    break 'segments;
                }
                doc = postings.advance();
            }
        }
    }
    Ok(out)
}

/// The context window of a chunk: up to `n` neighbours per side from its own session, the
/// chunk itself left out. With `cut`, each line is an excerpt of [`CONTEXT_CHARS`].
pub fn window(
    idx: &View<'_>,
    s: &Searcher,
    session: &str,
    position: u64,
    n: usize,
    cut: bool,
    terms: &mut Terms,
) -> Result<Vec<ContextChunk>> {
    let f = &idx.chunk_fields;
    let lo = position.saturating_sub(n as u64);
    let hi = position + n as u64;
    let max = cut.then_some(CONTEXT_CHARS);
    let mut rows: Vec<ContextChunk> = Vec::new();
    for addr in docs_at(s, f, session, lo, hi)? {
        if !idx.saved(addr) {
            continue;
        }
        let d = doc(s, addr)?;
        let p = get_u64(&d, f.position);
        if p == position {
            continue;
        }
        let (text, _) = excerpt(&get_str(&d, f.content), terms, max);
        rows.push(ContextChunk {
            position: p,
            content: text,
        });
    }
    rows.sort_by_key(|r| r.position);
    Ok(rows)
}
