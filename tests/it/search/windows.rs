//! Context windows around hits, content truncation, and the shape of a result row.

use serde_json::json;

use super::{
    BETA, assert_window, check_response, fetched, fixture, is_category, is_chunk, key, key_set,
    keys, rows, search, set,
};
use crate::util::TestEnv;

#[test]
fn each_hit_carries_three_neighbours_per_side_by_default() {
    let env = fixture();
    let v = search(&env, &["max_size=10", "--mode", "exact"]);
    assert_eq!(keys(&v), vec!["alpha#7"]);
    assert_window(&env, &rows(&v)[0], 4, 10);
    // Also under BM25, and for every row.
    let v = search(&env, &["kubernetes ingress certificate", "--mode", "bm25"]);
    assert!(rows(&v).len() > 1);
    for r in rows(&v).iter().filter(|r| is_chunk(r)) {
        let p = r["position"].as_u64().unwrap();
        let last = fetched(&env, r["session_id"].as_str().unwrap()).len() as u64 - 1;
        assert_window(&env, r, p.saturating_sub(3), (p + 3).min(last));
    }
}

#[test]
fn filters_and_windows_work_on_ids_that_need_escaping() {
    let env = TestEnv::new();
    for (s, p, t) in [
        ("team/α β", "My Proj", "walrus one"),
        ("team/α β", "My Proj", "walrus two"),
        ("Team/α β", "", "walrus three"),
        ("../etc", "x:y", "walrus four"),
    ] {
        env.ok(&["ingest", "--session-id", s, "--project", p, "--text", t]);
    }
    for mode in ["auto", "bm25", "exact"] {
        let v = search(
            &env,
            &[
                "walrus",
                "--mode",
                mode,
                "--session",
                "team/α β",
                "--context",
                "1",
            ],
        );
        // Both turns match; outside exact mode, the one inside the other's window is shown
        // there rather than as a hit of its own.
        let mut shown = key_set(&v);
        for r in rows(&v) {
            for c in r["context"].as_array().unwrap() {
                shown.insert(format!(
                    "{}#{}",
                    r["session_id"].as_str().unwrap(),
                    c["position"]
                ));
            }
        }
        assert_eq!(shown, set(&["team/α β#0", "team/α β#1"]), "{mode}: {v:#}");
        if mode == "exact" {
            assert_eq!(v["count"], 2, "{v:#}");
        }
        for r in rows(&v) {
            assert_window(&env, r, 0, 1);
        }
        let v = search(
            &env,
            &[
                "walrus",
                "--mode",
                mode,
                "--project",
                "My Proj",
                "--context",
                "0",
            ],
        );
        assert_eq!(v["count"], 2, "{mode}: {v:#}");
        let v = search(&env, &["walrus", "--mode", mode, "--session", "../etc"]);
        assert_eq!(keys(&v), vec!["../etc#0"], "{mode}: {v:#}");
        assert_eq!(rows(&v)[0]["project"], "x:y");
        let v = search(&env, &["walrus", "--mode", mode, "--session", "team"]);
        assert_eq!(v["count"], 0, "{mode}: {v:#}");
    }
}

