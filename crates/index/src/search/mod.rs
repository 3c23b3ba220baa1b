//! Query planning and execution over the [`SearchIndex`]: auto, BM25 and exact modes, filters,
//! a chunk's previous turn as weighted context, context windows and result shaping.
//!
//! Architecture Invariant: every engine and every fallback applies the same [`Filters`], as
//! zero-scoring required clauses, so a filter never changes a score.
//!
//! The pieces, in the order a search uses them: `query` (the words as the index analyzes
//! them, filter clauses, tantivy queries, and the best hits of one whatever the segment
//! layout), `keyword` (the BM25 and exact engines), `rank` (session-aware ranking of a pool),
//! `fusion` (BM25 and vector lists fused), `window` (which context windows to show, and their
//! turns), `document` (stored fields and places read back), `excerpt`, and `row` (the typed
//! rows of an answer). This module holds the request, the entry points [`run`] and
//! [`run_dense`], and what they share.

mod document;
mod excerpt;
mod fusion;
mod keyword;
mod period;
mod query;
mod rank;
mod row;
pub mod supersede;
mod window;

use serde::Deserialize;
use tantivy::{DocAddress, Searcher};

use crate::index::SearchIndex;
use memdir_api::SearchHit;
use memdir_api::error::{Error, Result};

use document::{fast_order, places_of};
use keyword::{bm25, bm25_pool, exact, rank_corrected_last};
use rank::{plain, rank};
use row::shape;
use supersede::{demote_hits, superseded};
use window::choose;

pub use document::stored_content_at;
pub use excerpt::{CUT_MARK, Terms, excerpt};
pub use fusion::{DENSE_WEIGHT, Dense, FUSION_DEPTH, fuse};
pub use query::is_identifier_like;
pub use rank::{Candidate, NEIGHBOUR_SHARE, POOL, Ranked, SESSION_SHARE, ScoreParts, spread};
pub use window::{CONTEXT_CHARS, window};

/// Longest query, in characters; longer ones are an `invalid` error.
pub const MAX_QUERY_CHARS: usize = 10_000;
/// Default number of neighbours per side in a context window.
pub const DEFAULT_CONTEXT: usize = 3;
/// Most neighbours per side.
pub const MAX_CONTEXT: usize = 20;
/// Characters of a hit's excerpt (markers included) unless the whole text is asked for.
pub const DEFAULT_MAX_CHARS: usize = 300;

/// Which engine to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Identifier-like or quoted queries go to exact first, then BM25.
    #[default]
    Auto,
    Bm25,
    Exact,
    /// By meaning alone: the nearest vectors (needs an embeddings provider).
    Semantic,
    /// BM25 and vectors fused (see [`fuse`]).
    Hybrid,
}

impl Mode {
    pub fn parse(s: &str) -> Result<Mode> {
        match s {
            "auto" => Ok(Mode::Auto),
            "bm25" | "fts" | "keyword" => Ok(Mode::Bm25),
            "exact" => Ok(Mode::Exact),
            "semantic" | "dense" | "vector" => Ok(Mode::Semantic),
            "hybrid" => Ok(Mode::Hybrid),
            _ => Err(Error::invalid(
                "mode",
                format!("mode must be auto, bm25, exact, semantic or hybrid; got {s:?}"),
            )),
        }
    }

    /// Whether this mode sends natural-language queries to `hybrid` when embeddings are
    /// configured: `auto` with a query that is neither quoted nor identifier-like.
    pub fn wants_hybrid(self, query: &str) -> bool {
        let q = query.trim();
        let quoted = q.len() >= 2 && q.starts_with('"') && q.ends_with('"');
        self == Mode::Auto && !quoted && !is_identifier_like(q)
    }
}

/// Which kinds of memory to search.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Chunk,
    Category,
    Note,
}

impl Kind {
    pub fn parse(s: &str) -> Result<Kind> {
        match s {
            "chunk" | "chunks" | "session" => Ok(Kind::Chunk),
            "category" | "categories" => Ok(Kind::Category),
            "note" | "notes" => Ok(Kind::Note),
            _ => Err(Error::invalid(
                "kind",
                format!("kind must be chunk, category or note; got {s:?}"),
            )),
        }
    }
}

