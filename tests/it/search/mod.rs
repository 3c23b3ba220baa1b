//! Search through the built binary: BM25 ranking, exact precision, auto routing, filters under
//! every engine, context windows, limits, read-your-writes across processes, hand-edit
//! freshness, rebuild determinism, and hostile queries.
//!
//! One module per area; the shared fixture and helpers live here.

mod determinism;
mod exact;
mod filters;
mod hand_edits;
mod hostile;
mod lazy_commits;
mod limits;
mod ranking;
mod visibility;
mod windows;

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::util::TestEnv;

// ---------------------------------------------------------------------------------------------
// Fixture: 40 chunks in 4 sessions (3 projects, 4 ingest times) and 2 categories.
// ---------------------------------------------------------------------------------------------

const ALPHA: &[&str] = &[
    "Kickoff: we plan the checkout page redesign for the web shop",
    "The connection pool timed out under load during the canary_token smoke test",
    "We raised the timeout to 30 seconds in the pool settings",
    "Postgres refused connections: ECONNREFUSED 127.0.0.1:5432 from the api container",
    "Another box listens on 127.0.0.1:54321 which is unrelated",
    "The nightly job runs at 02:00 and reports to the dashboard",
    "Kubernetes ingress certificate renewal failed because cert-manager lacked RBAC permissions",
    "Decided: keep max_size=10 for the upload queue",
    "Later someone proposed max_size=100 for the batch queue",
    "In prose only: the max size 10 limit stays for now",
    "The café on the corner has good espresso",
    "Wrap-up: the checkout redesign ships next sprint",
];

const BETA: &[&str] = &[
    "Rust compile error E0382: borrow of moved value `config`",
    "A vendor log shows code E03820 which is something else",
    "The fix lives in src/store/txn.rs where the staging rename happens",
    "A test file src/store/txn_test.rs covers the rename",
    "The words src store txn rs appear here only as prose",
    "class Foo extends Base in the legacy module",
    "the foo helper is lowercase everywhere",
    "Ship it 🚀 now that the canary_token build is green",
    "We went to the cafe after the release",
    "The migration script runs twice on every deploy",
];

const GAMMA: &[&str] = &[
    "TypeError: Cannot read properties of undefined",
    "    at Object.<anonymous> (/app/index.js:10:5)",
    "    at Object.<anonymous> (/app/index.js:10:55)",
    "    at Module._compile (node:internal/modules/cjs/loader:1105:14)",
    "The api gateway returns 502 when upstream is slow; canary_token seen in headers",
    "東京大学に行きました",
    "週末は大阪に行きました",
    "econnrefused in lowercase is not the error code",
    "Timeouts were logged by the gateway every hour",
    "The retry budget is three attempts",
];

const DELTA: &[&str] = &[
    "Terraform plan shows drift in the vpc module",
    "The load balancer health check path is /healthz",
    "Rotating the TLS certificate on the edge proxy",
    "canary_token rollout to 5 percent of traffic",
    "Grafana dashboard for latency percentiles",
    "Paging policy: the on-call engineer acknowledges within 5 minutes",
    "Backups run every night and are restored weekly to verify",
    "The incident review is scheduled for Friday",
];

/// (session, project, ingest time, contents)
const SESSIONS: &[(&str, &str, &str, &[&str])] = &[
    ("alpha", "web", "2026-01-01T10:00:00Z", ALPHA),
    ("beta", "web", "2026-01-10T10:00:00Z", BETA),
    ("gamma", "api", "2026-02-01T10:00:00Z", GAMMA),
    ("delta", "infra", "2026-03-01T10:00:00Z", DELTA),
];

const BASE_AT: &str = "2026-01-15T00:00:00Z";
const PROJECTS_AT: &str = "2026-02-15T00:00:00Z";

/// Runs with `MEMDIR_CLOCK` fixed for this run only; requires exit 0.
fn ok_at(env: &TestEnv, clock: &str, args: &[&str], input: &[u8]) -> Value {
    let r = env.run_env(args, &[("MEMDIR_CLOCK", clock)], input);
    if r.run.code != 0 {
        env.dump(&r.run);
        panic!("`{}` exited {}", r.run.cmd, r.run.code);
    }
    r.run.json()
}

/// Ingests `contents` into `session` as one `--jsonl` batch at time `clock`.
fn ingest_session(env: &TestEnv, session: &str, project: &str, clock: &str, contents: &[&str]) {
    let mut jsonl = String::new();
    for c in contents {
        jsonl.push_str(
            &json!({"session_id": session, "project": project, "content": c}).to_string(),
        );
        jsonl.push('\n');
    }
    let out = ok_at(env, clock, &["ingest", "--jsonl", "-"], jsonl.as_bytes());
    assert_eq!(out["count"], contents.len(), "{out}");
}

fn fixture() -> TestEnv {
    let env = TestEnv::new();
    for (session, project, at, contents) in SESSIONS {
        ingest_session(&env, session, project, at, contents);
    }
    ok_at(
        &env,
        BASE_AT,
        &[
            "write",
            "base",
            "--data",
            r#"{"editor": "helix", "shell": "fish", "canary": "canary_token in base notes",
                "db": {"error": "ECONNREFUSED 127.0.0.1:5432 seen once"}}"#,
        ],
        b"",
    );
    ok_at(
        &env,
        PROJECTS_AT,
        &[
            "write",
            "projects",
            "--data",
            r#"{"web": "checkout redesign with canary_token", "api": "gateway timeouts"}"#,
        ],
        b"",
    );
    env
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// `memdir search <args>`; requires exit 0 and checks the response's invariants.
fn search(env: &TestEnv, args: &[&str]) -> Value {
    let mut full = vec!["search"];
    full.extend_from_slice(args);
    let v = env.ok(&full);
    check_response(&v);
    v
}

