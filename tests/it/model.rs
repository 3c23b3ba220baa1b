//! Random operation sequences against an in-memory model of the store, with a crash in each
//! round: a failpoint armed at a random step of the commit protocol, or `kill -9` at a random
//! instant. After recovery the whole store must equal the model: every acknowledged operation
//! is there, the crashed one is there whole or not at all, nothing else is, and
//! `verify-store` is clean.
//!
//! The schedule comes from a seed, printed when the test fails; `MEMDIR_MODEL_SEED=<n>` replays
//! it and `MEMDIR_MODEL_ROUNDS=<n>` runs longer. Also here: a fuzz of `memdir serve` over stdio
//! with random and damaged JSON-RPC lines.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::util::{RawRun, Rng, TestEnv, raw_run};

const DOCS: &[&str] = &["d0", "d1", "d2"];
const LOGS: &[&str] = &["j0", "j1"];
const SESSIONS: &[&str] = &["s0", "s1", "s2"];
const DEFAULT_SEED: u64 = 0x6d6f_6465_6c31;
const DEFAULT_ROUNDS: u64 = 30;

/// One operation, run through the CLI.
#[derive(Clone, Debug)]
enum Op {
    /// Replace a document whole.
    Write(String, Map<String, Value>),
    /// Merge top-level keys into a document; null deletes a key.
    Merge(String, Map<String, Value>),
    /// Delete a document or a log.
    Delete(String),
    /// Append an event to a log.
    Append(String, String),
    /// One chunk into a session.
    Ingest(String, String),
    /// Several chunks, across sessions, in one batch.
    Batch(Vec<(String, String)>),
}

impl Op {
    fn args(&self) -> (Vec<String>, Vec<u8>) {
        let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        match self {
            Op::Write(n, d) => (
                s(&["write", n, "--data", &Value::Object(d.clone()).to_string()]),
                vec![],
            ),
            Op::Merge(n, d) => (
                s(&[
                    "write",
                    n,
                    "--merge",
                    "--data",
                    &Value::Object(d.clone()).to_string(),
                ]),
                vec![],
            ),
            Op::Delete(n) => (s(&["delete", n]), vec![]),
            Op::Append(n, e) => (
                s(&["append", n, "--data", &json!({ "event": e }).to_string()]),
                vec![],
            ),
            Op::Ingest(sid, t) => (s(&["ingest", "--session-id", sid, "--text", t]), vec![]),
            Op::Batch(chunks) => (
                s(&["ingest", "--jsonl", "-"]),
                chunks
                    .iter()
                    .map(|(sid, t)| json!({"session_id": sid, "content": t}).to_string() + "\n")
                    .collect::<String>()
                    .into_bytes(),
            ),
        }
    }

    fn is_session_op(&self) -> bool {
        matches!(self, Op::Ingest(..) | Op::Batch(..))
    }
}

/// What the store should hold.
#[derive(Clone, Debug, Default, PartialEq)]
struct Model {
    docs: BTreeMap<String, Map<String, Value>>,
    logs: BTreeMap<String, Vec<String>>,
    sessions: BTreeMap<String, Vec<String>>,
    /// History entries per category name, deleted ones included.
    versions: BTreeMap<String, u64>,
}

impl Model {
    /// Applies `op`; returns the exit code the CLI should give (0, or 4 for a missing
    /// category).
    fn apply(&mut self, op: &Op) -> i32 {
        let mut bump = |name: &str| *self.versions.entry(name.to_string()).or_default() += 1;
        match op {
            Op::Write(n, d) => {
                if self.docs.get(n) != Some(d) {
                    bump(n);
                    self.docs.insert(n.clone(), d.clone());
                }
            }
            Op::Merge(n, patch) => {
                let old = self.docs.get(n).cloned();
                let mut new = old.clone().unwrap_or_default();
                for (k, v) in patch {
                    if v.is_null() {
                        new.remove(k);
                    } else {
                        new.insert(k.clone(), v.clone());
                    }
                }
                if old.as_ref() != Some(&new) {
                    bump(n);
                    self.docs.insert(n.clone(), new);
                }
            }
            Op::Delete(n) => {
                if self.docs.remove(n).is_none() && self.logs.remove(n).is_none() {
                    return 4;
                }
                bump(n);
            }
            Op::Append(n, e) => {
                bump(n);
                self.logs.entry(n.clone()).or_default().push(e.clone());
            }
            Op::Ingest(sid, t) => self
                .sessions
                .entry(sid.clone())
                .or_default()
                .push(t.clone()),
            Op::Batch(chunks) => {
                for (sid, t) in chunks {
                    self.sessions
                        .entry(sid.clone())
                        .or_default()
                        .push(t.clone());
                }
            }
        }
        0
    }
}