/// Filters every engine honours.
#[derive(Clone, Debug, Default)]
pub struct Filters {
    pub project: Option<String>,
    pub session_id: Option<String>,
    pub category: Option<String>,
    pub kind: Option<Kind>,
    /// Inclusive lower bound, ms since the epoch.
    pub since: Option<i64>,
    /// Inclusive upper bound, ms since the epoch.
    pub until: Option<i64>,
    /// Categories left out (those the caller may not read).
    pub hidden_categories: Vec<String>,
    /// Only chunks saved at or before this time, ms (memory as of a time; see [`View::then`]).
    pub as_of: Option<i64>,
}

impl Filters {
    pub fn wants_chunks(&self) -> bool {
        matches!(self.kind, None | Some(Kind::Chunk)) && self.category.is_none()
    }
    pub fn wants_categories(&self) -> bool {
        self.kind != Some(Kind::Chunk) && self.project.is_none() && self.session_id.is_none()
    }
}

/// A planned search.
#[derive(Clone, Debug)]
pub struct Request {
    pub query: String,
    pub mode: Mode,
    pub limit: usize,
    pub filters: Filters,
    pub context: usize,
    /// Characters of content per row; `None` for full text.
    pub max_chars: Option<usize>,
    /// Weight of a match in the previous turn (0 disables it).
    pub context_weight: f32,
    /// Shares of session-aware ranking ([`spread`]): what a turn passes to its neighbours and
    /// what a session's best turn gives the others (both 0: plain BM25 order).
    pub neighbour_share: f32,
    pub session_share: f32,
    /// Add each hit's score parts.
    pub explain: bool,
    /// BM25 matches only texts holding every word of the query (not any one of them): what a
    /// destructive operation selects by (a forget by query).
    pub all_words: bool,
    /// Chunks a later chunk corrects keep their own rank (default: below the others).
    pub include_superseded: bool,
}

/// One hit before shaping.
#[derive(Clone, Debug)]
enum Hit {
    Chunk {
        addr: Option<DocAddress>,
        session: String,
        position: u64,
        score: f32,
        order: u64,
        /// How the score was made (BM25 answers; exact hits have none).
        parts: Option<ScoreParts>,
        /// Below every hit that is not (see `keyword::rank_corrected_last`).
        demoted: bool,
    },
    Category {
        addr: DocAddress,
        score: f32,
        order: u64,
        /// How the score was made, when fused (BM25 answers: the score itself).
        parts: Option<ScoreParts>,
    },
}

impl Hit {
    fn score(&self) -> f32 {
        match self {
            Hit::Chunk { score, .. } | Hit::Category { score, .. } => *score,
        }
    }
    fn order(&self) -> u64 {
        match self {
            Hit::Chunk { order, .. } | Hit::Category { order, .. } => *order,
        }
    }
}

fn sort_hits(hits: &mut [Hit]) {
    let demoted = |h: &Hit| matches!(h, Hit::Chunk { demoted: true, .. });
    hits.sort_by(|a, b| {
        demoted(a)
            .cmp(&demoted(b))
            .then(b.score().total_cmp(&a.score()))
            .then(a.order().cmp(&b.order()))
    });
}

/// An index with its searchers taken once: every step of one search (ranking, windows,
/// stored texts) reads the same commit, so its document addresses stay valid while catch-ups
/// commit and reload beside it. Dereferences to the index for fields and the analyzer.
pub struct View<'a> {
    idx: &'a SearchIndex,
    /// The chunk index's searcher.
    pub cs: Searcher,
    /// The category index's searcher.
    pub gs: Searcher,
    /// Memory as it stood at this time (ms): chunks saved by then, the corrections saved by
    /// then, and in `gs` the categories current then.
    pub as_of: Option<i64>,
}

impl<'a> View<'a> {
    /// The index as its readers hold it now.
    pub fn of(idx: &'a SearchIndex) -> View<'a> {
        View {
            idx,
            cs: idx.chunks.reader.searcher(),
            gs: idx.categories.reader.searcher(),
            as_of: None,
        }
    }

    /// The memory as it stood at `at` (ms): this view's chunks seen through the clocks of their
    /// documents, and `categories`, a searcher over the categories as they stood then
    /// ([`SearchIndex::categories_then`]).
    pub fn then(&self, at: i64, categories: Searcher) -> View<'a> {
        View {
            idx: self.idx,
            cs: self.cs.clone(),
            gs: categories,
            as_of: Some(at),
        }
    }