/// Invariants every response keeps: a named engine, a count, scores positive and sorted.
fn check_response(v: &Value) {
    let engine = v["engine"]
        .as_str()
        .unwrap_or_else(|| panic!("no engine: {v}"));
    assert!(
        ["bm25", "exact", "empty"].contains(&engine),
        "unknown engine {engine}: {v}"
    );
    let rows = v["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results: {v}"));
    assert_eq!(v["count"].as_u64(), Some(rows.len() as u64), "{v}");
    if engine == "empty" {
        assert!(rows.is_empty(), "{v}");
    }
    let mut last = f64::INFINITY;
    for r in rows {
        let s = r["score"]
            .as_f64()
            .unwrap_or_else(|| panic!("score is not a number: {r}"));
        assert!(
            s.is_finite() && s > 0.0,
            "score {s} is not a positive float: {r}"
        );
        assert!(s <= last, "results not sorted by score descending: {v:#}");
        last = s;
        assert!(r["content"].is_string(), "{r}");
    }
}

fn rows(v: &Value) -> &Vec<Value> {
    v["results"].as_array().expect("results array")
}

fn contents(v: &Value) -> Vec<String> {
    rows(v)
        .iter()
        .map(|r| r["content"].as_str().unwrap().to_string())
        .collect()
}

/// A hit's identity: `session#position` for chunks, `category:key_path` for categories.
fn key(r: &Value) -> String {
    match r["kind"].as_str() {
        Some("chunk") => format!("{}#{}", r["session_id"].as_str().unwrap(), r["position"]),
        Some("category") => format!(
            "{}:{}",
            r["category"].as_str().unwrap(),
            r["key_path"].as_str().unwrap()
        ),
        other => panic!("unknown kind {other:?}: {r}"),
    }
}

fn keys(v: &Value) -> Vec<String> {
    rows(v).iter().map(key).collect()
}

fn key_set(v: &Value) -> BTreeSet<String> {
    keys(v).into_iter().collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The score of the hit `k`, if present.
fn score_of(v: &Value, k: &str) -> Option<f64> {
    rows(v)
        .iter()
        .find(|r| key(r) == k)
        .map(|r| r["score"].as_f64().unwrap())
}

/// The time a hit carries: `ts` for chunks, `updated_at` for categories.
fn time_of(r: &Value) -> &str {
    r.get("ts")
        .or_else(|| r.get("updated_at"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no time on {r}"))
}

/// Every exact hit contains the literal, byte for byte.
fn assert_exact_precision(v: &Value, literal: &str) {
    for r in rows(v) {
        let c = r["content"].as_str().unwrap();
        assert!(
            c.contains(literal),
            "exact false positive for {literal:?}: {c:?} in {v:#}"
        );
    }
}

fn is_chunk(r: &Value) -> bool {
    r["kind"] == "chunk"
}

fn is_category(r: &Value) -> bool {
    r["kind"] == "category"
}

/// The chunks of a session as `fetch` gives them: (position, chunk_id, content).
fn fetched(env: &TestEnv, session: &str) -> Vec<(u64, String, String)> {
    let v = env.ok(&["fetch", session, "--limit", "1000"]);
    v["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["position"].as_u64().unwrap(),
                c["chunk_id"].as_str().unwrap().to_string(),
                c["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Checks that `row`'s window is exactly positions `lo..=hi` of its own session but its own,
/// with each neighbour's text (or an excerpt of it) as fetch shows it.
fn assert_window(env: &TestEnv, row: &Value, lo: u64, hi: u64) {
    let session = row["session_id"].as_str().unwrap();
    let pos = row["position"].as_u64().unwrap();
    let chunks = fetched(env, session);
    let ctx = row["context"].as_array().expect("context array");
    let positions: Vec<u64> = ctx
        .iter()
        .map(|c| c["position"].as_u64().unwrap())
        .collect();
    assert_eq!(
        positions,
        (lo..=hi).filter(|p| *p != pos).collect::<Vec<_>>(),
        "window of {session}#{pos}: {row:#}"
    );
    for c in ctx {
        let p = c["position"].as_u64().unwrap();
        let (_, _, content) = &chunks[p as usize];
        let text = c["content"].as_str().expect("content");
        let core = text.trim_start_matches('…').trim_end_matches('…');
        assert!(
            text == content || (core.len() < content.len() && content.contains(core)),
            "{row:#}"
        );
        assert_eq!(
            c.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["content", "position"],
            "a context line carries only its position and content: {row:#}"
        );
    }
}

/// Rewrites one line of a session's segment, replacing its content.
fn hand_edit_line(env: &TestEnv, session: &str, seq: usize, content: &str) {
    let path = env.segment_of(session);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let mut v: Value = serde_json::from_str(&lines[seq]).unwrap();
    v["content"] = Value::from(content);
    lines[seq] = serde_json::to_string(&v).unwrap();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
}
