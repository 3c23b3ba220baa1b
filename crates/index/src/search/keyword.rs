//! The keyword engines: BM25 (a pool of the filtered query, ranked session-aware, then the
//! windows chosen) and exact (candidates by the phrase of the query's words, each verified
//! byte for byte on the stored text), and the BM25 list a hybrid search fuses.

use tantivy::query::Query;
use tantivy::{DocAddress, Searcher};

use super::document::{doc, get_str, get_u64, places_of};
use super::query::{
    analyze, bm25_text_query, filter_clauses, phrase_query, query_words, top, with_filters,
};
use super::rank::{Candidate, POOL, Ranked, rank, short_turn_factor};
use super::supersede::superseded;
use super::window::choose;
use super::{Hit, Request, View, sort_hits};
use memdir_api::error::{Error, Result};

/// The BM25 query of `words` over chunks, the previous turn weighted in with every word of
/// the query (`asked`: a question word there marks a turn that answers such a question),
/// under the filters.
fn bm25_chunk_query(
    idx: &View<'_>,
    req: &Request,
    words: &[(usize, String)],
    asked: &[(usize, String)],
) -> Box<dyn Query> {
    let f = &idx.chunk_fields;
    with_filters(
        bm25_text_query(
            f.content,
            Some((f.context, req.context_weight, asked)),
            words,
            req.all_words,
        ),
        filter_clauses(&req.filters, Some(f), None, f.ts),
    )
}

/// The BM25 query of `words` over category documents, under the filters.
fn bm25_category_query(idx: &View<'_>, req: &Request, words: &[(usize, String)]) -> Box<dyn Query> {
    let f = &idx.category_fields;
    with_filters(
        bm25_text_query(f.content, None, words, req.all_words),
        filter_clauses(&req.filters, None, Some(f.category), f.ts),
    )
}

/// The best `depth` BM25 hits of each index under the filters, without reading documents:
/// `(is_category, score, address)`.
pub(super) fn bm25_pool(
    idx: &View<'_>,
    text: &str,
    req: &Request,
    depth: usize,
) -> Result<Vec<(bool, f32, DocAddress)>> {
    let words = query_words(idx, text, req.all_words)?;
    let asked = analyze(idx, text)?;
    let mut out = Vec::new();
    if words.is_empty() {
        return Ok(out);
    }
    if req.filters.wants_chunks() {
        let s = &idx.cs;
        let query = bm25_chunk_query(idx, req, &words, &asked);
        for (score, _, addr) in top(s, query.as_ref(), depth, 0)? {
            out.push((false, score, addr));
        }
    }
    if req.filters.wants_categories() {
        let s = &idx.gs;
        let query = bm25_category_query(idx, req, &words);
        for (score, _, addr) in top(s, query.as_ref(), depth, 0)? {
            out.push((true, score, addr));
        }
    }
    Ok(out)
}

pub(super) fn bm25(
    idx: &View<'_>,
    text: &str,
    req: &Request,
    folded: &mut usize,
) -> Result<Vec<Hit>> {
    let words = query_words(idx, text, req.all_words)?;
    let asked = analyze(idx, text)?;
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let mut hits = Vec::new();
    if req.filters.wants_chunks() {
        let s = &idx.cs;
        let query = bm25_chunk_query(idx, req, &words, &asked);
        let pool = top(s, query.as_ref(), POOL.max(req.limit), 0)?;
        let addrs: Vec<DocAddress> = pool.iter().map(|(_, _, a)| *a).collect();
        let mut cands: Vec<Candidate> = pool
            .into_iter()
            .zip(places_of(s, &addrs)?)
            .map(|((score, order, addr), (session, position))| Candidate {
                session,
                position,
                bm25: score,
                order,
                addr: Some(addr),
                mix: None,
                period: 0.0,
                short: None,
            })
            .collect();
        shorten(s, idx.chunk_fields.content, &mut cands)?;
        super::period::lift(s, &mut cands, &super::period::named(text));
        let ranked = rank_corrected_last(idx, cands, req, |c| rank(c, req))?;
        hits.extend(choose(idx, s, ranked, req, folded)?);
    }
    if req.filters.wants_categories() {
        let s = &idx.gs;
        let query = bm25_category_query(idx, req, &words);
        for (score, order, addr) in top(s, query.as_ref(), req.limit, 0)? {
            hits.push(Hit::Category {
                addr,
                score,
                order,
                parts: None,
            });
        }
    }
    sort_hits(&mut hits);
    hits.truncate(req.limit);
    Ok(hits)
}

/// Short turns count for less: each candidate's BM25 times its [`short_turn_factor`], read
/// from the index's count of the words of its text (`field`). Before the period lift, which is
/// a share of this score.
fn shorten(s: &Searcher, field: tantivy::schema::Field, cands: &mut [Candidate]) -> Result<()> {
    for c in cands.iter_mut() {
        let Some(addr) = c.addr else { continue };
        let words = s
            .segment_reader(addr.segment_ord)
            .get_fieldnorms_reader(field)
            .map_err(|e| Error::internal(format!("field norms: {e}")))?
            .fieldnorm(addr.doc_id);
        if let Some(f) = short_turn_factor(words) {
            c.bm25 *= f;
            c.short = Some(f);
        }
    }
    Ok(())
}

