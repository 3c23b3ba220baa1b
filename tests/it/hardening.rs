//! Regression tests for bugs found by an outside attack on the store, each named after the
//! bug it guards against.

use std::io::{BufRead, BufReader};

use serde_json::Value;

use crate::util::TestEnv;

/// Hits of `memdir search QUERY --mode exact` as their content strings.
fn exact_hits(env: &TestEnv, query: &str) -> Vec<String> {
    let v = env.ok(&["search", query, "--mode", "exact", "--context", "0"]);
    v["results"]
        .as_array()
        .unwrap_or_else(|| panic!("search answer without results: {v}"))
        .iter()
        .map(|h| h["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Bug: catch-up read the change feed, then took the feed's generation under the store lock
/// and recorded that generation as absorbed, so a write acknowledged in between counted as
/// indexed without being indexed: search never found it and status said `current`.
#[test]
fn a_write_acknowledged_while_catch_up_runs_is_indexed() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "first words"]);
    assert_eq!(exact_hits(&env, "first").len(), 1);
    // The index is now behind by one chunk; a searcher catches up and pauses inside catch-up.
    env.ok(&["ingest", "--session-id", "s", "--text", "second zebra"]);
    let mut searcher = env
        .command(&["search", "zebra", "--mode", "exact"])
        .env("MEMDIR_FAILPOINT", "catchup.before_snapshot=pause:1500")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn searcher");
    let mut err = BufReader::new(searcher.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        let n = err.read_line(&mut line).unwrap();
        assert!(n > 0, "the searcher ended before its pause");
        if line.contains("failpoint catchup.before_snapshot") {
            break;
        }
    }
    // Acknowledged while the searcher is inside catch-up, in a session the searcher has not
    // seen change, and a category too.
    env.ok(&["ingest", "--session-id", "t", "--text", "third quokka"]);
    env.ok(&["write", "notes", "--data", r#"{"animal": "wombat"}"#]);
    let out = searcher.wait_with_output().unwrap();
    assert!(out.status.success(), "the paused search failed");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["results"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(
        exact_hits(&env, "quokka"),
        vec!["third quokka".to_string()],
        "a chunk acknowledged during catch-up is missing from the index"
    );
    let v = env.ok(&["search", "wombat", "--kind", "category"]);
    assert_eq!(
        v["results"].as_array().map(Vec::len),
        Some(1),
        "a category version acknowledged during catch-up is missing from the index: {v}"
    );
    env.assert_clean();
}

/// The same promise under load: processes ingesting while others search; afterwards every
/// acknowledged chunk is found by an exact search for its unique word.
#[test]
fn concurrent_ingests_and_searches_index_every_acknowledged_chunk() {
    const WRITERS: usize = 4;
    const SEARCHERS: usize = 3;
    const ROUNDS: usize = 12;
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_LOCK_TIMEOUT_MS", "30000");
    env.ok(&["init"]);
    let done = std::sync::atomic::AtomicBool::new(false);
    let acked = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|p| {
                let (env, acked) = (&env, &acked);
                s.spawn(move || {
                    for i in 0..ROUNDS {
                        let word = format!("uniq{p}x{i}");
                        let session = format!("s{}", i % 4);
                        let r = env.run(&["ingest", "--session-id", &session, "--text", &word]);
                        if r.code == 0 {
                            acked.lock().unwrap().push(word);
                        } else {
                            assert_eq!(r.code, 6, "ingest failed: {}", r.stderr);
                        }
                    }
                })
            })
            .collect();
        for q in 0..SEARCHERS {
            let (env, done) = (&env, &done);
            s.spawn(move || {
                // Bounded in count; stops once the writers are done.
                for _ in 0..1000 {
                    if done.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let r = env.run(&["search", &format!("uniq{q}x1"), "--limit", "1"]);
                    assert!(r.code == 0 || r.code == 6, "search failed: {}", r.stderr);
                }
            });
        }
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let acked = acked.into_inner().unwrap();
    assert!(!acked.is_empty());
    let missing: Vec<_> = acked
        .iter()
        .filter(|w| exact_hits(&env, w).is_empty())
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged but not indexed: {missing:?}"
    );
    env.assert_clean();
}
