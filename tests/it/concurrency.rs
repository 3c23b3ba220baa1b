//! Many processes, one store (SPEC §3.3): concurrent `memdir` processes ingest into one session
//! and merge into one category; no acknowledged write is lost, positions stay gap-free, merges
//! keep each other's keys, compare-and-swap turns races into conflicts, and a held lock ends in
//! a bounded "busy" error that changes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::process::Stdio;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{Run, TestEnv, wait_until};

/// Processes running at once.
const PROCS: usize = 8;

/// What became of one write attempted by a racing process.
#[derive(Debug)]
enum Outcome {
    /// Exit 0 with the JSON result.
    Acked(Value),
    /// Exit 6: the store was busy; the write must not have landed.
    Busy,
}

/// Classifies a finished run: exit 0 and exit 6 are the only acceptable outcomes of a racing
/// write; anything else is a failure worth reporting in full.
fn classify(r: Run, failures: &std::sync::Mutex<Vec<String>>) -> Option<Outcome> {
    match r.code {
        0 => Some(Outcome::Acked(r.json())),
        6 => {
            let e = r.error();
            assert_eq!(e["code"], "busy", "exit 6 without code busy: {}", r.stderr);
            Some(Outcome::Busy)
        }
        _ => {
            failures.lock().unwrap().push(format!(
                "`{}` exited {}\nstdout:\n{}\nstderr:\n{}",
                r.cmd, r.code, r.stdout, r.stderr
            ));
            None
        }
    }
}

fn check_no_failures(env: &TestEnv, failures: std::sync::Mutex<Vec<String>>) {
    let failures = failures.into_inner().unwrap();
    if !failures.is_empty() {
        let r = env.run(&["status"]);
        env.dump(&r);
        panic!(
            "{} racing command(s) failed:\n{}",
            failures.len(),
            failures.join("\n---\n")
        );
    }
}

