//! From a request to tantivy queries: the query's words as the index analyzes them, whether
//! a query looks like an identifier (and goes to exact first), the filters as zero-scoring
//! required clauses, the BM25 and phrase queries, and [`top`]: the best hits of a query in an
//! order that does not depend on how the index is split into segments.

use std::ops::Bound;

use tantivy::DocSet as _;
use tantivy::collector::{Collector as _, TopDocs};
use tantivy::query::{
    BooleanQuery, BoostQuery, ConstScoreQuery, EmptyQuery, Occur, PhraseQuery, Query, RangeQuery,
    TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::tokenizer::TokenStream;
use tantivy::{DocAddress, Score, Searcher, Term};

use super::Filters;
use crate::index::SearchIndex;
use memdir_api::error::{Error, Result};

/// Query words with their positions, as the index analyzed them.
pub(super) fn analyze(idx: &SearchIndex, text: &str) -> Result<Vec<(usize, String)>> {
    let mut a = idx.analyzer()?;
    let mut ts = a.token_stream(text);
    let mut out = Vec::new();
    while let Some(t) = ts.next() {
        out.push((t.position, t.text.clone()));
    }
    Ok(out)
}

/// Words that ask a question rather than say what it is about: question words, auxiliaries,
/// quantity words, verbs of saying. English. The index keeps them (a turn may be about "what
/// she did"), but as query words they match every short question in a chat ("What did you
/// buy?") and outrank the turn that holds the answer. Pronouns stay (in third-person notes "he"
/// and "she" find the fact), and so do words that are also names or content ("may", "us").
/// On the dev set (bench/devset) taking these out moved R@5 from 0.309 to 0.386.
const QUESTION_WORDS: &str = "what when where which who whom whose why how do does did doing \
    done have has had having am were been being can could would should shall might must about \
    much many say said says tell told mention mentioned";

/// The query's words that a BM25 search scores in a text: with `all` (every word must occur)
/// all of them; otherwise, for English and for plain words, the words left when
/// [`QUESTION_WORDS`] are taken out, unless that would leave none. The previous turn's field
/// is still asked every word: a question word there marks the answer to such a question.
pub(super) fn query_words(
    idx: &SearchIndex,
    text: &str,
    all: bool,
) -> Result<Vec<(usize, String)>> {
    use std::collections::HashSet;
    use std::sync::OnceLock;
    static STEMMED: OnceLock<HashSet<String>> = OnceLock::new();
    static PLAIN: OnceLock<HashSet<String>> = OnceLock::new();
    let words = analyze(idx, text)?;
    let cell = match idx.cfg.language.as_str() {
        "english" => &STEMMED,
        "none" => &PLAIN,
        _ => return Ok(words),
    };
    if all {
        return Ok(words);
    }
    // The list as this analyzer reads it (stemmed for English), worked out once.
    let question = match cell.get() {
        Some(q) => q,
        None => {
            let q = analyze(idx, QUESTION_WORDS)?.into_iter().map(|(_, w)| w);
            cell.get_or_init(|| q.collect())
        }
    };
    let kept: Vec<(usize, String)> = words
        .iter()
        .filter(|(_, w)| !question.contains(w))
        .cloned()
        .collect();
    Ok(if kept.is_empty() { words } else { kept })
}

/// For `explain`: the query's words that [`query_words`] left out of the text match.
pub(super) fn left_out_note(
    idx: &SearchIndex,
    text: &str,
    req: &super::Request,
) -> Result<Option<String>> {
    let kept = query_words(idx, text, req.all_words)?;
    let mut out: Vec<String> = Vec::new();
    for (p, w) in analyze(idx, text)? {
        if !kept.iter().any(|(q, _)| *q == p) && !out.contains(&w) {
            out.push(w);
        }
    }
    Ok((!out.is_empty()).then(|| {
        format!(
            "question words matched only in the previous turn, not in the text: {}",
            out.join(", ")
        )
    }))
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
fn push_must(out: &mut Vec<(Occur, Box<dyn Query>)>, q: Box<dyn Query>) {
    out.push((
        Occur::Must,
        Box::new(ConstScoreQuery::new(q, 0.0)) as Box<dyn Query>,
    ));
}

pub(super) fn filter_clauses(
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
    if let (Some(at), Some(cf)) = (f.as_of, chunk) {
        push(Box::new(RangeQuery::new(
            Bound::Unbounded,
            Bound::Included(Term::from_field_i64(cf.clock, at)),
        )));
    }
    if let Some(field) = category {
        // Notes share the category index; their documents carry a mark of their own.
        let note = || {
            Box::new(TermQuery::new(
                Term::from_field_text(field, crate::index::NOTE_MARK),
                IndexRecordOption::Basic,
            )) as Box<dyn Query>
        };
        match f.kind {
            Some(super::Kind::Note) => push_must(&mut out, note()),
            Some(super::Kind::Category) => out.push((Occur::MustNot, note())),
            _ => {}
        }
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

pub(super) fn with_filters(
    text: Box<dyn Query>,
    filters: Vec<(Occur, Box<dyn Query>)>,
) -> Box<dyn Query> {
    if filters.is_empty() {
        return text;
    }
    let mut clauses = vec![(Occur::Must, text)];
    clauses.extend(filters);
    Box::new(BooleanQuery::new(clauses))
}

/// Query words with their positions.
pub(super) type Words = [(usize, String)];

/// With `all`, every word must occur in `field` itself (the context field only adds score).
/// The context field, weighted, is queried with its own words (`context.2`).
pub(super) fn bm25_text_query(
    field: Field,
    context: Option<(Field, f32, &Words)>,
    words: &Words,
    all: bool,
) -> Box<dyn Query> {
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    let term = |f: Field, w: &str| -> Box<dyn Query> {
        Box::new(TermQuery::new(
            Term::from_field_text(f, w),
            IndexRecordOption::WithFreqs,
        ))
    };
    for w in distinct(words) {
        clauses.push((
            if all { Occur::Must } else { Occur::Should },
            term(field, w),
        ));
    }
    if let Some((cf, weight, cwords)) = context
        && weight > 0.0
    {
        for w in distinct(cwords) {
            clauses.push((
                Occur::Should,
                Box::new(BoostQuery::new(term(cf, w), weight)),
            ));
        }
    }
    if clauses.is_empty() {
        return Box::new(EmptyQuery);
    }
    Box::new(BooleanQuery::new(clauses))
}

/// The words, each once, in their first order.
fn distinct(words: &[(usize, String)]) -> Vec<&str> {
    let mut seen: Vec<&str> = Vec::new();
    for (_, w) in words {
        if !seen.contains(&w.as_str()) {
            seen.push(w);
        }
    }
    seen
}

pub(super) fn phrase_query(field: Field, words: &[(usize, String)]) -> Box<dyn Query> {
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
pub(super) fn top(
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

/// Chunks of `session` at positions `lo..=hi`.
pub(super) fn session_range(
    f: &crate::index::ChunkFields,
    session: &str,
    lo: u64,
    hi: u64,
) -> Box<dyn Query> {
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
}
