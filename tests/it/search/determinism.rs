//! A rebuilt or deleted index gives byte-identical results; reindex and verify-store agree.

use serde_json::Value;

use super::{fixture, hand_edit_line, key_set, search};
use crate::util::TestEnv;

fn determinism_queries() -> Vec<Vec<&'static str>> {
    vec![
        vec!["canary_token"],
        vec!["canary_token", "--mode", "bm25", "--limit", "100"],
        vec!["canary_token", "--mode", "exact", "--context", "1"],
        vec!["pool timeout gateway"],
        vec![
            "kubernetes ingress certificate",
            "--full",
            "--context",
            "20",
        ],
        vec!["ECONNREFUSED 127.0.0.1:5432"],
        vec!["checkout redesign", "--project", "web"],
        vec![
            "canary_token",
            "--mode",
            "bm25",
            "--since",
            "2026-01-10T00:00:00Z",
            "--until",
            "2026-02-20",
        ],
        vec!["canary_token", "--kind", "category"],
        vec!["runs", "--session", "beta", "--context", "5"],
        vec!["東京大学"],
        vec!["café"],
        vec!["gateway timeouts", "--category", "projects"],
        vec!["the", "--mode", "bm25"],
        vec!["max_size=999"],
        vec!["\"checkout redesign\""],
        // Ties: each of these matches one word once in chunks of similar length.
        vec!["the queue", "--mode", "bm25", "--limit", "1000"],
        vec!["retry budget queue", "--limit", "100", "--context", "0"],
        // A period the query names lifts the sessions saved in it (beta: 10 January).
        vec![
            "canary_token in January 2026",
            "--explain",
            "--context",
            "0",
        ],
    ]
}

fn run_queries(env: &TestEnv) -> Vec<String> {
    determinism_queries()
        .iter()
        .map(|q| {
            let mut a = vec!["search"];
            a.extend_from_slice(q);
            let r = env.run(&a);
            if r.code != 0 {
                env.dump(&r);
                panic!("`{}` exited {}", r.cmd, r.code);
            }
            r.stdout
        })
        .collect()
}

fn assert_same_output(before: &[String], after: &[String], what: &str) {
    for ((q, b), a) in determinism_queries().iter().zip(before).zip(after) {
        assert_eq!(a, b, "{what}: `memdir search {}` changed", q.join(" "));
    }
}

