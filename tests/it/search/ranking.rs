//! BM25 ranking: stemming, stop words, score order and real BM25 scores.

use std::collections::BTreeSet;

use serde_json::json;

use super::{
    ALPHA, BETA, DELTA, GAMMA, contents, fixture, key, keys, ok_at, rows, score_of, search,
};
use crate::util::TestEnv;

#[test]
fn bm25_ranks_the_one_strongly_matching_chunk_first() {
    let env = fixture();
    let v = search(
        &env,
        &["kubernetes ingress certificate renewal", "--mode", "bm25"],
    );
    assert_eq!(v["engine"], "bm25");
    let r = rows(&v);
    assert!(r.len() >= 2, "{v:#}");
    assert_eq!(key(&r[0]), "alpha#6", "{v:#}");
    assert_eq!(r[0]["content"], ALPHA[6]);
    // Clearly ahead: it matches four rare words, the next one at most one.
    let (first, second) = (
        r[0]["score"].as_f64().unwrap(),
        r[1]["score"].as_f64().unwrap(),
    );
    assert!(first > 2.0 * second, "{first} vs {second}: {v:#}");
    // The same query in auto mode (not identifier-like) answers the same way.
    let auto = search(&env, &["kubernetes ingress certificate renewal"]);
    assert_eq!(auto["engine"], "bm25");
    assert_eq!(auto["mode"], "auto");
    assert_eq!(auto["results"], v["results"]);
}

#[test]
fn stemming_matches_other_forms_of_a_word() {
    let env = fixture();
    // "timeouts" and "timeout" share the stem: the chunk saying "timeout" is found.
    let v = search(&env, &["timeouts", "--mode", "bm25", "--limit", "20"]);
    let c = contents(&v);
    assert!(c.contains(&ALPHA[2].to_string()), "{v:#}");
    assert!(c.contains(&GAMMA[8].to_string()), "{v:#}");
    // "running" is nowhere in the corpus, yet "runs" and "run" are found.
    let v = search(&env, &["running", "--mode", "bm25", "--limit", "20"]);
    let c = contents(&v);
    assert!(c.iter().all(|s| !s.contains("running")));
    for want in [ALPHA[5], BETA[9], DELTA[6]] {
        assert!(c.contains(&want.to_string()), "{want:?} missing: {v:#}");
    }
    // Plural to singular.
    let v = search(&env, &["certificates", "--mode", "bm25"]);
    let c = contents(&v);
    assert!(c.contains(&ALPHA[6].to_string()), "{v:#}");
    assert!(c.contains(&DELTA[2].to_string()), "{v:#}");
}

#[test]
fn stop_words_are_ignored_in_queries() {
    let env = fixture();
    let plain = search(&env, &["pool", "--mode", "bm25"]);
    let padded = search(&env, &["the pool of it is", "--mode", "bm25"]);
    assert!(!rows(&plain).is_empty());
    // Same hits, same order, same scores: the stop words add nothing.
    assert_eq!(padded["results"], plain["results"]);
    // A query of stop words only matches nothing, though nearly every chunk has "the".
    let v = search(&env, &["the and of to", "--mode", "bm25"]);
    assert_eq!(v["engine"], "bm25");
    assert_eq!(v["count"], 0, "{v:#}");
}

#[test]
fn every_response_names_its_engine_and_sorts_positive_scores_descending() {
    let env = fixture();
    for (args, engine) in [
        (vec!["pool timeout gateway"], "bm25"),
        (vec!["pool timeout gateway", "--mode", "bm25"], "bm25"),
        (vec!["canary_token"], "exact"),
        (
            vec!["canary_token", "--mode", "bm25", "--limit", "50"],
            "bm25",
        ),
        (vec!["canary_token", "--mode", "exact"], "exact"),
        (vec!["the", "--mode", "exact"], "exact"),
        (vec![""], "empty"),
        (vec!["", "--mode", "exact"], "empty"),
        (vec!["", "--mode", "bm25"], "empty"),
    ] {
        let v = search(&env, &args);
        assert_eq!(v["engine"], engine, "{args:?}: {v:#}");
    }
    // Scores for a many-hit query are strictly informative: not all equal.
    let v = search(&env, &["canary_token", "--mode", "bm25", "--limit", "50"]);
    let scores: BTreeSet<u64> = rows(&v)
        .iter()
        .map(|r| r["score"].as_f64().unwrap().to_bits())
        .collect();
    assert!(scores.len() > 2, "{v:#}");
}

