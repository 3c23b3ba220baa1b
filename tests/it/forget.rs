//! Forget: chunks and category versions become tombstones that keep their place; the text is
//! gone from every file under the store (ledger and index included) and from search, and
//! `reindex` and `verify-store` pass afterwards.

use serde_json::json;

use crate::redaction::files_containing;
use crate::util::TestEnv;

fn seed(env: &TestEnv) {
    for (s, text) in [
        ("s1", "quokkasecret first line about the pool"),
        ("s1", "second chunk mentions the timeout"),
        ("s1", "third chunk wombatsecret here"),
        ("s2", "other session wombatsecret too"),
        ("s2", "other session dingosecret"),
    ] {
        env.ok(&["ingest", "--session-id", s, "--text", text]);
    }
    env.ok(&["search", "pool"]);
}

fn assert_gone(env: &TestEnv, word: &str) {
    let found = files_containing(&env.dir, word);
    assert!(found.is_empty(), "{word} is still in {found:?}");
    let hits = env.ok(&["search", word]);
    assert_eq!(
        hits["results"],
        json!([]),
        "{word} is still found: {hits:#}"
    );
}

#[test]
fn a_forgotten_chunk_becomes_a_tombstone_that_keeps_its_position_and_leaves_no_trace() {
    let env = TestEnv::new();
    seed(&env);
    let fetched = env.ok(&["fetch", "s1"]);
    let first = fetched["chunks"][0]["chunk_id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = env.ok(&[
        "forget",
        "--session-id",
        "s1",
        "--chunk-id",
        &first,
        "--yes",
    ]);
    assert_eq!(out["count"], 1);
    assert_eq!(out["chunks"][0]["position"], 0);
    assert!(
        out["chunks"][0].get("preview").is_none(),
        "a forget echoes nothing: {out}"
    );
    assert_gone(&env, "quokkasecret");
    let after = env.ok(&["fetch", "s1"]);
    assert_eq!(after["total"], 3);
    assert_eq!(after["chunks"][0]["content"], "");
    assert!(after["chunks"][0]["metadata"]["forgotten"].is_string());
    assert_eq!(
        after["chunks"][1]["content"],
        "second chunk mentions the timeout"
    );
    assert_eq!(after["chunks"][1]["position"], 1);
    // The neighbour's search document no longer carries the forgotten text as its context.
    assert_eq!(env.ok(&["search", "pool"])["results"], json!([]));
    // The session goes on where it was.
    let next = env.ok(&["ingest", "--session-id", "s1", "--text", "fourth"]);
    assert_eq!(next["position"], 3);
    env.assert_clean();
    env.ok(&["reindex"]);
    env.assert_clean();
    assert_gone(&env, "quokkasecret");
    // Forgetting it again changes nothing.
    let before = env.snapshot();
    let again = env.ok(&[
        "forget",
        "--session-id",
        "s1",
        "--chunk-id",
        &first,
        "--yes",
    ]);
    assert_eq!(again["count"], 0);
    assert_eq!(env.snapshot(), before);
}

