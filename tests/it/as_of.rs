//! Memory as of a date: a category as it stood then (read, context), a session as it stood
//! then (fetch), from history and clocks alone.

use serde_json::json;

use crate::util::TestEnv;

fn at(env: &mut TestEnv, when: &str) {
    env.set_env("MEMDIR_CLOCK", when);
}

#[test]
fn read_and_context_show_the_version_current_then() {
    let mut env = TestEnv::new();
    at(&mut env, "2026-10-01T09:00:00Z");
    env.ok(&["write", "plan", "--data", r#"{"deploy": "Friday"}"#]);
    at(&mut env, "2026-10-15T09:00:00Z");
    env.ok(&[
        "write",
        "plan",
        "--merge",
        "--data",
        r#"{"deploy": "Tuesday"}"#,
    ]);
    at(&mut env, "2026-11-01T09:00:00Z");
    env.ok(&["write", "other", "--data", r#"{"x": 1}"#]);

    let then = env.ok(&["read", "plan", "--as-of", "2026-10-10"]);
    assert_eq!(then["data"], json!({"deploy": "Friday"}));
    assert_eq!(then["meta"]["version"], 1);
    assert_eq!(then["meta"]["current"], false);
    // A date means the whole of that day; RFC 3339 means that instant.
    assert_eq!(
        env.ok(&["read", "plan", "--as-of", "2026-10-15"])["data"]["deploy"],
        "Tuesday"
    );
    assert_eq!(
        env.ok(&["read", "plan", "--as-of", "2026-10-15T08:59:59Z"])["data"]["deploy"],
        "Friday"
    );
    let now = env.ok(&["read", "plan", "--as-of", "2026-11-02"]);
    assert_eq!(now["data"]["deploy"], "Tuesday");
    assert_eq!(now["meta"]["current"], true);

    let c = env.ok(&["context", "plan", "other", "--as-of", "2026-10-10"]);
    assert_eq!(c["categories"]["plan"]["data"]["deploy"], "Friday");
    assert_eq!(
        c["missing"],
        json!(["other"]),
        "other did not exist yet: {c}"
    );
}

#[test]
fn before_its_first_write_and_after_its_delete_a_category_is_not_found() {
    let mut env = TestEnv::new();
    at(&mut env, "2026-10-01T09:00:00Z");
    env.ok(&["write", "plan", "--data", r#"{"a": 1}"#]);
    at(&mut env, "2026-10-05T09:00:00Z");
    env.ok(&["delete", "plan"]);
    for (when, needle) in [
        ("2026-09-30", "did not exist"),
        ("2026-10-06", "was deleted"),
    ] {
        let r = env.run(&["read", "plan", "--as-of", when]);
        let e = r.error();
        assert_eq!(e["code"], "not_found", "{e}");
        assert!(e["message"].as_str().unwrap().contains(needle), "{e}");
    }
    assert_eq!(
        env.ok(&["read", "plan", "--as-of", "2026-10-02"])["data"]["a"],
        1
    );
}

#[test]
fn bad_as_of_is_a_clear_error() {
    let env = TestEnv::new();
    env.ok(&["write", "plan", "--data", r#"{"a": 1}"#]);
    let e = env
        .run(&["read", "plan", "--as-of", "last tuesday-ish"])
        .error();
    assert_eq!(
        (e["code"].clone(), e["field"].clone()),
        (json!("invalid"), json!("as_of")),
        "{e}"
    );
    let e = env
        .run(&["read", "plan", "--as-of", "2026-10-02", "--version", "1"])
        .error();
    assert_eq!(e["code"], "invalid", "{e}");
    let e = env.run(&["fetch", "s", "--as-of", "nope"]).error();
    assert_eq!(e["field"], "as_of", "{e}");
}

#[test]
fn fetch_shows_a_session_as_it_stood_and_corrections_made_by_then() {
    let mut env = TestEnv::new();
    at(&mut env, "2026-10-01T09:00:00Z");
    let old = env.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--text",
        "Deploys are on Friday.",
    ]);
    at(&mut env, "2026-10-02T09:00:00Z");
    env.ok(&["ingest", "--session-id", "s", "--text", "Second turn."]);
    at(&mut env, "2026-10-20T09:00:00Z");
    env.ok(&[
        "ingest",
        "--session-id",
        "t",
        "--text",
        "Deploys moved to Tuesday.",
        "--supersedes",
        &format!("memdir://sessions/s/{}", old["position"]),
    ]);
    env.ok(&["ingest", "--session-id", "s", "--text", "Third turn."]);
    env.ok(&["search", "deploys"]);

    let then = env.ok(&["fetch", "s", "--as-of", "2026-10-10"]);
    assert_eq!(then["total"], 2, "{then}");
    assert_eq!(then["chunks"].as_array().unwrap().len(), 2);
    assert!(
        then["chunks"][0].get("superseded_by").is_none(),
        "not corrected yet: {then}"
    );
    let now = env.ok(&["fetch", "s"]);
    assert_eq!(now["total"], 3);
    assert_eq!(
        now["chunks"][0]["superseded_by"],
        json!(["memdir://sessions/t/0"])
    );
    let e = env.run(&["fetch", "t", "--as-of", "2026-10-10"]).error();
    assert_eq!(e["code"], "not_found", "{e}");
}