/// How the crashed operation is crashed.
#[derive(Clone, Debug)]
enum Crash {
    /// `MEMDIR_FAILPOINT=<spec>`: abort at a step, or fail an I/O step with ENOSPC.
    Failpoint(&'static str),
    /// SIGKILL after this many milliseconds.
    Kill(u64),
}

/// Every failpoint with the operations on whose path it lies;
/// `the_model_test_arms_every_failpoint` keeps it in step with the source.
const FAILPOINTS: &[(&str, &[Kind])] = &[
    ("txn.after_stage", &[Kind::Category]),
    ("txn.after_manifest", &[Kind::Category]),
    ("txn.after_first_rename", &[Kind::Category]),
    ("txn.after_publish", &[Kind::Category]),
    ("txn.after_trash", &[Kind::Category]),
    (
        "ledger.before_update",
        &[Kind::Category, Kind::Chunk, Kind::Batch],
    ),
    ("ledger.update", &[Kind::Category, Kind::Chunk, Kind::Batch]),
    ("stage.write", &[Kind::Category, Kind::Batch]),
    ("stage.write=enospc", &[Kind::Category, Kind::Batch]),
    ("append.after_intent", &[Kind::Batch]),
    ("append.torn", &[Kind::Chunk, Kind::Batch]),
    ("append.write", &[Kind::Chunk, Kind::Batch]),
    ("append.write=enospc", &[Kind::Chunk, Kind::Batch]),
    ("append.after_write", &[Kind::Chunk, Kind::Batch]),
    ("append.before_sync", &[Kind::Chunk, Kind::Batch]),
    ("append.sync", &[Kind::Chunk, Kind::Batch]),
    // On the search path, on no write's: `search::lazy_commits` crashes searches there.
    ("index.after_lazy_commit", &[]),
    // On the hook's path: `hook::a_killed_hook_resumes_without_loss_or_duplicates`.
    ("cursor.before_save", &[]),
    // On the HTTP sync client's path: `sync_http::a_client_killed_mid_sync_converges...`.
    ("sync.http.after_pull_page", &[]),
    ("sync.http.after_push_page", &[]),
    // On both syncs' merge: `sync::a_sync_killed_between_the_history_and_the_files_it_derives_
    // loses_nothing` and `sync_http::a_client_killed_before_settling_a_pulled_page_loses_nothing`.
    ("sync.before_settle", &[]),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Category,
    Chunk,
    Batch,
}

fn kind(op: &Op) -> Kind {
    match op {
        Op::Ingest(..) => Kind::Chunk,
        Op::Batch(..) => Kind::Batch,
        _ => Kind::Category,
    }
}

/// Whether an abort at `fp` is past the operation's commit point (`Some(true)`: the next open
/// shows it), before it (`Some(false)`), or either (`None`). STORAGE.md: the manifest commits
/// a transaction, a whole line commits a chunk, removing the intent commits a batch.
fn lands(fp: &str, k: Kind) -> Option<bool> {
    match fp {
        "txn.after_stage"
        | "stage.write"
        | "append.after_intent"
        | "append.torn"
        | "append.write" => Some(false),
        "txn.after_manifest"
        | "txn.after_first_rename"
        | "txn.after_publish"
        | "txn.after_trash"
        | "ledger.before_update"
        | "ledger.update" => Some(true),
        // Every line is written whole before the flushes begin: a single chunk is on disk, a
        // batch's intent cuts it back.
        "append.after_write" | "append.before_sync" | "append.sync" => Some(k != Kind::Batch),
        _ => None,
    }
}

/// A small JSON value; no floats (their text round trip is tested in the props target).
fn value(rng: &mut Rng) -> Value {
    match rng.below(6) {
        0 => json!(rng.below(1000)),
        1 => json!(rng.below(2) == 1),
        2 => json!(format!("v{} é😀 \"q\"\n", rng.below(100))),
        3 => json!([rng.below(10), "x", null]),
        4 => json!({"n": rng.below(10), "s": "nested"}),
        _ => json!(-(rng.below(1_000_000) as i64)),
    }
}

fn pick<'a>(rng: &mut Rng, from: &[&'a str]) -> &'a str {
    from[rng.below(from.len() as u64) as usize]
}

