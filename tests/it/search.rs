//! Search through the built binary: BM25 ranking, exact precision, auto routing, filters under
//! every engine, context windows, limits, read-your-writes across processes, hand-edit
//! freshness, rebuild determinism, and hostile queries.

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

// ---------------------------------------------------------------------------------------------
// 1. Ranking
// ---------------------------------------------------------------------------------------------

#[test]
fn bm25_ranks_the_one_strongly_matching_chunk_first() {
    let env = fixture();
    let v = search(
        &env,
        &["kubernetes ingress certificate renewal", "--mode", "bm25"],
    );
    assert_eq!(v["engine"], "bm25");
    let r = rows(&v);
    assert!(r.len() >= 2, "{v:#}");
    assert_eq!(key(&r[0]), "alpha#6", "{v:#}");
    assert_eq!(r[0]["content"], ALPHA[6]);
    // Clearly ahead: it matches four rare words, the next one at most one.
    let (first, second) = (
        r[0]["score"].as_f64().unwrap(),
        r[1]["score"].as_f64().unwrap(),
    );
    assert!(first > 2.0 * second, "{first} vs {second}: {v:#}");
    // The same query in auto mode (not identifier-like) answers the same way.
    let auto = search(&env, &["kubernetes ingress certificate renewal"]);
    assert_eq!(auto["engine"], "bm25");
    assert_eq!(auto["mode"], "auto");
    assert_eq!(auto["results"], v["results"]);
}

#[test]
fn stemming_matches_other_forms_of_a_word() {
    let env = fixture();
    // "timeouts" and "timeout" share the stem: the chunk saying "timeout" is found.
    let v = search(&env, &["timeouts", "--mode", "bm25", "--limit", "20"]);
    let c = contents(&v);
    assert!(c.contains(&ALPHA[2].to_string()), "{v:#}");
    assert!(c.contains(&GAMMA[8].to_string()), "{v:#}");
    // "running" is nowhere in the corpus, yet "runs" and "run" are found.
    let v = search(&env, &["running", "--mode", "bm25", "--limit", "20"]);
    let c = contents(&v);
    assert!(c.iter().all(|s| !s.contains("running")));
    for want in [ALPHA[5], BETA[9], DELTA[6]] {
        assert!(c.contains(&want.to_string()), "{want:?} missing: {v:#}");
    }
    // Plural to singular.
    let v = search(&env, &["certificates", "--mode", "bm25"]);
    let c = contents(&v);
    assert!(c.contains(&ALPHA[6].to_string()), "{v:#}");
    assert!(c.contains(&DELTA[2].to_string()), "{v:#}");
}

#[test]
fn stop_words_are_ignored_in_queries() {
    let env = fixture();
    let plain = search(&env, &["pool", "--mode", "bm25"]);
    let padded = search(&env, &["the pool of it is", "--mode", "bm25"]);
    assert!(!rows(&plain).is_empty());
    // Same hits, same order, same scores: the stop words add nothing.
    assert_eq!(padded["results"], plain["results"]);
    // A query of stop words only matches nothing, though nearly every chunk has "the".
    let v = search(&env, &["the and of to", "--mode", "bm25"]);
    assert_eq!(v["engine"], "bm25");
    assert_eq!(v["count"], 0, "{v:#}");
}

#[test]
fn every_response_names_its_engine_and_sorts_positive_scores_descending() {
    let env = fixture();
    for (args, engine) in [
        (vec!["pool timeout gateway"], "bm25"),
        (vec!["pool timeout gateway", "--mode", "bm25"], "bm25"),
        (vec!["canary_token"], "exact"),
        (
            vec!["canary_token", "--mode", "bm25", "--limit", "50"],
            "bm25",
        ),
        (vec!["canary_token", "--mode", "exact"], "exact"),
        (vec!["the", "--mode", "exact"], "exact"),
        (vec![""], "empty"),
        (vec!["", "--mode", "exact"], "empty"),
        (vec!["", "--mode", "bm25"], "empty"),
    ] {
        let v = search(&env, &args);
        assert_eq!(v["engine"], engine, "{args:?}: {v:#}");
    }
    // Scores for a many-hit query are strictly informative: not all equal.
    let v = search(&env, &["canary_token", "--mode", "bm25", "--limit", "50"]);
    let scores: BTreeSet<u64> = rows(&v)
        .iter()
        .map(|r| r["score"].as_f64().unwrap().to_bits())
        .collect();
    assert!(scores.len() > 2, "{v:#}");
}

/// BM25 as tantivy computes it: k1 = 1.2, b = 0.75, idf = ln(1 + (N - n + 0.5) / (n + 0.5)).
fn bm25(n_docs: f64, docs_with_term: f64, tf: f64, doc_len: f64, avg_len: f64) -> f64 {
    let idf = (1.0 + (n_docs - docs_with_term + 0.5) / (docs_with_term + 0.5)).ln();
    idf * tf * 2.2 / (tf + 1.2 * (1.0 - 0.75 + 0.75 * doc_len / avg_len))
}

#[test]
fn bm25_scores_are_real_bm25_and_rarer_terms_score_higher() {
    let env = TestEnv::new();
    // One chunk per session: no neighbours, so no propagation; no stop words or stemming
    // changes in these words.
    for (s, text) in [
        ("a", "zebra giraffe lion"),
        ("b", "giraffe elephant"),
        ("c", "giraffe giraffe hippo rhino tiger"),
    ] {
        env.ok(&["ingest", "--session-id", s, "--text", text]);
    }
    let avg = (3.0 + 2.0 + 5.0) / 3.0;
    let zebra = search(&env, &["zebra", "--mode", "bm25"]);
    assert_eq!(keys(&zebra), vec!["a#0"]);
    let zebra_score = score_of(&zebra, "a#0").unwrap();
    let want = bm25(3.0, 1.0, 1.0, 3.0, avg);
    assert!(
        (zebra_score - want).abs() < 1e-5,
        "zebra: {zebra_score} vs BM25 {want}"
    );

    let giraffe = search(&env, &["giraffe", "--mode", "bm25"]);
    // Term frequency 2 in a long doc beats tf 1 in a short one, which beats tf 1 in a longer.
    assert_eq!(keys(&giraffe), vec!["c#0", "b#0", "a#0"], "{giraffe:#}");
    for (k, tf, len) in [("a#0", 1.0, 3.0), ("b#0", 1.0, 2.0), ("c#0", 2.0, 5.0)] {
        let got = score_of(&giraffe, k).unwrap();
        let want = bm25(3.0, 3.0, tf, len, avg);
        assert!(
            (got - want).abs() < 1e-5,
            "giraffe {k}: {got} vs BM25 {want}"
        );
    }
    // The rarer term gives the same document a higher score.
    assert!(zebra_score > score_of(&giraffe, "a#0").unwrap());
    // Two terms add up.
    let both = search(&env, &["zebra giraffe", "--mode", "bm25"]);
    let got = score_of(&both, "a#0").unwrap();
    let want = bm25(3.0, 1.0, 1.0, 3.0, avg) + bm25(3.0, 3.0, 1.0, 3.0, avg);
    assert!(
        (got - want).abs() < 1e-5,
        "zebra giraffe: {got} vs BM25 {want}"
    );
    assert_eq!(keys(&both)[0], "a#0");
}

