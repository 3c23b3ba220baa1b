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

/// A store whose plan changed on 2026-10-20: a chunk and a category said Friday on 2026-10-01,
/// a correction (linked) and a merge say Tuesday; another session began later.
fn changed_plan(env: &mut TestEnv) {
    at(env, "2026-10-01T09:00:00Z");
    env.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--text",
        "We deploy orion on Fridays at noon.",
        "--source-id",
        "first",
    ]);
    at(env, "2026-10-01T09:05:00Z");
    env.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--text",
        "The linter is noisy today.",
    ]);
    env.ok(&["write", "plan", "--data", r#"{"deploy": "Friday"}"#]);
    at(env, "2026-10-20T09:00:00Z");
    env.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--text",
        "Heads up: orion deploys moved to Tuesdays.",
        "--supersedes",
        "first",
    ]);
    env.ok(&[
        "write",
        "plan",
        "--merge",
        "--data",
        r#"{"deploy": "Tuesday"}"#,
    ]);
    at(env, "2026-11-01T09:00:00Z");
    env.ok(&[
        "ingest",
        "--session-id",
        "later",
        "--text",
        "orion deploy checklist",
    ]);
}

/// Every text an answer shows: hits' texts and their context lines.
fn shown(r: &serde_json::Value) -> String {
    r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let ctx: Vec<String> = h["context"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| c["content"].as_str().unwrap_or("").to_string())
                .collect();
            format!(
                "{} {} {}",
                h["content"].as_str().unwrap_or(""),
                h["text"].as_str().unwrap_or(""),
                ctx.join(" ")
            )
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

#[test]
fn search_as_of_answers_from_the_memory_as_it_stood() {
    let mut env = TestEnv::new();
    changed_plan(&mut env);
    let now = env.ok(&["search", "orion", "deploy", "Tuesday", "Friday"]);
    assert!(shown(&now).contains("Tuesday"), "{now}");

    let then = env.ok(&[
        "search",
        "orion",
        "deploy",
        "Tuesday",
        "Friday",
        "--as-of",
        "2026-10-10",
    ]);
    let text = shown(&then);
    // Nothing saved later shows, not even as a context line; the category is its version then.
    assert!(
        !text.contains("Tuesday"),
        "a later text shows as of then: {then}"
    );
    assert!(
        !text.contains("checklist"),
        "a later session shows as of then: {then}"
    );
    assert!(text.contains("Fridays at noon"), "{then}");
    let cat = then["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["kind"] == "category")
        .expect("the category as it was");
    assert!(cat.to_string().contains("Friday"), "{cat}");
    // The correction was not saved yet: the old chunk is not marked and ranks first.
    let best = &then["results"][0];
    assert_eq!(best["kind"], "chunk", "{then}");
    assert!(
        best["content"].as_str().unwrap().contains("Fridays"),
        "{then}"
    );
    assert!(best.get("superseded_by").is_none(), "{then}");

    // Before anything was saved, nothing; a bad time is a clear error.
    let empty = env.ok(&["search", "orion", "--as-of", "2026-09-01"]);
    assert_eq!(empty["count"], 0, "{empty}");
    let e = env.run(&["search", "orion", "--as-of", "someday"]).error();
    assert_eq!(
        (e["code"].as_str(), e["field"].as_str()),
        (Some("invalid"), Some("as_of")),
        "{e}"
    );

    // Exact mode honours the time too.
    let exact = env.ok(&[
        "search",
        "\"moved to Tuesdays\"",
        "--mode",
        "exact",
        "--as-of",
        "2026-10-10",
    ]);
    assert_eq!(exact["count"], 0, "{exact}");
    let exact = env.ok(&[
        "search",
        "\"moved to Tuesdays\"",
        "--mode",
        "exact",
        "--as-of",
        "2026-10-21",
    ]);
    assert_eq!(exact["count"], 1, "{exact}");
}

#[test]
fn search_as_of_after_a_correction_ranks_the_correction_first_and_survives_a_reindex() {
    let mut env = TestEnv::new();
    changed_plan(&mut env);
    let args = [
        "search",
        "orion",
        "deploy",
        "Fridays",
        "--as-of",
        "2026-10-25",
        "--kind",
        "chunk",
    ];
    let r = env.ok(&args);
    assert!(
        r["results"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Tuesdays"),
        "{r}"
    );
    let old = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["content"].as_str().unwrap_or("").contains("Fridays"))
        .map(|h| h["superseded_by"].clone());
    if let Some(by) = old {
        assert_eq!(by, json!(["memdir://sessions/s/2"]), "{r}");
    }
    // The index is derived: rebuilt from nothing, the answer is the same.
    std::fs::remove_dir_all(env.dir.join(".memdir/index")).unwrap();
    env.ok(&["reindex"]);
    assert_eq!(env.ok(&args), r);
}

#[test]
fn list_and_overview_as_of_show_what_existed_then() {
    let mut env = TestEnv::new();
    changed_plan(&mut env);
    at(&mut env, "2026-11-02T09:00:00Z");
    env.ok(&["write", "newer", "--data", r#"{"x": 1}"#]);
    env.ok(&["delete", "plan"]);

    let then = env.ok(&["list", "--as-of", "2026-10-10"]);
    assert_eq!(then["count"], 1, "{then}");
    assert_eq!(then["categories"][0]["name"], "plan");
    assert_eq!(then["categories"][0]["version"], 1);
    let later = env.ok(&["list", "--as-of", "2026-10-25"]);
    assert_eq!(later["categories"][0]["version"], 2, "{later}");
    let now = env.ok(&["list"]);
    assert_eq!(now["count"], 1, "plan was deleted since: {now}");
    assert_eq!(now["categories"][0]["name"], "newer");

    let o = env.ok(&["overview", "--days", "0", "--as-of", "2026-10-10"]);
    assert_eq!(o["total"], 1, "the later session did not exist: {o}");
    assert_eq!(o["sessions"][0]["id"], "s");
    assert_eq!(o["sessions"][0]["message_count"], 2, "{o}");
    let o = env.ok(&["overview", "--days", "0"]);
    assert_eq!(o["total"], 2, "{o}");
    // days counts back from the time asked about.
    let o = env.ok(&["overview", "--days", "3", "--as-of", "2026-10-03"]);
    assert_eq!(o["total"], 1, "{o}");
    let o = env.ok(&["overview", "--days", "3", "--as-of", "2026-10-15"]);
    assert_eq!(o["total"], 0, "{o}");
}