    /// The same chunk searcher with the categories as they are now and no time: what the
    /// vectors, which are of the texts as they are, are kept in step with.
    pub fn now(&self) -> View<'a> {
        View {
            idx: self.idx,
            cs: self.cs.clone(),
            gs: self.idx.categories.reader.searcher(),
            as_of: None,
        }
    }

    /// Whether the chunk document at `addr` was saved by the view's time (always, for a view
    /// of now).
    pub(crate) fn saved(&self, addr: DocAddress) -> bool {
        let Some(at) = self.as_of else {
            return true;
        };
        document::clock_of(&self.cs, addr).is_some_and(|c| c <= at)
    }
}

impl std::ops::Deref for View<'_> {
    type Target = SearchIndex;
    fn deref(&self) -> &SearchIndex {
        self.idx
    }
}

/// Weight of a match in the previous turn's text (the `context` field) relative to a match in
/// the chunk itself.
pub const CONTEXT_WEIGHT: f32 = 0.5;

/// Results of one search, shaped.
pub struct Outcome {
    pub engine: &'static str,
    pub results: Vec<SearchHit>,
    pub notes: Vec<String>,
}

/// The request's query, trimmed; longer than [`MAX_QUERY_CHARS`], an error.
fn query_text(req: &Request) -> Result<&str> {
    let q = req.query.trim();
    let n = q.chars().count();
    if n > MAX_QUERY_CHARS {
        return Err(Error::too_large("query", n, MAX_QUERY_CHARS, "characters"));
    }
    Ok(q)
}

/// Runs a search.
pub fn run(idx: &View<'_>, req: &Request) -> Result<Outcome> {
    let q = query_text(req)?;
    if q.is_empty() {
        return Ok(Outcome {
            engine: "empty",
            results: Vec::new(),
            notes: Vec::new(),
        });
    }
    let mut notes = Vec::new();
    let quoted = q.len() >= 2 && q.starts_with('"') && q.ends_with('"');
    let literal = if quoted { &q[1..q.len() - 1] } else { q };
    let mut folded = 0;
    let (hits, engine) = match req.mode {
        Mode::Exact => (exact(idx, literal, req, &mut notes)?, "exact"),
        Mode::Bm25 => (bm25(idx, q, req, &mut folded)?, "bm25"),
        Mode::Auto => {
            if quoted || is_identifier_like(q) {
                let hits = exact(idx, literal, req, &mut notes)?;
                // A quoted phrase that must occur as written (`all_words`) has no fallback:
                // its words in another order are not it.
                if hits.is_empty() && quoted && req.all_words {
                    (hits, "exact")
                } else if hits.is_empty() {
                    notes.push("no exact match; answered by BM25".to_string());
                    (bm25(idx, literal, req, &mut folded)?, "bm25")
                } else {
                    (hits, "exact")
                }
            } else {
                (bm25(idx, q, req, &mut folded)?, "bm25")
            }
        }
        // Without vectors (the service answers these modes with `run_dense` when it has them).
        Mode::Semantic | Mode::Hybrid => (bm25(idx, q, req, &mut folded)?, "keyword-fallback"),
    };
    notes.extend(folded_note(folded));
    if req.explain && engine == "bm25" {
        notes.extend(query::left_out_note(idx, literal, req)?);
    }
    let mut hits = hits;
    let results = shape_marked(idx, &mut hits, req, engine)?;
    Ok(Outcome {
        engine,
        results,
        notes,
    })
}