#[test]
fn windows_follow_positions_across_the_segments_of_two_replicas() {
    let env = TestEnv::new();
    for i in 0..3 {
        env.ok(&[
            "ingest",
            "--session-id",
            "s",
            "--text",
            &format!("from the first copy, number {i}"),
        ]);
    }
    search(&env, &["number"]);
    // The same store copied to another path mints a new replica and appends its own segment.
    let other = env.tmp.path().join("copy");
    for e in walkdir::WalkDir::new(&env.dir) {
        let e = e.unwrap();
        let to = other.join(e.path().strip_prefix(&env.dir).unwrap());
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&to).unwrap();
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
    let dir = other.display().to_string();
    for i in 3..6 {
        env.ok(&[
            "--dir",
            &dir,
            "ingest",
            "--session-id",
            "s",
            "--text",
            &format!("from the second copy, number {i}"),
        ]);
    }
    let segs = std::fs::read_dir(other.join("sessions/s")).unwrap().count();
    assert_eq!(segs, 2, "two replicas, two segments");
    let fetched = env.ok(&["--dir", &dir, "fetch", "s", "--limit", "100"]);
    let by_pos: Vec<&str> = fetched["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["content"].as_str().unwrap())
        .collect();
    let v = env.ok(&[
        "--dir",
        &dir,
        "search",
        "number",
        "--mode",
        "bm25",
        "--limit",
        "100",
        "--context",
        "1",
    ]);
    check_response(&v);
    // Six matching turns: the hits and their windows show each of them, no hit inside
    // another's window.
    let mut shown = std::collections::BTreeSet::new();
    let hits: Vec<u64> = rows(&v)
        .iter()
        .map(|r| r["position"].as_u64().unwrap())
        .collect();
    for (i, a) in hits.iter().enumerate() {
        for b in &hits[i + 1..] {
            assert!(a.abs_diff(*b) > 1, "{a} and {b} share a window: {v:#}");
        }
    }
    for r in rows(&v) {
        shown.insert(r["position"].as_u64().unwrap());
        for c in r["context"].as_array().unwrap() {
            shown.insert(c["position"].as_u64().unwrap());
        }
    }
    assert_eq!(shown, (0..6).collect(), "{v:#}");
    for r in rows(&v) {
        let p = r["position"].as_u64().unwrap() as usize;
        assert_eq!(r["content"], by_pos[p], "{r:#}");
        let ctx: Vec<(u64, &str)> = r["context"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["position"].as_u64().unwrap(),
                    c["content"].as_str().unwrap(),
                )
            })
            .collect();
        let want: Vec<(u64, &str)> = (p.saturating_sub(1)..=(p + 1).min(5))
            .filter(|i| *i != p)
            .map(|i| (i as u64, by_pos[i]))
            .collect();
        assert_eq!(ctx, want, "{r:#}");
    }
}

#[test]
fn context_zero_gives_no_window_and_twenty_is_the_most() {
    let env = fixture();
    let v = search(&env, &["max_size=10", "--mode", "exact", "--context", "0"]);
    assert_eq!(rows(&v)[0]["context"], json!([]));
    let v = search(&env, &["max_size=10", "--mode", "exact", "--context", "1"]);
    assert_window(&env, &rows(&v)[0], 6, 8);
    // alpha has 12 chunks: 20 per side covers all of it, and nothing of another session.
    let v = search(&env, &["max_size=10", "--mode", "exact", "--context", "20"]);
    assert_window(&env, &rows(&v)[0], 0, 11);
    let e = env.fail(&["search", "max_size=10", "--context", "21"], 3);
    assert_eq!(e["code"], "invalid");
    assert_eq!(e["field"], "context");
}

#[test]
fn two_hits_in_one_session_keep_their_own_windows() {
    let env = fixture();
    // "pool" is in alpha#1 and alpha#2 only: overlapping windows, never merged.
    let v = search(&env, &["pool", "--mode", "exact"]);
    assert_eq!(key_set(&v), set(&["alpha#1", "alpha#2"]), "{v:#}");
    for r in rows(&v) {
        match key(r).as_str() {
            "alpha#1" => assert_window(&env, r, 0, 4),
            "alpha#2" => assert_window(&env, r, 0, 5),
            k => panic!("{k}"),
        }
    }
    // Far apart in one session, and across sessions.
    let v = search(
        &env,
        &[
            "canary_token",
            "--mode",
            "exact",
            "--kind",
            "chunk",
            "--context",
            "2",
        ],
    );
    assert_eq!(rows(&v).len(), 4);
    for r in rows(&v) {
        let p = r["position"].as_u64().unwrap();
        let last = fetched(&env, r["session_id"].as_str().unwrap()).len() as u64 - 1;
        assert_window(&env, r, p.saturating_sub(2), (p + 2).min(last));
    }
    // Two hits in one session far apart: checkout at alpha#0 and alpha#11.
    let v = search(&env, &["checkout", "--mode", "exact", "--kind", "chunk"]);
    assert_eq!(key_set(&v), set(&["alpha#0", "alpha#11"]), "{v:#}");
    for r in rows(&v) {
        match key(r).as_str() {
            "alpha#0" => assert_window(&env, r, 0, 3),
            "alpha#11" => assert_window(&env, r, 8, 11),
            k => panic!("{k}"),
        }
    }
}