// ---------------------------------------------------------------------------------------------
// 2. Exact precision and auto routing
// ---------------------------------------------------------------------------------------------

/// (literal, exactly the hits it must give)
fn canaries() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("ECONNREFUSED", vec!["alpha#3", "base:db.error"]),
        (
            "ECONNREFUSED 127.0.0.1:5432",
            vec!["alpha#3", "base:db.error"],
        ),
        ("127.0.0.1:5432", vec!["alpha#3", "base:db.error"]),
        ("127.0.0.1:54321", vec!["alpha#4"]),
        ("E0382", vec!["beta#0"]),
        ("E03820", vec!["beta#1"]),
        ("max_size=10", vec!["alpha#7"]),
        ("max_size=100", vec!["alpha#8"]),
        ("src/store/txn.rs", vec!["beta#2"]),
        ("src/store/txn_test.rs", vec!["beta#3"]),
        (
            "at Object.<anonymous> (/app/index.js:10:5)",
            vec!["gamma#1"],
        ),
        (
            "at Object.<anonymous> (/app/index.js:10:55)",
            vec!["gamma#2"],
        ),
        (
            "Module._compile (node:internal/modules/cjs/loader:1105:14)",
            vec!["gamma#3"],
        ),
        (
            "canary_token",
            vec![
                "alpha#1",
                "beta#7",
                "gamma#4",
                "delta#3",
                "base:canary",
                "projects:web",
            ],
        ),
        ("the pool", vec!["alpha#2"]),
        ("Foo", vec!["beta#5"]),
        ("foo", vec!["beta#6"]),
    ]
}

#[test]
fn exact_mode_finds_identifier_canaries_with_no_false_positives() {
    let env = fixture();
    for (literal, want) in canaries() {
        let v = search(&env, &[literal, "--mode", "exact", "--limit", "100"]);
        assert_eq!(v["engine"], "exact", "{literal}: {v:#}");
        assert_exact_precision(&v, literal);
        assert_eq!(key_set(&v), set(&want), "{literal}: {v:#}");
    }
}

#[test]
fn exact_mode_rejects_phrase_candidates_that_lack_the_literal() {
    let env = fixture();
    // Each of these chunks holds the query's words in order, but not its bytes.
    for (literal, decoy) in [
        ("src/store/txn.rs", "beta#4"), // "src store txn rs" in prose
        ("max_size=10", "alpha#9"),     // "max size 10" in prose
        ("ECONNREFUSED", "gamma#7"),    // lower case
    ] {
        let bm = search(&env, &[literal, "--mode", "bm25", "--limit", "100"]);
        assert!(
            key_set(&bm).contains(decoy),
            "{literal}: the decoy {decoy} should be a word match: {bm:#}"
        );
        let ex = search(&env, &[literal, "--mode", "exact", "--limit", "100"]);
        assert!(!key_set(&ex).contains(decoy), "{literal}: {ex:#}");
        assert_exact_precision(&ex, literal);
    }
}

#[test]
fn exact_mode_is_case_sensitive() {
    let env = fixture();
    let upper = search(&env, &["Foo", "--mode", "exact"]);
    assert_eq!(contents(&upper), vec![BETA[5]]);
    let lower = search(&env, &["foo", "--mode", "exact"]);
    assert_eq!(contents(&lower), vec![BETA[6]]);
    let shout = search(&env, &["FOO", "--mode", "exact"]);
    assert_eq!(shout["count"], 0, "{shout:#}");
    let lc = search(&env, &["econnrefused", "--mode", "exact"]);
    assert_eq!(contents(&lc), vec![GAMMA[7]]);
    // BM25 folds case: both are word matches.
    let bm = key_set(&search(&env, &["Foo", "--mode", "bm25", "--context", "0"]));
    assert!(bm.contains("beta#5") && bm.contains("beta#6"), "{bm:?}");
}

#[test]
fn auto_mode_routes_identifiers_to_exact() {
    let env = fixture();
    for (literal, want) in canaries() {
        // Plain lower-case words are not identifier-like; the rest are.
        if matches!(literal, "the pool" | "Foo" | "foo") {
            continue;
        }
        let v = search(&env, &[literal, "--limit", "100"]);
        assert_eq!(v["engine"], "exact", "{literal}: {v:#}");
        assert_eq!(v["mode"], "auto");
        assert_exact_precision(&v, literal);
        assert_eq!(key_set(&v), set(&want), "{literal}: {v:#}");
    }
}

#[test]
fn auto_mode_sends_quoted_phrases_to_exact() {
    let env = fixture();
    let v = search(&env, &["\"checkout redesign\"", "--limit", "100"]);
    assert_eq!(v["engine"], "exact", "{v:#}");
    assert_exact_precision(&v, "checkout redesign");
    // "checkout page redesign" (alpha#0) has both words but not the phrase.
    assert_eq!(key_set(&v), set(&["alpha#11", "projects:web"]), "{v:#}");
    // Unquoted, the same words are a BM25 query that also finds alpha#0.
    let v = search(&env, &["checkout redesign", "--limit", "100"]);
    assert_eq!(v["engine"], "bm25");
    assert!(key_set(&v).contains("alpha#0"), "{v:#}");
}

#[test]
fn auto_mode_falls_back_to_bm25_with_a_note_when_exact_finds_nothing() {
    let env = fixture();
    let v = search(&env, &["max_size=999", "--limit", "100"]);
    assert_eq!(v["engine"], "bm25", "{v:#}");
    let notes = v["notes"].to_string();
    assert!(notes.contains("no exact match"), "{v:#}");
    // BM25 answers with the word matches.
    let k = key_set(&v);
    assert!(k.contains("alpha#7") && k.contains("alpha#8"), "{v:#}");
    // Exact mode itself does not fall back.
    let v = search(&env, &["max_size=999", "--mode", "exact"]);
    assert_eq!(v["engine"], "exact");
    assert_eq!(v["count"], 0, "{v:#}");
    // An identifier found nowhere: BM25 answers with nothing, still naming itself.
    let v = search(&env, &["E9999"]);
    assert_eq!(v["engine"], "bm25", "{v:#}");
    assert_eq!(v["count"], 0);
}

#[test]
fn exact_mode_finds_identifiers_longer_than_the_token_length_limit() {
    let env = TestEnv::new();
    // A SHA-512 hex digest: 128 characters without a separator.
    let digest: String = (0..128)
        .map(|i| char::from_digit((i * 7 + 3) % 16, 16).unwrap())
        .collect();
    env.ok(&[
        "ingest",
        "--session-id",
        "builds",
        "--text",
        &format!("artifact digest {digest} uploaded"),
    ]);
    let v = search(&env, &[&digest, "--mode", "exact"]);
    assert_exact_precision(&v, &digest);
    assert_eq!(keys(&v), vec!["builds#0"], "{v:#}");
    let v = search(&env, &[&digest]);
    assert_eq!(keys(&v), vec!["builds#0"], "auto: {v:#}");
}

// ---------------------------------------------------------------------------------------------
// 3. Filters under every engine
// ---------------------------------------------------------------------------------------------

type Pred = Box<dyn Fn(&Value) -> bool>;

fn is_chunk(r: &Value) -> bool {
    r["kind"] == "chunk"
}

