//! Query planning and execution over the [`SearchIndex`]: auto, BM25 and exact modes, filters,
//! a chunk's previous turn as weighted context, context windows and result shaping.
//!
//! Architecture Invariant: every engine and every fallback applies the same [`Filters`], as
//! zero-scoring required clauses, so a filter never changes a score.

use std::ops::Bound;

use serde::Deserialize;
use tantivy::DocSet as _;
use tantivy::collector::{Collector as _, TopDocs};
use tantivy::query::{
    BooleanQuery, BoostQuery, ConstScoreQuery, EmptyQuery, Occur, PhraseQuery, Query, RangeQuery,
    TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption, Value as _};
use tantivy::tokenizer::TokenStream;
use tantivy::{DocAddress, Score, Searcher, TantivyDocument, Term};

use crate::index::SearchIndex;
use memdir_api::error::{Error, Result};
use memdir_api::{ContextChunk, Explain, SearchHit};

/// Longest query, in characters; longer ones are an `invalid` error.
pub const MAX_QUERY_CHARS: usize = 10_000;
/// Default number of neighbours per side in a context window.
pub const DEFAULT_CONTEXT: usize = 3;
/// Most neighbours per side.
pub const MAX_CONTEXT: usize = 20;
/// Characters of a hit's excerpt (markers included) unless the whole text is asked for.
pub const DEFAULT_MAX_CHARS: usize = 300;
/// Characters of the excerpt of a context line next to the hit, and of one further away: the
/// turn just before or after a hit is where its question or answer usually sits.
pub const NEAR_CONTEXT_CHARS: usize = 200;
pub const FAR_CONTEXT_CHARS: usize = 100;
/// Marks where an excerpt was cut.
pub const CUT_MARK: char = '…';

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
}

