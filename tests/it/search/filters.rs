//! Filters (project, session, category, kind, time) under every engine, never changing scores.

use serde_json::Value;

use super::{
    fixture, is_category, is_chunk, key, key_set, keys, ok_at, rows, score_of, search, set, time_of,
};
use crate::util::TestEnv;

type Pred = Box<dyn Fn(&Value) -> bool>;

fn filter_cases() -> Vec<(Vec<&'static str>, Pred)> {
    vec![
        (
            vec!["--project", "web"],
            Box::new(|r| is_chunk(r) && r["project"] == "web"),
        ),
        (
            vec!["--project", "infra"],
            Box::new(|r| is_chunk(r) && r["project"] == "infra"),
        ),
        (
            vec!["--session", "gamma"],
            Box::new(|r| is_chunk(r) && r["session_id"] == "gamma"),
        ),
        (
            vec!["--category", "base"],
            Box::new(|r| is_category(r) && r["category"] == "base"),
        ),
        (vec!["--kind", "chunk"], Box::new(is_chunk)),
        (vec!["--kind", "category"], Box::new(is_category)),
        (
            vec!["--since", "2026-01-10T10:00:00Z"],
            Box::new(|r| time_of(r) >= "2026-01-10T10:00:00.000Z"),
        ),
        (
            vec!["--until", "2026-01-31T23:59:59Z"],
            Box::new(|r| time_of(r) <= "2026-01-31T23:59:59.000Z"),
        ),
        (
            vec![
                "--since",
                "2026-01-05T00:00:00Z",
                "--until",
                "2026-02-10T00:00:00Z",
            ],
            Box::new(|r| {
                time_of(r) >= "2026-01-05T00:00:00.000Z" && time_of(r) <= "2026-02-10T00:00:00.000Z"
            }),
        ),
        (
            vec!["--project", "web", "--since", "2026-01-05T00:00:00Z"],
            Box::new(|r| {
                is_chunk(r) && r["project"] == "web" && time_of(r) >= "2026-01-05T00:00:00.000Z"
            }),
        ),
        (
            vec!["--session", "alpha", "--kind", "chunk"],
            Box::new(|r| is_chunk(r) && r["session_id"] == "alpha"),
        ),
        (
            vec!["--category", "projects", "--since", "2026-02-01T00:00:00Z"],
            Box::new(|r| {
                is_category(r)
                    && r["category"] == "projects"
                    && time_of(r) >= "2026-02-01T00:00:00.000Z"
            }),
        ),
        (
            vec!["--kind", "category", "--until", "2026-01-31T00:00:00Z"],
            Box::new(|r| is_category(r) && time_of(r) <= "2026-01-31T00:00:00.000Z"),
        ),
        (
            vec![
                "--kind",
                "chunk",
                "--project",
                "api",
                "--until",
                "2026-02-28T00:00:00Z",
            ],
            Box::new(|r| {
                is_chunk(r) && r["project"] == "api" && time_of(r) <= "2026-02-28T00:00:00.000Z"
            }),
        ),
    ]
}

/// For each filter: the filtered response is exactly the unfiltered one restricted to the hits
/// the filter keeps (same hits, same order, same scores), non-empty, and strictly smaller.
fn check_filters(env: &TestEnv, query: &str, mode: &str, engine: &str) {
    let base_args = [query, "--mode", mode, "--limit", "100", "--context", "0"];
    let base = search(env, &base_args);
    assert_eq!(base["engine"], engine, "{base:#}");
    for (filter, pred) in filter_cases() {
        let mut args = base_args.to_vec();
        args.extend_from_slice(&filter);
        let got = search(env, &args);
        let label = format!("{query:?} --mode {mode} {}", filter.join(" "));
        assert_eq!(got["engine"], engine, "{label}: {got:#}");
        for r in rows(&got) {
            assert!(pred(r), "{label}: a hit that fails the filter: {r:#}");
        }
        let want: Vec<(String, Value)> = rows(&base)
            .iter()
            .filter(|r| pred(r))
            .map(|r| (key(r), r["score"].clone()))
            .collect();
        let have: Vec<(String, Value)> = rows(&got)
            .iter()
            .map(|r| (key(r), r["score"].clone()))
            .collect();
        assert!(!have.is_empty(), "{label}: no hits");
        assert!(
            want.len() < rows(&base).len(),
            "{label}: the filter should remove something"
        );
        assert_eq!(
            have, want,
            "{label}: hits or scores differ from the unfiltered run"
        );
    }
}

#[test]
fn filters_under_bm25_keep_exactly_the_matching_hits_with_unchanged_scores() {
    let env = fixture();
    check_filters(&env, "canary_token", "bm25", "bm25");
}

#[test]
fn filters_under_exact_keep_exactly_the_matching_hits_with_unchanged_scores() {
    let env = fixture();
    check_filters(&env, "canary_token", "exact", "exact");
}

#[test]
fn filters_under_auto_keep_exactly_the_matching_hits_with_unchanged_scores() {
    let env = fixture();
    // Routed to exact.
    check_filters(&env, "canary_token", "auto", "exact");
    // Routed to BM25.
    check_filters(&env, "canary token", "auto", "bm25");
}

#[test]
fn filters_apply_to_the_bm25_fallback_of_auto_mode() {
    let env = fixture();
    // No exact hit passes these filters, so auto falls back to BM25, which must apply them
    // too: the api session's only canary is from February.
    let v = search(
        &env,
        &[
            "canary_token",
            "--project",
            "api",
            "--until",
            "2026-01-31T00:00:00Z",
            "--limit",
            "100",
        ],
    );
    assert_eq!(v["engine"], "bm25", "{v:#}");
    assert_eq!(v["count"], 0, "{v:#}");
    // A fallback that does find something still honours the filter.
    let v = search(
        &env,
        &["max_size=999", "--session", "beta", "--limit", "100"],
    );
    assert_eq!(v["engine"], "bm25", "{v:#}");
    assert_eq!(v["count"], 0, "{v:#}");
    let v = search(
        &env,
        &["max_size=999", "--session", "alpha", "--limit", "100"],
    );
    assert_eq!(v["engine"], "bm25");
    assert!(v["count"].as_u64().unwrap() > 0);
    assert!(rows(&v).iter().all(|r| r["session_id"] == "alpha"), "{v:#}");
}