fn is_category(r: &Value) -> bool {
    r["kind"] == "category"
}

fn filter_cases() -> Vec<(Vec<&'static str>, Pred)> {
    vec![
        (
            vec!["--project", "web"],
            Box::new(|r| is_chunk(r) && r["project"] == "web"),
        ),
        (
            vec!["--project", "infra"],
            Box::new(|r| is_chunk(r) && r["project"] == "infra"),
        ),
        (
            vec!["--session", "gamma"],
            Box::new(|r| is_chunk(r) && r["session_id"] == "gamma"),
        ),
        (
            vec!["--category", "base"],
            Box::new(|r| is_category(r) && r["category"] == "base"),
        ),
        (vec!["--kind", "chunk"], Box::new(is_chunk)),
        (vec!["--kind", "category"], Box::new(is_category)),
        (
            vec!["--since", "2026-01-10T10:00:00Z"],
            Box::new(|r| time_of(r) >= "2026-01-10T10:00:00.000Z"),
        ),
        (
            vec!["--until", "2026-01-31T23:59:59Z"],
            Box::new(|r| time_of(r) <= "2026-01-31T23:59:59.000Z"),
        ),
        (
            vec![
                "--since",
                "2026-01-05T00:00:00Z",
                "--until",
                "2026-02-10T00:00:00Z",
            ],
            Box::new(|r| {
                time_of(r) >= "2026-01-05T00:00:00.000Z" && time_of(r) <= "2026-02-10T00:00:00.000Z"
            }),
        ),
        (
            vec!["--project", "web", "--since", "2026-01-05T00:00:00Z"],
            Box::new(|r| {
                is_chunk(r) && r["project"] == "web" && time_of(r) >= "2026-01-05T00:00:00.000Z"
            }),
        ),
        (
            vec!["--session", "alpha", "--kind", "chunk"],
            Box::new(|r| is_chunk(r) && r["session_id"] == "alpha"),
        ),
        (
            vec!["--category", "projects", "--since", "2026-02-01T00:00:00Z"],
            Box::new(|r| {
                is_category(r)
                    && r["category"] == "projects"
                    && time_of(r) >= "2026-02-01T00:00:00.000Z"
            }),
        ),
        (
            vec!["--kind", "category", "--until", "2026-01-31T00:00:00Z"],
            Box::new(|r| is_category(r) && time_of(r) <= "2026-01-31T00:00:00.000Z"),
        ),
        (
            vec![
                "--kind",
                "chunk",
                "--project",
                "api",
                "--until",
                "2026-02-28T00:00:00Z",
            ],
            Box::new(|r| {
                is_chunk(r) && r["project"] == "api" && time_of(r) <= "2026-02-28T00:00:00.000Z"
            }),
        ),
    ]
}

/// For each filter: the filtered response is exactly the unfiltered one restricted to the hits
/// the filter keeps (same hits, same order, same scores), non-empty, and strictly smaller.
fn check_filters(env: &TestEnv, query: &str, mode: &str, engine: &str) {
    let base_args = [query, "--mode", mode, "--limit", "100", "--context", "0"];
    let base = search(env, &base_args);
    assert_eq!(base["engine"], engine, "{base:#}");
    for (filter, pred) in filter_cases() {
        let mut args = base_args.to_vec();
        args.extend_from_slice(&filter);
        let got = search(env, &args);
        let label = format!("{query:?} --mode {mode} {}", filter.join(" "));
        assert_eq!(got["engine"], engine, "{label}: {got:#}");
        for r in rows(&got) {
            assert!(pred(r), "{label}: a hit that fails the filter: {r:#}");
        }
        let want: Vec<(String, Value)> = rows(&base)
            .iter()
            .filter(|r| pred(r))
            .map(|r| (key(r), r["score"].clone()))
            .collect();
        let have: Vec<(String, Value)> = rows(&got)
            .iter()
            .map(|r| (key(r), r["score"].clone()))
            .collect();
        assert!(!have.is_empty(), "{label}: no hits");
        assert!(
            want.len() < rows(&base).len(),
            "{label}: the filter should remove something"
        );
        assert_eq!(
            have, want,
            "{label}: hits or scores differ from the unfiltered run"
        );
    }
}

#[test]
fn filters_under_bm25_keep_exactly_the_matching_hits_with_unchanged_scores() {
    let env = fixture();
    check_filters(&env, "canary_token", "bm25", "bm25");
}

#[test]
fn filters_under_exact_keep_exactly_the_matching_hits_with_unchanged_scores() {
    let env = fixture();
    check_filters(&env, "canary_token", "exact", "exact");
}

#[test]
fn filters_under_auto_keep_exactly_the_matching_hits_with_unchanged_scores() {
    let env = fixture();
    // Routed to exact.
    check_filters(&env, "canary_token", "auto", "exact");
    // Routed to BM25.
    check_filters(&env, "canary token", "auto", "bm25");
}

#[test]
fn filters_apply_to_the_bm25_fallback_of_auto_mode() {
    let env = fixture();
    // No exact hit passes these filters, so auto falls back to BM25, which must apply them
    // too: the api session's only canary is from February.
    let v = search(
        &env,
        &[
            "canary_token",
            "--project",
            "api",
            "--until",
            "2026-01-31T00:00:00Z",
            "--limit",
            "100",
        ],
    );
    assert_eq!(v["engine"], "bm25", "{v:#}");
    assert_eq!(v["count"], 0, "{v:#}");
    // A fallback that does find something still honours the filter.
    let v = search(
        &env,
        &["max_size=999", "--session", "beta", "--limit", "100"],
    );
    assert_eq!(v["engine"], "bm25", "{v:#}");
    assert_eq!(v["count"], 0, "{v:#}");
    let v = search(
        &env,
        &["max_size=999", "--session", "alpha", "--limit", "100"],
    );
    assert_eq!(v["engine"], "bm25");
    assert!(v["count"].as_u64().unwrap() > 0);
    assert!(rows(&v).iter().all(|r| r["session_id"] == "alpha"), "{v:#}");
}

#[test]
fn time_bounds_are_inclusive_and_accept_dates_offsets_and_epoch_millis() {
    let env = fixture();
    let q = [
        "canary_token",
        "--mode",
        "exact",
        "--kind",
        "chunk",
        "--limit",
        "100",
    ];
    let run = |extra: &[&str]| {
        let mut a = q.to_vec();
        a.extend_from_slice(extra);
        key_set(&search(&env, &a))
    };
    // beta was ingested at 2026-01-10T10:00:00Z exactly.
    assert!(run(&["--since", "2026-01-10T10:00:00Z"]).contains("beta#7"));
    assert!(run(&["--until", "2026-01-10T10:00:00Z"]).contains("beta#7"));
    assert!(!run(&["--until", "2026-01-10T09:59:59.999Z"]).contains("beta#7"));
    assert!(!run(&["--since", "2026-01-10T10:00:00.001Z"]).contains("beta#7"));
    // An offset names the same instant.
    assert!(run(&["--since", "2026-01-10T12:00:00+02:00"]).contains("beta#7"));
    assert!(!run(&["--since", "2026-01-10T11:00:01+01:00"]).contains("beta#7"));
    // Epoch milliseconds: 2026-01-10T10:00:00Z.
    assert!(run(&["--since", "1768039200000", "--until", "1768039200000"]).contains("beta#7"));
    // A bare date as the upper bound covers that whole day; as the lower bound, its start.
    assert_eq!(
        run(&["--since", "2026-01-10", "--until", "2026-01-10"]),
        set(&["beta#7"])
    );
    assert_eq!(run(&["--until", "2026-01-01"]), set(&["alpha#1"]));
    // An empty window.
    let v = search(
        &env,
        &[
            "canary_token",
            "--mode",
            "exact",
            "--since",
            "2027-01-01",
            "--limit",
            "100",
        ],
    );
    assert_eq!(v["count"], 0);
    // since after until: nothing, not an error.
    let v = search(
        &env,
        &[
            "canary_token",
            "--mode",
            "exact",
            "--since",
            "2026-03-01",
            "--until",
            "2026-01-01",
        ],
    );
    assert_eq!(v["count"], 0);
}