/// BM25 as tantivy computes it: k1 = 1.2, b = 0.75, idf = ln(1 + (N - n + 0.5) / (n + 0.5)),
/// times the short-turn factor memdir applies below 12 words: (doc_len / 12) ^ 0.75.
fn bm25(n_docs: f64, docs_with_term: f64, tf: f64, doc_len: f64, avg_len: f64) -> f64 {
    let idf = (1.0 + (n_docs - docs_with_term + 0.5) / (docs_with_term + 0.5)).ln();
    let short = (doc_len / 12.0).min(1.0).powf(0.75);
    short * idf * tf * 2.2 / (tf + 1.2 * (1.0 - 0.75 + 0.75 * doc_len / avg_len))
}

#[test]
fn bm25_scores_are_real_bm25_and_rarer_terms_score_higher() {
    let env = TestEnv::new();
    // One chunk per session: no neighbours, so no propagation; no stop words or stemming
    // changes in these words.
    for (s, text) in [
        ("a", "zebra giraffe lion"),
        ("b", "giraffe elephant"),
        ("c", "giraffe giraffe hippo rhino tiger"),
    ] {
        env.ok(&["ingest", "--session-id", s, "--text", text]);
    }
    let avg = (3.0 + 2.0 + 5.0) / 3.0;
    let zebra = search(&env, &["zebra", "--mode", "bm25"]);
    assert_eq!(keys(&zebra), vec!["a#0"]);
    let zebra_score = score_of(&zebra, "a#0").unwrap();
    let want = bm25(3.0, 1.0, 1.0, 3.0, avg);
    assert!(
        (zebra_score - want).abs() < 1e-5,
        "zebra: {zebra_score} vs BM25 {want}"
    );

    let giraffe = search(&env, &["giraffe", "--mode", "bm25"]);
    // Term frequency 2 in the longest doc comes first; among tf 1, the three-word doc beats
    // the two-word one, which BM25 alone would rank higher: both are short turns, counted in
    // proportion to their length.
    assert_eq!(keys(&giraffe), vec!["c#0", "a#0", "b#0"], "{giraffe:#}");
    for (k, tf, len) in [("a#0", 1.0, 3.0), ("b#0", 1.0, 2.0), ("c#0", 2.0, 5.0)] {
        let got = score_of(&giraffe, k).unwrap();
        let want = bm25(3.0, 3.0, tf, len, avg);
        assert!(
            (got - want).abs() < 1e-5,
            "giraffe {k}: {got} vs BM25 {want}"
        );
    }
    // The rarer term gives the same document a higher score.
    assert!(zebra_score > score_of(&giraffe, "a#0").unwrap());
    // Two terms add up.
    let both = search(&env, &["zebra giraffe", "--mode", "bm25"]);
    let got = score_of(&both, "a#0").unwrap();
    let want = bm25(3.0, 1.0, 1.0, 3.0, avg) + bm25(3.0, 3.0, 1.0, 3.0, avg);
    assert!(
        (got - want).abs() < 1e-5,
        "zebra giraffe: {got} vs BM25 {want}"
    );
    assert_eq!(keys(&both)[0], "a#0");
}

