//! The `--limit` range, and smaller limits giving a prefix of larger ones.

use serde_json::json;

use super::{fixture, rows, search};
use crate::util::TestEnv;

/// Ingests `(session, content)` pairs as one `--jsonl` batch.
fn ingest_lines(env: &TestEnv, chunks: impl IntoIterator<Item = (String, String)>) {
    let jsonl: String = chunks
        .into_iter()
        .map(|(session, content)| {
            format!("{}\n", json!({"session_id": session, "content": content}))
        })
        .collect();
    env.ok_stdin(&["ingest", "--jsonl", "-"], jsonl.as_bytes());
}

#[test]
fn limit_must_be_between_1_and_1000() {
    let env = fixture();
    for bad in ["0", "1001"] {
        let e = env.fail(&["search", "pool", "--limit", bad], 3);
        assert_eq!(e["code"], "invalid");
        assert_eq!(e["field"], "limit");
    }
    let all = search(
        &env,
        &[
            "canary_token",
            "--mode",
            "bm25",
            "--limit",
            "1000",
            "--context",
            "0",
        ],
    );
    assert!(rows(&all).len() > 6, "{all:#}");
    let one = search(
        &env,
        &[
            "canary_token",
            "--mode",
            "bm25",
            "--limit",
            "1",
            "--context",
            "0",
        ],
    );
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
    let long = "a very long chunk that mentions gizmo only once among many other words ".repeat(3);
    let chunks = (0..60)
        .map(|i| (format!("s{i:02}"), "gizmo gizmo".to_string()))
        .chain([
            ("z".to_string(), "gizmo gizmo gizmo gizmo short".to_string()),
            ("z".to_string(), long),
        ]);
    ingest_lines(&env, chunks);
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

/// A limit deeper than the ranked pool still gets that many hits when that many match (the
/// pool grows to the limit), and the head of the pool is what a default search returns.
#[test]
fn a_limit_beyond_the_pool_gets_every_match_it_asks_for() {
    let env = TestEnv::new();
    ingest_lines(
        &env,
        (0..150).map(|i| (format!("s{i:03}"), format!("widget number {i}"))),
    );
    let args = |limit: &'static str| {
        vec![
            "widget",
            "--mode",
            "bm25",
            "--limit",
            limit,
            "--context",
            "0",
        ]
    };
    let deep = search(&env, &args("120"));
    assert_eq!(rows(&deep).len(), 120, "{deep:#}");
    let five = search(&env, &args("5"));
    assert_eq!(rows(&five)[..], rows(&deep)[..5]);
}

/// Far more documents than the pool tie with the cut: the tie-break key (a hash of session and
/// chunk id) decides among all of them, whichever segment holds each, and a rebuilt index
/// agrees.
#[test]
fn ties_beyond_the_pool_are_broken_by_their_key_across_segments() {
    let env = TestEnv::new();
    // Three ingests with a search between each: the index holds three segments, and the
    // earliest ties are not all in the first one the collector visits.
    for part in 0..3 {
        ingest_lines(
            &env,
            (part * 60..part * 60 + 60).map(|n| (format!("s{n:03}"), "sprocket wheel".into())),
        );
        search(&env, &["sprocket"]);
    }
    let args = [
        "sprocket",
        "--mode",
        "bm25",
        "--limit",
        "5",
        "--context",
        "0",
    ];
    let five = search(&env, &args);
    let sessions: Vec<String> = rows(&five)
        .iter()
        .map(|r| r["session_id"].as_str().unwrap().to_string())
        .collect();
    let chunk_id = rows(&five)[0]["chunk_id"].as_str().unwrap().to_string();
    let mut expected: Vec<(u64, String)> = (0..180)
        .map(|n| {
            let s = format!("s{n:03}");
            (memdir_index::index::order_key(&[&s, &chunk_id]), s)
        })
        .collect();
    expected.sort();
    let expected: Vec<String> = expected.into_iter().take(5).map(|(_, s)| s).collect();
    assert_eq!(sessions, expected, "{five:#}");
    std::fs::remove_dir_all(env.path(".memdir/index")).unwrap();
    env.ok(&["reindex"]);
    assert_eq!(
        search(&env, &args),
        five,
        "after rm -rf .memdir/index && reindex"
    );
}