#[test]
fn eight_processes_ingest_and_merge_into_one_session_and_one_category() {
    const ROUNDS: usize = 14;
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_LOCK_TIMEOUT_MS", "30000");
    // The store does not exist yet: the first writers also race to create it.
    let start = Barrier::new(PROCS);
    let failures = std::sync::Mutex::new(Vec::new());
    // (process, round) -> outcome
    let mut chunks: BTreeMap<(usize, usize), Outcome> = BTreeMap::new();
    let mut merges: BTreeMap<(usize, usize), Outcome> = BTreeMap::new();
    let began = Instant::now();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..PROCS)
            .map(|p| {
                let (env, start, failures) = (&env, &start, &failures);
                s.spawn(move || {
                    let mut mine = Vec::new();
                    start.wait();
                    for i in 0..ROUNDS {
                        let text = format!("p{p} i{i}");
                        let r = env.run(&["ingest", "--session-id", "shared", "--text", &text]);
                        if let Some(o) = classify(r, failures) {
                            mine.push((true, p, i, o));
                        }
                        let data = format!(r#"{{"k{p}_{i}": {i}}}"#);
                        let r = env.run(&["write", "cat", "--merge", "--data", &data]);
                        if let Some(o) = classify(r, failures) {
                            mine.push((false, p, i, o));
                        }
                    }
                    mine
                })
            })
            .collect();
        for h in handles {
            for (is_chunk, p, i, o) in h.join().unwrap() {
                if is_chunk {
                    chunks.insert((p, i), o);
                } else {
                    merges.insert((p, i), o);
                }
            }
        }
    });
    let elapsed = began.elapsed();
    check_no_failures(&env, failures);

    // Session: every acknowledged chunk is there, at the position it was acknowledged with;
    // no busy chunk is; positions are exactly 0..n-1.
    let contents = env.session_contents("shared");
    let mut at: BTreeMap<&str, usize> = BTreeMap::new();
    for (pos, c) in contents.iter().enumerate() {
        assert!(at.insert(c.as_str(), pos).is_none(), "chunk {c:?} twice");
    }
    let mut acked_chunks = 0;
    let mut busy = 0;
    for ((p, i), o) in &chunks {
        let text = format!("p{p} i{i}");
        match o {
            Outcome::Acked(v) => {
                acked_chunks += 1;
                let pos = at.get(text.as_str()).unwrap_or_else(|| {
                    panic!("acknowledged chunk {text:?} ({v}) is missing from {contents:?}")
                });
                assert_eq!(
                    v["position"].as_u64(),
                    Some(*pos as u64),
                    "chunk {text:?} was acknowledged at another position"
                );
            }
            Outcome::Busy => {
                busy += 1;
                assert!(
                    !at.contains_key(text.as_str()),
                    "chunk {text:?} was reported busy (exit 6) but landed"
                );
            }
        }
    }
    assert_eq!(
        contents.len(),
        acked_chunks,
        "the session holds chunks nobody acknowledged"
    );

    // Category: every acknowledged key is there; no busy key is; acknowledged versions are
    // exactly 1..=n, one per merge.
    let cat = env.ok(&["read", "cat"]);
    let data = cat["data"].as_object().expect("category data").clone();
    let mut versions = BTreeSet::new();
    let mut acked_merges = 0;
    for ((p, i), o) in &merges {
        let key = format!("k{p}_{i}");
        match o {
            Outcome::Acked(v) => {
                acked_merges += 1;
                assert_eq!(
                    data.get(&key),
                    Some(&json!(i)),
                    "acknowledged merge of {key} was lost; category: {cat:#}"
                );
                assert_eq!(v["unchanged"], json!(false));
                let ver = v["version"].as_u64().expect("version");
                assert!(versions.insert(ver), "version {ver} acknowledged twice");
            }
            Outcome::Busy => {
                busy += 1;
                assert!(
                    !data.contains_key(&key),
                    "merge of {key} was reported busy (exit 6) but landed"
                );
            }
        }
    }
    assert_eq!(
        data.len(),
        acked_merges,
        "keys nobody acknowledged: {cat:#}"
    );
    assert_eq!(
        versions,
        (1..=acked_merges as u64).collect::<BTreeSet<_>>(),
        "acknowledged versions are not 1..={acked_merges}"
    );
    assert_eq!(cat["meta"]["version"], json!(acked_merges));
    let hist = env.ok(&["history", "cat", "--limit", "1000"]);
    assert_eq!(
        hist["total"],
        json!(acked_merges),
        "one history entry per merge"
    );
    env.assert_clean();
    eprintln!(
        "{PROCS} processes x {ROUNDS} rounds: {acked_chunks} chunks, {acked_merges} merges, \
         {busy} busy, in {elapsed:?}"
    );
}