#[test]
fn invalid_filter_values_are_rejected_with_exit_3() {
    let env = fixture();
    for (args, field) in [
        (vec!["search", "pool", "--kind", "note"], "kind"),
        (vec!["search", "pool", "--since", "yesterday"], "since"),
        (vec!["search", "pool", "--until", "2026-13-01"], "until"),
        (vec!["search", "pool", "--mode", "fuzzy"], "mode"),
    ] {
        let e = env.fail(&args, 3);
        assert_eq!(e["code"], "invalid", "{args:?}: {e}");
        assert_eq!(e["field"], field, "{args:?}: {e}");
    }
}

/// A session whose two chunks both match "gizmo" but differ in time and project.
fn mixed_session() -> TestEnv {
    let env = TestEnv::new();
    ok_at(
        &env,
        "2026-01-01T00:00:00Z",
        &[
            "ingest",
            "--session-id",
            "mixed",
            "--project",
            "web",
            "--text",
            "the gizmo broke",
        ],
        b"",
    );
    ok_at(
        &env,
        "2026-01-05T00:00:00Z",
        &[
            "ingest",
            "--session-id",
            "mixed",
            "--project",
            "api",
            "--text",
            "the gizmo works",
        ],
        b"",
    );
    env
}

#[test]
fn a_time_filter_never_changes_a_hits_score_even_when_it_drops_a_matching_neighbour() {
    let env = mixed_session();
    let all = search(&env, &["gizmo", "--mode", "bm25", "--context", "0"]);
    let filtered = search(
        &env,
        &[
            "gizmo",
            "--mode",
            "bm25",
            "--context",
            "0",
            "--since",
            "2026-01-03",
        ],
    );
    assert_eq!(keys(&filtered), vec!["mixed#1"], "{filtered:#}");
    assert_eq!(
        score_of(&filtered, "mixed#1"),
        score_of(&all, "mixed#1"),
        "the filter changed the score of the hit it keeps:\nunfiltered {all:#}\nfiltered {filtered:#}"
    );
}

#[test]
fn a_project_filter_never_changes_a_hits_score_even_when_it_drops_a_matching_neighbour() {
    let env = mixed_session();
    let all = search(&env, &["gizmo", "--mode", "bm25", "--context", "0"]);
    let filtered = search(
        &env,
        &[
            "gizmo",
            "--mode",
            "bm25",
            "--context",
            "0",
            "--project",
            "api",
        ],
    );
    assert_eq!(keys(&filtered), vec!["mixed#1"], "{filtered:#}");
    assert_eq!(
        score_of(&filtered, "mixed#1"),
        score_of(&all, "mixed#1"),
        "the filter changed the score of the hit it keeps:\nunfiltered {all:#}\nfiltered {filtered:#}"
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Context windows and truncation
// ---------------------------------------------------------------------------------------------

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

/// Checks that `row`'s window is exactly positions `lo..=hi` of its own session, as fetch
/// shows them, with only its own position marked as the hit.
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
        (lo..=hi).collect::<Vec<_>>(),
        "window of {session}#{pos}: {row:#}"
    );
    for c in ctx {
        let p = c["position"].as_u64().unwrap();
        let (_, id, content) = &chunks[p as usize];
        assert_eq!(c["chunk_id"], id.as_str(), "{row:#}");
        assert_eq!(c["content"], content.as_str(), "{row:#}");
        if p == pos {
            assert_eq!(c["hit"], true, "{row:#}");
            assert_eq!(c["chunk_id"], row["chunk_id"]);
        } else {
            assert!(c.get("hit").is_none(), "only the hit is marked: {row:#}");
        }
    }
}

#[test]
fn each_hit_carries_three_neighbours_per_side_by_default() {
    let env = fixture();
    let v = search(&env, &["max_size=10", "--mode", "exact"]);
    assert_eq!(keys(&v), vec!["alpha#7"]);
    assert_window(&env, &rows(&v)[0], 4, 10);
    // Also under BM25, and for every row.
    let v = search(&env, &["kubernetes ingress certificate", "--mode", "bm25"]);
    assert!(rows(&v).len() > 1);
    for r in rows(&v).iter().filter(|r| is_chunk(r)) {
        let p = r["position"].as_u64().unwrap();
        let last = fetched(&env, r["session_id"].as_str().unwrap()).len() as u64 - 1;
        assert_window(&env, r, p.saturating_sub(3), (p + 3).min(last));
    }
}

#[test]
fn filters_and_windows_work_on_ids_that_need_escaping() {
    let env = TestEnv::new();
    for (s, p, t) in [
        ("team/α β", "My Proj", "walrus one"),
        ("team/α β", "My Proj", "walrus two"),
        ("Team/α β", "", "walrus three"),
        ("../etc", "x:y", "walrus four"),
    ] {
        env.ok(&["ingest", "--session-id", s, "--project", p, "--text", t]);
    }
    for mode in ["auto", "bm25", "exact"] {
        let v = search(
            &env,
            &[
                "walrus",
                "--mode",
                mode,
                "--session",
                "team/α β",
                "--context",
                "1",
            ],
        );
        assert_eq!(
            key_set(&v),
            set(&["team/α β#0", "team/α β#1"]),
            "{mode}: {v:#}"
        );
        for r in rows(&v) {
            assert_window(&env, r, 0, 1);
        }
        let v = search(&env, &["walrus", "--mode", mode, "--project", "My Proj"]);
        assert_eq!(v["count"], 2, "{mode}: {v:#}");
        let v = search(&env, &["walrus", "--mode", mode, "--session", "../etc"]);
        assert_eq!(keys(&v), vec!["../etc#0"], "{mode}: {v:#}");
        assert_eq!(rows(&v)[0]["project"], "x:y");
        let v = search(&env, &["walrus", "--mode", mode, "--session", "team"]);
        assert_eq!(v["count"], 0, "{mode}: {v:#}");
    }
}