fn object(rng: &mut Rng, nulls: bool) -> Map<String, Value> {
    (0..rng.below(4))
        .map(|_| {
            let k = format!("k{}", rng.below(5));
            let v = if nulls && rng.below(3) == 0 {
                Value::Null
            } else {
                value(rng)
            };
            (k, v)
        })
        .collect()
}

/// A random operation; `n` makes its texts unique.
fn random_op(rng: &mut Rng, n: u64) -> Op {
    let text = |rng: &mut Rng| match rng.below(4) {
        0 => format!("c{n} plain"),
        1 => format!("c{n} ünï \"quoted\" 😀"),
        2 => format!("c{n} two\nlines\ttab"),
        _ => format!("c{n} {}", "long text ".repeat(1 + rng.below(80) as usize)),
    };
    match rng.below(100) {
        0..20 => Op::Write(pick(rng, DOCS).into(), object(rng, false)),
        20..38 => Op::Merge(pick(rng, DOCS).into(), object(rng, true)),
        38..46 => Op::Delete(pick(rng, &[DOCS, LOGS].concat()).into()),
        46..62 => Op::Append(pick(rng, LOGS).into(), format!("e{n}")),
        62..82 => Op::Ingest(pick(rng, SESSIONS).into(), text(rng)),
        _ => Op::Batch(
            (0..2 + rng.below(3))
                .map(|i| {
                    (
                        pick(rng, SESSIONS).to_string(),
                        format!("{}.{i}", text(rng)),
                    )
                })
                .collect(),
        ),
    }
}

/// The whole store as memdir shows it, in the model's terms.
fn observe(env: &TestEnv) -> Model {
    let mut m = Model::default();
    let list = env.ok(&["list"]);
    for c in list["categories"].as_array().expect("categories") {
        let name = c["name"].as_str().expect("name").to_string();
        assert_eq!(c["status"], "ok", "category {name}: {c}");
        let data = env
            .category_data(&name)
            .unwrap_or_else(|| panic!("listed {name} does not read"));
        match c["kind"].as_str() {
            Some("document") => {
                m.docs
                    .insert(name, data.as_object().expect("an object").clone());
            }
            Some("log") => {
                let events = data["entries"]
                    .as_array()
                    .expect("log entries")
                    .iter()
                    .map(|e| e["data"]["event"].as_str().expect("event").to_string())
                    .collect();
                m.logs.insert(name, events);
            }
            k => panic!("category {name} has kind {k:?}"),
        }
    }
    for name in DOCS.iter().chain(LOGS) {
        let r = env.run(&["history", name, "--limit", "1000"]);
        match r.code {
            0 => {
                let total = r.json()["total"].as_u64().expect("total");
                m.versions.insert(name.to_string(), total);
            }
            4 => {}
            _ => {
                env.dump(&r);
                panic!("`{}` exited {}", r.cmd, r.code);
            }
        }
    }
    let overview = env.ok(&["overview", "--limit", "1000"]);
    for s in overview["sessions"].as_array().expect("sessions") {
        let id = s["id"].as_str().expect("id");
        m.sessions.insert(id.to_string(), env.session_contents(id));
    }
    m
}