#[test]
fn batch_ingests_racing_single_ingests_keep_positions_gap_free_and_batches_contiguous() {
    const SINGLE_ROUNDS: usize = 12;
    const BATCHES: usize = 6;
    const BATCH_LEN: usize = 5;
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_LOCK_TIMEOUT_MS", "30000");
    env.ok(&["ingest", "--session-id", "mix", "--text", "first"]);
    let start = Barrier::new(PROCS);
    let failures = std::sync::Mutex::new(Vec::new());
    let mut singles: Vec<(String, Outcome)> = Vec::new();
    let mut batches: Vec<(Vec<String>, Outcome)> = Vec::new();
    std::thread::scope(|s| {
        let mut single_handles = Vec::new();
        let mut batch_handles = Vec::new();
        for p in 0..PROCS {
            let (env, start, failures) = (&env, &start, &failures);
            if p % 2 == 0 {
                single_handles.push(s.spawn(move || {
                    start.wait();
                    let mut out = Vec::new();
                    for i in 0..SINGLE_ROUNDS {
                        let text = format!("single p{p} i{i}");
                        let r = env.run(&["ingest", "--session-id", "mix", "--text", &text]);
                        if let Some(o) = classify(r, failures) {
                            out.push((text, o));
                        }
                    }
                    out
                }));
            } else {
                batch_handles.push(s.spawn(move || {
                    start.wait();
                    let mut out = Vec::new();
                    for b in 0..BATCHES {
                        let texts: Vec<String> = (0..BATCH_LEN)
                            .map(|j| format!("batch p{p} b{b} j{j}"))
                            .collect();
                        let jsonl: String = texts
                            .iter()
                            .map(|t| json!({"session_id": "mix", "content": t}).to_string() + "\n")
                            .collect();
                        let r = env.run_stdin(&["ingest", "--jsonl", "-"], jsonl.as_bytes());
                        if let Some(o) = classify(r, failures) {
                            out.push((texts, o));
                        }
                    }
                    out
                }));
            }
        }
        for h in single_handles {
            singles.extend(h.join().unwrap());
        }
        for h in batch_handles {
            batches.extend(h.join().unwrap());
        }
    });
    check_no_failures(&env, failures);

    let contents = env.session_contents("mix");
    let at: BTreeMap<&str, usize> = contents
        .iter()
        .enumerate()
        .map(|(i, c)| (c.as_str(), i))
        .collect();
    assert_eq!(at.len(), contents.len(), "a chunk landed twice");
    let mut expected = 1; // "first"
    for (text, o) in &singles {
        match o {
            Outcome::Acked(v) => {
                expected += 1;
                let pos = at
                    .get(text.as_str())
                    .unwrap_or_else(|| panic!("acknowledged chunk {text:?} is missing"));
                assert_eq!(v["position"].as_u64(), Some(*pos as u64), "{text:?}");
            }
            Outcome::Busy => assert!(!at.contains_key(text.as_str()), "busy {text:?} landed"),
        }
    }
    for (texts, o) in &batches {
        match o {
            Outcome::Acked(v) => {
                expected += texts.len();
                assert_eq!(v["count"], json!(texts.len()));
                let first = at
                    .get(texts[0].as_str())
                    .copied()
                    .unwrap_or_else(|| panic!("acknowledged batch {texts:?} is missing"));
                for (j, t) in texts.iter().enumerate() {
                    assert_eq!(
                        at.get(t.as_str()).copied(),
                        Some(first + j),
                        "batch {texts:?} is not contiguous and in order: {contents:#?}"
                    );
                    assert_eq!(
                        v["chunks"][j]["position"].as_u64(),
                        Some((first + j) as u64)
                    );
                }
            }
            Outcome::Busy => {
                for t in texts {
                    assert!(
                        !at.contains_key(t.as_str()),
                        "busy batch chunk {t:?} landed"
                    );
                }
            }
        }
    }
    assert_eq!(
        contents.len(),
        expected,
        "chunks nobody acknowledged landed"
    );
    env.assert_clean();
}

