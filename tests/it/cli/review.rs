//! `review`: a category, a key or a chunk marked as checked, kept in `_reviews`; what is
//! stale; the review time on search hits and the stale count in status.

use serde_json::json;

use crate::util::TestEnv;

fn at(env: &mut TestEnv, when: &str) {
    env.set_env("MEMDIR_CLOCK", when);
}

#[test]
fn a_review_is_kept_in_the_reviews_category_and_shown_on_hits() {
    let mut env = TestEnv::new();
    at(&mut env, "2026-10-01T09:00:00Z");
    env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"editor": "helix", "shell": "fish"}"#,
    ]);
    env.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--text",
        "The staging host is stage2.example.dev.",
    ]);
    at(&mut env, "2026-11-01T09:00:00Z");
    let r = env.ok(&["review", "base", "--key", "editor", "--note", "asked Ada"]);
    assert_eq!(r["reviewed"]["target"], "category:base/editor", "{r}");
    assert_eq!(
        r["reviewed"]["reviewed_at"], "2026-11-01T09:00:00.000Z",
        "{r}"
    );
    assert_eq!(r["reviewed"]["note"], "asked Ada");
    at(&mut env, "2026-11-02T09:00:00Z");
    env.ok(&["review", "--chunk", "memdir://sessions/s/0"]);

    // A plain category a person can read, diff and sync.
    let kept = env.ok(&["read", "_reviews"]);
    assert_eq!(
        kept["data"]["category:base/editor"]["note"], "asked Ada",
        "{kept}"
    );
    assert_eq!(kept["data"]["category:base/editor"]["by"], "test-device");
    assert!(
        kept["data"]["chunk:memdir://sessions/s/0"]["at"].is_string(),
        "{kept}"
    );

    // Hits carry the time of their review: a category's key, a chunk by its uri.
    let hits = env.ok(&["search", "helix"]);
    let cat = &hits["results"][0];
    assert_eq!(
        (cat["category"].as_str(), cat["reviewed_at"].as_str()),
        (Some("base"), Some("2026-11-01T09:00:00.000Z")),
        "{hits}"
    );
    let other = env.ok(&["search", "fish", "--kind", "category"]);
    assert!(
        other["results"][0].get("reviewed_at").is_none(),
        "only editor was reviewed: {other}"
    );
    let chunk = env.ok(&["search", "staging host"]);
    assert_eq!(
        chunk["results"][0]["reviewed_at"], "2026-11-02T09:00:00.000Z",
        "{chunk}"
    );
    // Reviewing the whole category covers every key.
    env.ok(&["review", "base"]);
    let other = env.ok(&["search", "fish", "--kind", "category"]);
    assert_eq!(
        other["results"][0]["reviewed_at"], "2026-11-02T09:00:00.000Z",
        "{other}"
    );
}

#[test]
fn stale_lists_what_was_neither_written_nor_reviewed_and_status_counts_it() {
    let mut env = TestEnv::new();
    at(&mut env, "2026-01-01T00:00:00Z");
    env.ok(&["write", "old", "--data", r#"{"a": 1}"#]);
    env.ok(&["write", "checked", "--data", r#"{"a": 1}"#]);
    at(&mut env, "2026-05-01T00:00:00Z");
    env.ok(&["write", "fresh", "--data", r#"{"a": 1}"#]);
    env.ok(&["review", "checked"]);
    at(&mut env, "2026-05-11T00:00:00Z");
    let s = env.ok(&["review", "--stale", "30"]);
    assert_eq!(
        s["stale"],
        json!([{"category": "old", "updated_at": "2026-01-01T00:00:00.000Z", "days": 130}]),
        "{s}"
    );
    let s = env.ok(&["review", "--stale", "5"]);
    let names: Vec<&str> = s["stale"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["category"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["old", "checked", "fresh"],
        "longest untouched first: {s}"
    );
    assert_eq!(s["stale"][1]["reviewed_at"], "2026-05-01T00:00:00.000Z");
    // status counts the categories stale after 90 days (the reviews category is not one).
    assert_eq!(env.ok(&["status"])["stale"], 1);
}

#[test]
fn bad_reviews_are_clear_errors_and_change_nothing() {
    let mut env = TestEnv::new();
    at(&mut env, "2026-10-01T09:00:00Z");
    env.ok(&["write", "base", "--data", r#"{"editor": "helix"}"#]);
    env.ok(&["ingest", "--session-id", "s", "--text", "one"]);
    let cases: &[(&[&str], &str, &str)] = &[
        (&["review"], "invalid", "category"),
        (&["review", "--key", "editor"], "invalid", "key"),
        (&["review", "nope"], "not_found", ""),
        (&["review", "base", "--key", "nope"], "not_found", "key"),
        (
            &["review", "base", "--chunk", "memdir://sessions/s/0"],
            "invalid",
            "chunk",
        ),
        (
            &["review", "--chunk", "https://example.com/x"],
            "invalid",
            "chunk",
        ),
        (
            &["review", "--chunk", "memdir://sessions/s/9"],
            "not_found",
            "chunk",
        ),
        (
            &["review", "--chunk", "memdir://sessions/nope/0"],
            "not_found",
            "chunk",
        ),
        (&["review", "base", "--stale", "3"], "invalid", "stale"),
        (&["review", "_reviews"], "invalid", "category"),
        (&["review", "--stale", "-1"], "invalid", "stale"),
    ];
    for (args, code, field) in cases {
        let e = env.run(args).error();
        assert_eq!(e["code"], *code, "{args:?}: {e}");
        if !field.is_empty() {
            assert_eq!(e["field"], *field, "{args:?}: {e}");
        }
    }
    let long = "x".repeat(5000);
    let e = env.run(&["review", "base", "--note", &long]).error();
    assert_eq!(
        (e["code"].as_str(), e["field"].as_str()),
        (Some("too_large"), Some("note")),
        "{e}"
    );
    assert_eq!(
        env.run(&["read", "_reviews"]).error()["code"],
        "not_found",
        "nothing was written"
    );

    // A reviews file broken by hand: a review says so and changes nothing.
    env.ok(&["review", "base"]);
    let file = env.dir.join("categories/_reviews.json");
    std::fs::write(&file, "{not json").unwrap();
    let e = env.run(&["review", "base"]).error();
    assert_eq!(e["code"], "corrupt", "{e}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{not json");
    // Searches still answer, without review times.
    let hits = env.ok(&["search", "helix"]);
    assert!(hits["results"][0].get("reviewed_at").is_none(), "{hits}");
}
