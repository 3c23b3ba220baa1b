//! The rows of an answer: each hit shaped into a typed [`SearchHit`] with its excerpt, its
//! context window and, when asked, how its score was made.

use super::document::{doc, get_i64, get_str};
use super::excerpt::{Terms, excerpt};
use super::fusion::{DENSE_WEIGHT, FUSION_DEPTH};
use super::rank::ScoreParts;
use super::window::window;
use super::{Hit, Request, View};
use memdir_api::error::Result;
use memdir_api::{Explain, SearchHit};

/// The period's term of a formula, when a period the question names lifted the hit.
fn plus_period(p: &ScoreParts) -> &'static str {
    if p.period > 0.0 { " + period" } else { "" }
}

/// The short-turn factor of a formula, when the hit's text is a short turn.
fn times_short(p: &ScoreParts) -> &'static str {
    if p.short.is_some() { " × short" } else { "" }
}

/// How a score was made, for `explain`: in `engine`, from `parts` (exact hits have none).
fn explain(
    engine: &str,
    req: &Request,
    score: f32,
    parts: Option<&ScoreParts>,
    chunk: bool,
) -> Explain {
    let spreads = chunk && (req.session_share > 0.0 || req.neighbour_share > 0.0);
    let over = 1.0 + req.session_share;
    match (engine, parts) {
        ("hybrid", Some(p)) => {
            let (keyword, dense) = p.mix.unwrap_or_default();
            Explain {
                bm25: keyword,
                normalised: keyword,
                neighbour: p.neighbour,
                session: p.session,
                dense: Some(dense),
                fused: Some(p.bm25),
                period: (p.period > 0.0).then_some(p.period),
                short: None,
                formula: format!(
                    "fused = {DENSE_WEIGHT} × dense + {} × bm25, each min-max normalised over its \
                     top {FUSION_DEPTH}; score = {}",
                    1.0 - DENSE_WEIGHT,
                    if spreads {
                        format!("(fused{} + neighbour + session) / {over}", plus_period(p))
                    } else {
                        format!("fused{}", plus_period(p))
                    }
                ),
            }
        }
        ("semantic", _) => Explain {
            dense: Some(score),
            formula: "similarity by meaning (cosine of the embeddings)".into(),
            ..Explain::default()
        },
        (_, Some(p)) => Explain {
            bm25: p.bm25,
            normalised: p.normalised,
            neighbour: p.neighbour,
            session: p.session,
            period: (p.period > 0.0).then_some(p.period),
            short: p.short,
            formula: if spreads {
                format!(
                    "(bm25{}{} + neighbour + session) / {over}",
                    times_short(p),
                    plus_period(p)
                )
            } else {
                format!("bm25{}{}", times_short(p), plus_period(p))
            },
            ..Explain::default()
        },
        (_, None) => Explain {
            bm25: score,
            normalised: 1.0,
            formula: "exact: the phrase's BM25".into(),
            ..Explain::default()
        },
    }
}

pub(super) fn shape(
    idx: &View<'_>,
    hits: &[Hit],
    req: &Request,
    engine: &str,
    sup: &super::supersede::Superseded,
) -> Result<Vec<SearchHit>> {
    let (cs, gs) = (&idx.cs, &idx.gs);
    let mut out = Vec::with_capacity(hits.len());
    let mut terms = Terms::new(idx, &req.query)?;
    let best_category = hits
        .iter()
        .filter(|h| matches!(h, Hit::Category { .. }))
        .map(Hit::score)
        .fold(0f32, f32::max);
    let share = |x: f32, best: f32| if best > 0.0 { x / best } else { 0.0 };
    for h in hits {
        match h {
            Hit::Chunk {
                addr,
                session,
                position,
                score,
                parts,
                ..
            } => {
                let explain = req
                    .explain
                    .then(|| self::explain(engine, req, *score, parts.as_ref(), true));
                let f = &idx.chunk_fields;
                let d = match addr {
                    Some(a) => doc(cs, *a)?,
                    None => continue,
                };
                let (content, truncated) =
                    excerpt(&get_str(&d, f.content), &mut terms, req.max_chars);
                let context = if req.context > 0 {
                    let cut = req.max_chars.is_some();
                    window(idx, cs, session, *position, req.context, cut, &mut terms)?
                } else {
                    Vec::new()
                };
                out.push(SearchHit::Chunk {
                    uri: memdir_api::uri::chunk(session, *position),
                    session_id: session.clone(),
                    position: *position,
                    chunk_id: get_str(&d, f.chunk_id),
                    project: get_str(&d, f.project),
                    ts: memdir_store::clock::rfc3339(get_i64(&d, f.ts)),
                    content,
                    score: *score,
                    context,
                    truncated: truncated.then_some(true),
                    superseded_by: sup.get(&(session.clone(), *position)).cloned(),
                    reviewed_at: None,
                    explain,
                });
            }
            Hit::Category {
                addr, score, parts, ..
            } => {
                let f = &idx.category_fields;
                let d = doc(gs, *addr)?;
                let (text, truncated) = excerpt(&get_str(&d, f.text), &mut terms, req.max_chars);
                let category = get_str(&d, f.category);
                let explain = req.explain.then(|| match parts {
                    Some(p) => self::explain(engine, req, *score, Some(p), false),
                    None => Explain {
                        bm25: *score,
                        normalised: share(*score, best_category),
                        formula: "bm25".into(),
                        ..Explain::default()
                    },
                });
                if let Some(path) = category.strip_prefix('/') {
                    let (lines, heading) =
                        crate::index::parse_note_key_path(&get_str(&d, f.key_path));
                    out.push(SearchHit::Note {
                        uri: memdir_api::uri::note(path),
                        path: path.to_string(),
                        heading,
                        lines,
                        content: text,
                        score: *score,
                        hash: get_str(&d, f.hash),
                        updated_at: memdir_store::clock::rfc3339(get_i64(&d, f.ts)),
                        updated_by: get_str(&d, f.updated_by),
                        truncated: truncated.then_some(true),
                        explain,
                    });
                    continue;
                }
                out.push(SearchHit::Category {
                    uri: memdir_api::uri::category(&category),
                    category,
                    key_path: get_str(&d, f.key_path),
                    content: text,
                    score: *score,
                    hash: get_str(&d, f.hash),
                    updated_at: memdir_store::clock::rfc3339(get_i64(&d, f.ts)),
                    updated_by: get_str(&d, f.updated_by),
                    reviewed_at: None,
                    truncated: truncated.then_some(true),
                    explain,
                });
            }
        }
    }
    Ok(out)
}