#[test]
fn compare_and_swap_race_has_exactly_one_winner() {
    let env = TestEnv::new();
    env.ok(&["init"]);
    // Round 0 creates the category ("absent"); later rounds alternate replace and merge, all
    // racers passing the same expected hash.
    let mut expected = "absent".to_string();
    let mut expected_data: Option<Value> = None;
    for round in 0..4 {
        let start = Barrier::new(PROCS);
        let results: Vec<(usize, Run)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..PROCS)
                .map(|p| {
                    let (env, start, expected) = (&env, &start, &expected);
                    s.spawn(move || {
                        let data = json!({"round": round, "winner": p, format!("only_{p}"): true})
                            .to_string();
                        let mut args =
                            vec!["write", "cas", "--data", data.as_str(), "--expected-hash"];
                        args.push(expected.as_str());
                        if round % 2 == 0 && round > 0 {
                            args.push("--merge");
                        }
                        start.wait();
                        (p, env.run(&args))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<&(usize, Run)> = results.iter().filter(|(_, r)| r.code == 0).collect();
        if winners.len() != 1 {
            for (_, r) in &results {
                env.dump(r);
            }
            panic!(
                "round {round}: {} winners, expected exactly 1",
                winners.len()
            );
        }
        let (winner, wr) = winners[0];
        let new_hash = wr.json()["new_hash"].as_str().unwrap().to_string();
        for (p, r) in &results {
            if p == winner {
                continue;
            }
            if r.code != 5 {
                env.dump(r);
                panic!(
                    "round {round}: loser {p} exited {}, expected 5 (conflict)",
                    r.code
                );
            }
            let e = r.error();
            assert_eq!(e["code"], "conflict", "round {round}: {e}");
            assert_eq!(
                e["current_hash"],
                json!(new_hash),
                "round {round}: a loser must be told the winner's hash"
            );
        }
        let read = env.ok(&["read", "cas"]);
        let mut want = json!({"round": round, "winner": winner, format!("only_{winner}"): true});
        if round % 2 == 0
            && round > 0
            && let Some(prev) = &expected_data
        {
            let mut merged = prev.as_object().unwrap().clone();
            merged.extend(want.as_object().unwrap().clone());
            want = Value::Object(merged);
        }
        assert_eq!(
            read["data"], want,
            "round {round}: only the winner's write landed"
        );
        assert_eq!(read["meta"]["hash"], json!(new_hash));
        assert_eq!(read["meta"]["version"], json!(round + 1));
        expected = new_hash;
        expected_data = Some(want);
    }
    let hist = env.ok(&["history", "cas"]);
    assert_eq!(hist["total"], json!(4), "one version per round");
    env.assert_clean();
}

#[test]
fn a_held_lock_gives_busy_quickly_and_changes_nothing() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"name": "Ada"}"#]);
    env.ok(&["append", "journal", "--data", r#"{"event": "one"}"#]);
    env.ok(&["ingest", "--session-id", "s", "--text", "hello"]);
    let before = env.snapshot();
    let lock_file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(env.path(".memdir/lock"))
        .expect("open the lock file");
    lock_file.lock().expect("take the store's lock");

    let short = [("MEMDIR_LOCK_TIMEOUT_MS", "200")];
    let writes: [&[&str]; 6] = [
        &[
            "write",
            "base",
            "--merge",
            "--data",
            r#"{"editor": "helix"}"#,
        ],
        &["write", "other", "--data", r#"{"x": 1}"#],
        &["append", "journal", "--data", r#"{"event": "two"}"#],
        &["delete", "base"],
        &["ingest", "--session-id", "s", "--text", "blocked"],
        &["restore", "base", "--version", "1"],
    ];
    for args in writes {
        let t = Instant::now();
        let r = env.run_env(args, &short, b"");
        let took = t.elapsed();
        if r.run.code != 6 {
            env.dump(&r.run);
            panic!("`{}` exited {}, expected 6 (busy)", r.run.cmd, r.run.code);
        }
        let e = r.run.error();
        assert_eq!(e["code"], "busy", "{e}");
        assert!(
            e["hints"].as_array().is_some_and(|h| !h.is_empty()),
            "a busy error tells the caller what to do: {e}"
        );
        assert!(
            took >= Duration::from_millis(200),
            "`{}` gave up after {took:?}, before its 200 ms deadline",
            r.run.cmd
        );
        assert!(
            took < Duration::from_secs(5),
            "`{}` took {took:?} to report busy with a 200 ms deadline",
            r.run.cmd
        );
    }
    assert_eq!(env.snapshot(), before, "a busy write changed the files");
    assert!(
        env.staging_entries().is_empty(),
        "{:?}",
        env.staging_entries()
    );

    // Readers take no lock.
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"name": "Ada"}));
    assert_eq!(env.session_contents("s"), vec!["hello"]);

    // A writer with a longer deadline waits, and proceeds once the lock is released.
    let mut waiter = env
        .command(&[
            "write",
            "base",
            "--merge",
            "--data",
            r#"{"editor": "helix"}"#,
        ])
        .env("MEMDIR_LOCK_TIMEOUT_MS", "30000")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn memdir");
    let exited_early = wait_until(Duration::from_millis(400), || {
        waiter.try_wait().unwrap().is_some()
    });
    assert!(!exited_early, "the writer did not wait for the held lock");
    assert_eq!(env.snapshot(), before, "a waiting writer changed the files");
    lock_file.unlock().expect("release the lock");
    let finished = wait_until(Duration::from_secs(20), || {
        waiter.try_wait().unwrap().is_some()
    });
    assert!(finished, "the writer did not finish once the lock was free");
    let out = waiter.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the waiting writer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(lock_file);

    // And with the lock free, a short deadline is no obstacle.
    let r = env.run_env(
        &["ingest", "--session-id", "s", "--text", "unblocked"],
        &short,
        b"",
    );
    assert_eq!(r.run.code, 0, "{}", r.run.stderr);
    assert_eq!(
        env.ok(&["read", "base"])["data"],
        json!({"name": "Ada", "editor": "helix"})
    );
    assert_eq!(env.session_contents("s"), vec!["hello", "unblocked"]);
    env.assert_clean();
}

#[test]
fn eight_processes_appending_to_one_log_lose_no_entry() {
    const ROUNDS: usize = 6;
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_LOCK_TIMEOUT_MS", "30000");
    env.ok(&["append", "journal", "--data", r#"{"event": "start"}"#]);
    let start = Barrier::new(PROCS);
    let failures = std::sync::Mutex::new(Vec::new());
    let results: Vec<(String, Outcome)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..PROCS)
            .map(|p| {
                let (env, start, failures) = (&env, &start, &failures);
                s.spawn(move || {
                    start.wait();
                    let mut out = Vec::new();
                    for i in 0..ROUNDS {
                        let event = format!("p{p} i{i}");
                        let data = json!({"event": event}).to_string();
                        let r = env.run(&["append", "journal", "--data", &data]);
                        if let Some(o) = classify(r, failures) {
                            out.push((event, o));
                        }
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    check_no_failures(&env, failures);
    let log = env.ok(&["read", "journal"]);
    let entries = log["data"]["entries"].as_array().expect("entries").clone();
    let by_event: BTreeMap<&str, &str> = entries
        .iter()
        .map(|e| {
            (
                e["data"]["event"].as_str().unwrap(),
                e["id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        by_event.len(),
        entries.len(),
        "an entry landed twice: {log:#}"
    );
    let mut acked = 1; // "start"
    let mut versions = BTreeSet::from([1u64]);
    for (event, o) in &results {
        match o {
            Outcome::Acked(v) => {
                acked += 1;
                assert_eq!(
                    by_event.get(event.as_str()).copied(),
                    v["id"].as_str(),
                    "acknowledged entry {event:?} is missing: {log:#}"
                );
                let ver = v["version"].as_u64().unwrap();
                assert!(versions.insert(ver), "version {ver} acknowledged twice");
            }
            Outcome::Busy => assert!(
                !by_event.contains_key(event.as_str()),
                "busy {event:?} landed"
            ),
        }
    }
    assert_eq!(entries.len(), acked, "entries nobody acknowledged: {log:#}");
    let ids: Vec<&str> = entries.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "log ids not strictly sorted: {ids:?}"
    );
    assert_eq!(versions, (1..=acked as u64).collect::<BTreeSet<_>>());
    env.assert_clean();
}

/// Searches right after writes, from several processes at once: each search commits a small
/// index segment, and catch-ups fold the small segments as they go (one that finds the writer
/// lock taken leaves the fold to a later one). Every acknowledged write is found by the search
/// that follows it, and the index ends with a few segments, not one per search.
#[test]
fn processes_searching_right_after_their_writes_find_them_and_fold_small_segments() {
    const SEARCHERS: usize = 4;
    const ROUNDS: usize = 20;
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_LOCK_TIMEOUT_MS", "30000");
    env.ok(&["ingest", "--session-id", "seed", "--text", "opening words"]);
    env.ok(&["search", "opening"]);
    let start = Barrier::new(SEARCHERS);
    std::thread::scope(|s| {
        for p in 0..SEARCHERS {
            let (env, start) = (&env, &start);
            s.spawn(move || {
                start.wait();
                for i in 0..ROUNDS {
                    let word = format!("word{p}x{i}q");
                    let text = format!("note {word}");
                    env.ok(&["ingest", "--session-id", &format!("s{p}"), "--text", &text]);
                    let v = env.ok(&["search", &word, "--mode", "exact", "--context", "0"]);
                    let found: Vec<&str> = v["results"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter_map(|h| h["content"].as_str())
                        .collect();
                    assert_eq!(found, [text.as_str()], "process {p}, round {i}: {v}");
                }
            });
        }
    });
    let meta: Value =
        serde_json::from_slice(&std::fs::read(env.path(".memdir/index/chunks/meta.json")).unwrap())
            .unwrap();
    let segments = meta["segments"].as_array().unwrap().len();
    // Searches that each found something new to index (without folding, well over twenty
    // segments); eight small segments fold into one.
    assert!(
        (1..=12).contains(&segments),
        "{segments} segments after {} searches right after writes: small segments were not folded",
        SEARCHERS * ROUNDS
    );
    let v = env.ok(&["verify-store"]);
    assert_eq!(v["ok"], true, "{v:#}");
}
