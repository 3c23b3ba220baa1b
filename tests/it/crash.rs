//! Crash safety (SPEC §3.1, §3.2, §3.5): every failpoint of the commit protocol aborts the
//! process for real, and the next open finds the old or the new content, never a torn file, a
//! half batch or a gap in positions; a full disk is a clear error that changes nothing; and
//! `kill -9` at random instants loses no acknowledged write.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::{RawRun, Rng, TestEnv, raw_run};

/// Every failpoint in the source; `every_failpoint_in_the_source_is_covered` keeps it honest.
const FAILPOINTS: &[&str] = &[
    "txn.after_stage",
    "txn.after_manifest",
    "txn.after_first_rename",
    "txn.after_publish",
    "txn.after_trash",
    "ledger.before_update",
    "ledger.update",
    "append.after_intent",
    "append.torn",
    "append.after_write",
    "append.before_sync",
    "append.sync",
    "stage.write",
    "append.write",
    // On the search path: `search::lazy_commits` kills a search after a lazy index commit.
    "index.after_lazy_commit",
    // On the hook's path: `hook::a_killed_hook_resumes_without_loss_or_duplicates` kills a
    // capture after its chunks are saved and before its cursor is.
    "cursor.before_save",
    // On the HTTP sync client's path: `sync_http::a_client_killed_mid_sync_converges_on_the_
    // next_sync` kills a client after a pulled page and after a pushed page.
    "sync.http.after_pull_page",
    "sync.http.after_push_page",
    // On the git sync's merge: `sync::a_sync_killed_between_the_history_and_the_files_it_
    // derives_loses_nothing` kills a sync after the history it brought is committed and
    // before the category files that follow from it are written.
    "sync.before_settle",
];

/// An operation run with a failpoint armed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// Replace an existing document.
    Write,
    /// Create a new document.
    WriteNew,
    /// Merge into an existing document (one key deleted, one added).
    Merge,
    /// Delete a document.
    Delete,
    /// Append to an existing log.
    Append,
    /// One chunk into an existing session.
    Ingest,
    /// One chunk into a new session.
    IngestNew,
    /// A JSONL batch across two existing sessions.
    Batch,
}

const CATEGORY_OPS: &[Op] = &[Op::Write, Op::WriteNew, Op::Merge, Op::Delete, Op::Append];
const SESSION_OPS: &[Op] = &[Op::Ingest, Op::IngestNew, Op::Batch];

/// The operations on whose path a failpoint lies.
fn ops_for(fp: &str) -> Vec<Op> {
    match fp {
        "txn.after_stage"
        | "txn.after_manifest"
        | "txn.after_first_rename"
        | "txn.after_publish"
        | "txn.after_trash" => CATEGORY_OPS.to_vec(),
        "ledger.before_update" | "ledger.update" => [CATEGORY_OPS, SESSION_OPS].concat(),
        "stage.write" => [CATEGORY_OPS, &[Op::Batch]].concat(),
        "append.after_intent" => vec![Op::Batch],
        "append.torn" | "append.after_write" | "append.write" | "append.before_sync"
        | "append.sync" => SESSION_OPS.to_vec(),
        other => panic!("unknown failpoint {other}"),
    }
}

/// Whether a crash at `fp` during `op` is past the commit point (the next open must show the
/// new state) or before it (the old state). The manifest is a transaction's commit point; a
/// single chunk is committed once its whole line is on disk; a batch only once its intent is
/// removed.
fn lands(fp: &str, op: Op) -> bool {
    match fp {
        "txn.after_stage"
        | "stage.write"
        | "append.after_intent"
        | "append.torn"
        | "append.write" => false,
        "txn.after_manifest"
        | "txn.after_first_rename"
        | "txn.after_publish"
        | "txn.after_trash"
        | "ledger.before_update"
        | "ledger.update" => true,
        // Every line is written whole before the flushes begin: a killed process (not a
        // power loss) leaves a single chunk's line in place, and a batch's intent cuts it back.
        "append.after_write" | "append.before_sync" | "append.sync" => op != Op::Batch,
        other => panic!("unknown failpoint {other}"),
    }
}

/// A long chunk, so that half of a batch's bytes end inside its second line.
fn long_text() -> String {
    format!("b1 {}", "long batch line ".repeat(60))
}