/// Right after a crash, before anything recovers: every category file is a whole JSON object
/// and every complete segment line is a whole chunk, as a plain reader (an editor, `git`) sees.
fn check_raw(env: &TestEnv, ctx: &str) {
    for e in walkdir::WalkDir::new(env.path("categories"))
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
    {
        let bytes = std::fs::read(e.path()).unwrap();
        let v: Value = serde_json::from_slice(&bytes).unwrap_or_else(|err| {
            panic!(
                "{ctx}: {} is torn ({err}): {}",
                e.path().display(),
                String::from_utf8_lossy(&bytes)
            )
        });
        assert!(v.is_object(), "{ctx}: {}: {v}", e.path().display());
    }
    for e in walkdir::WalkDir::new(env.path("sessions"))
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
    {
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

/// Files outside `.memdir/`: category files and session directories must be exactly the
/// model's (a crashed operation may not leave an empty session behind, say).
fn check_files(env: &TestEnv, want: &Model, ctx: &str) {
    let names = |dir: &Path| -> BTreeSet<String> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let cats: BTreeSet<String> = want
        .docs
        .keys()
        .chain(want.logs.keys())
        .map(|n| format!("{n}.json"))
        .collect();
    assert_eq!(
        names(&env.path("categories")),
        cats,
        "{ctx}: category files"
    );
    let sessions: BTreeSet<String> = want.sessions.keys().cloned().collect();
    let on_disk: BTreeSet<String> = names(&env.path("sessions")).into_iter().collect();
    assert_eq!(on_disk, sessions, "{ctx}: session directories");
    let status = env.ok(&["status"]);
    let chunks: usize = want.sessions.values().map(Vec::len).sum();
    assert_eq!(status["chunks"], json!(chunks), "{ctx}: status: {status}");
    assert_eq!(
        status["categories"],
        json!(want.docs.len() + want.logs.len()),
        "{ctx}: status: {status}"
    );
    assert_eq!(
        status["logs"],
        json!(want.logs.len()),
        "{ctx}: status: {status}"
    );
}

/// Bug (fixed): an ingest that creates a session and crashes mid-write (`append.torn`, or a
/// `kill -9`) is cut back to zero bytes on recovery, but the session directory and its empty
/// segment stay: `status` counts a session that `fetch` and `overview` say does not exist, and
/// an empty `sessions/<id>/<replica>.jsonl` stays among the user's files. The ENOSPC path
/// (`segment::append` failing without a crash) removes what it created; recovery
/// (`undo_intent`, torn-tail repair) does not. Expected: the store exactly as before the
/// crashed ingest. The body is disabled until the fix lands; uncomment it to check the fix.
#[test]
fn a_crashed_ingest_into_a_new_session_leaves_no_session_behind() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s0", "--text", "first"]);
    let before = env.snapshot();
    for (args, input) in [
        (vec!["ingest", "--session-id", "s1", "--text", "torn"], &b""[..]),
        (
            vec!["ingest", "--jsonl", "-"],
            &b"{\"session_id\":\"s2\",\"content\":\"x\"}\n{\"session_id\":\"s2\",\"content\":\"y\"}\n"[..],
        ),
    ] {
        let r = env.run_env(&args, &[("MEMDIR_FAILPOINT", "append.torn")], input);
        assert_eq!(r.signal, Some(6), "{}", r.run.stderr);
        assert_eq!(env.ok(&["status"])["sessions"], 1);
        assert_eq!(env.snapshot(), before, "files left by {args:?}");
    }
}

/// Runs `op` normally; it must succeed (or be refused as the model says) and is applied.
fn run_ok(env: &TestEnv, model: &mut Model, op: &Op, ctx: &str) -> Duration {
    let (args, input) = op.args();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let t = Instant::now();
    let r = env.run_stdin(&argv, &input);
    let took = t.elapsed();
    let want = model.apply(op);
    if r.code != want {
        env.dump(&r);
        panic!(
            "{ctx}: `{}` exited {}, the model says {want}",
            r.cmd, r.code
        );
    }
    took
}

/// Runs `op` crashed as `crash` says; returns how it ended.
fn run_crashed(env: &TestEnv, op: &Op, crash: &Crash) -> RawRun {
    let (args, input) = op.args();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    match crash {
        Crash::Failpoint(spec) => env.run_env(&argv, &[("MEMDIR_FAILPOINT", spec)], &input),
        Crash::Kill(ms) => {
            let mut child = env
                .command(&argv)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn memdir");
            let mut stdin = child.stdin.take().unwrap();
            // Small inputs fit the pipe: this never blocks.
            let _ = stdin.write_all(&input);
            drop(stdin);
            std::thread::sleep(Duration::from_millis(*ms));
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait memdir");
            raw_run(format!("memdir {}", args.join(" ")), out)
        }
    }
}

/// One whole run from `seed`.
fn run_model(seed: u64, rounds: u64) {
    let mut rng = Rng(seed);
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_LOCK_TIMEOUT_MS", "30000");
    let mut model = Model::default();
    let mut times: Vec<Duration> = Vec::new();
    let mut n = 0;
    for round in 0..rounds {
        for _ in 0..1 + rng.below(6) {
            n += 1;
            let op = random_op(&mut rng, n);
            let ctx = format!("round {round}, op {n} {op:?}");
            times.push(run_ok(&env, &mut model, &op, &ctx));
        }
        n += 1;
        let op = random_op(&mut rng, n);
        let k = kind(&op);
        let crash = if rng.below(3) == 0 {
            times.sort();
            let median = times[times.len() / 2].as_millis() as u64;
            Crash::Kill(rng.below((2 * median).max(15) + 1))
        } else {
            let fps: Vec<&'static str> = FAILPOINTS
                .iter()
                .filter(|(_, kinds)| kinds.contains(&k))
                .map(|(fp, _)| *fp)
                .collect();
            Crash::Failpoint(pick(&mut rng, &fps))
        };
        let ctx = format!("round {round}, op {n} {op:?} crashed by {crash:?}");
        let r = run_crashed(&env, &op, &crash);
        let without = model.clone();
        let mut with = model.clone();
        let code = with.apply(&op);
        let outcome = match (r.signal, r.run.code) {
            // A SIGKILL can land after the acknowledgement was written and before the process
            // exited: then the operation must have landed.
            (Some(9), _) if !r.run.stdout.is_empty() => {
                check_raw(&env, &ctx);
                Some(true)
            }
            (Some(_), _) => {
                assert!(r.run.stdout.is_empty(), "{ctx}: acknowledged, then crashed");
                check_raw(&env, &ctx);
                None
            }
            (None, c) if c == code => Some(true),
            // ENOSPC is refused whole: exit 8, nothing changed.
            (None, 8) if matches!(crash, Crash::Failpoint(s) if s.ends_with("=enospc")) => {
                Some(false)
            }
            _ => {
                env.dump(&r.run);
                panic!(
                    "{ctx}: exited {} signal {:?}; the model says {code}",
                    r.run.code, r.signal
                );
            }
        };
        // Recover: one ordinary command, then the whole store is compared.
        env.ok(&["status"]);
        let got = observe(&env);
        let landed = if got == with {
            true
        } else if got == without {
            false
        } else {
            panic!(
                "{ctx}: the store is neither without nor with the crashed operation\n\
                 got:     {got:?}\nwithout: {without:?}\nwith:    {with:?}"
            );
        };
        if let Some(acked) = outcome {
            assert_eq!(
                landed, acked,
                "{ctx}: the store disagrees with the exit status"
            );
        }
        if let (Crash::Failpoint(fp), None) = (&crash, outcome)
            && let Some(want) = lands(fp, k)
        {
            assert_eq!(
                landed, want,
                "{ctx}: crash on the wrong side of the commit point"
            );
        }
        model = if landed { with } else { without };
        check_files(&env, &model, &ctx);
        assert!(
            env.staging_entries().is_empty(),
            "{ctx}: staging left after recovery: {:?}",
            env.staging_entries()
        );
        env.assert_clean();
        eprintln!(
            "model: round {round}: {:?} {} by {crash:?}",
            op_name(&op),
            if landed { "landed" } else { "rolled back" }
        );
        // The store keeps working after the crash.
        n += 1;
        let op = if op.is_session_op() {
            Op::Ingest(pick(&mut rng, SESSIONS).into(), format!("c{n} after"))
        } else {
            Op::Append(pick(&mut rng, LOGS).into(), format!("e{n}"))
        };
        run_ok(
            &env,
            &mut model,
            &op,
            &format!("round {round}, after the crash"),
        );
    }
    assert_eq!(observe(&env), model, "the final store");
    env.assert_clean();
}

fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Write(..) => "write",
        Op::Merge(..) => "merge",
        Op::Delete(..) => "delete",
        Op::Append(..) => "append",
        Op::Ingest(..) => "ingest",
        Op::Batch(..) => "batch",
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
    })
}