#[test]
fn windows_at_the_start_and_end_of_a_session_are_shorter() {
    let env = fixture();
    let first = search(&env, &["Kickoff", "--mode", "exact"]);
    assert_eq!(keys(&first), vec!["alpha#0"]);
    assert_window(&env, &rows(&first)[0], 0, 3);
    let last = search(&env, &["Wrap-up", "--mode", "exact"]);
    assert_eq!(keys(&last), vec!["alpha#11"]);
    assert_window(&env, &rows(&last)[0], 8, 11);
    let second = search(&env, &["E03820", "--mode", "exact"]);
    assert_window(&env, &rows(&second)[0], 0, 4);
    // A session of one chunk: the window is the hit alone.
    env.ok(&[
        "ingest",
        "--session-id",
        "solo",
        "--text",
        "a lonely quasar",
    ]);
    let v = search(&env, &["quasar", "--mode", "bm25"]);
    assert_eq!(keys(&v), vec!["solo#0"]);
    assert_window(&env, &rows(&v)[0], 0, 0);
}

#[test]
fn texts_are_cut_to_excerpts_around_the_query_unless_full_is_asked_for() {
    let env = TestEnv::new();
    // 1,200 characters, most of them two bytes wide (the cut counts characters), with the
    // query's word in the middle.
    let long: String = format!("{} longmarker {}", "é ".repeat(300), "ü ".repeat(294));
    assert_eq!(long.chars().count(), 1200);
    let plain: String = "word ".repeat(240);
    let short = "short neighbour";
    // Two turns from the hit, 149 characters: shown whole (an answer often sits there).
    let medium: String = ["turn"; 30].join(" ");
    for text in [
        medium.as_str(),
        plain.as_str(),
        long.as_str(),
        short,
        plain.as_str(),
    ] {
        env.ok(&["ingest", "--session-id", "s", "--text", text]);
    }
    let v = search(&env, &["longmarker", "--mode", "bm25"]);
    let r = rows(&v)
        .iter()
        .find(|r| key(r) == "s#2")
        .unwrap_or_else(|| panic!("{v:#}"))
        .clone();
    // The hit: at most 300 characters, centred on the match, marked where cut at both ends.
    let c = r["content"].as_str().unwrap();
    assert!(c.chars().count() <= 300, "{c}");
    assert!(c.starts_with('…') && c.ends_with('…'), "{c}");
    let at = c.find("longmarker").expect("the excerpt holds the match");
    let before = c[..at].chars().count();
    let after = c[at + "longmarker".len()..].chars().count();
    assert!(before.abs_diff(after) <= 30, "centred: {before} / {after}");
    assert!(long.contains(c.trim_matches('…')));
    assert_eq!(r["truncated"], true);
    // Neighbours: only position and text; at most 200 characters each, near the hit or not.
    let ctx = r["context"].as_array().unwrap();
    let positions: Vec<u64> = ctx
        .iter()
        .map(|c| c["position"].as_u64().unwrap())
        .collect();
    assert_eq!(positions, [0, 1, 3, 4]);
    assert_eq!(ctx[0]["content"], medium.as_str());
    assert_eq!(ctx[2]["content"], short);
    let near = ctx[1]["content"].as_str().unwrap();
    assert!(near.chars().count() <= 200 && near.ends_with('…') && !near.starts_with('…'));
    assert!(plain.starts_with(near.trim_end_matches('…')));
    let far = ctx[3]["content"].as_str().unwrap();
    let n = far.chars().count();
    assert!((150..=200).contains(&n) && far.ends_with('…'), "{n}: {far}");
    for c in ctx {
        assert_eq!(c.as_object().unwrap().len(), 2, "{c}");
    }

    let v = search(&env, &["longmarker", "--mode", "bm25", "--full"]);
    let r = rows(&v).iter().find(|r| key(r) == "s#2").unwrap().clone();
    assert_eq!(r["content"], long.as_str());
    assert!(r.get("truncated").is_none(), "{r:#}");
    let ctx = r["context"].as_array().unwrap();
    assert_eq!(ctx[1]["content"], plain.as_str());
    assert_eq!(ctx[3]["content"], plain.as_str());
    // Exactly 300 characters are not cut.
    let exact300 = format!("edgemarker {}", "x".repeat(289));
    assert_eq!(exact300.chars().count(), 300);
    env.ok(&["ingest", "--session-id", "t", "--text", &exact300]);
    let v = search(&env, &["edgemarker", "--mode", "bm25"]);
    assert_eq!(rows(&v)[0]["content"], exact300.as_str());
    assert!(rows(&v)[0].get("truncated").is_none());
}