#[test]
fn max_tokens_cuts_the_answer_and_says_what_it_left_out() {
    let env = fixture();
    let est = |v: &serde_json::Value| {
        serde_json::to_string(v)
            .unwrap()
            .chars()
            .count()
            .div_ceil(4)
    };
    let full = search(&env, &["canary_token", "--mode", "bm25", "--limit", "20"]);
    assert!(
        est(&full) > 400,
        "the fixture answer is large enough: {}",
        est(&full)
    );
    let cut = search(
        &env,
        &[
            "canary_token",
            "--mode",
            "bm25",
            "--limit",
            "20",
            "--max-tokens",
            "400",
        ],
    );
    assert!(est(&cut) <= 400, "{} tokens: {cut:#}", est(&cut));
    let o = &cut["omitted"];
    assert_eq!(o["max_tokens"], 400);
    assert!(
        o["context_lines"].as_u64().unwrap_or(0) + o["hits"].as_u64().unwrap_or(0) > 0,
        "{o}"
    );
    // The best hit stays, first.
    assert_eq!(rows(&cut)[0]["chunk_id"], rows(&full)[0]["chunk_id"]);
    assert_eq!(cut["count"].as_u64().unwrap() as usize, rows(&cut).len());
    // A budget the answer fits in changes nothing.
    let roomy = search(
        &env,
        &[
            "canary_token",
            "--mode",
            "bm25",
            "--limit",
            "20",
            "--max-tokens",
            "100000",
        ],
    );
    assert_eq!(roomy, full);
    let e = env.fail(&["search", "x", "--max-tokens", "10"], 3);
    assert_eq!(e["field"], "max_tokens");
}

#[test]
fn a_fetch_within_max_tokens_ends_early_and_says_where_to_go_on() {
    let env = TestEnv::new();
    for i in 0..40 {
        env.ok(&[
            "ingest",
            "--session-id",
            "long",
            "--text",
            &format!("turn {i}: {}", "words ".repeat(40)),
        ]);
    }
    let page = env.ok(&["fetch", "long", "--limit", "40", "--max-tokens", "500"]);
    let n = page["chunks"].as_array().unwrap().len();
    assert!((1..40).contains(&n), "{n}");
    assert_eq!(page["next_position"], n as u64);
    assert_eq!(page["omitted"]["chunks"], 40 - n as u64);
    let est = serde_json::to_string(&page)
        .unwrap()
        .chars()
        .count()
        .div_ceil(4);
    assert!(est <= 500, "{est}");
    // Going on from next_position reads the rest, nothing skipped.
    let next = env.ok(&[
        "fetch",
        "long",
        "--position",
        &n.to_string(),
        "--limit",
        "1",
    ]);
    assert_eq!(next["chunks"][0]["position"], n as u64);
}

#[test]
fn a_context_read_within_max_tokens_leaves_out_the_last_categories_and_names_them() {
    let env = TestEnv::new();
    for (name, n) in [("gamma", 6), ("alpha", 6), ("beta", 6)] {
        let data: serde_json::Map<String, serde_json::Value> = (0..n)
            .map(|k| (format!("key{k}"), "fact ".repeat(20 * (k + 1)).into()))
            .collect();
        env.ok(&[
            "write",
            name,
            "--data",
            &serde_json::Value::Object(data).to_string(),
        ]);
    }
    let est = |v: &serde_json::Value| {
        serde_json::to_string(v)
            .unwrap()
            .chars()
            .count()
            .div_ceil(4)
    };
    let full = env.ok(&["context", "gamma", "alpha", "beta"]);
    let one = env.ok(&["context", "gamma"]);
    let budget = est(&one) + 60;
    let cut = env.ok(&[
        "context",
        "gamma",
        "alpha",
        "beta",
        "--max-tokens",
        &budget.to_string(),
    ]);
    assert!(est(&cut) <= budget, "{} > {budget}", est(&cut));
    assert_eq!(cut["categories"]["gamma"], full["categories"]["gamma"]);
    assert_eq!(
        cut["omitted"]["categories"],
        serde_json::json!(["alpha", "beta"])
    );
    // Below the first category's size its largest keys go, and are named.
    let small = env.ok(&["context", "gamma", "alpha", "--max-tokens", "200"]);
    assert!(est(&small) <= 200, "{small}");
    assert_eq!(small["omitted"]["keys"][0], "key5", "{small}");
    assert!(small["categories"]["gamma"]["data"].get("key0").is_some());
    // Reading a left-out key with `fields` gets it whole.
    let key = env.ok(&["context", "gamma", "--fields", "key5"]);
    assert_eq!(
        key["categories"]["gamma"]["data"]["key5"],
        full["categories"]["gamma"]["data"]["key5"]
    );
    // A budget it fits changes nothing; a budget below the minimum is refused.
    assert_eq!(
        env.ok(&[
            "context",
            "gamma",
            "alpha",
            "beta",
            "--max-tokens",
            "100000"
        ]),
        full
    );
    let e = env.fail(&["context", "gamma", "--max-tokens", "10"], 3);
    assert_eq!(e["field"], "max_tokens");
}