#[test]
fn time_bounds_are_inclusive_and_accept_dates_offsets_and_epoch_millis() {
    let env = fixture();
    let q = [
        "canary_token",
        "--mode",
        "exact",
        "--kind",
        "chunk",
        "--limit",
        "100",
    ];
    let run = |extra: &[&str]| {
        let mut a = q.to_vec();
        a.extend_from_slice(extra);
        key_set(&search(&env, &a))
    };
    // beta was ingested at 2026-01-10T10:00:00Z exactly.
    assert!(run(&["--since", "2026-01-10T10:00:00Z"]).contains("beta#7"));
    assert!(run(&["--until", "2026-01-10T10:00:00Z"]).contains("beta#7"));
    assert!(!run(&["--until", "2026-01-10T09:59:59.999Z"]).contains("beta#7"));
    assert!(!run(&["--since", "2026-01-10T10:00:00.001Z"]).contains("beta#7"));
    // An offset names the same instant.
    assert!(run(&["--since", "2026-01-10T12:00:00+02:00"]).contains("beta#7"));
    assert!(!run(&["--since", "2026-01-10T11:00:01+01:00"]).contains("beta#7"));
    // Epoch milliseconds: 2026-01-10T10:00:00Z.
    assert!(run(&["--since", "1768039200000", "--until", "1768039200000"]).contains("beta#7"));
    // A bare date as the upper bound covers that whole day; as the lower bound, its start.
    assert_eq!(
        run(&["--since", "2026-01-10", "--until", "2026-01-10"]),
        set(&["beta#7"])
    );
    assert_eq!(run(&["--until", "2026-01-01"]), set(&["alpha#1"]));
    // An empty window.
    let v = search(
        &env,
        &[
            "canary_token",
            "--mode",
            "exact",
            "--since",
            "2027-01-01",
            "--limit",
            "100",
        ],
    );
    assert_eq!(v["count"], 0);
    // since after until: nothing, not an error.
    let v = search(
        &env,
        &[
            "canary_token",
            "--mode",
            "exact",
            "--since",
            "2026-03-01",
            "--until",
            "2026-01-01",
        ],
    );
    assert_eq!(v["count"], 0);
}

#[test]
fn invalid_filter_values_are_rejected_with_exit_3() {
    let env = fixture();
    for (args, field) in [
        (vec!["search", "pool", "--kind", "notebook"], "kind"),
        (vec!["search", "pool", "--since", "last tuesday"], "since"),
        (vec!["search", "pool", "--until", "2026-13-01"], "until"),
        (vec!["search", "pool", "--mode", "fuzzy"], "mode"),
    ] {
        let e = env.fail(&args, 3);
        assert_eq!(e["code"], "invalid", "{args:?}: {e}");
        assert_eq!(e["field"], field, "{args:?}: {e}");
    }
}

/// A session whose two chunks both match "gizmo" but differ in time and project.
fn mixed_session() -> TestEnv {
    let env = TestEnv::new();
    ok_at(
        &env,
        "2026-01-01T00:00:00Z",
        &[
            "ingest",
            "--session-id",
            "mixed",
            "--project",
            "web",
            "--text",
            "the gizmo broke",
        ],
        b"",
    );
    ok_at(
        &env,
        "2026-01-05T00:00:00Z",
        &[
            "ingest",
            "--session-id",
            "mixed",
            "--project",
            "api",
            "--text",
            "the gizmo works",
        ],
        b"",
    );
    env
}

#[test]
fn a_time_filter_defines_the_pool_so_a_dropped_neighbour_lends_nothing() {
    let env = mixed_session();
    let all = search(&env, &["gizmo", "--mode", "bm25", "--context", "0"]);
    let filtered = search(
        &env,
        &[
            "gizmo",
            "--mode",
            "bm25",
            "--context",
            "0",
            "--since",
            "2026-01-03",
        ],
    );
    assert_eq!(keys(&filtered), vec!["mixed#1"], "{filtered:#}");
    // Unfiltered, the matching turn beside it lends it a share of its score; filtered out, it
    // lends nothing (the filters define the pool that session-aware ranking sees).
    let (f, a) = (
        score_of(&filtered, "mixed#1").unwrap(),
        score_of(&all, "mixed#1").unwrap(),
    );
    assert!(f < a, "filtered {f} should be below unfiltered {a}");
}

#[test]
fn a_project_filter_defines_the_pool_so_a_dropped_neighbour_lends_nothing() {
    let env = mixed_session();
    let all = search(&env, &["gizmo", "--mode", "bm25", "--context", "0"]);
    let filtered = search(
        &env,
        &[
            "gizmo",
            "--mode",
            "bm25",
            "--context",
            "0",
            "--project",
            "api",
        ],
    );
    assert_eq!(keys(&filtered), vec!["mixed#1"], "{filtered:#}");
    // Unfiltered, the matching turn beside it lends it a share of its score; filtered out, it
    // lends nothing (the filters define the pool that session-aware ranking sees).
    let (f, a) = (
        score_of(&filtered, "mixed#1").unwrap(),
        score_of(&all, "mixed#1").unwrap(),
    );
    assert!(f < a, "filtered {f} should be below unfiltered {a}");
}