#[test]
fn windows_follow_positions_across_the_segments_of_two_replicas() {
    let env = TestEnv::new();
    for i in 0..3 {
        env.ok(&[
            "ingest",
            "--session-id",
            "s",
            "--text",
            &format!("from the first copy, number {i}"),
        ]);
    }
    search(&env, &["number"]);
    // The same store copied to another path mints a new replica and appends its own segment.
    let other = env.tmp.path().join("copy");
    for e in walkdir::WalkDir::new(&env.dir) {
        let e = e.unwrap();
        let to = other.join(e.path().strip_prefix(&env.dir).unwrap());
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&to).unwrap();
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
    let dir = other.display().to_string();
    for i in 3..6 {
        env.ok(&[
            "--dir",
            &dir,
            "ingest",
            "--session-id",
            "s",
            "--text",
            &format!("from the second copy, number {i}"),
        ]);
    }
    let segs = std::fs::read_dir(other.join("sessions/s")).unwrap().count();
    assert_eq!(segs, 2, "two replicas, two segments");
    let fetched = env.ok(&["--dir", &dir, "fetch", "s", "--limit", "100"]);
    let by_pos: Vec<&str> = fetched["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["content"].as_str().unwrap())
        .collect();
    let v = env.ok(&[
        "--dir",
        &dir,
        "search",
        "number",
        "--mode",
        "bm25",
        "--limit",
        "100",
        "--context",
        "1",
    ]);
    check_response(&v);
    assert_eq!(rows(&v).len(), 6);
    for r in rows(&v) {
        let p = r["position"].as_u64().unwrap() as usize;
        assert_eq!(r["content"], by_pos[p], "{r:#}");
        let ctx: Vec<(u64, &str)> = r["context"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["position"].as_u64().unwrap(),
                    c["content"].as_str().unwrap(),
                )
            })
            .collect();
        let want: Vec<(u64, &str)> = (p.saturating_sub(1)..=(p + 1).min(5))
            .map(|i| (i as u64, by_pos[i]))
            .collect();
        assert_eq!(ctx, want, "{r:#}");
    }
}

#[test]
fn context_zero_gives_no_window_and_twenty_is_the_most() {
    let env = fixture();
    let v = search(&env, &["max_size=10", "--mode", "exact", "--context", "0"]);
    assert_eq!(rows(&v)[0]["context"], json!([]));
    let v = search(&env, &["max_size=10", "--mode", "exact", "--context", "1"]);
    assert_window(&env, &rows(&v)[0], 6, 8);
    // alpha has 12 chunks: 20 per side covers all of it, and nothing of another session.
    let v = search(&env, &["max_size=10", "--mode", "exact", "--context", "20"]);
    assert_window(&env, &rows(&v)[0], 0, 11);
    let e = env.fail(&["search", "max_size=10", "--context", "21"], 3);
    assert_eq!(e["code"], "invalid");
    assert_eq!(e["field"], "context");
}

#[test]
fn two_hits_in_one_session_keep_their_own_windows() {
    let env = fixture();
    // "pool" is in alpha#1 and alpha#2 only: overlapping windows, never merged.
    let v = search(&env, &["pool", "--mode", "exact"]);
    assert_eq!(key_set(&v), set(&["alpha#1", "alpha#2"]), "{v:#}");
    for r in rows(&v) {
        match key(r).as_str() {
            "alpha#1" => assert_window(&env, r, 0, 4),
            "alpha#2" => assert_window(&env, r, 0, 5),
            k => panic!("{k}"),
        }
    }
    // Far apart in one session, and across sessions.
    let v = search(
        &env,
        &[
            "canary_token",
            "--mode",
            "exact",
            "--kind",
            "chunk",
            "--context",
            "2",
        ],
    );
    assert_eq!(rows(&v).len(), 4);
    for r in rows(&v) {
        let p = r["position"].as_u64().unwrap();
        let last = fetched(&env, r["session_id"].as_str().unwrap()).len() as u64 - 1;
        assert_window(&env, r, p.saturating_sub(2), (p + 2).min(last));
    }
    // Two hits in one session far apart: checkout at alpha#0 and alpha#11.
    let v = search(&env, &["checkout", "--mode", "exact", "--kind", "chunk"]);
    assert_eq!(key_set(&v), set(&["alpha#0", "alpha#11"]), "{v:#}");
    for r in rows(&v) {
        match key(r).as_str() {
            "alpha#0" => assert_window(&env, r, 0, 3),
            "alpha#11" => assert_window(&env, r, 8, 11),
            k => panic!("{k}"),
        }
    }
}

#[test]
fn windows_at_the_start_and_end_of_a_session_are_shorter() {
    let env = fixture();
    let first = search(&env, &["Kickoff", "--mode", "exact"]);
    assert_eq!(keys(&first), vec!["alpha#0"]);
    assert_window(&env, &rows(&first)[0], 0, 3);
    let last = search(&env, &["Wrap-up", "--mode", "exact"]);
    assert_eq!(keys(&last), vec!["alpha#11"]);
    assert_window(&env, &rows(&last)[0], 8, 11);
    let second = search(&env, &["E03820", "--mode", "exact"]);
    assert_window(&env, &rows(&second)[0], 0, 4);
    // A session of one chunk: the window is the hit alone.
    env.ok(&[
        "ingest",
        "--session-id",
        "solo",
        "--text",
        "a lonely quasar",
    ]);
    let v = search(&env, &["quasar", "--mode", "bm25"]);
    assert_eq!(keys(&v), vec!["solo#0"]);
    assert_window(&env, &rows(&v)[0], 0, 0);
}

#[test]
fn content_is_cut_to_500_characters_unless_full_is_asked_for() {
    let env = TestEnv::new();
    // 1,200 characters, most of them two bytes wide: the cut counts characters.
    let long: String = format!("longmarker {}", "é".repeat(1189));
    assert_eq!(long.chars().count(), 1200);
    let short = "short neighbour";
    for text in [short, long.as_str(), short] {
        env.ok(&["ingest", "--session-id", "s", "--text", text]);
    }
    let v = search(&env, &["longmarker", "--mode", "bm25"]);
    let r = rows(&v)
        .iter()
        .find(|r| key(r) == "s#1")
        .unwrap_or_else(|| panic!("{v:#}"))
        .clone();
    let c = r["content"].as_str().unwrap();
    assert_eq!(c.chars().count(), 500);
    assert!(long.starts_with(c));
    assert_eq!(r["truncated"], true);
    let ctx = r["context"].as_array().unwrap();
    assert_eq!(ctx.len(), 3);
    assert_eq!(ctx[1]["content"].as_str().unwrap().chars().count(), 500);
    assert_eq!(ctx[1]["truncated"], true);
    assert_eq!(ctx[0]["content"], short);
    assert!(ctx[0].get("truncated").is_none());

    let v = search(&env, &["longmarker", "--mode", "bm25", "--full"]);
    let r = rows(&v).iter().find(|r| key(r) == "s#1").unwrap().clone();
    assert_eq!(r["content"], long.as_str());
    assert!(r.get("truncated").is_none(), "{r:#}");
    let ctx = r["context"].as_array().unwrap();
    assert_eq!(ctx[1]["content"], long.as_str());
    assert!(ctx[1].get("truncated").is_none());
    // Exactly 500 characters are not cut.
    let exact500 = format!("edgemarker {}", "x".repeat(489));
    assert_eq!(exact500.chars().count(), 500);
    env.ok(&["ingest", "--session-id", "t", "--text", &exact500]);
    let v = search(&env, &["edgemarker", "--mode", "bm25"]);
    assert_eq!(rows(&v)[0]["content"], exact500.as_str());
    assert!(rows(&v)[0].get("truncated").is_none());
}