#[test]
fn result_rows_keep_the_public_contract() {
    let env = fixture();
    let v = search(&env, &["canary_token", "--mode", "exact", "--limit", "100"]);
    let base_hash = env.ok(&["read", "base"])["meta"]["hash"].clone();
    for r in rows(&v) {
        if is_chunk(r) {
            for f in [
                "session_id",
                "position",
                "content",
                "score",
                "context",
                "chunk_id",
                "project",
                "ts",
            ] {
                assert!(r.get(f).is_some(), "chunk row without {f}: {r:#}");
            }
            for c in r["context"].as_array().unwrap() {
                assert!(c["position"].is_u64() && c["content"].is_string(), "{c}");
            }
        } else {
            assert!(is_category(r), "{r}");
            for f in ["category", "key_path", "content", "score", "hash"] {
                assert!(r.get(f).is_some(), "category row without {f}: {r:#}");
            }
            if r["category"] == "base" {
                assert_eq!(r["hash"], base_hash);
                assert_eq!(r["key_path"], "canary");
                assert_eq!(r["content"], "canary_token in base notes");
                assert_eq!(r["updated_at"], "2026-01-15T00:00:00.000Z");
            }
        }
    }
    let beta = rows(&v).iter().find(|r| key(r) == "beta#7").unwrap();
    assert_eq!(beta["project"], "web");
    assert_eq!(beta["ts"], "2026-01-10T10:00:00.000Z");
    assert_eq!(beta["content"], BETA[7]);
    assert_eq!(v["query"], "canary_token");
}

#[test]
fn the_note_counts_only_matching_turns_folded_into_a_shown_window() {
    let note = |v: &serde_json::Value| -> Option<String> {
        v["notes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str())
            .find(|n| n.contains("inside the context windows"))
            .map(str::to_string)
    };
    // One chunk: nothing else can be folded.
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "one", "--text", "a lone walrus"]);
    for mode in ["bm25", "auto", "exact"] {
        let v = search(&env, &["walrus", "--mode", mode]);
        assert_eq!(note(&v), None, "{mode}: {v:#}");
    }
    // Five turns, one matches: its neighbours are shown but do not match.
    let env = TestEnv::new();
    for t in [
        "hello",
        "the pelican flew",
        "a walrus swam",
        "goodbye",
        "later",
    ] {
        env.ok(&["ingest", "--session-id", "five", "--text", t]);
    }
    let v = search(&env, &["walrus", "--mode", "bm25"]);
    assert_eq!(rows(&v).len(), 1, "{v:#}");
    assert_eq!(note(&v), None, "{v:#}");
    // Two neighbouring turns match: one is the hit, the other is in its window, said once.
    env.ok(&["ingest", "--session-id", "five", "--text", "another walrus"]);
    env.ok(&[
        "ingest",
        "--session-id",
        "five",
        "--text",
        "the walrus again",
    ]);
    let v = search(
        &env,
        &["walrus", "--mode", "bm25", "--context", "4", "--limit", "1"],
    );
    assert_eq!(rows(&v).len(), 1, "{v:#}");
    assert_eq!(
        note(&v).as_deref(),
        Some("2 more matching turns are shown inside the context windows of these hits"),
        "{v:#}"
    );
}
