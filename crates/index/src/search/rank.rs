//! Session-aware ranking of a keyword pool: a turn's score also counts the turns beside it
//! and the best turn of its session, so the answer one turn away from the question's words
//! ranks near it. Pure: it depends on the pool alone, never on the limit or the segment
//! layout.

use tantivy::DocAddress;

use super::Request;

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

/// A turn of fewer words than this counts for less in keyword search: its BM25 is multiplied
/// by (its words / this) ^ [`SHORT_TURN_POWER`]. BM25's length normalisation otherwise puts a
/// chat's shortest turns ("What did you buy?") above the turn that answers, whenever one
/// shares a word with the query.
pub const SHORT_TURN_WORDS: f32 = 12.0;
/// See [`SHORT_TURN_WORDS`].
pub const SHORT_TURN_POWER: f32 = 0.75;

/// The factor a turn of `words` words (as the index counts them) has its BM25 multiplied by:
/// `None` at [`SHORT_TURN_WORDS`] or more.
pub fn short_turn_factor(words: u32) -> Option<f32> {
    let w = words as f32;
    (w < SHORT_TURN_WORDS).then(|| (w.max(1.0) / SHORT_TURN_WORDS).powf(SHORT_TURN_POWER))
}

/// A turn's own BM25, for `explain`: its base score without the period's lift and the short
/// turn's factor.
fn own_bm25(base: f32, period: f32, short: Option<f32>) -> f32 {
    (base - period) / short.unwrap_or(1.0)
}

/// How a chunk hit's score was made (`explain`): score = (bm25 × short + period + neighbour +
/// session) / (1 + the session share), `short` 1 when absent.
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
    /// What a period the question names gave the turn (see `period::lift`).
    pub period: f32,
    /// The factor a short turn's `bm25` was multiplied by ([`short_turn_factor`]).
    pub short: Option<f32>,
}

/// A turn the ranking considers.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub session: String,
    pub position: u64,
    /// Its base score (BM25, or a fused score) before spreading, with its `period` lift and
    /// times its `short` factor.
    pub bm25: f32,
    /// The part of `bm25` a period the question names gave it.
    pub period: f32,
    /// The factor a short turn's BM25 was multiplied by ([`short_turn_factor`]).
    pub short: Option<f32>,
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
    /// Ranked below every turn that is not: a corrected turn, or one its text lifted.
    pub demoted: bool,
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
pub(super) fn plain(cands: Vec<Candidate>) -> Vec<Ranked> {
    let best = cands.iter().map(|c| c.bm25).fold(0f32, f32::max);
    let mut out: Vec<Ranked> = cands
        .into_iter()
        .map(|c| Ranked {
            parts: ScoreParts {
                bm25: own_bm25(c.bm25, c.period, c.short),
                normalised: if best > 0.0 { c.bm25 / best } else { 0.0 },
                mix: c.mix,
                period: c.period,
                short: c.short,
                ..ScoreParts::default()
            },
            score: c.bm25,
            session: c.session,
            position: c.position,
            order: c.order,
            addr: c.addr,
            demoted: false,
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
    type Raw = (
        f32,
        u64,
        Option<DocAddress>,
        Option<(f32, f32)>,
        f32,
        Option<f32>,
    );
    let mut raw: BTreeMap<(String, u64), Raw> = BTreeMap::new();
    let mut session_best: HashMap<String, f32> = HashMap::new();
    for c in &cands {
        raw.insert(
            (c.session.clone(), c.position),
            (c.bm25, c.order, c.addr, c.mix, c.period, c.short),
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
        let (r, order, addr, mix, period, short) =
            raw.get(&key)
                .copied()
                .unwrap_or((0.0, u64::MAX, None, None, 0.0, None));
        let from_neighbours = neighbour * received.get(&key).copied().unwrap_or(0.0);
        let from_session = session * session_best.get(&key.0).copied().unwrap_or(0.0);
        out.push(Ranked {
            score: (r + from_neighbours + from_session) / (1.0 + session),
            parts: ScoreParts {
                bm25: own_bm25(r, period, short),
                normalised: r / best,
                neighbour: from_neighbours,
                session: from_session,
                mix,
                period,
                short,
            },
            session: key.0,
            position: key.1,
            order,
            addr,
            demoted: false,
        });
    }
    by_score_then_order(&mut out);
    out
}

/// The pool ranked: session-aware unless both shares are zero.
pub(super) fn rank(cands: Vec<Candidate>, req: &Request) -> Vec<Ranked> {
    if req.neighbour_share > 0.0 || req.session_share > 0.0 {
        spread(cands, req.neighbour_share, req.session_share)
    } else {
        plain(cands)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(session: &str, position: u64, bm25: f32, order: u64) -> Candidate {
        Candidate {
            session: session.into(),
            position,
            bm25,
            order,
            addr: None,
            mix: None,
            period: 0.0,
            short: None,
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
