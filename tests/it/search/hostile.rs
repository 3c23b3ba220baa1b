//! Hostile queries, query lengths, and Unicode: CJK, accents and emoji.

use super::{
    BETA, GAMMA, assert_exact_precision, check_response, fixture, key_set, keys, rows, search, set,
};
use crate::util::TestEnv;

const HOSTILE: &[&str] = &[
    "\"foo",
    "foo\"",
    "\"",
    "\"\"",
    "\" \"",
    "\"unbalanced quote and pool",
    "a:b",
    "title:pool",
    "field:value",
    "content:canary",
    ":",
    "::",
    "(",
    ")",
    "(pool",
    "pool)",
    "((()))",
    "pool OR timeout",
    "NOT pool",
    "pool AND NOT timeout",
    "AND",
    "OR",
    "NOT",
    "*",
    "pool*",
    "*pool",
    "?",
    "\\",
    "\\\\",
    "C:\\Users\\x\\pool",
    "+pool -timeout",
    "-pool",
    "--",
    "pool~2",
    "pool^3",
    "[1 TO 5]",
    "{a}",
    "/regex.*/",
    "'",
    "`rm -rf /`",
    "$(whoami)",
    "%s%n%x",
    "<script>alert(1)</script>",
    "SELECT * FROM chunks; --",
    "\u{200b}",
    "\u{feff}pool",
    "a\tb",
    "pool\ntimeout",
    "null",
    "{}",
    "[]",
    "🚀🔥💥",
    "👨‍👩‍👧",
    "❤️",
    "مرحبا بالعالم",
    "ÅÄÖ",
    "ẓ̵̛̛̇a̶l̷g̸o̴",
    "\u{1}\u{7f}",
    "\u{10ffff}",
];

fn hostile_in_mode(mode: &str) {
    let env = fixture();
    for q in HOSTILE {
        let r = env.run(&["search", "--mode", mode, "--limit", "50", "--", q]);
        if r.code != 0 {
            env.dump(&r);
            panic!("{q:?} in mode {mode} exited {}", r.code);
        }
        let v = r.json();
        check_response(&v);
        assert_eq!(v["query"], *q, "the query is echoed as given");
        let t = q.trim();
        let quoted = t.len() >= 2 && t.starts_with('"') && t.ends_with('"');
        let literal = if quoted { &t[1..t.len() - 1] } else { t };
        if v["engine"] == "exact" {
            assert_exact_precision(&v, literal);
        }
        if t.is_empty() {
            assert_eq!(v["engine"], "empty", "{q:?}: {v:#}");
        }
    }
    // The store is unharmed.
    env.assert_clean();
    assert_eq!(
        search(&env, &["canary_token", "--mode", "exact", "--limit", "100"])["count"],
        6
    );
}

#[test]
fn hostile_queries_never_break_auto_mode() {
    hostile_in_mode("auto");
}

#[test]
fn hostile_queries_never_break_bm25_mode() {
    hostile_in_mode("bm25");
}

#[test]
fn hostile_queries_never_break_exact_mode() {
    hostile_in_mode("exact");
}

#[test]
fn query_operators_are_plain_words_not_syntax() {
    let env = fixture();
    // "NOT pool" must not mean "everything without pool": pool is just a word here.
    let v = search(&env, &["NOT pool", "--mode", "bm25", "--context", "0"]);
    let k = key_set(&v);
    assert!(k.contains("alpha#1") && k.contains("alpha#2"), "{v:#}");
    // "title:pool" is not a field query: it finds no title field and does not fail.
    let v = search(&env, &["title:pool", "--limit", "100", "--context", "0"]);
    assert_eq!(
        v["engine"], "bm25",
        "no exact match, so BM25 answers: {v:#}"
    );
    assert!(key_set(&v).contains("alpha#1"));
}

#[test]
fn empty_and_whitespace_queries_answer_with_engine_empty() {
    let env = fixture();
    for q in ["", " ", "   ", "\t", "\n", " \t\n "] {
        for mode in ["auto", "bm25", "exact"] {
            let v = search(&env, &[q, "--mode", mode]);
            assert_eq!(v["engine"], "empty", "{q:?} {mode}: {v:#}");
            assert_eq!(v["count"], 0);
        }
    }
    // Also on a store that does not exist yet.
    let fresh = TestEnv::new();
    let v = search(&fresh, &[""]);
    assert_eq!(v["engine"], "empty");
}

