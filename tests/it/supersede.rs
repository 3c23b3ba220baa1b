//! Facts that change: a chunk that corrects earlier ones (`supersedes`) ranks above them in
//! search, marks them `superseded_by` in search and fetch, and the link lives in the files.

use serde_json::{Value, json};

use crate::util::TestEnv;

fn ingest(env: &TestEnv, session: &str, text: &str, extra: &[&str]) -> Value {
    let mut args = vec!["ingest", "--session-id", session, "--text", text];
    args.extend_from_slice(extra);
    env.ok(&args)
}

fn ids(search: &Value) -> Vec<String> {
    search["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["uri"].as_str().unwrap_or("").to_string())
        .collect()
}

/// The one segment file of a session written by this device.
fn segment(env: &TestEnv, session: &str) -> std::path::PathBuf {
    walkdir::WalkDir::new(env.path(&format!("sessions/{session}")))
        .into_iter()
        .filter_map(|e| e.ok())
        .find(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .expect("a segment file")
        .into_path()
}

/// The URI of an ingested chunk.
fn uri(ingested: &Value) -> String {
    format!(
        "memdir://sessions/{}/{}",
        ingested["session_id"].as_str().unwrap(),
        ingested["position"]
    )
}

/// A stale fact whose words match the question better than its correction's do.
fn stale_and_correction(env: &TestEnv) -> (String, String) {
    let old = ingest(
        env,
        "s1",
        "We moved the weekly deploy to Fridays; the deploy runs Friday at noon, deploy day Friday.",
        &["--source-id", "deploy-day"],
    );
    ingest(
        env,
        "s3",
        "Unrelated: the office plants need water on Mondays.",
        &[],
    );
    // Named by its uri, as a search hit shows it.
    let new = ingest(
        env,
        "s2",
        "Correction: deploys are back on Tuesdays.",
        &["--supersedes", &uri(&old)],
    );
    (uri(&old), uri(&new))
}

#[test]
fn a_correction_ranks_above_what_it_corrects_and_marks_it() {
    let env = TestEnv::new();
    let (old, new) = stale_and_correction(&env);
    let r = env.ok(&["search", "deploy", "day", "--limit", "5"]);
    let order = ids(&r);
    let (o, n) = (
        order
            .iter()
            .position(|i| *i == old)
            .expect("old in results"),
        order
            .iter()
            .position(|i| *i == new)
            .expect("correction in results"),
    );
    assert!(
        n < o,
        "the correction must rank above the stale fact: {order:?}"
    );
    let stale = &r["results"][o];
    assert_eq!(stale["superseded_by"], json!([new]));
    assert!(r["results"][n].get("superseded_by").is_none());

    // At its own rank on request: words alone put the stale fact first.
    let own = env.ok(&["search", "deploy", "day", "--include-superseded"]);
    let order = ids(&own);
    assert!(
        order.iter().position(|i| *i == old) < order.iter().position(|i| *i == new),
        "{order:?}"
    );
    assert_eq!(own["results"][0]["superseded_by"], json!([new]));

    // Exact search marks and demotes too.
    let exact = env.ok(&["search", "deploy", "--mode", "exact"]);
    let order = ids(&exact);
    assert!(
        order.iter().position(|i| *i == new) < order.iter().position(|i| *i == old),
        "{order:?}"
    );

    // fetch marks it in its session.
    let f = env.ok(&["fetch", "s1"]);
    assert_eq!(f["chunks"][0]["superseded_by"], json!([new]));
    assert!(f["chunks"][1].get("superseded_by").is_none());
}

#[test]
fn the_link_is_a_line_in_the_files_and_survives_a_rebuilt_index() {
    let env = TestEnv::new();
    let (old, new) = stale_and_correction(&env);
    let text = std::fs::read_to_string(segment(&env, "s2")).unwrap();
    let line: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    // The link is kept as the corrected chunk's uri, whatever named it.
    assert_eq!(line["metadata"]["supersedes"], json!([old]));

    let before = env.ok(&["search", "deploy", "day"]);
    std::fs::remove_dir_all(env.path(".memdir/index")).unwrap();
    env.ok(&["reindex"]);
    let after = env.ok(&["search", "deploy", "day"]);
    assert_eq!(
        before, after,
        "a rebuilt index answers byte for byte the same"
    );
    assert_eq!(ids(&after)[0], new);
}

#[test]
fn a_source_id_names_what_it_corrects_and_a_hand_edit_can_add_a_link() {
    let env = TestEnv::new();
    ingest(
        &env,
        "s1",
        "The server runs on port 8080 for the api.",
        &["--source-id", "port"],
    );
    let c = ingest(
        &env,
        "s2",
        "Now the api listens on port 9090.",
        &["--supersedes", "port"],
    );
    let r = env.ok(&["search", "port", "api"]);
    assert_eq!(ids(&r)[0], uri(&c));
    assert!(r["results"][1]["superseded_by"].is_array());

    // A line written by hand with metadata.supersedes is honoured like one memdir wrote.
    let a = ingest(&env, "s3", "The cache holds 100 entries.", &[]);
    let a_id = uri(&a);
    let b = ingest(&env, "s3", "The cache holds 500 entries now.", &[]);
    let seg = segment(&env, "s3");
    let text = std::fs::read_to_string(&seg).unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines[1]["metadata"]["supersedes"] = json!([a_id]);
    let out: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&seg, out).unwrap();
    // A search adopts the edit and brings the index up to date; fetch reads what it knows.
    let r = env.ok(&[
        "search",
        "cache",
        "entries",
        "--include-superseded",
        "--context",
        "0",
    ]);
    let held = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["uri"] == json!(a_id))
        .expect("the corrected chunk is found");
    assert_eq!(held["superseded_by"], json!([uri(&b)]));
    let f = env.ok(&["fetch", "s3"]);
    assert_eq!(f["chunks"][0]["superseded_by"], json!([uri(&b)]));
}