#[test]
fn result_rows_keep_the_public_contract() {
    let env = fixture();
    let v = search(&env, &["canary_token", "--mode", "exact", "--limit", "100"]);
    let base_hash = env.ok(&["read", "base"])["meta"]["hash"].clone();
    for r in rows(&v) {
        if is_chunk(r) {
            for f in [
                "session_id",
                "position",
                "content",
                "score",
                "context",
                "chunk_id",
                "project",
                "ts",
            ] {
                assert!(r.get(f).is_some(), "chunk row without {f}: {r:#}");
            }
            for c in r["context"].as_array().unwrap() {
                assert!(c["position"].is_u64() && c["content"].is_string(), "{c}");
            }
        } else {
            assert!(is_category(r), "{r}");
            for f in ["category", "key_path", "content", "score", "hash"] {
                assert!(r.get(f).is_some(), "category row without {f}: {r:#}");
            }
            if r["category"] == "base" {
                assert_eq!(r["hash"], base_hash);
                assert_eq!(r["key_path"], "canary");
                assert_eq!(r["content"], "canary_token in base notes");
                assert_eq!(r["updated_at"], "2026-01-15T00:00:00.000Z");
            }
        }
    }
    let beta = rows(&v).iter().find(|r| key(r) == "beta#7").unwrap();
    assert_eq!(beta["project"], "web");
    assert_eq!(beta["ts"], "2026-01-10T10:00:00.000Z");
    assert_eq!(beta["content"], BETA[7]);
    assert_eq!(v["query"], "canary_token");
}

// ---------------------------------------------------------------------------------------------
// 5. Limits
// ---------------------------------------------------------------------------------------------

#[test]
fn limit_must_be_between_1_and_1000() {
    let env = fixture();
    for bad in ["0", "1001"] {
        let e = env.fail(&["search", "pool", "--limit", bad], 3);
        assert_eq!(e["code"], "invalid");
        assert_eq!(e["field"], "limit");
    }
    let all = search(&env, &["canary_token", "--mode", "bm25", "--limit", "1000"]);
    assert!(rows(&all).len() > 6, "{all:#}");
    let one = search(&env, &["canary_token", "--mode", "bm25", "--limit", "1"]);
    assert_eq!(one["count"], 1);
    // The one hit is the best hit, with the same score.
    assert_eq!(rows(&one)[0], rows(&all)[0]);
    let three = search(&env, &["canary_token", "--mode", "exact", "--limit", "3"]);
    let ex_all = search(
        &env,
        &["canary_token", "--mode", "exact", "--limit", "1000"],
    );
    assert_eq!(three["count"], 3);
    assert_eq!(rows(&three)[..], rows(&ex_all)[..3]);
    // The default limit is 5 on every surface.
    let dflt = search(&env, &["canary_token", "--mode", "bm25"]);
    assert_eq!(dflt["count"], 5usize.min(rows(&all).len()));
}