#[test]
fn queries_up_to_10000_characters_work_and_longer_ones_are_too_large() {
    let env = fixture();
    let words = "pool timeout canary_token ECONNREFUSED 127.0.0.1:5432 café 東京 🚀 ";
    let make = |n: usize| -> String { words.chars().cycle().take(n).collect() };
    for n in [5_000, 10_000] {
        let q = make(n);
        assert_eq!(q.chars().count(), n);
        for mode in ["auto", "bm25", "exact"] {
            let v = search(&env, &[&q, "--mode", mode]);
            assert_eq!(v["query"].as_str().map(|s| s.chars().count()), Some(n));
            if mode != "exact" {
                assert!(v["count"].as_u64().unwrap() > 0, "{n} {mode}: {v:#}");
            }
        }
    }
    // 10,000 multi-byte characters are still within the limit: it counts characters.
    let wide = "東".repeat(10_000);
    search(&env, &[&wide, "--mode", "bm25"]);
    for q in [make(10_001), "東".repeat(10_001)] {
        for mode in ["auto", "bm25", "exact"] {
            let e = env.fail(&["search", &q, "--mode", mode], 9);
            assert_eq!(e["code"], "too_large", "{e}");
            assert_eq!(e["field"], "query");
            assert_eq!(e["limit"], 10_000);
        }
    }
}

#[test]
fn cjk_text_is_found_by_words_and_by_substrings() {
    let env = fixture();
    for mode in ["auto", "bm25", "exact"] {
        let v = search(&env, &["東京大学", "--mode", mode]);
        assert_eq!(rows(&v)[0]["content"], GAMMA[5], "{mode}: {v:#}");
        let v = search(&env, &["京大", "--mode", mode]);
        assert_eq!(rows(&v)[0]["content"], GAMMA[5], "{mode}: {v:#}");
    }
    // Exact is a phrase of characters: "京大" is not in "週末は大阪に行きました".
    let v = search(&env, &["京大", "--mode", "exact"]);
    assert_eq!(keys(&v), vec!["gamma#5"], "{v:#}");
    let v = search(&env, &["行きました", "--mode", "exact"]);
    assert_eq!(key_set(&v), set(&["gamma#5", "gamma#6"]), "{v:#}");
    assert_exact_precision(&v, "行きました");
    // A character that appears nowhere finds nothing in exact mode.
    let v = search(&env, &["京都", "--mode", "exact"]);
    assert_eq!(v["count"], 0, "{v:#}");
}

#[test]
fn accented_and_unaccented_words_find_each_other_in_bm25() {
    let env = fixture();
    for q in ["café", "cafe", "CAFÉ", "Cafe"] {
        let v = search(&env, &[q, "--mode", "bm25", "--context", "0"]);
        let k = key_set(&v);
        assert!(k.contains("alpha#10") && k.contains("beta#8"), "{q}: {v:#}");
    }
    // Exact keeps the bytes.
    let v = search(&env, &["café", "--mode", "exact"]);
    assert_eq!(keys(&v), vec!["alpha#10"]);
    let v = search(&env, &["cafe", "--mode", "exact"]);
    assert_eq!(keys(&v), vec!["beta#8"]);
}

#[test]
fn decomposed_accents_find_precomposed_text() {
    let env = fixture();
    // "café" typed as e + U+0301 COMBINING ACUTE ACCENT (NFD, as macOS often produces) looks
    // the same as the precomposed "café" in the corpus.
    let nfd = "cafe\u{301}";
    let v = search(&env, &[nfd, "--mode", "bm25", "--context", "0"]);
    let k = key_set(&v);
    assert!(k.contains("alpha#10"), "{v:#}");
}

#[test]
fn emoji_are_searchable() {
    let env = fixture();
    for mode in ["auto", "bm25", "exact"] {
        let v = search(&env, &["🚀", "--mode", mode]);
        assert_eq!(rows(&v)[0]["content"], BETA[7], "{mode}: {v:#}");
    }
    let v = search(&env, &["🚀", "--mode", "exact"]);
    assert_eq!(keys(&v), vec!["beta#7"]);
    let v = search(&env, &["Ship it 🚀", "--mode", "exact"]);
    assert_eq!(keys(&v), vec!["beta#7"]);
    // An emoji that appears nowhere.
    let v = search(&env, &["🦀", "--mode", "exact"]);
    assert_eq!(v["count"], 0);
}