#[test]
fn rebuilding_the_index_gives_byte_identical_results() {
    let env = fixture();
    // Spread the index over several commits: searches between writes.
    search(&env, &["pool"]);
    env.ok(&[
        "ingest",
        "--session-id",
        "delta",
        "--project",
        "infra",
        "--text",
        "postmortem: the queue filled up",
    ]);
    search(&env, &["queue"]);
    env.ok(&["write", "base", "--merge", "--data", r#"{"shell": "zsh"}"#]);
    search(&env, &["zsh"]);
    // Hand edits re-read a segment and a category: deleted documents must not skew BM25.
    hand_edit_line(
        &env,
        "gamma",
        9,
        "The retry budget is five attempts, then the queue waits",
    );
    env.write_file(
        "categories/projects.json",
        "{\"web\": \"checkout redesign with canary_token\", \"api\": \"gateway timeouts queue\"}\n",
    );
    let v = search(&env, &["retry budget queue", "--limit", "100"]);
    assert!(
        key_set(&v).contains("gamma#9") && key_set(&v).contains("projects:api"),
        "{v:#}"
    );
    let before = run_queries(&env);
    std::fs::remove_dir_all(env.path(".memdir/index")).unwrap();
    env.ok(&["reindex"]);
    assert_same_output(&before, &run_queries(&env), "after rm -rf index && reindex");
    // Without reindex: the next search rebuilds it.
    std::fs::remove_dir_all(env.path(".memdir/index")).unwrap();
    assert_same_output(&before, &run_queries(&env), "after rm -rf index");
    env.assert_clean();
}

#[test]
fn deleting_all_derived_state_gives_byte_identical_results() {
    let env = fixture();
    let before = run_queries(&env);
    std::fs::remove_dir_all(env.path(".memdir")).unwrap();
    assert_same_output(&before, &run_queries(&env), "after rm -rf .memdir");
    std::fs::remove_dir_all(env.path(".memdir")).unwrap();
    env.ok(&["reindex"]);
    assert_same_output(
        &before,
        &run_queries(&env),
        "after rm -rf .memdir && reindex",
    );
    env.assert_clean();
}

fn verify_index(env: &TestEnv) -> Value {
    let r = env.run(&["verify-store"]);
    if r.code != 0 {
        env.dump(&r);
        panic!("verify-store exited {}", r.code);
    }
    r.json()["index"].clone()
}

#[test]
fn reindex_prints_a_stable_fingerprint_and_verify_store_agrees() {
    let env = fixture();
    search(&env, &["pool"]);
    let idx = verify_index(&env);
    assert_eq!(idx["state"], "current", "{idx:#}");
    assert_eq!(idx["chunks"], 40);

    let a = env.ok(&["reindex"]);
    let fp = a["fingerprint"].as_str().expect("fingerprint").to_string();
    assert!(fp.len() >= 16, "{a}");
    assert_eq!(a["chunks"], 40);
    let b = env.ok(&["reindex"]);
    assert_eq!(
        b["fingerprint"],
        fp.as_str(),
        "reindex twice without changes"
    );
    let idx = verify_index(&env);
    assert_eq!(idx["state"], "current", "{idx:#}");
    assert_eq!(idx["fingerprint"], fp.as_str(), "{idx:#}");
    // A search changes nothing.
    search(&env, &["canary_token"]);
    assert_eq!(verify_index(&env)["state"], "current");
    // The same files from scratch give the same fingerprint.
    std::fs::remove_dir_all(env.path(".memdir/index")).unwrap();
    assert_eq!(verify_index(&env)["state"], "missing");
    assert_eq!(env.ok(&["reindex"])["fingerprint"], fp.as_str());
    // A change to the files changes it.
    env.ok(&["ingest", "--session-id", "alpha", "--text", "one more"]);
    let c = env.ok(&["reindex"]);
    assert_ne!(c["fingerprint"], fp.as_str());
    assert_eq!(c["chunks"], 41);
    let idx = verify_index(&env);
    assert_eq!(idx["state"], "current");
    assert_eq!(idx["fingerprint"], c["fingerprint"]);
}

#[test]
fn verify_store_reports_an_index_behind_the_files_until_the_next_search() {
    let env = fixture();
    search(&env, &["pool"]);
    env.ok(&["ingest", "--session-id", "alpha", "--text", "one more"]);
    let idx = verify_index(&env);
    assert_eq!(idx["state"], "behind", "{idx:#}");
    search(&env, &["pool"]);
    let idx = verify_index(&env);
    assert_eq!(idx["state"], "current", "{idx:#}");
    assert_eq!(idx["chunks"], 41);
}

/// A session written by two replicas has a segment from each; a write appended to one of them
/// is indexed on its own (its chunks sort after every chunk indexed before), and the index is
/// the one a rebuild makes.
#[test]
fn appends_to_a_session_of_two_segments_index_as_a_rebuild_does() {
    let mut env = TestEnv::new();
    let ingest = |env: &TestEnv, text: &str| {
        env.ok(&["ingest", "--session-id", "multi", "--text", text]);
    };
    for i in 0..4 {
        ingest(
            &env,
            &format!("first machine, turn {i}: the queue drains slowly"),
        );
    }
    ingest(&env, "an unrelated session's neighbour");
    search(&env, &["queue"]);
    // Another machine's replica of the same store writes its own segment of the session.
    env.set_env("MEMDIR_MACHINE_ID", "second-machine");
    for i in 0..3 {
        ingest(
            &env,
            &format!("second machine, turn {i}: the queue is fixed"),
        );
        search(&env, &["turn"]);
    }
    let segments = std::fs::read_dir(env.path("sessions/multi"))
        .unwrap()
        .count();
    assert_eq!(segments, 2, "the session has a segment per replica");
    let queries: [&[&str]; 3] = [
        &["queue", "--limit", "100", "--context", "2"],
        &["turn", "--session", "multi", "--context", "5"],
        &["fixed drains", "--limit", "3", "--context", "1"],
    ];
    let run = |env: &TestEnv| -> Vec<String> {
        queries
            .iter()
            .map(|q| {
                let mut a = vec!["search"];
                a.extend_from_slice(q);
                env.run(&a).stdout
            })
            .collect()
    };
    let before = run(&env);
    assert!(
        before[1].contains("second machine, turn 2"),
        "{}",
        before[1]
    );
    std::fs::remove_dir_all(env.path(".memdir/index")).unwrap();
    env.ok(&["reindex"]);
    assert_eq!(
        run(&env),
        before,
        "the appended index differs from a rebuilt one"
    );
}

/// How many segment changes the ledger's feed holds (each makes the index re-read a segment).
fn segment_changes(env: &TestEnv) -> i64 {
    env.ledger_ints("SELECT count(*) FROM change WHERE kind = 'segment'")[0]
}

/// A copy or a restore sets every file's status-change time: segments whose bytes are what
/// their rows signed are not re-read (the index keeps them, results are unchanged), while an
/// edit that keeps the size and puts the modification time back is still found.
#[test]
fn a_copied_stores_segments_are_not_read_again_but_a_disguised_edit_is() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    for s in ["one", "two", "three"] {
        for i in 0..3 {
            env.ok(&[
                "ingest",
                "--session-id",
                s,
                "--text",
                &format!("{s} says the kettle boils at step {i}"),
            ]);
        }
    }
    let before = search(&env, &["kettle", "--limit", "20"]);
    let changes = segment_changes(&env);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let segments: Vec<std::path::PathBuf> = walkdir::WalkDir::new(env.path("sessions"))
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().to_path_buf())
        .collect();
    assert_eq!(segments.len(), 3);
    let stamps = |env: &TestEnv| env.ledger_ints("SELECT mtime_ns FROM segment ORDER BY rel");
    let stamped = stamps(&env);
    for p in &segments {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    env.ok(&["status"]);
    assert_ne!(
        stamps(&env),
        stamped,
        "the scan saw the new status-change times"
    );
    assert_eq!(
        segment_changes(&env),
        changes,
        "touched segments were read again"
    );
    assert_eq!(search(&env, &["kettle", "--limit", "20"]), before);
    // The same size, another word, the modification time put back: the signature differs.
    let p = segments
        .iter()
        .find(|p| p.to_string_lossy().contains("/two/"))
        .unwrap();
    let text = std::fs::read_to_string(p).unwrap();
    crate::util::write_keeping_mtime(p, text.replacen("kettle", "teapot", 1));
    let r = search(&env, &["teapot"]);
    assert_eq!(r["results"].as_array().unwrap().len(), 1, "{r:#}");
    assert!(segment_changes(&env) > changes);
}