#[test]
fn forgetting_the_correction_restores_what_it_corrected() {
    let env = TestEnv::new();
    let (old, _new) = stale_and_correction(&env);
    let new_id = env.ok(&["fetch", "s2"])["chunks"][0]["chunk_id"].clone();
    env.ok(&[
        "forget",
        "--session-id",
        "s2",
        "--chunk-id",
        new_id.as_str().unwrap(),
        "--yes",
    ]);
    let r = env.ok(&["search", "deploy", "day"]);
    assert_eq!(ids(&r)[0], old);
    assert!(r["results"][0].get("superseded_by").is_none());
}

#[test]
fn naming_no_chunk_is_a_clear_error_and_writes_nothing() {
    let env = TestEnv::new();
    ingest(&env, "s1", "A fact.", &[]);
    let before = crate::util::truth_files(&env.dir);
    for (args, code) in [
        (vec!["--supersedes", "nope:99"], "invalid"),
        (vec!["--supersedes", "memdir://sessions/s1/7"], "invalid"),
        (vec!["--supersedes", "memdir://sessions/zz/0"], "invalid"),
        (vec!["--supersedes", "no-such-source-id"], "invalid"),
        (vec!["--supersedes", ""], "invalid"),
    ] {
        let mut all = vec!["ingest", "--session-id", "s2", "--text", "Another fact."];
        all.extend(args.iter().copied());
        let r = env.run(&all);
        assert_ne!(r.code, 0, "{args:?}");
        let e = r.error();
        assert_eq!(e["code"], code, "{args:?}: {e}");
        assert_eq!(e["field"], "supersedes", "{args:?}: {e}");
    }
    assert_eq!(crate::util::truth_files(&env.dir), before);
    // A chunk id is unique within its session only: one held by two sessions is ambiguous.
    ingest(&env, "s9", "A fact elsewhere.", &[]);
    let id = env.ok(&["fetch", "s1"])["chunks"][0]["chunk_id"].clone();
    let r = env.run(&[
        "ingest",
        "--session-id",
        "s2",
        "--text",
        "y",
        "--supersedes",
        id.as_str().unwrap(),
    ]);
    assert!(
        r.error()["message"].as_str().unwrap().contains("uri"),
        "{}",
        r.stderr
    );
    let before = crate::util::truth_files(&env.dir);
    let r = env.run(&[
        "ingest",
        "--session-id",
        "s2",
        "--text",
        "x",
        "--metadata",
        r#"{"supersedes": "not-a-list"}"#,
    ]);
    assert_eq!(r.error()["code"], "invalid");
    assert_eq!(crate::util::truth_files(&env.dir), before);
    // A chunk id held by one session only names that chunk.
    let second = ingest(&env, "s1", "A second fact.", &[]);
    let c = env.ok(&[
        "ingest",
        "--session-id",
        "s2",
        "--text",
        "The second fact, corrected.",
        "--supersedes",
        second["chunk_id"].as_str().unwrap(),
    ]);
    env.ok(&["search", "second", "fact"]);
    let f = env.ok(&["fetch", "s1"]);
    assert_eq!(f["chunks"][1]["superseded_by"], json!([uri(&c)]));
}

#[test]
fn verify_store_names_a_correction_that_corrects_nothing() {
    let env = TestEnv::new();
    let (_old, _new) = stale_and_correction(&env);
    let v = env.ok(&["verify-store"]);
    assert_eq!(v["ok"], true, "{v:#}");

    // By hand: a link to a position past the session's end, and one that is no uri.
    let c = ingest(&env, "s4", "A fourth fact.", &[]);
    let seg = segment(&env, "s4");
    let mut line: Value =
        serde_json::from_str(std::fs::read_to_string(&seg).unwrap().trim_end()).unwrap();
    line["metadata"]["supersedes"] = json!(["memdir://sessions/s1/99", "not a uri"]);
    std::fs::write(&seg, format!("{line}\n")).unwrap();
    let r = env.run(&["verify-store"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let report = r.json();
    let found: Vec<String> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "correction")
        .map(|p| p["message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(found.len(), 2, "{report:#}");
    assert!(
        found.iter().any(|m| m.contains("no chunk of this store")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|m| m.contains("not a chunk uri")),
        "{found:?}"
    );
    let _ = c;
}