/// What memdir shows of the store, through its commands.
#[derive(Clone, Debug, PartialEq)]
struct State {
    doc: Option<Value>,
    fresh: Option<Value>,
    journal: Vec<String>,
    s: Vec<String>,
    t: Vec<String>,
    u: Vec<String>,
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn old_state() -> State {
    State {
        doc: Some(json!({"a": 1, "b": 2, "c": 3})),
        fresh: None,
        journal: strings(&["one"]),
        s: strings(&["s0", "s1", "s2"]),
        t: strings(&["t0"]),
        u: Vec::new(),
    }
}

fn new_state(op: Op) -> State {
    let mut st = old_state();
    match op {
        Op::Write => st.doc = Some(json!({"a": 10, "z": 26})),
        Op::WriteNew => st.fresh = Some(json!({"n": 1})),
        Op::Merge => st.doc = Some(json!({"a": 1, "c": 3, "d": 4})),
        Op::Delete => st.doc = None,
        Op::Append => st.journal.push("two".into()),
        Op::Ingest => st.s.push("s3".into()),
        Op::IngestNew => st.u.push("u0".into()),
        Op::Batch => {
            st.s.push("b0".into());
            st.s.push(long_text());
            st.t.push("tb0".into());
            st.t.push("tb1".into());
        }
    }
    st
}

fn jsonl(lines: &[(&str, &str)]) -> Vec<u8> {
    lines
        .iter()
        .map(|(s, c)| json!({"session_id": s, "content": c}).to_string() + "\n")
        .collect::<String>()
        .into_bytes()
}

/// A store in the old state.
fn setup() -> TestEnv {
    let env = TestEnv::new();
    env.ok(&["write", "doc", "--data", r#"{"a": 1, "b": 2}"#]);
    env.ok(&["write", "doc", "--merge", "--data", r#"{"c": 3}"#]);
    env.ok(&["append", "journal", "--data", r#"{"event": "one"}"#]);
    env.ok_stdin(
        &["ingest", "--jsonl", "-"],
        &jsonl(&[("s", "s0"), ("s", "s1"), ("s", "s2"), ("t", "t0")]),
    );
    env
}

/// The command line and stdin of `op`.
fn op_args(op: Op) -> (Vec<&'static str>, Vec<u8>) {
    match op {
        Op::Write => (
            vec!["write", "doc", "--data", r#"{"a": 10, "z": 26}"#],
            vec![],
        ),
        Op::WriteNew => (vec!["write", "fresh", "--data", r#"{"n": 1}"#], vec![]),
        Op::Merge => (
            vec![
                "write",
                "doc",
                "--merge",
                "--data",
                r#"{"b": null, "d": 4}"#,
            ],
            vec![],
        ),
        Op::Delete => (vec!["delete", "doc"], vec![]),
        Op::Append => (
            vec!["append", "journal", "--data", r#"{"event": "two"}"#],
            vec![],
        ),
        Op::Ingest => (vec!["ingest", "--session-id", "s", "--text", "s3"], vec![]),
        Op::IngestNew => (vec!["ingest", "--session-id", "u", "--text", "u0"], vec![]),
        Op::Batch => (
            vec!["ingest", "--jsonl", "-"],
            jsonl(&[("s", "b0"), ("s", &long_text()), ("t", "tb0"), ("t", "tb1")]),
        ),
    }
}

/// The state as memdir shows it. The first command opens the store and recovers it.
fn observe(env: &TestEnv) -> State {
    let journal = env
        .category_data("journal")
        .map(|j| {
            j["entries"]
                .as_array()
                .expect("log entries")
                .iter()
                .map(|e| e["data"]["event"].as_str().expect("event").to_string())
                .collect()
        })
        .unwrap_or_default();
    State {
        doc: env.category_data("doc"),
        fresh: env.category_data("fresh"),
        journal,
        s: env.session_contents("s"),
        t: env.session_contents("t"),
        u: env.session_contents("u"),
    }
}

/// The data of a category file as a plain reader (an editor, `git`) sees it, before memdir
/// recovers anything: absent, or a whole JSON object.
fn raw_category(env: &TestEnv, name: &str, ctx: &str) -> Option<Value> {
    let p = env.path(&format!("categories/{name}.json"));
    let bytes = match std::fs::read(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("{ctx}: read {}: {e}", p.display()),
    };
    let v: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "{ctx}: categories/{name}.json is torn ({e}):\n{}",
            String::from_utf8_lossy(&bytes)
        )
    });
    assert!(v.is_object(), "{ctx}: categories/{name}.json: {v}");
    Some(v)
}

fn journal_events(v: &Option<Value>) -> Option<Vec<String>> {
    v.as_ref().map(|j| {
        j["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["data"]["event"].as_str().unwrap().to_string())
            .collect()
    })
}

/// Checks the raw files right after the crash: each category file is the old or the new one,
/// and every complete segment line is a whole chunk.
fn check_raw(env: &TestEnv, old: &State, new: &State, ctx: &str) {
    for (name, o, n) in [
        ("doc", &old.doc, &new.doc),
        ("fresh", &old.fresh, &new.fresh),
    ] {
        let raw = raw_category(env, name, ctx);
        assert!(
            raw == *o || raw == *n,
            "{ctx}: categories/{name}.json is neither old nor new: {raw:?}"
        );
    }
    let raw = journal_events(&raw_category(env, "journal", ctx));
    assert!(
        raw.as_ref() == Some(&old.journal) || raw.as_ref() == Some(&new.journal),
        "{ctx}: categories/journal.json is neither old nor new: {raw:?}"
    );
    let sessions = env.path("sessions");
    for e in walkdir::WalkDir::new(&sessions).into_iter().flatten() {
        if !e.file_type().is_file() {
            continue;
        }
        let bytes = std::fs::read(e.path()).unwrap();
        let committed = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        for line in bytes[..committed].split(|&b| b == b'\n') {
            if line.is_empty() {
                continue;
            }
            let v: Value = serde_json::from_slice(line).unwrap_or_else(|err| {
                panic!(
                    "{ctx}: {} holds a torn complete line ({err}): {}",
                    e.path().display(),
                    String::from_utf8_lossy(line)
                )
            });
            assert!(v["content"].is_string(), "{ctx}: {v}");
        }
    }
}

/// Number of history entries of a category (0 when it has none).
fn history_total(env: &TestEnv, name: &str) -> u64 {
    let r = env.run(&["history", name, "--limit", "1000"]);
    match r.code {
        0 => r.json()["total"].as_u64().unwrap(),
        4 => 0,
        _ => {
            env.dump(&r);
            panic!("`{}` exited {}", r.cmd, r.code);
        }
    }
}

fn list_tree(root: &Path) -> String {
    walkdir::WalkDir::new(root)
        .sort_by_file_name()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "  {}",
                e.path().strip_prefix(root).unwrap_or(e.path()).display()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `op` with `fp` armed, requires a real abort, then checks what the next open finds.
fn crash_case(fp: &str, op: Op) {
    let ctx = format!("MEMDIR_FAILPOINT={fp} during {op:?}");
    let env = setup();
    let (args, input) = op_args(op);
    let r = env.run_env(&args, &[("MEMDIR_FAILPOINT", fp)], &input);
    if r.signal != Some(6) {
        env.dump(&r.run);
        panic!(
            "{ctx}: expected an abort (SIGABRT), got exit {} signal {:?}",
            r.run.code, r.signal
        );
    }
    assert!(
        r.run.stderr.contains(&format!("failpoint {fp}")),
        "{ctx}: stderr does not name the failpoint: {}",
        r.run.stderr
    );
    assert!(
        r.run.stdout.is_empty(),
        "{ctx}: a crashed write acknowledged: {}",
        r.run.stdout
    );

    let old = old_state();
    let new = new_state(op);
    check_raw(&env, &old, &new, &ctx);

    // Reopen: the first command recovers.
    let want = if lands(fp, op) { &new } else { &old };
    let got = observe(&env);
    assert_eq!(
        &got,
        want,
        "{ctx}: expected the {} state after recovery\ntree:\n{}",
        if lands(fp, op) { "new" } else { "old" },
        list_tree(&env.dir)
    );
    assert!(
        env.staging_entries().is_empty(),
        "{ctx}: staging left after reopening: {:?}",
        env.staging_entries()
    );
    // What the crashed process left in the trash is gone once a command has run.
    assert!(
        env.meta_entries("trash").is_empty(),
        "{ctx}: trash left after reopening: {:?}",
        env.meta_entries("trash")
    );
    env.assert_clean();

    // History holds exactly the versions that are visible.
    let doc_versions = if lands(fp, op) && matches!(op, Op::Write | Op::Merge | Op::Delete) {
        3
    } else {
        2
    };
    assert_eq!(
        history_total(&env, "doc"),
        doc_versions,
        "{ctx}: doc history"
    );
    let fresh_versions = u64::from(lands(fp, op) && op == Op::WriteNew);
    assert_eq!(
        history_total(&env, "fresh"),
        fresh_versions,
        "{ctx}: fresh history"
    );
    let journal_versions = 1 + u64::from(lands(fp, op) && op == Op::Append);
    assert_eq!(
        history_total(&env, "journal"),
        journal_versions,
        "{ctx}: journal history"
    );

    // The store keeps working: versions and positions continue where the recovered state is.
    let version = if got.doc.is_some() {
        env.ok(&["read", "doc"])["meta"]["version"]
            .as_u64()
            .unwrap()
    } else {
        doc_versions // the tombstone's version
    };
    let w = env.ok(&["write", "doc", "--merge", "--data", r#"{"after": true}"#]);
    assert_eq!(
        w["version"],
        json!(version + 1),
        "{ctx}: version after recovery"
    );
    let mut doc = got.doc.clone().unwrap_or_else(|| json!({}));
    doc["after"] = json!(true);
    assert_eq!(env.category_data("doc"), Some(doc), "{ctx}");
    for (session, before) in [("s", &got.s), ("u", &got.u)] {
        let i = env.ok(&["ingest", "--session-id", session, "--text", "after"]);
        assert_eq!(
            i["position"],
            json!(before.len()),
            "{ctx}: position in {session}"
        );
        let mut want = before.clone();
        want.push("after".into());
        assert_eq!(
            env.session_contents(session),
            want,
            "{ctx}: session {session}"
        );
    }
    let a = env.ok(&["append", "journal", "--data", r#"{"event": "after"}"#]);
    assert_eq!(a["entries"], json!(got.journal.len() + 1), "{ctx}");
    env.assert_clean();
}

/// Runs every case, then fails with the messages of all that failed (not just the first).
fn run_cases(cases: Vec<(String, Box<dyn FnOnce() + '_>)>) {
    let total = cases.len();
    let mut failed = Vec::new();
    for (name, case) in cases {
        if let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(case)) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(format!("[{name}] {msg}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {total} cases failed:\n{}",
        failed.len(),
        failed.join("\n\n")
    );
}

fn crash_at(fp: &'static str) {
    run_cases(
        ops_for(fp)
            .into_iter()
            .map(|op| {
                let case: Box<dyn FnOnce()> = Box::new(move || crash_case(fp, op));
                (format!("{fp} during {op:?}"), case)
            })
            .collect(),
    );
}

#[test]
fn crash_at_txn_after_stage() {
    crash_at("txn.after_stage");
}

#[test]
fn crash_at_txn_after_manifest() {
    crash_at("txn.after_manifest");
}

#[test]
fn crash_at_txn_after_first_rename() {
    crash_at("txn.after_first_rename");
}

#[test]
fn crash_at_txn_after_publish() {
    crash_at("txn.after_publish");
}

#[test]
fn crash_at_txn_after_trash() {
    crash_at("txn.after_trash");
}

#[test]
fn crash_at_ledger_before_update() {
    crash_at("ledger.before_update");
}

#[test]
fn crash_at_ledger_update() {
    crash_at("ledger.update");
}

#[test]
fn crash_at_append_after_intent() {
    crash_at("append.after_intent");
}

#[test]
fn crash_at_append_torn() {
    crash_at("append.torn");
}

#[test]
fn crash_at_append_after_write() {
    crash_at("append.after_write");
}

#[test]
fn crash_at_append_before_sync() {
    crash_at("append.before_sync");
}

#[test]
fn crash_at_append_sync() {
    crash_at("append.sync");
}

/// A JSONL batch of `per` chunks in each of `sessions` sessions, interleaved (every session
/// is touched by every few lines, as a merged export would be).
fn many_sessions_batch(sessions: usize, per: usize, tag: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..per {
        for s in 0..sessions {
            let line =
                json!({"session_id": format!("m{s:03}"), "content": format!("{tag} {s} {i}")});
            out.extend_from_slice(format!("{line}\n").as_bytes());
        }
    }
    out
}

/// A batch touching 100 sessions (half of them new) is flushed as a group: a crash after
/// every line is written but before the flushes end keeps none of it; a crash after the flushes
/// (before the ledger heard of it) keeps all of it; an acknowledged batch is all there.
#[test]
fn a_batch_over_a_hundred_sessions_is_all_or_nothing() {
    const SESSIONS: usize = 100;
    const PER: usize = 3;
    let env = TestEnv::new();
    // Sessions m000..m049 exist; m050..m099 are new to the batch.
    env.ok_stdin(
        &["ingest", "--jsonl", "-"],
        &many_sessions_batch(SESSIONS / 2, 1, "old"),
    );
    let old: Vec<Vec<String>> = (0..SESSIONS)
        .map(|s| env.session_contents(&format!("m{s:03}")))
        .collect();
    let batch = many_sessions_batch(SESSIONS, PER, "new");
    for fp in ["append.before_sync", "append.sync", "append.after_write"] {
        let r = env.run_env(
            &["ingest", "--jsonl", "-"],
            &[("MEMDIR_FAILPOINT", fp)],
            &batch,
        );
        assert_eq!(
            r.signal,
            Some(6),
            "{fp}: expected an abort: {}",
            r.run.stderr
        );
        assert!(
            r.run.stdout.is_empty(),
            "{fp}: acknowledged: {}",
            r.run.stdout
        );
        for (s, before) in old.iter().enumerate() {
            assert_eq!(
                &env.session_contents(&format!("m{s:03}")),
                before,
                "{fp}: session m{s:03} after the crash"
            );
        }
        assert!(
            env.staging_entries().is_empty(),
            "{fp}: staging left: {:?}",
            env.staging_entries()
        );
        let sessions = std::fs::read_dir(env.path("sessions")).unwrap().count();
        assert_eq!(sessions, SESSIONS / 2, "{fp}: new session directories left");
        env.assert_clean();
    }
    // Past the flushes: the files hold the batch, though the ledger never heard of it.
    let r = env.run_env(
        &["ingest", "--jsonl", "-"],
        &[("MEMDIR_FAILPOINT", "ledger.before_update")],
        &batch,
    );
    assert_eq!(r.signal, Some(6), "expected an abort: {}", r.run.stderr);
    let with_batch = |s: usize, before: &[String]| {
        let mut want = before.to_vec();
        want.extend((0..PER).map(|i| format!("new {s} {i}")));
        want
    };
    for (s, before) in old.iter().enumerate() {
        assert_eq!(
            env.session_contents(&format!("m{s:03}")),
            with_batch(s, before),
            "session m{s:03} after a crash past the flushes"
        );
    }
    env.assert_clean();
    // Acknowledged: every chunk of the batch is there, positions gap-free, in every session.
    let ack = env.ok_stdin(
        &["ingest", "--jsonl", "-"],
        &many_sessions_batch(SESSIONS, 1, "acked"),
    );
    assert_eq!(ack["count"], json!(SESSIONS), "{ack}");
    for (s, before) in old.iter().enumerate() {
        let mut want = with_batch(s, before);
        want.push(format!("acked {s} 0"));
        assert_eq!(
            env.session_contents(&format!("m{s:03}")),
            want,
            "session m{s:03}"
        );
    }
    let found = env.ok(&["search", "acked", "--limit", "1000"]);
    assert_eq!(
        found["results"].as_array().map(Vec::len),
        Some(SESSIONS),
        "every acknowledged chunk is searchable"
    );
    env.assert_clean();
}

#[test]
fn crash_at_stage_write() {
    crash_at("stage.write");
}

#[test]
fn crash_at_append_write() {
    crash_at("append.write");
}

#[test]
fn a_crash_during_recovery_is_recovered_by_the_next_open() {
    for op in [Op::Write, Op::WriteNew, Op::Delete] {
        let ctx = format!("{op:?} crashed after its manifest, then recovery crashed too");
        let env = setup();
        let (args, input) = op_args(op);
        let r = env.run_env(&args, &[("MEMDIR_FAILPOINT", "txn.after_manifest")], &input);
        assert_eq!(r.signal, Some(6), "{ctx}: {}", r.run.stderr);
        // Recovery rolls the transaction forward through the same publish step: a reader that
        // opens the store with the failpoint armed dies halfway through recovery.
        let r = env.run_env(
            &["read", "journal"],
            &[("MEMDIR_FAILPOINT", "txn.after_first_rename")],
            b"",
        );
        if r.signal != Some(6) {
            env.dump(&r.run);
            panic!("{ctx}: recovery did not reach txn.after_first_rename");
        }
        check_raw(&env, &old_state(), &new_state(op), &ctx);
        assert_eq!(observe(&env), new_state(op), "{ctx}");
        assert!(
            env.staging_entries().is_empty(),
            "{ctx}: {:?}",
            env.staging_entries()
        );
        env.assert_clean();
    }
}

#[test]
fn every_failpoint_in_the_source_is_covered() {
    let in_source = crate::util::failpoints_in_source();
    let covered: BTreeSet<String> = FAILPOINTS.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        in_source, covered,
        "failpoints in src/ and the crash tests disagree"
    );
}

/// Runs `op` with `<point>=enospc`; requires exit 8 with a "disk is full" hint and a store
/// exactly as it was.
fn enospc_case(point: &str, op: Op) {
    let spec = format!("{point}=enospc");
    let ctx = format!("MEMDIR_FAILPOINT={spec} during {op:?}");
    let env = setup();
    let before = env.snapshot();
    let (args, input) = op_args(op);
    let r = env.run_env(&args, &[("MEMDIR_FAILPOINT", &spec)], &input);
    if r.run.code != 8 {
        env.dump(&r.run);
        panic!(
            "{ctx}: exited {} (signal {:?}), expected 8 (unavailable)",
            r.run.code, r.signal
        );
    }
    assert!(r.run.stdout.is_empty(), "{ctx}: {}", r.run.stdout);
    let e = r.run.error();
    assert_eq!(e["code"], "unavailable", "{ctx}: {e}");
    assert!(
        e["hints"].as_array().is_some_and(|h| h
            .iter()
            .any(|h| h.as_str().is_some_and(|h| h.contains("disk is full")))),
        "{ctx}: no \"disk is full\" hint: {e}"
    );
    let after = env.snapshot();
    let changed: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(changed.is_empty(), "{ctx}: files changed: {changed:?}");
    assert!(
        env.staging_entries().is_empty(),
        "{ctx}: staging left behind: {:?}\ntree:\n{}",
        env.staging_entries(),
        list_tree(&env.dir)
    );
    // Read-only check before any other command: the store is as it was.
    env.assert_clean();
    assert_eq!(observe(&env), old_state(), "{ctx}");
    // Without the failpoint the same operation goes through.
    let r = env.run_stdin(&args, &input);
    assert_eq!(r.code, 0, "{ctx}: retry failed: {}", r.stderr);
    assert_eq!(observe(&env), new_state(op), "{ctx}: retry");
    env.assert_clean();
}

#[test]
fn full_disk_while_staging_is_unavailable_and_changes_nothing() {
    run_cases(
        [CATEGORY_OPS, &[Op::Batch]]
            .concat()
            .into_iter()
            .map(|op| {
                let case: Box<dyn FnOnce()> = Box::new(move || enospc_case("stage.write", op));
                (format!("stage.write=enospc during {op:?}"), case)
            })
            .collect(),
    );
}

#[test]
fn full_disk_while_appending_is_unavailable_and_changes_nothing() {
    run_cases(
        ["append.write", "append.sync"]
            .into_iter()
            .flat_map(|point| {
                SESSION_OPS.iter().map(move |&op| {
                    let case: Box<dyn FnOnce()> = Box::new(move || enospc_case(point, op));
                    (format!("{point}=enospc during {op:?}"), case)
                })
            })
            .collect(),
    );
}

/// What one writer of the kill loop attempted.
#[derive(Debug)]
enum Attempt {
    /// One chunk into session `k`.
    Chunk(String),
    /// Three chunks: two into `k`, one into `k2`.
    Batch([String; 3]),
    /// A merge of key = value into `kv`.
    Merge(String, u64),
    /// An entry appended to the log `journal`.
    Log(String),
}

#[derive(Debug)]
struct Tried {
    attempt: Attempt,
    /// The JSON result when the write was acknowledged (exit 0).
    acked: Option<Value>,
}

#[test]
fn kill_nine_at_random_instants_loses_no_acknowledged_write() {
    const THREADS: u64 = 2;
    const ITERATIONS: u64 = 150;
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_LOCK_TIMEOUT_MS", "30000");
    env.ok(&["write", "kv", "--data", r#"{"seed": 0}"#]);
    env.ok(&["ingest", "--session-id", "k", "--text", "seed"]);
    env.ok(&["append", "journal", "--data", r#"{"event": "seed"}"#]);
    let batch_dir = env.tmp.path().join("batches");
    std::fs::create_dir_all(&batch_dir).unwrap();

    // Calibration: how long a whole write takes here (debug build, this machine, this load).
    // Kill instants are drawn from 0..=max(15 ms, 2x that), so that they fall anywhere in a
    // writer's life, commit and ledger update included, and some writers finish.
    let mut times: Vec<Duration> = (0..6)
        .map(|n| {
            let t = std::time::Instant::now();
            if n % 2 == 0 {
                env.ok(&[
                    "write",
                    "kv",
                    "--merge",
                    "--data",
                    &json!({"seed": n}).to_string(),
                ]);
            } else {
                env.ok(&[
                    "ingest",
                    "--session-id",
                    "k",
                    "--text",
                    &format!("calibrate {n}"),
                ]);
            }
            t.elapsed()
        })
        .collect();
    times.sort();
    let max_delay_ms = (2 * times[times.len() / 2].as_millis() as u64).max(15);
    eprintln!("kill loop: writes take {times:?}; kill delays 0..={max_delay_ms} ms");

    let began = std::time::Instant::now();
    let tried: Vec<Tried> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (env, batch_dir) = (&env, &batch_dir);
                s.spawn(move || {
                    let mut rng = Rng(0x6d65_6d64_6972 + t);
                    let mut out = Vec::new();
                    for i in 0..ITERATIONS {
                        let id = format!("{t}-{i}");
                        let roll = rng.below(100);
                        let (attempt, args): (Attempt, Vec<String>) = if roll < 35 {
                            let c = format!("c-{id}");
                            let args = ["ingest", "--session-id", "k", "--text", &c];
                            (Attempt::Chunk(c.clone()), args.map(String::from).to_vec())
                        } else if roll < 55 {
                            let b = [0, 1, 2].map(|j| format!("b-{id}-{j}"));
                            let file = batch_dir.join(format!("{id}.jsonl"));
                            let lines = jsonl(&[("k", &b[0]), ("k", &b[1]), ("k2", &b[2])]);
                            std::fs::write(&file, lines).unwrap();
                            let args = vec![
                                "ingest".to_string(),
                                "--jsonl".into(),
                                file.display().to_string(),
                            ];
                            (Attempt::Batch(b), args)
                        } else if roll < 85 {
                            let key = format!("m-{id}");
                            let data = json!({ &key: i }).to_string();
                            let args = ["write", "kv", "--merge", "--data", &data];
                            (Attempt::Merge(key, i), args.map(String::from).to_vec())
                        } else {
                            let e = format!("e-{id}");
                            let data = json!({"event": e}).to_string();
                            let args = ["append", "journal", "--data", &data];
                            (Attempt::Log(e), args.map(String::from).to_vec())
                        };
                        let delay = Duration::from_millis(rng.below(max_delay_ms + 1));
                        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
                        let mut child = env
                            .command(&argv)
                            .stdin(Stdio::null())
                            .stdout(Stdio::piped())
                            .stderr(Stdio::piped())
                            .spawn()
                            .expect("spawn memdir");
                        // The random instant: the child may be anywhere in its run by now.
                        std::thread::sleep(delay);
                        let _ = child.kill();
                        let output = child.wait_with_output().expect("wait memdir");
                        let r: RawRun = raw_run(format!("memdir {}", args.join(" ")), output);
                        let acked = match (r.signal, r.run.code) {
                            (Some(9), _) => None,
                            (None, 0) => Some(r.run.json()),
                            _ => {
                                env.dump(&r.run);
                                panic!(
                                    "`{}` ended with exit {} signal {:?}",
                                    r.run.cmd, r.run.code, r.signal
                                );
                            }
                        };
                        out.push(Tried { attempt, acked });
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
    let loop_time = began.elapsed();
    let acked = tried.iter().filter(|t| t.acked.is_some()).count();
    let killed = tried.len() - acked;
    eprintln!(
        "kill loop: {} writes, {acked} acknowledged, {killed} killed, in {loop_time:?}",
        tried.len()
    );
    assert!(
        acked > 0 && killed > 0,
        "the loop must both kill writers and let some finish ({acked} acked, {killed} killed)"
    );

    // One normal command recovers whatever the last kill left; then the store is clean.
    env.ok(&["status"]);
    assert!(
        env.staging_entries().is_empty(),
        "staging left after a normal command: {:?}",
        env.staging_entries()
    );
    env.assert_clean();

    let k = env.session_contents("k");
    let k2 = env.session_contents("k2");
    let pos = |list: &[String]| -> BTreeMap<String, usize> {
        let m: BTreeMap<String, usize> = list
            .iter()
            .enumerate()
            .map(|(i, c)| (c.clone(), i))
            .collect();
        assert_eq!(m.len(), list.len(), "a chunk landed twice: {list:?}");
        m
    };
    let (kp, k2p) = (pos(&k), pos(&k2));
    let kv = env.category_data("kv").expect("kv exists");
    let journal = env.category_data("journal").expect("journal exists");
    let entries = journal["entries"].as_array().unwrap();
    let entry_ids: BTreeSet<&str> = entries.iter().map(|e| e["id"].as_str().unwrap()).collect();
    let events: BTreeSet<&str> = entries
        .iter()
        .map(|e| e["data"]["event"].as_str().unwrap())
        .collect();
    let (mut known_k, mut known_k2, mut known_keys, mut known_events) = (
        (0..6)
            .map(|n| format!("calibrate {n}"))
            .chain(["seed".to_string()])
            .collect::<BTreeSet<_>>(),
        BTreeSet::new(),
        BTreeSet::from(["seed".to_string()]),
        BTreeSet::from(["seed".to_string()]),
    );
    for t in &tried {
        match (&t.attempt, &t.acked) {
            (Attempt::Chunk(c), acked) => {
                known_k.insert(c.clone());
                if let Some(v) = acked {
                    assert_eq!(
                        kp.get(c).map(|p| *p as u64),
                        v["position"].as_u64(),
                        "acknowledged chunk {c:?} ({v}) is missing or moved"
                    );
                }
            }
            (Attempt::Batch(b), acked) => {
                known_k.extend([b[0].clone(), b[1].clone()]);
                known_k2.insert(b[2].clone());
                let present = [kp.get(&b[0]), kp.get(&b[1]), k2p.get(&b[2])];
                let n = present.iter().filter(|p| p.is_some()).count();
                assert!(n == 0 || n == 3, "batch {b:?} is partly there: {present:?}");
                if let Some(v) = acked {
                    assert_eq!(n, 3, "acknowledged batch {b:?} ({v}) is missing");
                    for j in 0..3 {
                        assert_eq!(
                            Some(present[j].map(|p| *p as u64).unwrap()),
                            v["chunks"][j]["position"].as_u64(),
                            "batch {b:?} chunk {j} moved"
                        );
                    }
                    assert_eq!(
                        present[1].copied(),
                        present[0].map(|p| p + 1),
                        "batch {b:?} is not contiguous"
                    );
                }
            }
            (Attempt::Merge(key, value), acked) => {
                known_keys.insert(key.clone());
                if let Some(v) = acked {
                    assert_eq!(
                        kv.get(key),
                        Some(&json!(value)),
                        "acknowledged merge {key} ({v}) was lost"
                    );
                }
            }
            (Attempt::Log(e), acked) => {
                known_events.insert(e.clone());
                if let Some(v) = acked {
                    let id = v["id"].as_str().unwrap();
                    assert!(
                        entry_ids.contains(id) && events.contains(e.as_str()),
                        "acknowledged log entry {e} ({id}) was lost"
                    );
                }
            }
        }
    }
    // Nothing appears that nobody wrote.
    for c in &k {
        assert!(
            known_k.contains(c),
            "session k holds an unknown chunk {c:?}"
        );
    }
    for c in &k2 {
        assert!(
            known_k2.contains(c),
            "session k2 holds an unknown chunk {c:?}"
        );
    }
    for key in kv.as_object().unwrap().keys() {
        assert!(known_keys.contains(key), "kv holds an unknown key {key}");
    }
    for e in &events {
        assert!(
            known_events.contains(*e),
            "journal holds an unknown event {e}"
        );
    }
    let ids: Vec<&str> = entries.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "log ids not sorted: {ids:?}"
    );
    // The store keeps working after all that.
    let i = env.ok(&["ingest", "--session-id", "k", "--text", "final"]);
    assert_eq!(i["position"], json!(k.len()));
    env.assert_clean();
}