/// The pool ranked with the chunks a later chunk corrects set apart (unless the request shows
/// them at their own rank): the others are ranked among themselves and come first, so a
/// correction reaches the limit before what it corrects, and a corrected turn lends no score
/// to its neighbours; the corrected follow, ranked among themselves.
pub(super) fn rank_corrected_last(
    idx: &View<'_>,
    cands: Vec<Candidate>,
    req: &Request,
    rank_of: impl Fn(Vec<Candidate>) -> Vec<Ranked>,
) -> Result<Vec<Ranked>> {
    if req.include_superseded {
        return Ok(rank_of(cands));
    }
    let sup = superseded(
        idx,
        cands
            .iter()
            .map(|c| (c.session.clone(), c.position, c.addr)),
    )?;
    if sup.is_empty() {
        return Ok(rank_of(cands));
    }
    // A turn matched only through the previous turn's text (the `context` field), when that
    // turn is corrected, was lifted by the stale fact: it goes with the corrected.
    let words = query_words(idx, &req.query, req.all_words)?;
    let terms: Vec<tantivy::Term> = words
        .iter()
        .map(|(_, w)| tantivy::Term::from_field_text(idx.chunk_fields.content, w))
        .collect();
    let mut stale = std::collections::HashSet::new();
    for c in &cands {
        let after_corrected =
            c.position > 0 && sup.contains_key(&(c.session.clone(), c.position - 1));
        if after_corrected
            && let Some(a) = c.addr
            && !super::window::holds_a_term(&idx.cs, idx.chunk_fields.content, &terms, a)?
        {
            stale.insert((c.session.clone(), c.position));
        }
    }
    let (live, corrected): (Vec<Candidate>, Vec<Candidate>) = cands.into_iter().partition(|c| {
        let place = (c.session.clone(), c.position);
        !sup.contains_key(&place) && !stale.contains(&place)
    });
    let mut ranked = rank_of(live);
    let placed: std::collections::HashSet<(String, u64)> = ranked
        .iter()
        .map(|r| (r.session.clone(), r.position))
        .collect();
    ranked.extend(
        rank_of(corrected)
            .into_iter()
            .filter(|r| !placed.contains(&(r.session.clone(), r.position)))
            .map(|r| Ranked { demoted: true, ..r }),
    );
    Ok(ranked)
}

/// Exact: the index narrows candidates by the phrase of the query's words; the stored text
/// verifies the literal, byte for byte. No false positives.
pub(super) fn exact(
    idx: &View<'_>,
    literal: &str,
    req: &Request,
    notes: &mut Vec<String>,
) -> Result<Vec<Hit>> {
    let words = analyze(idx, literal)?;
    if words.is_empty() || literal.is_empty() {
        notes.push("the query has no indexable words for exact search".to_string());
        return Ok(Vec::new());
    }
    const PAGE: usize = 256;
    const MAX_CANDIDATES: usize = 20_000;
    let mut hits = Vec::new();
    if req.filters.wants_chunks() {
        let f = &idx.chunk_fields;
        let s = &idx.cs;
        let q = with_filters(
            phrase_query(f.content, &words),
            filter_clauses(&req.filters, Some(f), None, f.ts),
        );
        let mut offset = 0;
        let mut found = 0;
        loop {
            let page = top(s, q.as_ref(), PAGE, offset)?;
            for (score, order, addr) in &page {
                let d = doc(s, *addr)?;
                if get_str(&d, f.content).contains(literal) {
                    hits.push(Hit::Chunk {
                        addr: Some(*addr),
                        session: get_str(&d, f.session),
                        position: get_u64(&d, f.position),
                        score: *score,
                        order: *order,
                        parts: None,
                        demoted: false,
                    });
                    found += 1;
                }
            }
            offset += page.len();
            if page.len() < PAGE || found >= req.limit {
                break;
            }
            if offset >= MAX_CANDIDATES {
                notes.push(format!(
                    "exact search verified the best {MAX_CANDIDATES} candidates only"
                ));
                break;
            }
        }
    }
    if req.filters.wants_categories() {
        let f = &idx.category_fields;
        let s = &idx.gs;
        let q = with_filters(
            phrase_query(f.content, &words),
            filter_clauses(&req.filters, None, Some(f.category), f.ts),
        );
        for (score, order, addr) in top(s, q.as_ref(), MAX_CANDIDATES, 0)? {
            let d = doc(s, addr)?;
            if get_str(&d, f.text).contains(literal) {
                hits.push(Hit::Category {
                    addr,
                    score,
                    order,
                    parts: None,
                });
                if hits.len() >= req.limit * 2 {
                    break;
                }
            }
        }
    }
    sort_hits(&mut hits);
    hits.truncate(req.limit);
    Ok(hits)
}