#[test]
fn the_answer_one_turn_after_the_questions_words_is_found_and_limits_only_cut() {
    let env = TestEnv::new();
    let chat = [
        "Maya: I finally adopted a dog last weekend!",
        "Leo: Where did you get her?",
        "Maya: From the Riverside shelter on Elm Street.",
        "Leo: Nice. How is work going?",
        "Maya: Busy, lots of meetings.",
    ];
    for t in chat {
        env.ok(&["ingest", "--session-id", "c1", "--text", t]);
    }
    for i in 0..12 {
        let t = format!("Leo: my neighbour's dog number {i} barks all night");
        env.ok(&["ingest", "--session-id", &format!("noise{i}"), "--text", &t]);
    }
    let q = "where did Maya adopt her dog";
    let v = search(
        &env,
        &[q, "--mode", "bm25", "--context", "0", "--limit", "5"],
    );
    // The answer shares no word with the question but sits beside the turns that do.
    assert!(keys(&v).contains(&"c1#2".to_string()), "{v:#}");
    // Every limit gives a prefix of the same ranking, with the same scores.
    let all = search(
        &env,
        &[q, "--mode", "bm25", "--context", "0", "--limit", "50"],
    );
    for limit in [1, 3, 7] {
        let some = search(
            &env,
            &[
                q,
                "--mode",
                "bm25",
                "--context",
                "0",
                "--limit",
                &limit.to_string(),
            ],
        );
        assert_eq!(rows(&some)[..], rows(&all)[..limit], "limit {limit}");
    }
    // explain gives the parts, which make the score.
    let e = search(
        &env,
        &[
            q,
            "--mode",
            "bm25",
            "--context",
            "0",
            "--explain",
            "--limit",
            "50",
        ],
    );
    for r in rows(&e) {
        let x = &r["explain"];
        let sum = x["bm25"].as_f64().unwrap() * x["short"].as_f64().unwrap_or(1.0)
            + x["neighbour"].as_f64().unwrap()
            + x["session"].as_f64().unwrap();
        let score = r["score"].as_f64().unwrap();
        assert!((sum / 1.5 - score).abs() < 1e-4 * score.max(1.0), "{r:#}");
    }
    let answer = rows(&e)
        .iter()
        .find(|r| r["session_id"] == "c1" && r["position"] == 2)
        .unwrap();
    assert!(answer["explain"]["neighbour"].as_f64().unwrap() > 0.0);
    assert!(
        rows(&all)[0].get("explain").is_none(),
        "parts only when asked"
    );
    // With windows, a matching turn inside a shown window is not a hit of its own.
    let w = search(
        &env,
        &[q, "--mode", "bm25", "--context", "2", "--limit", "5"],
    );
    let c1: Vec<u64> = rows(&w)
        .iter()
        .filter(|r| r["session_id"] == "c1")
        .map(|r| r["position"].as_u64().unwrap())
        .collect();
    for (i, a) in c1.iter().enumerate() {
        for b in &c1[i + 1..] {
            assert!(a.abs_diff(*b) > 2, "{a} and {b} share a window: {w:#}");
        }
    }
    assert!(
        w["notes"]
            .to_string()
            .contains("inside the context windows"),
        "{w:#}"
    );
}

#[test]
fn question_words_do_not_outrank_the_turn_that_holds_the_answer() {
    let env = TestEnv::new();
    let chat = [
        "Wren: What did you buy?",
        "Kofi: Ha. A waffle maker. I don't eat waffles.",
        "Wren: How did it go? What did they say?",
        "Kofi: What are you having for dinner tonight?",
    ];
    for t in chat {
        env.ok(&["ingest", "--session-id", "small-talk", "--text", t]);
    }
    let fact = "Wren: I finally decided to buy a car, a burgundy Mazda with a million miles on it.";
    for t in ["Kofi: Any news?", fact, "Kofi: Nice one."] {
        env.ok(&["ingest", "--session-id", "news", "--text", t]);
    }
    let q = "What car did Wren buy?";
    let v = search(&env, &[q, "--mode", "bm25", "--context", "0"]);
    // "What did you buy?" is short and holds three of the question's words; the answer holds
    // its content words, and comes first.
    assert_eq!(rows(&v)[0]["content"], fact, "{v:#}");
    assert!(
        v.get("notes")
            .is_none_or(|n| n.as_array().unwrap().is_empty()),
        "{v:#}"
    );
    // explain says which words were left out of the text match.
    let e = search(&env, &[q, "--mode", "bm25", "--context", "0", "--explain"]);
    let notes = e["notes"].to_string();
    assert!(
        notes.contains("previous turn, not in the text: what, did"),
        "{e:#}"
    );
    // A query of question words alone still searches with them.
    let w = search(
        &env,
        &["what did they say", "--mode", "bm25", "--context", "0"],
    );
    assert_eq!(rows(&w)[0]["content"], chat[2], "{w:#}");
    // A selection that needs every word (a forget by query) keeps them all: nothing holds
    // "what", "car" and "buy".
    let f = env.ok(&["forget", "--query", q, "--dry-run"]);
    assert!(!f.to_string().contains("Mazda"), "{f:#}");
}