#[test]
fn random_operations_with_a_crash_per_round_match_the_model() {
    let seed = env_u64("MEMDIR_MODEL_SEED").unwrap_or(DEFAULT_SEED);
    let rounds = env_u64("MEMDIR_MODEL_ROUNDS").unwrap_or(DEFAULT_ROUNDS);
    eprintln!("model: MEMDIR_MODEL_SEED={seed} MEMDIR_MODEL_ROUNDS={rounds}");
    let began = Instant::now();
    if let Err(e) = std::panic::catch_unwind(|| run_model(seed, rounds)) {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!("model test failed; replay with MEMDIR_MODEL_SEED={seed}:\n{msg}");
    }
    eprintln!("model: {rounds} rounds in {:?}", began.elapsed());
}

#[test]
fn the_model_test_arms_every_failpoint() {
    let in_source = crate::util::failpoints_in_source();
    let armed: BTreeSet<String> = FAILPOINTS
        .iter()
        .map(|(fp, _)| fp.split('=').next().unwrap().to_string())
        .collect();
    assert_eq!(
        in_source, armed,
        "failpoints in src/ and the model test disagree"
    );
}

// ---------------------------------------------------------------------------------------------
// `memdir serve` over stdio, fed random and damaged JSON-RPC lines.

/// Valid requests to damage.
fn valid_messages() -> Vec<Value> {
    let call = |name: &str, args: Value| json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": args}});
    vec![
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}),
        call(
            "memory_search",
            json!({"query": "pool timeout", "limit": 3, "since": "2020-01-01"}),
        ),
        call(
            "memory_write",
            json!({"category": "base", "data": {"a": 1}, "merge": true}),
        ),
        call("memory_read", json!({"category": "base"})),
        call(
            "memory_append",
            json!({"category": "journal", "data": {"event": "x"}}),
        ),
        call(
            "memory_ingest",
            json!({"session_id": "s", "content": "hello"}),
        ),
        call("memory_list", json!({})),
        json!([{"jsonrpc": "2.0", "id": 8, "method": "ping"}]),
    ]
}