impl Kind {
    pub fn parse(s: &str) -> Result<Kind> {
        match s {
            "chunk" | "chunks" | "session" => Ok(Kind::Chunk),
            "category" | "categories" => Ok(Kind::Category),
            _ => Err(Error::invalid(
                "kind",
                format!("kind must be chunk or category; got {s:?}"),
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
}

impl Filters {
    pub fn wants_chunks(&self) -> bool {
        self.kind != Some(Kind::Category) && self.category.is_none()
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
    hits.sort_by(|a, b| {
        b.score()
            .total_cmp(&a.score())
            .then(a.order().cmp(&b.order()))
    });
}

/// Query words with their positions, as the index analyzed them.
fn analyze(idx: &SearchIndex, text: &str) -> Result<Vec<(usize, String)>> {
    let mut a = idx.analyzer()?;
    let mut ts = a.token_stream(text);
    let mut out = Vec::new();
    while let Some(t) = ts.next() {
        out.push((t.position, t.text.clone()));
    }
    Ok(out)
}

/// Whether a query looks like an identifier, path, error code or code fragment.
pub fn is_identifier_like(q: &str) -> bool {
    let q = q.trim();
    if q.len() >= 2 && q.starts_with('"') && q.ends_with('"') {
        return true;
    }
    q.split_whitespace().any(|w| {
        let inner = w.trim_matches(|c: char| matches!(c, ',' | '?' | '!' | '.' | ';' | '(' | ')'));
        let has_sym = inner.chars().any(|c| {
            matches!(
                c,
                '_' | '='
                    | ':'
                    | '/'
                    | '\\'
                    | '.'
                    | '@'
                    | '#'
                    | '$'
                    | '%'
                    | '<'
                    | '>'
                    | '{'
                    | '}'
                    | '['
                    | ']'
                    | '|'
                    | '&'
                    | '*'
                    | '~'
                    | '`'
            )
        });
        let has_digit = inner.chars().any(|c| c.is_ascii_digit());
        let has_alpha = inner.chars().any(|c| c.is_alphabetic());
        let camel = inner.chars().skip(1).any(|c| c.is_uppercase())
            && inner.chars().any(|c| c.is_lowercase());
        let shout = inner.len() >= 4
            && inner
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            && has_alpha;
        (has_sym && inner.len() > 1) || (has_digit && has_alpha) || camel || shout
    })
}

/// The clauses that apply `f`: to chunks when `chunk` is given, else to category documents
/// (`category` their name field).
fn filter_clauses(
    f: &Filters,
    chunk: Option<&crate::index::ChunkFields>,
    category: Option<Field>,
    ts: Field,
) -> Vec<(Occur, Box<dyn Query>)> {
    let mut out: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    let mut push = |q: Box<dyn Query>| {
        out.push((
            Occur::Must,
            Box::new(ConstScoreQuery::new(q, 0.0)) as Box<dyn Query>,
        ))
    };
    if let (Some(s), Some(cf)) = (&f.session_id, chunk) {
        push(Box::new(TermQuery::new(
            crate::index::session_key(cf, s),
            IndexRecordOption::Basic,
        )));
    }
    if let (Some(p), Some(cf)) = (&f.project, chunk) {
        push(Box::new(TermQuery::new(
            crate::index::project_key(cf, p),
            IndexRecordOption::Basic,
        )));
    }
    if let (Some(c), Some(field)) = (&f.category, category) {
        push(Box::new(TermQuery::new(
            Term::from_field_text(field, c),
            IndexRecordOption::Basic,
        )));
    }
    if f.since.is_some() || f.until.is_some() {
        let lo = f
            .since
            .map(|v| Bound::Included(Term::from_field_i64(ts, v)))
            .unwrap_or(Bound::Unbounded);
        let hi = f
            .until
            .map(|v| Bound::Included(Term::from_field_i64(ts, v)))
            .unwrap_or(Bound::Unbounded);
        push(Box::new(RangeQuery::new(lo, hi)));
    }
    if let Some(field) = category {
        for c in &f.hidden_categories {
            out.push((
                Occur::MustNot,
                Box::new(TermQuery::new(
                    Term::from_field_text(field, c),
                    IndexRecordOption::Basic,
                )),
            ));
        }
    }
    out
}

fn with_filters(text: Box<dyn Query>, filters: Vec<(Occur, Box<dyn Query>)>) -> Box<dyn Query> {
    if filters.is_empty() {
        return text;
    }
    let mut clauses = vec![(Occur::Must, text)];
    clauses.extend(filters);
    Box::new(BooleanQuery::new(clauses))
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
}

impl<'a> View<'a> {
    /// The index as its readers hold it now.
    pub fn of(idx: &'a SearchIndex) -> View<'a> {
        View {
            idx,
            cs: idx.chunks.reader.searcher(),
            gs: idx.categories.reader.searcher(),
        }
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

fn bm25_text_query(
    field: Field,
    context: Option<(Field, f32)>,
    words: &[(usize, String)],
) -> Box<dyn Query> {
    let mut seen = Vec::new();
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for (_, w) in words {
        if seen.contains(w) {
            continue;
        }
        seen.push(w.clone());
        clauses.push((
            Occur::Should,
            Box::new(TermQuery::new(
                Term::from_field_text(field, w),
                IndexRecordOption::WithFreqs,
            )),
        ));
        if let Some((cf, weight)) = context
            && weight > 0.0
        {
            let q = TermQuery::new(Term::from_field_text(cf, w), IndexRecordOption::WithFreqs);
            clauses.push((
                Occur::Should,
                Box::new(BoostQuery::new(Box::new(q), weight)),
            ));
        }
    }
    if clauses.is_empty() {
        return Box::new(EmptyQuery);
    }
    Box::new(BooleanQuery::new(clauses))
}

fn phrase_query(field: Field, words: &[(usize, String)]) -> Box<dyn Query> {
    match words.len() {
        0 => Box::new(EmptyQuery),
        1 => Box::new(TermQuery::new(
            Term::from_field_text(field, &words[0].1),
            IndexRecordOption::WithFreqs,
        )),
        _ => {
            let base = words[0].0;
            Box::new(PhraseQuery::new_with_offset(
                words
                    .iter()
                    .map(|(p, w)| (p - base, Term::from_field_text(field, w)))
                    .collect(),
            ))
        }
    }
}

/// The best `limit` hits after `offset`, by score, ties broken by the `order` fast field so the
/// result does not depend on how the index is split into segments.
///
/// Fast path: the plain score-ordered collector (which can skip blocks of documents that
/// cannot make the cut) fetches a few extra hits; when the last score needed is strictly above
/// the last score fetched, every tie at the cut is inside the fetched set and sorting it gives
/// the exact answer. Otherwise the full sort-key collector decides.
fn top(
    searcher: &Searcher,
    q: &dyn Query,
    limit: usize,
    offset: usize,
) -> Result<Vec<(f32, u64, DocAddress)>> {
    const SLACK: usize = 16;
    let want = offset + limit;
    let err = |e: tantivy::TantivyError| Error::internal(format!("search: {e}"));
    // One weight for every pass below: weighing looks each term up in every segment.
    let weight = q
        .weight(tantivy::query::EnableScoring::enabled_from_searcher(
            searcher,
        ))
        .map_err(err)?;
    let fast = TopDocs::with_limit(want + SLACK).order_by_score();
    let fruits = searcher
        .segment_readers()
        .iter()
        .enumerate()
        .map(|(ord, reader)| fast.collect_segment(weight.as_ref(), ord as u32, reader))
        .collect::<tantivy::Result<Vec<_>>>()
        .map_err(err)?;
    let hits: Vec<(Score, DocAddress)> = fast.merge_fruits(fruits).map_err(err)?;
    let exhausted = hits.len() < want + SLACK;
    let cut = hits
        .get(want.saturating_sub(1))
        .map(|h| h.0)
        .unwrap_or(f32::MIN);
    let margin = cut.abs() * 1e-4 + 1e-6;
    let decisive = exhausted || hits.last().is_some_and(|b| cut > b.0 + margin);
    // Every document that can make the cut: within the margin of the `want`-th score.
    let mut candidates: Vec<(f32, DocAddress)> = if decisive {
        hits.into_iter()
            .filter(|(raw, _)| *raw >= cut - margin)
            .collect()
    } else {
        // More documents tie with the cut than the first pass kept: the tie-break key decides
        // among all of them. Block skipping still passes over everything scoring below the
        // cut, where an exhaustive collector would score every match.
        let floor = (cut - margin).next_down();
        let mut all = Vec::new();
        for (ord, reader) in searcher.segment_readers().iter().enumerate() {
            let alive = reader.alive_bitset();
            weight
                .for_each_pruning(floor, reader, &mut |doc, score| {
                    if alive.is_none_or(|a| a.is_alive(doc)) {
                        all.push((score, DocAddress::new(ord as u32, doc)));
                    }
                    floor
                })
                .map_err(|e| Error::internal(format!("search: {e}")))?;
        }
        all
    };
    // Block skipping sums a document's term scores in an order that depends on how the index is
    // split into segments, so the last bits of a score can differ between two indexes of the
    // same files. Hits that can make the cut are re-scored in clause order, which is what the
    // exhaustive collector computes, so scores and ties are the same whatever the layout.
    candidates.sort_by_key(|(_, a)| (a.segment_ord, a.doc_id));
    let mut keyed: Vec<(f32, u64, DocAddress)> = Vec::with_capacity(candidates.len());
    // One scorer and one `order` column per segment (opening the column per document cost
    // more than scoring it, with a pool of 200).
    let mut current = None;
    for (raw, addr) in candidates {
        if current
            .as_ref()
            .is_none_or(|(ord, _, _)| *ord != addr.segment_ord)
        {
            let reader = searcher.segment_reader(addr.segment_ord);
            let scorer = weight
                .scorer(reader, 1.0)
                .map_err(|e| Error::internal(format!("search: {e}")))?;
            let orders = reader.fast_fields().u64("order").ok();
            current = Some((addr.segment_ord, scorer, orders));
        }
        let (_, scorer, orders) = current.as_mut().expect("invariant: set just above");
        // Documents are visited in ascending order within a segment, so one scorer seeks
        // forward through them.
        let score = if scorer.doc() <= addr.doc_id && scorer.seek(addr.doc_id) == addr.doc_id {
            scorer.score()
        } else {
            raw
        };
        let order = orders
            .as_ref()
            .and_then(|col| col.first(addr.doc_id))
            .unwrap_or(u64::MAX);
        keyed.push((score, order, addr));
    }
    keyed.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    Ok(keyed.into_iter().skip(offset).take(limit).collect())
}

fn doc(searcher: &Searcher, addr: DocAddress) -> Result<TantivyDocument> {
    searcher
        .doc(addr)
        .map_err(|e| Error::internal(format!("stored document: {e}")))
}

fn get_str(d: &TantivyDocument, f: Field) -> String {
    d.get_first(f)
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_string()
}

fn get_u64(d: &TantivyDocument, f: Field) -> u64 {
    d.get_first(f).and_then(|v| v.as_u64()).unwrap_or(0)
}

fn get_i64(d: &TantivyDocument, f: Field) -> i64 {
    d.get_first(f).and_then(|v| v.as_i64()).unwrap_or(0)
}

/// Results of one search, shaped.
pub struct Outcome {
    pub engine: &'static str,
    pub results: Vec<SearchHit>,
    pub notes: Vec<String>,
}

/// The words of a query as the index analyzes them, to find in the texts of hits.
pub struct Terms {
    words: std::collections::HashSet<String>,
    analyzer: Option<tantivy::tokenizer::TextAnalyzer>,
}

impl Terms {
    pub fn new(idx: &SearchIndex, query: &str) -> Result<Terms> {
        let words = analyze(idx, query)?.into_iter().map(|(_, w)| w).collect();
        Ok(Terms {
            words,
            analyzer: Some(idx.analyzer()?),
        })
    }

    /// No words: excerpts start at the beginning.
    pub fn none() -> Terms {
        Terms {
            words: Default::default(),
            analyzer: None,
        }
    }

    /// Byte spans of the words of `text` that match the query.
    fn spans(&mut self, text: &str) -> Vec<(usize, usize)> {
        let (Some(a), false) = (self.analyzer.as_mut(), self.words.is_empty()) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut ts = a.token_stream(text);
        while let Some(t) = ts.next() {
            if self.words.contains(&t.text) {
                out.push((t.offset_from, t.offset_to));
            }
        }
        out
    }
}

/// An excerpt of `text` of at most `max` characters (`None`: the whole text) around the
/// densest cluster of the query's words (the beginning when none occurs), cut at word
/// boundaries where one is near, with [`CUT_MARK`] at each end that was cut. Returns whether it
/// was cut.
pub fn excerpt(text: &str, terms: &mut Terms, max: Option<usize>) -> (String, bool) {
    let Some(max) = max else {
        return (text.to_string(), false);
    };
    let n = text.chars().count();
    if n <= max {
        return (text.to_string(), false);
    }
    // Character index of every byte offset that starts a char.
    let starts: Vec<usize> = text.char_indices().map(|(b, _)| b).collect();
    let char_at = |byte: usize| starts.partition_point(|&b| b < byte);
    let spans: Vec<(usize, usize)> = terms
        .spans(text)
        .into_iter()
        .map(|(a, b)| (char_at(a), char_at(b)))
        .collect();
    let room = max.saturating_sub(2).max(1);
    let mut from = 0usize;
    if !spans.is_empty() {
        // The window of `room` characters holding the most matches, then centred on them.
        let (mut best, mut best_count, mut j) = ((spans[0].0, spans[0].1), 0usize, 0usize);
        for i in 0..spans.len() {
            j = j.max(i);
            while j + 1 < spans.len() && spans[j + 1].1 - spans[i].0 <= room {
                j += 1;
            }
            if j - i + 1 > best_count {
                best_count = j - i + 1;
                best = (spans[i].0, spans[j].1.max(spans[i].1));
            }
        }
        let centre = (best.0 + best.1) / 2;
        from = centre.saturating_sub(room / 2).min(n - room);
        // Never cut into the first match.
        from = from.min(best.0);
    }
    let chars: Vec<char> = text.chars().collect();
    let mut to = (from + room).min(n);
    // Prefer word boundaries within a few characters.
    if from > 0
        && let Some(k) = (from..(from + 12).min(to)).find(|&k| chars[k - 1].is_whitespace())
    {
        from = k;
    }
    if to < n
        && let Some(k) = ((to.saturating_sub(12)).max(from + 1)..=to)
            .rev()
            .find(|&k| chars[k].is_whitespace())
    {
        to = k;
    }
    let mut out = String::with_capacity(max * 2);
    if from > 0 {
        out.push(CUT_MARK);
    }
    out.extend(chars[from..to].iter().copied());
    let out_trimmed_len = out.trim_end().len();
    out.truncate(out_trimmed_len);
    if to < n {
        out.push(CUT_MARK);
    }
    (out, true)
}

/// Runs a search.
pub fn run(idx: &View<'_>, req: &Request) -> Result<Outcome> {
    let q = req.query.trim();
    if q.chars().count() > MAX_QUERY_CHARS {
        return Err(Error::too_large(
            "query",
            q.chars().count(),
            MAX_QUERY_CHARS,
            "characters",
        ));
    }
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
                if hits.is_empty() {
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
    let results = shape(idx, &hits, req, engine)?;
    Ok(Outcome {
        engine,
        results,
        notes,
    })
}

// ---------------------------------------------------------------------------------------------
// Session-aware ranking
// ---------------------------------------------------------------------------------------------

/// Depth of the candidate pool that keyword search ranks: the top of the filtered query,
/// whatever the limit up to this depth, so such a limit never changes a score or an order (the
/// filters define the pool). A larger limit ranks that many. 64 rather than 200: the recall
/// fixture gives the same figures at both depths (its conversations are short), and at 1M
/// chunks a pool of 200 made BM25 search 4.3 ms at p50 where 64 takes 2.6 (bench/README.md).
pub const POOL: usize = 64;

/// Share of a turn's normalised score passed to the turns just before and after it.
pub const NEIGHBOUR_SHARE: f32 = 0.25;

/// Share of the best normalised score in a session that every candidate of that session gains.
pub const SESSION_SHARE: f32 = 0.5;

/// How a chunk hit's score was made (`explain`): score = (bm25 + neighbour + session) /
/// (1 + the session share).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ScoreParts {
    /// The raw BM25 score (0 for a turn lifted only by its neighbours).
    pub bm25: f32,
    /// BM25 divided by the best BM25 of the pool.
    pub normalised: f32,
    /// What the neighbours passed on (the neighbour share of the larger BM25 beside it).
    pub neighbour: f32,
    /// What the session gave (the session share of its best BM25).
    pub session: f32,
    /// For a fused pool: the keyword and dense scores, each min-max normalised, that made
    /// the base score (which `bm25` then holds).
    pub mix: Option<(f32, f32)>,
}

/// A turn the ranking considers.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub session: String,
    pub position: u64,
    /// Its base score (BM25, or a fused score), before spreading.
    pub bm25: f32,
    pub order: u64,
    /// `None`: not reached by the query, lifted by a neighbour.
    pub addr: Option<DocAddress>,
    /// For a fused pool: the normalised keyword and dense scores behind `bm25`.
    pub mix: Option<(f32, f32)>,
}

/// A ranked turn.
#[derive(Clone, Debug)]
pub struct Ranked {
    pub session: String,
    pub position: u64,
    pub score: f32,
    pub order: u64,
    pub addr: Option<DocAddress>,
    pub parts: ScoreParts,
}

fn by_score_then_order(v: &mut [Ranked]) {
    v.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.order.cmp(&b.order))
            .then(a.session.cmp(&b.session))
            .then(a.position.cmp(&b.position))
    });
}

/// The pool as it came: BM25 order.
fn plain(cands: Vec<Candidate>) -> Vec<Ranked> {
    let best = cands.iter().map(|c| c.bm25).fold(0f32, f32::max);
    let mut out: Vec<Ranked> = cands
        .into_iter()
        .map(|c| Ranked {
            parts: ScoreParts {
                bm25: c.bm25,
                normalised: if best > 0.0 { c.bm25 / best } else { 0.0 },
                mix: c.mix,
                ..ScoreParts::default()
            },
            score: c.bm25,
            session: c.session,
            position: c.position,
            order: c.order,
            addr: c.addr,
        })
        .collect();
    by_score_then_order(&mut out);
    out
}

/// Session-aware ranking of a pool: each score is normalised by the pool's best; each turn
/// passes `neighbour` of its normalised score to the turns just before and after it (the
/// answer often sits one turn away from the words of the question), and every turn gains
/// `session` of the best normalised score in its session (a session that talks about the
/// question is where its answer is). A neighbour outside the pool joins it. The result depends
/// only on the pool, so it is the same for every limit and after a rebuild of the index.
pub fn spread(cands: Vec<Candidate>, neighbour: f32, session: f32) -> Vec<Ranked> {
    use std::collections::{BTreeMap, HashMap};
    let best = cands.iter().map(|c| c.bm25).fold(0f32, f32::max);
    if best <= 0.0 {
        return plain(cands);
    }
    // Worked in BM25 units: a turn's score is (its BM25 + `neighbour` × the larger BM25 of the
    // turns beside it + `session` × the best BM25 of its session) / (1 + `session`). It
    // depends on the turn, its neighbours and its session alone, not on the rest of the pool,
    // and it stays comparable with category hits.
    type Raw = (f32, u64, Option<DocAddress>, Option<(f32, f32)>);
    let mut raw: BTreeMap<(String, u64), Raw> = BTreeMap::new();
    let mut session_best: HashMap<String, f32> = HashMap::new();
    for c in &cands {
        raw.insert(
            (c.session.clone(), c.position),
            (c.bm25, c.order, c.addr, c.mix),
        );
        let e = session_best.entry(c.session.clone()).or_insert(0.0);
        *e = e.max(c.bm25);
    }
    let mut received: BTreeMap<(String, u64), f32> = BTreeMap::new();
    for ((s, p), (r, ..)) in &raw {
        for q in [p.checked_sub(1), p.checked_add(1)].into_iter().flatten() {
            let e = received.entry((s.clone(), q)).or_insert(0.0);
            *e = e.max(*r);
        }
    }
    let mut keys: Vec<(String, u64)> = raw.keys().cloned().collect();
    keys.extend(received.keys().filter(|k| !raw.contains_key(*k)).cloned());
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        // A turn outside the pool has no BM25 and no order: it sorts after every pool turn of
        // equal score, by place.
        let (r, order, addr, mix) = raw
            .get(&key)
            .copied()
            .unwrap_or((0.0, u64::MAX, None, None));
        let from_neighbours = neighbour * received.get(&key).copied().unwrap_or(0.0);
        let from_session = session * session_best.get(&key.0).copied().unwrap_or(0.0);
        out.push(Ranked {
            score: (r + from_neighbours + from_session) / (1.0 + session),
            parts: ScoreParts {
                bm25: r,
                normalised: r / best,
                neighbour: from_neighbours,
                session: from_session,
                mix,
            },
            session: key.0,
            position: key.1,
            order,
            addr,
        });
    }
    by_score_then_order(&mut out);
    out
}

/// The session and position of each document, from the fast columns. Each column is opened
/// once per segment, and a segment's session names are decoded in one pass over its sorted
/// ordinals (decoding each name alone re-reads its dictionary block from the start).
fn places_of(s: &Searcher, addrs: &[DocAddress]) -> Result<Vec<(String, u64)>> {
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

/// The nearest documents by vector, each list best first, already filtered (the caller
/// applies [`Filters`] to its vectors the way the query clauses apply them to the index).
#[derive(Clone, Debug, Default)]
pub struct Dense {
    pub chunks: Vec<(f32, DocAddress)>,
    pub categories: Vec<(f32, DocAddress)>,
}

/// How many hits of each list enter a hybrid fusion.
pub const FUSION_DEPTH: usize = 50;
/// Weight of the dense score in a hybrid fusion (BM25 gets the rest).
pub const DENSE_WEIGHT: f32 = 0.4;

/// Weighted fusion of two ranked lists: each list's scores are min-max normalised to 0..=1
/// (a list of one scores 1), a key missing from a list scores 0 there, and the fused score is
/// `dense_weight × dense + (1 - dense_weight) × bm25`. Returns `(key, fused, (bm25, dense))`
/// best first, ties in key order, with the normalised parts. On chat recall this beat
/// reciprocal rank fusion, which let weak dense hits push good BM25 hits out (see
/// bench/README.md).
pub fn fuse<K: Ord + Clone>(
    bm25: &[(K, f32)],
    dense: &[(K, f32)],
    dense_weight: f32,
) -> Vec<(K, f32, (f32, f32))> {
    fn norm<K: Ord + Clone>(l: &[(K, f32)]) -> std::collections::BTreeMap<K, f32> {
        let lo = l.iter().map(|x| x.1).fold(f32::INFINITY, f32::min);
        let hi = l.iter().map(|x| x.1).fold(f32::NEG_INFINITY, f32::max);
        l.iter()
            .map(|(k, s)| {
                let n = if hi > lo { (s - lo) / (hi - lo) } else { 1.0 };
                (k.clone(), n)
            })
            .collect()
    }
    let (b, d) = (norm(bm25), norm(dense));
    let mut keys: Vec<K> = b.keys().chain(d.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    let mut out: Vec<(K, f32, (f32, f32))> = keys
        .into_iter()
        .map(|k| {
            let (bk, dk) = (
                b.get(&k).copied().unwrap_or(0.0),
                d.get(&k).copied().unwrap_or(0.0),
            );
            (k, dense_weight * dk + (1.0 - dense_weight) * bk, (bk, dk))
        })
        .collect();
    out.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    out
}

fn fast_order(s: &Searcher, addr: DocAddress) -> u64 {
    s.segment_reader(addr.segment_ord)
        .fast_fields()
        .u64("order")
        .ok()
        .and_then(|col| col.first(addr.doc_id))
        .unwrap_or(u64::MAX)
}

/// Runs a `semantic` or `hybrid` search with the nearest vectors in `dense`. Hybrid fuses the
/// best [`FUSION_DEPTH`] BM25 hits of the filtered query with the dense lists ([`fuse`]);
/// chunks and categories are fused as one pool, so the engines' scales never meet.
pub fn run_dense(idx: &View<'_>, req: &Request, dense: &Dense, hybrid: bool) -> Result<Outcome> {
    let q = req.query.trim();
    if q.chars().count() > MAX_QUERY_CHARS {
        return Err(Error::too_large(
            "query",
            q.chars().count(),
            MAX_QUERY_CHARS,
            "characters",
        ));
    }
    let (cs, gs) = (&idx.cs, &idx.gs);
    // Keys: (0 chunk | 1 category, segment, doc).
    let key = |cat: bool, a: &DocAddress| (cat as u8, a.segment_ord, a.doc_id);
    let mut dense_list: Vec<((u8, u32, u32), f32)> = Vec::new();
    for (s, a) in dense.chunks.iter().take(FUSION_DEPTH) {
        dense_list.push((key(false, a), *s));
    }
    for (s, a) in dense.categories.iter().take(FUSION_DEPTH) {
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
            });
        }
    }
    let ranked = if hybrid {
        rank(cands, req)
    } else {
        plain(cands)
    };
    let mut folded = 0;
    hits.extend(choose(idx, cs, ranked, req, &mut folded)?);
    sort_hits(&mut hits);
    hits.truncate(req.limit);
    let notes = folded_note(folded).into_iter().collect();
    let engine = if hybrid { "hybrid" } else { "semantic" };
    let results = shape(idx, &hits, req, engine)?;
    Ok(Outcome {
        engine,
        results,
        notes,
    })
}

/// The best `depth` BM25 hits of each index under the filters, without reading documents:
/// `(is_category, score, address)`.
fn bm25_pool(
    idx: &View<'_>,
    text: &str,
    req: &Request,
    depth: usize,
) -> Result<Vec<(bool, f32, DocAddress)>> {
    let words = analyze(idx, text)?;
    let mut out = Vec::new();
    if words.is_empty() {
        return Ok(out);
    }
    if req.filters.wants_chunks() {
        let f = &idx.chunk_fields;
        let s = &idx.cs;
        let query = with_filters(
            bm25_text_query(f.content, Some((f.context, req.context_weight)), &words),
            filter_clauses(&req.filters, Some(f), None, f.ts),
        );
        for (score, _, addr) in top(s, query.as_ref(), depth, 0)? {
            out.push((false, score, addr));
        }
    }
    if req.filters.wants_categories() {
        let f = &idx.category_fields;
        let s = &idx.gs;
        let query = with_filters(
            bm25_text_query(f.content, None, &words),
            filter_clauses(&req.filters, None, Some(f.category), f.ts),
        );
        for (score, _, addr) in top(s, query.as_ref(), depth, 0)? {
            out.push((true, score, addr));
        }
    }
    Ok(out)
}

fn bm25(idx: &View<'_>, text: &str, req: &Request, folded: &mut usize) -> Result<Vec<Hit>> {
    let words = analyze(idx, text)?;
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let mut hits = Vec::new();
    if req.filters.wants_chunks() {
        let f = &idx.chunk_fields;
        let s = &idx.cs;
        let query = with_filters(
            bm25_text_query(f.content, Some((f.context, req.context_weight)), &words),
            filter_clauses(&req.filters, Some(f), None, f.ts),
        );
        let pool = top(s, query.as_ref(), POOL.max(req.limit), 0)?;
        let addrs: Vec<DocAddress> = pool.iter().map(|(_, _, a)| *a).collect();
        let cands: Vec<Candidate> = pool
            .into_iter()
            .zip(places_of(s, &addrs)?)
            .map(|((score, order, addr), (session, position))| Candidate {
                session,
                position,
                bm25: score,
                order,
                addr: Some(addr),
                mix: None,
            })
            .collect();
        hits.extend(choose(idx, s, rank(cands, req), req, folded)?);
    }
    if req.filters.wants_categories() {
        let f = &idx.category_fields;
        let s = &idx.gs;
        let query = with_filters(
            bm25_text_query(f.content, None, &words),
            filter_clauses(&req.filters, None, Some(f.category), f.ts),
        );
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

/// The note on matching turns shown inside other hits' windows.
fn folded_note(folded: usize) -> Option<String> {
    (folded > 0).then(|| {
        format!(
            "{folded} more matching turn{} shown inside the context windows of these hits",
            if folded == 1 { " is" } else { "s are" }
        )
    })
}

/// The pool ranked: session-aware unless both shares are zero.
fn rank(cands: Vec<Candidate>, req: &Request) -> Vec<Ranked> {
    if req.neighbour_share > 0.0 || req.session_share > 0.0 {
        spread(cands, req.neighbour_share, req.session_share)
    } else {
        plain(cands)
    }
}

/// Which windows to show: a matching turn inside the context window of a hit already chosen is
/// on screen there, so it is not a hit of its own (counted in `folded`), and the place goes to
/// a turn of another region. The choice follows the ranking, so a larger limit only shows more
/// of the same list.
fn choose(
    idx: &View<'_>,
    s: &Searcher,
    ranked: Vec<Ranked>,
    req: &Request,
    folded: &mut usize,
) -> Result<Vec<Hit>> {
    let mut hits = Vec::new();
    let mut chosen: Vec<(String, u64)> = Vec::new();
    for r in ranked {
        if chosen.len() == req.limit {
            break;
        }
        if req.context > 0
            && chosen
                .iter()
                .any(|(s, p)| *s == r.session && p.abs_diff(r.position) <= req.context as u64)
        {
            *folded += 1;
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
        });
    }
    Ok(hits)
}

/// Chunks of `session` at positions `lo..=hi`.
fn session_range(f: &crate::index::ChunkFields, session: &str, lo: u64, hi: u64) -> Box<dyn Query> {
    // A disjunction of exact term lookups: a term-set query would walk the whole dictionary.
    let clauses: Vec<(Occur, Box<dyn Query>)> = (lo..=hi)
        .map(|p| {
            let t = crate::index::place_term(f, session, p);
            (
                Occur::Should,
                Box::new(TermQuery::new(t, IndexRecordOption::Basic)) as Box<dyn Query>,
            )
        })
        .collect();
    Box::new(BooleanQuery::new(clauses))
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

fn chunk_at(
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

/// Exact: the index narrows candidates by the phrase of the query's words; the stored text
/// verifies the literal, byte for byte. No false positives.
fn exact(
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

/// The context window of a chunk: up to `n` neighbours per side from its own session, the
/// chunk itself left out. With `cut`, each line is an excerpt: [`NEAR_CONTEXT_CHARS`] next
/// to the hit, [`FAR_CONTEXT_CHARS`] further away.
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
    let mut rows: Vec<ContextChunk> = Vec::new();
    for addr in docs_at(s, f, session, lo, hi)? {
        let d = doc(s, addr)?;
        let p = get_u64(&d, f.position);
        if p == position {
            continue;
        }
        let max = cut.then(|| {
            if p.abs_diff(position) == 1 {
                NEAR_CONTEXT_CHARS
            } else {
                FAR_CONTEXT_CHARS
            }
        });
        let (text, _) = excerpt(&get_str(&d, f.content), terms, max);
        rows.push(ContextChunk { position: p, text });
    }
    rows.sort_by_key(|r| r.position);
    Ok(rows)
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
                formula: format!(
                    "fused = {DENSE_WEIGHT} × dense + {} × bm25, each min-max normalised over its \
                     top {FUSION_DEPTH}; score = {}",
                    1.0 - DENSE_WEIGHT,
                    if spreads {
                        format!("(fused + neighbour + session) / {over}")
                    } else {
                        "fused".into()
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
            formula: if spreads {
                format!("(bm25 + neighbour + session) / {over}")
            } else {
                "bm25".into()
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

fn shape(idx: &View<'_>, hits: &[Hit], req: &Request, engine: &str) -> Result<Vec<SearchHit>> {
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
                    session_id: session.clone(),
                    position: *position,
                    chunk_id: get_str(&d, f.chunk_id),
                    project: get_str(&d, f.project),
                    ts: memdir_store::clock::rfc3339(get_i64(&d, f.ts)),
                    content,
                    score: *score,
                    context,
                    truncated: truncated.then_some(true),
                    explain,
                });
            }
            Hit::Category {
                addr, score, parts, ..
            } => {
                let f = &idx.category_fields;
                let d = doc(gs, *addr)?;
                let (text, truncated) = excerpt(&get_str(&d, f.text), &mut terms, req.max_chars);
                out.push(SearchHit::Category {
                    category: get_str(&d, f.category),
                    key_path: get_str(&d, f.key_path),
                    content: text,
                    score: *score,
                    hash: get_str(&d, f.hash),
                    updated_at: memdir_store::clock::rfc3339(get_i64(&d, f.ts)),
                    updated_by: get_str(&d, f.updated_by),
                    truncated: truncated.then_some(true),
                    explain: req.explain.then(|| match parts {
                        Some(p) => self::explain(engine, req, *score, Some(p), false),
                        None => Explain {
                            bm25: *score,
                            normalised: share(*score, best_category),
                            formula: "bm25".into(),
                            ..Explain::default()
                        },
                    }),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifier_like_queries_route_to_exact() {
        for q in [
            "ECONNREFUSED 127.0.0.1:5432",
            "max_size=10",
            "src/main.rs",
            "\"exact phrase\"",
            "getUserById",
            "E0382",
            "HTTP 503",
        ] {
            assert!(is_identifier_like(q), "{q}");
        }
        for q in [
            "what did we decide about the database",
            "postgres pool timeout",
            "Why?",
        ] {
            assert!(!is_identifier_like(q), "{q}");
        }
    }

    #[test]
    fn fusion_normalises_each_list_and_weighs_dense_at_four_tenths() {
        let bm25 = [("a", 10.0), ("b", 5.0), ("c", 0.0)];
        let dense = [("c", 0.9), ("d", 0.5), ("b", 0.1)];
        let f = fuse(&bm25, &dense, 0.4);
        let get = |k| f.iter().find(|x| x.0 == k).unwrap().1;
        assert!((get("a") - 0.6).abs() < 1e-6);
        assert!((get("b") - 0.3).abs() < 1e-6); // 0.6 × 0.5 + 0.4 × 0
        assert!((get("c") - 0.4).abs() < 1e-6);
        assert!((get("d") - 0.2).abs() < 1e-6); // 0.4 × 0.5
        assert_eq!(
            f.iter().map(|x| x.0).collect::<Vec<_>>(),
            ["a", "c", "b", "d"]
        );
        // One list empty: the other alone decides, normalised.
        assert_eq!(fuse(&bm25, &[], 0.4)[0], ("a", 0.6, (1.0, 0.0)));
        // A list of one scores 1.
        assert_eq!(
            fuse::<&str>(&[], &[("x", 0.2)], 0.4),
            vec![("x", 0.4, (0.0, 1.0))]
        );
    }
}

#[cfg(test)]
mod ranking_tests {
    use super::*;

    fn c(session: &str, position: u64, bm25: f32, order: u64) -> Candidate {
        Candidate {
            session: session.into(),
            position,
            bm25,
            order,
            addr: None,
            mix: None,
        }
    }

    #[test]
    fn a_turn_beside_a_strong_match_is_lifted_and_joins_the_pool() {
        // The question's words are in s#4; its answer, s#5, does not match at all.
        let ranked = spread(
            vec![c("s", 4, 10.0, 4), c("t", 0, 6.0, 10), c("t", 9, 2.0, 19)],
            0.25,
            0.5,
        );
        let place: Vec<(String, u64)> = ranked
            .iter()
            .map(|r| (r.session.clone(), r.position))
            .collect();
        let at = |s: &str, p: u64| place.iter().position(|x| x.0 == s && x.1 == p).unwrap();
        assert_eq!(at("s", 4), 0);
        // s#5 and s#3 come from the neighbour share and the session share alone.
        assert!(at("s", 5) < at("t", 9), "{place:?}");
        let s5 = &ranked[at("s", 5)];
        assert_eq!(s5.parts.bm25, 0.0);
        assert_eq!(s5.parts.neighbour, 2.5);
        assert_eq!(s5.parts.session, 5.0);
        assert_eq!(s5.score, 7.5 / 1.5);
        // The best turn of the best session keeps its BM25 as its score.
        assert_eq!(ranked[0].score, (10.0 + 0.0 + 5.0) / 1.5);
    }

    #[test]
    fn scores_depend_on_the_turn_its_neighbours_and_its_session_only() {
        let a = spread(vec![c("s", 1, 4.0, 1), c("s", 2, 2.0, 2)], 0.25, 0.5);
        let b = spread(
            vec![c("s", 1, 4.0, 1), c("s", 2, 2.0, 2), c("x", 7, 40.0, 9)],
            0.25,
            0.5,
        );
        let score = |v: &[Ranked], p: u64| {
            v.iter()
                .find(|r| r.session == "s" && r.position == p)
                .unwrap()
                .score
        };
        assert_eq!(score(&a, 1).to_bits(), score(&b, 1).to_bits());
        assert_eq!(score(&a, 2).to_bits(), score(&b, 2).to_bits());
    }

    #[test]
    fn without_shares_the_order_is_bm25_then_ingest_order() {
        let r = spread(
            vec![c("s", 1, 1.0, 5), c("s", 9, 1.0, 2), c("s", 4, 3.0, 7)],
            0.0,
            0.0,
        );
        let p: Vec<u64> = r.iter().map(|x| x.position).collect();
        assert_eq!(p[..3], [4, 9, 1]);
    }
}