/// Runs a `semantic` or `hybrid` search with the nearest vectors in `dense`. Hybrid fuses the
/// best [`FUSION_DEPTH`] BM25 hits of the filtered query with the dense lists ([`fuse`]);
/// chunks and categories are fused as one pool, so the engines' scales never meet.
pub fn run_dense(idx: &View<'_>, req: &Request, dense: &Dense, hybrid: bool) -> Result<Outcome> {
    let q = query_text(req)?;
    let (cs, gs) = (&idx.cs, &idx.gs);
    // Keys: (0 chunk | 1 category, segment, doc).
    let key = |cat: bool, a: &DocAddress| (cat as u8, a.segment_ord, a.doc_id);
    let mut dense_list: Vec<((u8, u32, u32), f32)> = Vec::new();
    for (s, a) in dense
        .chunks
        .iter()
        .filter(|(_, a)| idx.saved(*a))
        .take(FUSION_DEPTH)
    {
        dense_list.push((key(false, a), *s));
    }
    // The vectors are of the categories' current texts: as of another time, the categories
    // are matched by their words alone.
    let categories = if idx.as_of.is_some() {
        &[][..]
    } else {
        &dense.categories[..]
    };
    for (s, a) in categories.iter().take(FUSION_DEPTH) {
        dense_list.push((key(true, a), *s));
    }
    // The pool: fused scores with their normalised parts for hybrid; for semantic, the
    // similarities themselves.
    type Entry = ((u8, u32, u32), f32, Option<(f32, f32)>);
    let pool: Vec<Entry> = if hybrid {
        let mut bm25_list = Vec::new();
        for (cat, score, addr) in bm25_pool(idx, q, req, FUSION_DEPTH)? {
            bm25_list.push((key(cat, &addr), score));
        }
        fuse(&bm25_list, &dense_list, DENSE_WEIGHT)
            .into_iter()
            .map(|(k, s, mix)| (k, s, Some(mix)))
            .collect()
    } else {
        dense_list.into_iter().map(|(k, s)| (k, s, None)).collect()
    };
    // Chunks are ranked as keyword search ranks them (session-aware for hybrid, whose fused
    // scores are 0..=1 like normalised BM25; as they are for semantic, whose similarities may
    // be negative) and their windows chosen the same way; only the hits kept are read from the
    // document store.
    let mut cands = Vec::new();
    let mut hits = Vec::new();
    let chunk_addrs: Vec<DocAddress> = pool
        .iter()
        .filter(|(k, _, _)| k.0 == 0)
        .map(|(k, _, _)| DocAddress::new(k.1, k.2))
        .collect();
    let mut places = places_of(cs, &chunk_addrs)?.into_iter();
    for (k, score, mix) in pool {
        let addr = DocAddress::new(k.1, k.2);
        if k.0 == 1 {
            hits.push(Hit::Category {
                addr,
                score,
                order: fast_order(gs, addr),
                parts: Some(ScoreParts {
                    bm25: score,
                    normalised: 1.0,
                    mix,
                    ..ScoreParts::default()
                }),
            });
        } else {
            let (session, position) = places
                .next()
                .ok_or_else(|| Error::internal("invariant: one place per chunk of the pool"))?;
            cands.push(Candidate {
                session,
                position,
                bm25: score,
                order: fast_order(cs, addr),
                addr: Some(addr),
                mix,
                period: 0.0,
                short: None,
            });
        }
    }
    if hybrid {
        period::lift(cs, &mut cands, &period::named(q));
    }
    let ranked = rank_corrected_last(idx, cands, req, |c| {
        if hybrid { rank(c, req) } else { plain(c) }
    })?;
    let mut folded = 0;
    hits.extend(choose(idx, cs, ranked, req, &mut folded)?);
    sort_hits(&mut hits);
    hits.truncate(req.limit);
    let mut notes: Vec<String> = folded_note(folded).into_iter().collect();
    if req.explain && hybrid {
        notes.extend(query::left_out_note(idx, q, req)?);
    }
    let engine = if hybrid { "hybrid" } else { "semantic" };
    let results = shape_marked(idx, &mut hits, req, engine)?;
    Ok(Outcome {
        engine,
        results,
        notes,
    })
}

/// The answer's rows, each corrected chunk marked with what corrects it and, unless the
/// request keeps its rank, moved below the hits nothing corrects.
fn shape_marked(
    idx: &View<'_>,
    hits: &mut Vec<Hit>,
    req: &Request,
    engine: &str,
) -> Result<Vec<SearchHit>> {
    let places = hits.iter().filter_map(|h| match h {
        Hit::Chunk {
            session,
            position,
            addr,
            ..
        } => Some((session.clone(), *position, *addr)),
        Hit::Category { .. } => None,
    });
    let sup = superseded(idx, places)?;
    if !req.include_superseded {
        demote_hits(hits, &sup);
    }
    shape(idx, hits, req, engine, &sup)
}

/// The note on matching turns shown inside other hits' windows.
fn folded_note(folded: usize) -> Option<String> {
    (folded > 0).then(|| {
        format!(
            "{folded} more matching turn{} shown inside the context windows of these hits",
            if folded == 1 { " is" } else { "s are" }
        )
    })
}