/// What the terminal shows for a BM25 search of `q` with `--explain`.
fn explain_line(env: &TestEnv, q: &str) -> String {
    let out = env.run(&[
        "--human",
        "search",
        q,
        "--mode",
        "bm25",
        "--context",
        "0",
        "--explain",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout
}

/// Ingests `lines` as one JSONL batch, at a fixed time.
fn ingest_lines(env: &TestEnv, lines: &[serde_json::Value]) {
    let jsonl: String = lines.iter().map(|l| format!("{l}\n")).collect();
    ok_at(
        env,
        "2024-08-01T00:00:00Z",
        &["ingest", "--jsonl", "-"],
        jsonl.as_bytes(),
    );
}

#[test]
fn a_period_the_question_names_lifts_the_turns_saved_in_it() {
    let env = TestEnv::new();
    // Both long enough (12 words) to count in full.
    let spring =
        "Ana: the garden fence quote came in today, for the back yard by the old oak tree and shed";
    let summer =
        "Ana: garden fence quote, the fence quote again, for the back yard by the oak tree";
    ingest_lines(
        &env,
        &[
            json!({"session_id": "spring", "ts": "2024-03-12T09:00:00Z", "content": spring}),
            json!({"session_id": "summer", "ts": "2024-07-02T09:00:00Z", "content": summer}),
        ],
    );
    let args = |q: &'static str| [q, "--mode", "bm25", "--context", "0", "--explain"];
    // Without a period, the closer match of the words comes first.
    let plain = search(&env, &args("garden fence quote"));
    assert_eq!(contents(&plain), [summer, spring], "{plain:#}");
    for q in [
        "garden fence quote in March",
        "garden fence quote in March 2024",
        "garden fence quote on 12 March 2024",
        "garden fence quote 2024-03",
        "garden fence quote during 2024-03-12",
    ] {
        let v = search(&env, &args(q));
        assert_eq!(contents(&v), [spring, summer], "{q}: {v:#}");
        // explain shows the lift: a quarter of the turn's own score, in the formula too.
        let e = &rows(&v)[0]["explain"];
        let lift = e["period"].as_f64().expect("a period part");
        let own = e["bm25"].as_f64().unwrap() * e["short"].as_f64().unwrap_or(1.0);
        assert!((lift - 0.25 * own).abs() < 1e-3, "{e}");
        assert!(e["formula"].as_str().unwrap().contains("period"), "{e}");
        assert!(rows(&v)[1]["explain"].get("period").is_none(), "{v:#}");
    }
    // The terminal's explain line shows the lift too.
    let human = explain_line(&env, "garden fence quote in March");
    assert!(
        human.contains("bm25 ") && human.contains(" · period "),
        "{human}"
    );
    // A period nothing was saved in, and words that only look like one, change no order.
    for q in [
        "garden fence quote in 2019",
        "garden fence quote may go up",
        "garden fence quote 2024",
    ] {
        let v = search(&env, &args(q));
        assert_eq!(contents(&v), [summer, spring], "{q}: {v:#}");
        assert!(
            rows(&v)
                .iter()
                .all(|r| r["explain"].get("period").is_none()),
            "{v:#}"
        );
    }
}

#[test]
fn a_short_turn_counts_in_proportion_to_its_length() {
    let env = TestEnv::new();
    let short = "Ben: kayak rental?";
    let long = "Ana: we booked the kayak rental at the north lake for Saturday morning, \
                with two paddles, life vests, a dry bag and a waterproof map of the shore";
    ingest_lines(
        &env,
        &[
            json!({"session_id": "ask", "content": short}),
            json!({"session_id": "plan", "content": long}),
        ],
    );
    let v = search(
        &env,
        &[
            "kayak rental",
            "--mode",
            "bm25",
            "--context",
            "0",
            "--explain",
        ],
    );
    // BM25 alone puts the three-word turn first (its length normalisation); counted at
    // (3 / 12) ^ 0.75 of it, the turn that holds the plan comes first.
    assert_eq!(contents(&v), [long, short], "{v:#}");
    let r = rows(&v);
    let e = &r[1]["explain"];
    let factor = e["short"].as_f64().expect("a short factor");
    assert!((factor - (3.0f64 / 12.0).powf(0.75)).abs() < 1e-4, "{e}");
    assert!(
        e["formula"].as_str().unwrap().contains("bm25 × short"),
        "{e}"
    );
    assert!(
        e["bm25"].as_f64().unwrap() > r[0]["explain"]["bm25"].as_f64().unwrap(),
        "{v:#}"
    );
    // The parts still make the score.
    let parts = e["bm25"].as_f64().unwrap() * factor
        + e["neighbour"].as_f64().unwrap()
        + e["session"].as_f64().unwrap();
    assert!(
        (parts / 1.5 - r[1]["score"].as_f64().unwrap()).abs() < 1e-3,
        "{e}"
    );
    // A turn of twelve words or more is not touched.
    assert!(r[0]["explain"].get("short").is_none(), "{v:#}");
    let human = explain_line(&env, "kayak rental");
    assert!(human.contains(" · short 0.35"), "{human}");
}
