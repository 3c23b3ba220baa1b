//! Exact mode precision and auto-mode routing between exact and BM25.

use super::{BETA, GAMMA, assert_exact_precision, contents, fixture, key_set, keys, search, set};
use crate::util::TestEnv;

/// (literal, exactly the hits it must give)
fn canaries() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("ECONNREFUSED", vec!["alpha#3", "base:db.error"]),
        (
            "ECONNREFUSED 127.0.0.1:5432",
            vec!["alpha#3", "base:db.error"],
        ),
        ("127.0.0.1:5432", vec!["alpha#3", "base:db.error"]),
        ("127.0.0.1:54321", vec!["alpha#4"]),
        ("E0382", vec!["beta#0"]),
        ("E03820", vec!["beta#1"]),
        ("max_size=10", vec!["alpha#7"]),
        ("max_size=100", vec!["alpha#8"]),
        ("src/store/txn.rs", vec!["beta#2"]),
        ("src/store/txn_test.rs", vec!["beta#3"]),
        (
            "at Object.<anonymous> (/app/index.js:10:5)",
            vec!["gamma#1"],
        ),
        (
            "at Object.<anonymous> (/app/index.js:10:55)",
            vec!["gamma#2"],
        ),
        (
            "Module._compile (node:internal/modules/cjs/loader:1105:14)",
            vec!["gamma#3"],
        ),
        (
            "canary_token",
            vec![
                "alpha#1",
                "beta#7",
                "gamma#4",
                "delta#3",
                "base:canary",
                "projects:web",
            ],
        ),
        ("the pool", vec!["alpha#2"]),
        ("Foo", vec!["beta#5"]),
        ("foo", vec!["beta#6"]),
    ]
}

#[test]
fn exact_mode_finds_identifier_canaries_with_no_false_positives() {
    let env = fixture();
    for (literal, want) in canaries() {
        let v = search(&env, &[literal, "--mode", "exact", "--limit", "100"]);
        assert_eq!(v["engine"], "exact", "{literal}: {v:#}");
        assert_exact_precision(&v, literal);
        assert_eq!(key_set(&v), set(&want), "{literal}: {v:#}");
    }
}

#[test]
fn exact_mode_rejects_phrase_candidates_that_lack_the_literal() {
    let env = fixture();
    // Each of these chunks holds the query's words in order, but not its bytes.
    for (literal, decoy) in [
        ("src/store/txn.rs", "beta#4"), // "src store txn rs" in prose
        ("max_size=10", "alpha#9"),     // "max size 10" in prose
        ("ECONNREFUSED", "gamma#7"),    // lower case
    ] {
        let bm = search(&env, &[literal, "--mode", "bm25", "--limit", "100"]);
        assert!(
            key_set(&bm).contains(decoy),
            "{literal}: the decoy {decoy} should be a word match: {bm:#}"
        );
        let ex = search(&env, &[literal, "--mode", "exact", "--limit", "100"]);
        assert!(!key_set(&ex).contains(decoy), "{literal}: {ex:#}");
        assert_exact_precision(&ex, literal);
    }
}

#[test]
fn exact_mode_is_case_sensitive() {
    let env = fixture();
    let upper = search(&env, &["Foo", "--mode", "exact"]);
    assert_eq!(contents(&upper), vec![BETA[5]]);
    let lower = search(&env, &["foo", "--mode", "exact"]);
    assert_eq!(contents(&lower), vec![BETA[6]]);
    let shout = search(&env, &["FOO", "--mode", "exact"]);
    assert_eq!(shout["count"], 0, "{shout:#}");
    let lc = search(&env, &["econnrefused", "--mode", "exact"]);
    assert_eq!(contents(&lc), vec![GAMMA[7]]);
    // BM25 folds case: both are word matches.
    let bm = key_set(&search(&env, &["Foo", "--mode", "bm25", "--context", "0"]));
    assert!(bm.contains("beta#5") && bm.contains("beta#6"), "{bm:?}");
}

#[test]
fn auto_mode_routes_identifiers_to_exact() {
    let env = fixture();
    for (literal, want) in canaries() {
        // Plain lower-case words are not identifier-like; the rest are.
        if matches!(literal, "the pool" | "Foo" | "foo") {
            continue;
        }
        let v = search(&env, &[literal, "--limit", "100"]);
        assert_eq!(v["engine"], "exact", "{literal}: {v:#}");
        assert_eq!(v["mode"], "auto");
        assert_exact_precision(&v, literal);
        assert_eq!(key_set(&v), set(&want), "{literal}: {v:#}");
    }
}

#[test]
fn auto_mode_sends_quoted_phrases_to_exact() {
    let env = fixture();
    let v = search(&env, &["\"checkout redesign\"", "--limit", "100"]);
    assert_eq!(v["engine"], "exact", "{v:#}");
    assert_exact_precision(&v, "checkout redesign");
    // "checkout page redesign" (alpha#0) has both words but not the phrase.
    assert_eq!(key_set(&v), set(&["alpha#11", "projects:web"]), "{v:#}");
    // Unquoted, the same words are a BM25 query that also finds alpha#0.
    let v = search(&env, &["checkout redesign", "--limit", "100"]);
    assert_eq!(v["engine"], "bm25");
    assert!(key_set(&v).contains("alpha#0"), "{v:#}");
}

#[test]
fn auto_mode_falls_back_to_bm25_with_a_note_when_exact_finds_nothing() {
    let env = fixture();
    let v = search(&env, &["max_size=999", "--limit", "100", "--context", "0"]);
    assert_eq!(v["engine"], "bm25", "{v:#}");
    let notes = v["notes"].to_string();
    assert!(notes.contains("no exact match"), "{v:#}");
    // BM25 answers with the word matches.
    let k = key_set(&v);
    assert!(k.contains("alpha#7") && k.contains("alpha#8"), "{v:#}");
    // Exact mode itself does not fall back.
    let v = search(&env, &["max_size=999", "--mode", "exact"]);
    assert_eq!(v["engine"], "exact");
    assert_eq!(v["count"], 0, "{v:#}");
    // An identifier found nowhere: BM25 answers with nothing, still naming itself.
    let v = search(&env, &["E9999"]);
    assert_eq!(v["engine"], "bm25", "{v:#}");
    assert_eq!(v["count"], 0);
}

#[test]
fn exact_mode_finds_identifiers_longer_than_the_token_length_limit() {
    let env = TestEnv::new();
    // A SHA-512 hex digest: 128 characters without a separator.
    let digest: String = (0..128)
        .map(|i| char::from_digit((i * 7 + 3) % 16, 16).unwrap())
        .collect();
    env.ok(&[
        "ingest",
        "--session-id",
        "builds",
        "--text",
        &format!("artifact digest {digest} uploaded"),
    ]);
    let v = search(&env, &[&digest, "--mode", "exact"]);
    assert_exact_precision(&v, &digest);
    assert_eq!(keys(&v), vec!["builds#0"], "{v:#}");
    let v = search(&env, &[&digest]);
    assert_eq!(keys(&v), vec!["builds#0"], "auto: {v:#}");
}