#[test]
fn a_session_or_the_hits_of_a_query_are_forgotten_after_a_dry_run_shows_them() {
    let env = TestEnv::new();
    seed(&env);
    let before = env.snapshot();
    let plan = env.ok(&["forget", "--query", "wombatsecret", "--dry-run"]);
    assert_eq!(plan["dry_run"], true);
    assert_eq!(plan["count"], 2);
    let previews: Vec<&str> = plan["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["preview"].as_str().unwrap())
        .collect();
    assert!(
        previews.contains(&"third chunk wombatsecret here"),
        "{plan:#}"
    );
    assert_eq!(env.snapshot(), before, "a dry run changed the files");
    // Without a terminal to ask on, --yes is required, and nothing changes without it.
    let e = env.fail(&["forget", "--query", "wombatsecret"], 3);
    assert_eq!(e["field"], "yes");
    assert_eq!(env.snapshot(), before);
    let out = env.ok(&["forget", "--query", "wombatsecret", "--yes"]);
    assert_eq!(out["count"], 2);
    assert_gone(&env, "wombatsecret");
    let out = env.ok(&["forget", "--session-id", "s2", "--yes"]);
    assert_eq!(out["count"], 1, "one chunk of s2 was left: {out}");
    let s2 = env.ok(&["fetch", "s2"]);
    assert!(
        s2["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["content"] == "")
    );
    assert_gone(&env, "dingosecret");
    env.ok(&["reindex"]);
    env.assert_clean();
}

#[test]
fn bad_forget_requests_are_refused_and_change_nothing() {
    let env = TestEnv::new();
    seed(&env);
    let before = env.snapshot();
    let e = env.fail(
        &[
            "forget",
            "--session-id",
            "s1",
            "--chunk-id",
            "nope:9",
            "--yes",
        ],
        4,
    );
    assert_eq!(e["field"], "chunk_ids");
    env.fail(&["forget", "--session-id", "missing", "--yes"], 4);
    let e = env.fail(
        &["forget", "--session-id", "s1", "--query", "x", "--yes"],
        3,
    );
    assert!(e["message"].as_str().unwrap().contains("one of"), "{e}");
    env.fail(&["forget", "--yes"], 3);
    env.fail(&["forget", "--category", "base", "--yes"], 3);
    assert_eq!(env.snapshot(), before);
    // A query that hits nothing forgets nothing, and on an absent store creates none.
    let empty = TestEnv::new();
    assert_eq!(
        empty.ok(&["forget", "--query", "anything", "--yes"])["count"],
        0
    );
    assert!(!empty.dir.exists());
}

#[test]
fn an_old_category_version_is_forgotten_and_the_chain_still_verifies() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", "{\"note\": \"numbatsecret v1\"}"]);
    env.ok(&["write", "base", "--data", "{\"note\": \"clean v2\"}"]);
    // The current version cannot be forgotten.
    let e = env.fail(
        &["forget", "--category", "base", "--version", "2", "--yes"],
        5,
    );
    assert_eq!(e["field"], "version");
    let plan = env.ok(&[
        "forget",
        "--category",
        "base",
        "--version",
        "1",
        "--dry-run",
    ]);
    assert_eq!(plan["versions"][0]["version"], 1);
    let out = env.ok(&["forget", "--category", "base", "--version", "1", "--yes"]);
    assert_eq!(out["versions"][0]["version"], 1);
    let history = env.ok(&["history", "base"]);
    assert_eq!(history["total"], 2);
    assert_eq!(history["versions"][0]["version"], 2);
    let e = env.fail(&["restore", "base", "--version", "1"], 3);
    assert!(e["message"].as_str().unwrap().contains("forgotten"), "{e}");
    assert_eq!(
        env.category_data("base").unwrap(),
        json!({"note": "clean v2"})
    );
    assert_gone(&env, "numbatsecret");
    env.assert_clean();
    // Later versions still build on it.
    env.ok(&["write", "base", "--merge", "--data", "{\"more\": 1}"]);
    assert_eq!(env.ok(&["history", "base"])["versions"][0]["version"], 3);
    env.assert_clean();
}

/// A long-lived process (a server) answering a forget: the text is in no file of the store
/// when the answer comes, although a category write leaves the large file it replaced for a
/// background thread to free, and the forget rewrites files large enough for that too.
#[test]
fn a_forget_in_a_long_lived_process_leaves_no_trace_when_it_answers() {
    use memdir_api::{ForgetRequest, NewChunk, VersionRef, WriteRequest};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let m = memdir_engine::service::Memdir::open(&root).unwrap();
    // A session of about 100 KB with the secret in one chunk.
    for i in 0..200 {
        let content = if i == 57 {
            "the echidnasecret lives here".to_string()
        } else {
            format!("chunk {i} {}", "filler words ".repeat(40))
        };
        m.sessions()
            .ingest_one(NewChunk {
                session_id: "big".into(),
                content,
                project: None,
                metadata: None,
                ts: None,
                source_id: None,
                supersedes: None,
            })
            .unwrap();
    }
    // A category of about 90 KB whose first version holds it; the second replaces that file.
    let mut data: serde_json::Map<String, serde_json::Value> = (0..1000)
        .map(|k| (format!("key-{k:04}"), json!("words ".repeat(14))))
        .collect();
    for note in ["echidnasecret v1", "clean v2"] {
        data.insert("note".into(), json!(note));
        m.categories()
            .write(&WriteRequest {
                category: "big".into(),
                data: serde_json::Value::Object(data.clone()),
                ..Default::default()
            })
            .unwrap();
    }
    // What a process killed right after such a write leaves for the next startup to sweep.
    let left = root.join(".memdir/trash/20261201T000000000Z-0000_killed-0000");
    std::fs::create_dir_all(&left).unwrap();
    std::fs::write(left.join("1.replaced"), "{\"note\": \"echidnasecret v0\"}").unwrap();
    let out = m
        .upkeep()
        .forget(&ForgetRequest {
            category: Some("big".into()),
            version: Some(VersionRef::Ordinal(1)),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(out.versions.len(), 1);
    let out = m
        .upkeep()
        .forget(&ForgetRequest {
            session_id: Some("big".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(out.count, 200);
    let found = files_containing(&root, "echidnasecret");
    assert!(found.is_empty(), "still in {found:?}");
}