#[test]
fn a_smaller_limit_returns_a_prefix_of_a_larger_one() {
    let env = TestEnv::new();
    // 60 short sessions that match well, and one session whose two chunks match less well
    // each but sit next to each other.
    let mut jsonl = String::new();
    for i in 0..60 {
        jsonl.push_str(
            &json!({"session_id": format!("s{i:02}"), "content": "gizmo gizmo"}).to_string(),
        );
        jsonl.push('\n');
    }
    jsonl.push_str(
        &json!({"session_id": "z", "content": "gizmo gizmo gizmo gizmo short"}).to_string(),
    );
    jsonl.push('\n');
    let long = "a very long chunk that mentions gizmo only once among many other words ".repeat(3);
    jsonl.push_str(&json!({"session_id": "z", "content": long}).to_string());
    jsonl.push('\n');
    env.ok_stdin(&["ingest", "--jsonl", "-"], jsonl.as_bytes());
    let all = search(
        &env,
        &[
            "gizmo",
            "--mode",
            "bm25",
            "--limit",
            "100",
            "--context",
            "0",
        ],
    );
    assert_eq!(rows(&all).len(), 62);
    for limit in ["1", "5", "10", "50"] {
        let v = search(
            &env,
            &[
                "gizmo",
                "--mode",
                "bm25",
                "--limit",
                limit,
                "--context",
                "0",
            ],
        );
        let n = rows(&v).len();
        assert_eq!(
            rows(&v)[..],
            rows(&all)[..n],
            "--limit {limit} is not the head of --limit 100:\n{:#}\nvs\n{:#}",
            json!(rows(&v)),
            json!(rows(&all)[..n])
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 6. Visibility across processes
// ---------------------------------------------------------------------------------------------

#[test]
fn every_write_is_seen_by_the_next_search_in_another_process() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "first words"]);
    assert_eq!(search(&env, &["zanzibar"])["count"], 0);
    // A chunk ingested by one process is found by the next.
    env.ok(&["ingest", "--session-id", "s", "--text", "the zanzibar plan"]);
    let v = search(&env, &["zanzibar"]);
    assert_eq!(contents(&v)[0], "the zanzibar plan");
    let v = search(&env, &["zanzibar", "--mode", "exact"]);
    assert_eq!(contents(&v), vec!["the zanzibar plan"]);
    // A batch into a new session.
    env.ok_stdin(
        &["ingest", "--jsonl", "-"],
        b"{\"session_id\": \"t\", \"content\": \"zanzibar again\"}\n{\"session_id\": \"t\", \"content\": \"and ECONNRESET\"}\n",
    );
    assert_eq!(search(&env, &["zanzibar", "--mode", "exact"])["count"], 2);
    assert_eq!(search(&env, &["ECONNRESET"])["engine"], "exact");
    // A category write.
    env.ok(&["write", "pets", "--data", r#"{"name": "quokka"}"#]);
    let v = search(&env, &["quokka"]);
    assert_eq!(keys(&v), vec!["pets:name"]);
    // A merge replaces the value: the new one is found, the old one is gone.
    env.ok(&[
        "write",
        "pets",
        "--merge",
        "--data",
        r#"{"name": "wombat"}"#,
    ]);
    assert_eq!(keys(&search(&env, &["wombat"])), vec!["pets:name"]);
    assert_eq!(search(&env, &["quokka"])["count"], 0);
    // A full replace drops a key.
    env.ok(&["write", "pets", "--data", r#"{"other": "capybara"}"#]);
    assert_eq!(search(&env, &["wombat"])["count"], 0);
    assert_eq!(keys(&search(&env, &["capybara"])), vec!["pets:other"]);
    // A log append.
    env.ok(&[
        "append",
        "journal",
        "--data",
        r#"{"event": "axolotl spotted"}"#,
    ]);
    let v = search(&env, &["axolotl"]);
    assert_eq!(rows(&v).len(), 1);
    assert_eq!(rows(&v)[0]["category"], "journal");
    // A delete.
    env.ok(&["delete", "pets"]);
    assert_eq!(search(&env, &["capybara"])["count"], 0);
    env.assert_clean();
}

// ---------------------------------------------------------------------------------------------
// 7. Hand edits
// ---------------------------------------------------------------------------------------------

#[test]
fn a_hand_edited_category_value_is_found_and_the_old_value_is_not() {
    let env = TestEnv::new();
    env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"color": "turquoise", "pet": "heron"}"#,
    ]);
    assert_eq!(keys(&search(&env, &["turquoise"])), vec!["base:color"]);
    env.write_file(
        "categories/base.json",
        "{\n  \"color\": \"magenta\",\n  \"pet\": \"heron\"\n}\n",
    );
    let v = search(&env, &["magenta"]);
    assert_eq!(keys(&v), vec!["base:color"], "{v:#}");
    assert_eq!(rows(&v)[0]["updated_by"], "external");
    for mode in ["auto", "bm25", "exact"] {
        let v = search(&env, &["turquoise", "--mode", mode]);
        assert_eq!(v["count"], 0, "{mode}: {v:#}");
    }
    // The hash a hit reports is the edited file's.
    let hash = env.ok(&["read", "base"])["meta"]["hash"].clone();
    assert_eq!(rows(&search(&env, &["heron"]))[0]["hash"], hash);
    env.assert_clean();
}

#[test]
fn a_hand_deleted_category_file_is_no_longer_found() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"color": "turquoise"}"#]);
    env.ok(&["write", "other", "--data", r#"{"color": "turquoise too"}"#]);
    assert_eq!(search(&env, &["turquoise"])["count"], 2);
    std::fs::remove_file(env.path("categories/base.json")).unwrap();
    for mode in ["auto", "bm25", "exact"] {
        let v = search(&env, &["turquoise", "--mode", mode]);
        assert_eq!(keys(&v), vec!["other:color"], "{mode}: {v:#}");
    }
    env.assert_clean();
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

#[test]
fn a_hand_edited_session_line_is_found_by_its_new_words_only() {
    let env = TestEnv::new();
    for t in ["we flew to zanzibar", "then took a ferry", "and a long nap"] {
        env.ok(&["ingest", "--session-id", "trip", "--text", t]);
    }
    env.ok(&[
        "ingest",
        "--session-id",
        "other",
        "--text",
        "unrelated words",
    ]);
    assert_eq!(search(&env, &["zanzibar", "--mode", "exact"])["count"], 1);
    hand_edit_line(&env, "trip", 0, "we flew to kilimanjaro instead");
    let v = search(&env, &["kilimanjaro"]);
    assert_eq!(rows(&v)[0]["content"], "we flew to kilimanjaro instead");
    assert_eq!(key(&rows(&v)[0]), "trip#0");
    for mode in ["auto", "bm25", "exact"] {
        let v = search(&env, &["zanzibar", "--mode", mode]);
        assert!(
            contents(&v).iter().all(|c| !c.contains("zanzibar")),
            "{mode}: the old words are still served: {v:#}"
        );
        assert_eq!(v["count"], 0, "{mode}: {v:#}");
    }
    // The window shows the edited text too.
    let v = search(&env, &["ferry", "--mode", "exact"]);
    assert_eq!(
        rows(&v)[0]["context"][0]["content"],
        "we flew to kilimanjaro instead"
    );
    env.assert_clean();
}

#[test]
fn a_hand_appended_session_line_is_found() {
    let env = TestEnv::new();
    for t in ["first line", "second line"] {
        env.ok(&["ingest", "--session-id", "log", "--text", t]);
    }
    search(&env, &["line"]);
    let path = env.segment_of("log");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    last["seq"] = Value::from(last["seq"].as_u64().unwrap() + 1);
    let hlc = last["hlc"].as_str().unwrap().to_string();
    let (time, counter) = hlc.split_at(20);
    last["hlc"] = Value::from(format!("{time}{:04}", counter.parse::<u32>().unwrap() + 1));
    last["content"] = Value::from("a narwhal typed by hand");
    std::fs::write(&path, format!("{text}{last}\n")).unwrap();
    let v = search(&env, &["narwhal", "--mode", "exact"]);
    assert_eq!(keys(&v), vec!["log#2"], "{v:#}");
    assert_window(&env, &rows(&v)[0], 0, 2);
    env.assert_clean();
}

#[test]
fn a_malformed_category_file_breaks_no_other_search() {
    let env = TestEnv::new();
    env.ok(&[
        "write",
        "good",
        "--data",
        r#"{"x": "walrus in a good file"}"#,
    ]);
    env.ok(&["write", "bad", "--data", r#"{"x": "walrus in a bad file"}"#]);
    env.ok(&["ingest", "--session-id", "s", "--text", "walrus in a chunk"]);
    env.write_file("categories/bad.json", "{\"x\": \"walrus broken");
    for mode in ["auto", "bm25", "exact"] {
        let v = search(&env, &["walrus", "--mode", mode, "--limit", "100"]);
        let k = key_set(&v);
        assert!(k.contains("good:x") && k.contains("s#0"), "{mode}: {v:#}");
    }
    env.ok(&["reindex"]);
    let v = search(&env, &["walrus", "--limit", "100"]);
    assert!(key_set(&v).contains("good:x"), "{v:#}");
}

#[test]
fn a_hand_deleted_session_directory_is_gone_from_results() {
    let env = TestEnv::new();
    for (s, t) in [
        ("doomed", "ECONNREFUSED in the doomed session"),
        ("doomed", "the doomed pelican"),
        ("kept", "ECONNREFUSED in the kept session"),
    ] {
        env.ok(&["ingest", "--session-id", s, "--text", t]);
    }
    assert_eq!(search(&env, &["ECONNREFUSED"])["count"], 2);
    std::fs::remove_dir_all(env.path("sessions/doomed")).unwrap();
    let v = search(&env, &["ECONNREFUSED"]);
    assert_eq!(keys(&v), vec!["kept#0"], "{v:#}");
    for mode in ["auto", "bm25", "exact"] {
        let v = search(&env, &["pelican", "--mode", mode]);
        assert_eq!(v["count"], 0, "{mode}: {v:#}");
        let v = search(&env, &["session", "--mode", mode, "--session", "doomed"]);
        assert_eq!(v["count"], 0, "{mode}: {v:#}");
    }
    env.assert_clean();
}

// ---------------------------------------------------------------------------------------------
// 8. Rebuild determinism
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// 9. Hostile queries, lengths, scripts
// ---------------------------------------------------------------------------------------------

const HOSTILE: &[&str] = &[
    "\"foo",
    "foo\"",
    "\"",
    "\"\"",
    "\" \"",
    "\"unbalanced quote and pool",
    "a:b",
    "title:pool",
    "field:value",
    "content:canary",
    ":",
    "::",
    "(",
    ")",
    "(pool",
    "pool)",
    "((()))",
    "pool OR timeout",
    "NOT pool",
    "pool AND NOT timeout",
    "AND",
    "OR",
    "NOT",
    "*",
    "pool*",
    "*pool",
    "?",
    "\\",
    "\\\\",
    "C:\\Users\\x\\pool",
    "+pool -timeout",
    "-pool",
    "--",
    "pool~2",
    "pool^3",
    "[1 TO 5]",
    "{a}",
    "/regex.*/",
    "'",
    "`rm -rf /`",
    "$(whoami)",
    "%s%n%x",
    "<script>alert(1)</script>",
    "SELECT * FROM chunks; --",
    "\u{200b}",
    "\u{feff}pool",
    "a\tb",
    "pool\ntimeout",
    "null",
    "{}",
    "[]",
    "🚀🔥💥",
    "👨‍👩‍👧",
    "❤️",
    "مرحبا بالعالم",
    "ÅÄÖ",
    "ẓ̵̛̛̇a̶l̷g̸o̴",
    "\u{1}\u{7f}",
    "\u{10ffff}",
];

fn hostile_in_mode(mode: &str) {
    let env = fixture();
    for q in HOSTILE {
        let r = env.run(&["search", "--mode", mode, "--limit", "50", "--", q]);
        if r.code != 0 {
            env.dump(&r);
            panic!("{q:?} in mode {mode} exited {}", r.code);
        }
        let v = r.json();
        check_response(&v);
        assert_eq!(v["query"], *q, "the query is echoed as given");
        let t = q.trim();
        let quoted = t.len() >= 2 && t.starts_with('"') && t.ends_with('"');
        let literal = if quoted { &t[1..t.len() - 1] } else { t };
        if v["engine"] == "exact" {
            assert_exact_precision(&v, literal);
        }
        if t.is_empty() {
            assert_eq!(v["engine"], "empty", "{q:?}: {v:#}");
        }
    }
    // The store is unharmed.
    env.assert_clean();
    assert_eq!(
        search(&env, &["canary_token", "--mode", "exact", "--limit", "100"])["count"],
        6
    );
}

#[test]
fn hostile_queries_never_break_auto_mode() {
    hostile_in_mode("auto");
}

#[test]
fn hostile_queries_never_break_bm25_mode() {
    hostile_in_mode("bm25");
}

#[test]
fn hostile_queries_never_break_exact_mode() {
    hostile_in_mode("exact");
}

#[test]
fn query_operators_are_plain_words_not_syntax() {
    let env = fixture();
    // "NOT pool" must not mean "everything without pool": pool is just a word here.
    let v = search(&env, &["NOT pool", "--mode", "bm25", "--context", "0"]);
    let k = key_set(&v);
    assert!(k.contains("alpha#1") && k.contains("alpha#2"), "{v:#}");
    // "title:pool" is not a field query: it finds no title field and does not fail.
    let v = search(&env, &["title:pool", "--limit", "100"]);
    assert_eq!(
        v["engine"], "bm25",
        "no exact match, so BM25 answers: {v:#}"
    );
    assert!(key_set(&v).contains("alpha#1"));
}

#[test]
fn empty_and_whitespace_queries_answer_with_engine_empty() {
    let env = fixture();
    for q in ["", " ", "   ", "\t", "\n", " \t\n "] {
        for mode in ["auto", "bm25", "exact"] {
            let v = search(&env, &[q, "--mode", mode]);
            assert_eq!(v["engine"], "empty", "{q:?} {mode}: {v:#}");
            assert_eq!(v["count"], 0);
        }
    }
    // Also on a store that does not exist yet.
    let fresh = TestEnv::new();
    let v = search(&fresh, &[""]);
    assert_eq!(v["engine"], "empty");
}

#[test]
fn queries_up_to_10000_characters_work_and_longer_ones_are_too_large() {
    let env = fixture();
    let words = "pool timeout canary_token ECONNREFUSED 127.0.0.1:5432 café 東京 🚀 ";
    let make = |n: usize| -> String { words.chars().cycle().take(n).collect() };
    for n in [5_000, 10_000] {
        let q = make(n);
        assert_eq!(q.chars().count(), n);
        for mode in ["auto", "bm25", "exact"] {
            let v = search(&env, &[&q, "--mode", mode]);
            assert_eq!(v["query"].as_str().map(|s| s.chars().count()), Some(n));
            if mode != "exact" {
                assert!(v["count"].as_u64().unwrap() > 0, "{n} {mode}: {v:#}");
            }
        }
    }
    // 10,000 multi-byte characters are still within the limit: it counts characters.
    let wide = "東".repeat(10_000);
    search(&env, &[&wide, "--mode", "bm25"]);
    for q in [make(10_001), "東".repeat(10_001)] {
        for mode in ["auto", "bm25", "exact"] {
            let e = env.fail(&["search", &q, "--mode", mode], 9);
            assert_eq!(e["code"], "too_large", "{e}");
            assert_eq!(e["field"], "query");
            assert_eq!(e["limit"], 10_000);
        }
    }
}

#[test]
fn cjk_text_is_found_by_words_and_by_substrings() {
    let env = fixture();
    for mode in ["auto", "bm25", "exact"] {
        let v = search(&env, &["東京大学", "--mode", mode]);
        assert_eq!(rows(&v)[0]["content"], GAMMA[5], "{mode}: {v:#}");
        let v = search(&env, &["京大", "--mode", mode]);
        assert_eq!(rows(&v)[0]["content"], GAMMA[5], "{mode}: {v:#}");
    }
    // Exact is a phrase of characters: "京大" is not in "週末は大阪に行きました".
    let v = search(&env, &["京大", "--mode", "exact"]);
    assert_eq!(keys(&v), vec!["gamma#5"], "{v:#}");
    let v = search(&env, &["行きました", "--mode", "exact"]);
    assert_eq!(key_set(&v), set(&["gamma#5", "gamma#6"]), "{v:#}");
    assert_exact_precision(&v, "行きました");
    // A character that appears nowhere finds nothing in exact mode.
    let v = search(&env, &["京都", "--mode", "exact"]);
    assert_eq!(v["count"], 0, "{v:#}");
}

#[test]
fn accented_and_unaccented_words_find_each_other_in_bm25() {
    let env = fixture();
    for q in ["café", "cafe", "CAFÉ", "Cafe"] {
        let v = search(&env, &[q, "--mode", "bm25", "--context", "0"]);
        let k = key_set(&v);
        assert!(k.contains("alpha#10") && k.contains("beta#8"), "{q}: {v:#}");
    }
    // Exact keeps the bytes.
    let v = search(&env, &["café", "--mode", "exact"]);
    assert_eq!(keys(&v), vec!["alpha#10"]);
    let v = search(&env, &["cafe", "--mode", "exact"]);
    assert_eq!(keys(&v), vec!["beta#8"]);
}

#[test]
fn decomposed_accents_find_precomposed_text() {
    let env = fixture();
    // "café" typed as e + U+0301 COMBINING ACUTE ACCENT (NFD, as macOS often produces) looks
    // the same as the precomposed "café" in the corpus.
    let nfd = "cafe\u{301}";
    let v = search(&env, &[nfd, "--mode", "bm25", "--context", "0"]);
    let k = key_set(&v);
    assert!(k.contains("alpha#10"), "{v:#}");
}

#[test]
fn emoji_are_searchable() {
    let env = fixture();
    for mode in ["auto", "bm25", "exact"] {
        let v = search(&env, &["🚀", "--mode", mode]);
        assert_eq!(rows(&v)[0]["content"], BETA[7], "{mode}: {v:#}");
    }
    let v = search(&env, &["🚀", "--mode", "exact"]);
    assert_eq!(keys(&v), vec!["beta#7"]);
    let v = search(&env, &["Ship it 🚀", "--mode", "exact"]);
    assert_eq!(keys(&v), vec!["beta#7"]);
    // An emoji that appears nowhere.
    let v = search(&env, &["🦀", "--mode", "exact"]);
    assert_eq!(v["count"], 0);
}
