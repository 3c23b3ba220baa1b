//! The `overview` of sessions: newest first, days, project and paging.

use serde_json::{Value, json};

use crate::util::TestEnv;

#[test]
fn overview_lists_sessions_newest_first_with_days_project_and_paging() {
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_CLOCK", "2026-01-01T00:00:00Z");
    env.ok(&[
        "ingest",
        "--session-id",
        "old",
        "--project",
        "web",
        "--metadata",
        r#"{"title": "Old talk"}"#,
        "--text",
        "first line\nsecond line",
    ]);
    env.set_env("MEMDIR_CLOCK", "2026-01-10T00:00:00Z");
    env.ok(&[
        "ingest",
        "--session-id",
        "new",
        "--project",
        "api",
        "--text",
        "\n  hello there\nmore",
    ]);
    env.set_env("MEMDIR_CLOCK", "2026-01-10T01:00:00Z");
    env.ok(&["ingest", "--session-id", "new", "--text", "second chunk"]);
    env.set_env("MEMDIR_CLOCK", "2026-01-05T00:00:00Z");
    env.ok(&[
        "ingest",
        "--session-id",
        "mid",
        "--project",
        "web",
        "--text",
        "m",
    ]);

    env.set_env("MEMDIR_CLOCK", "2026-01-11T00:00:00Z");
    // The default window is the last 7 days on every surface; 0 lists all.
    let recent = env.ok(&["overview"]);
    assert_eq!(recent["total"], 2, "{recent}");
    let all = env.ok(&["overview", "--days", "0"]);
    assert_eq!(all["total"], 3);
    let ids: Vec<&str> = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["new", "mid", "old"]);
    let new = &all["sessions"][0];
    assert_eq!(new["title"], "hello there");
    assert_eq!(new["message_count"], 2);
    assert_eq!(new["project"], "api");
    assert_eq!(new["start_time"], "2026-01-10T00:00:00.000Z");
    assert_eq!(new["last_active"], "2026-01-10T01:00:00.000Z");
    let old = &all["sessions"][2];
    assert_eq!(old["title"], "Old talk");
    assert_eq!(old["message_count"], 1);
    assert_eq!(old["start_time"], "2026-01-01T00:00:00.000Z");

    let recent = env.ok(&["overview", "--days", "3"]);
    assert_eq!(recent["total"], 1);
    assert_eq!(recent["sessions"][0]["id"], "new");
    let week = env.ok(&["overview", "--days", "7"]);
    assert_eq!(week["total"], 2);

    let web = env.ok(&["overview", "--days", "0", "--project", "web"]);
    let ids: Vec<&str> = web["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["mid", "old"]);
    let none = env.ok(&["overview", "--project", "nope"]);
    assert_eq!(none["sessions"], json!([]));

    let p1 = env.ok(&["overview", "--days", "0", "--limit", "2"]);
    assert_eq!(p1["sessions"].as_array().unwrap().len(), 2);
    assert_eq!(p1["next_offset"], 2);
    let p2 = env.ok(&["overview", "--days", "0", "--limit", "2", "--offset", "2"]);
    assert_eq!(p2["sessions"][0]["id"], "old");
    assert_eq!(p2["next_offset"], Value::Null);
}