/// One line: random bytes, or a valid message with a few random edits; never a newline.
fn fuzz_line(rng: &mut Rng, valid: &[Value]) -> Vec<u8> {
    let mut line = if rng.below(4) == 0 {
        (0..rng.below(80)).map(|_| rng.below(256) as u8).collect()
    } else {
        let mut b = valid[rng.below(valid.len() as u64) as usize]
            .to_string()
            .into_bytes();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(b.len() as u64 + 1) as usize;
            match rng.below(6) {
                0 if at < b.len() => b[at] ^= 1 << rng.below(8),
                1 if at < b.len() => b[at] = rng.below(256) as u8,
                2 => {
                    const BYTES: &[u8] = b"{}[]\",:\\0-e9\xff";
                    b.insert(at, BYTES[rng.below(BYTES.len() as u64) as usize]);
                }
                3 => {
                    let end = (at + rng.below(8) as usize).min(b.len());
                    b.drain(at..end);
                }
                4 => b.truncate(at),
                _ => {
                    let end = (at + rng.below(16) as usize).min(b.len());
                    let dup = b[at..end].to_vec();
                    b.splice(at..at, dup);
                }
            }
        }
        b
    };
    for b in &mut line {
        if *b == b'\n' {
            *b = b' ';
        }
    }
    line
}

#[test]
fn stdio_server_survives_random_and_damaged_lines() {
    const LINES: u64 = 200;
    let seed = env_u64("MEMDIR_MODEL_SEED").unwrap_or(DEFAULT_SEED);
    let env = TestEnv::new();
    let mut child = env.spawn(&["serve"]);
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).split(b'\n') {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let mut send = |bytes: &[u8]| {
        stdin.write_all(bytes).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}).to_string().as_bytes());
    send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let mut rng = Rng(seed);
    let valid = valid_messages();
    let mut sent = Vec::new();
    for _ in 0..LINES {
        let line = fuzz_line(&mut rng, &valid);
        send(&line);
        sent.push(line);
    }
    let last_id = 987_654_321u64;
    send(
        json!({"jsonrpc": "2.0", "id": last_id, "method": "tools/list"})
            .to_string()
            .as_bytes(),
    );

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut answered = None;
    let mut lines = 0;
    while answered.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            break;
        };
        lines += 1;
        let v: Value = serde_json::from_slice(&line).unwrap_or_else(|e| {
            panic!(
                "seed {seed}: stdout line is not JSON ({e}): {}",
                String::from_utf8_lossy(&line)
            )
        });
        if v["id"] == json!(last_id) {
            answered = Some(v);
        }
    }
    // Closing stdin ends the session.
    drop(stdin);
    let status = {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                break Some(st);
            }
            if Instant::now() > end {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let stderr = err_reader.join().unwrap();
    let shown: Vec<String> = sent
        .iter()
        .rev()
        .take(5)
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    let ctx = format!(
        "seed {seed}; {lines} lines answered; last lines sent (newest first): {shown:#?}\nstderr:\n{stderr}"
    );
    let answered = answered.unwrap_or_else(|| panic!("no answer to the final tools/list; {ctx}"));
    assert!(
        answered["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "final tools/list: {answered}; {ctx}"
    );
    assert!(!stderr.contains("panicked"), "the server panicked; {ctx}");
    let status = status.unwrap_or_else(|| panic!("no exit after stdin closed; {ctx}"));
    assert_eq!(status.code(), Some(0), "exit status {status:?}; {ctx}");
}
