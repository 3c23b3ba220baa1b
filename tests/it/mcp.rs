//! MCP edge cases, speaking raw JSON-RPC to `memdir serve` (the Python suite covers the
//! happy paths with the official SDK).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{TestEnv, tool_json};

pub(crate) struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Session {
    pub(crate) fn start(env: &TestEnv, args: &[&str]) -> Session {
        let mut child = env.spawn(args);
        let stdin = child.stdin.take();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        Session {
            child,
            stdin,
            lines: rx,
        }
    }

    fn send_raw(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, v: Value) {
        self.send_raw(&v.to_string());
    }

    /// The next message whose id is `id`, within a deadline.
    fn response(&mut self, id: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no response to request {id}"));
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    pub(crate) fn initialize(&mut self) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}}));
        let r = self.response(1);
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r
    }

    pub(crate) fn call(&mut self, id: u64, tool: &str, args: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}}));
        self.response(id)
    }

    /// Closes stdin and waits (bounded) for a clean exit.
    pub(crate) fn close(mut self) -> i32 {
        let stdin = self.stdin.take();
        crate::util::close_and_wait(&mut self.child, stdin)
    }
}

#[test]
fn initialize_names_memdir_and_gives_instructions() {
    let env = TestEnv::new();
    let mut s = Session::start(&env, &["serve"]);
    let r = s.initialize();
    assert_eq!(r["result"]["serverInfo"]["name"], "memdir");
    assert_eq!(
        r["result"]["serverInfo"]["version"],
        env!("CARGO_PKG_VERSION")
    );
    let instr = r["result"]["instructions"].as_str().unwrap();
    assert!(instr.contains("memory_search") && instr.contains("memory_write"));
    assert_eq!(s.close(), 0);
    assert!(
        !env.dir.exists(),
        "initialize and exit must not create the store"
    );
}

#[test]
fn unknown_tool_is_a_json_rpc_error() {
    let env = TestEnv::new();
    let mut s = Session::start(&env, &["serve"]);
    s.initialize();
    let r = s.call(2, "memory_teleport", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("memory_teleport")
    );
    // A compatibility tool is unknown in the default profile.
    let r = s.call(3, "memory_doctor", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(s.close(), 0);
}

#[test]
fn full_profile_answers_compatibility_tools() {
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_TOOLS", "full");
    let mut s = Session::start(&env, &["serve"]);
    s.initialize();
    let r = s.call(2, "memory_search_semantic", json!({"query": "anything"}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    let r = s.call(3, "memory_doctor", json!({}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(s.close(), 0);
}

#[test]
fn malformed_json_rpc_does_not_kill_the_server() {
    let env = TestEnv::new();
    let mut s = Session::start(&env, &["serve"]);
    s.initialize();
    s.send_raw("{this is not json");
    s.send_raw(r#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": "not an object"}"#);
    // The server keeps answering well-formed requests afterwards.
    let r = s.call(8, "memory_status", json!({}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(s.close(), 0);
}

#[test]
fn domain_errors_are_tool_errors_with_codes() {
    let env = TestEnv::new();
    let mut s = Session::start(&env, &["serve"]);
    s.initialize();
    let r = s.call(2, "memory_read", json!({"category": "nope"}));
    assert_eq!(r["result"]["isError"], true);
    assert_eq!(tool_json(&r)["error"]["code"], "not_found");
    let r = s.call(3, "memory_write", json!({"category": "../x", "data": {}}));
    assert_eq!(tool_json(&r)["error"]["code"], "invalid");
    assert_eq!(tool_json(&r)["error"]["field"], "category");
    let r = s.call(4, "memory_search", json!({"query": "x", "limit": "5"}));
    assert_eq!(tool_json(&r)["error"]["code"], "invalid");
    let r = s.call(
        5,
        "memory_write",
        json!({"category": "a", "data": {"k": 1}}),
    );
    let hash = tool_json(&r)["new_hash"].as_str().unwrap().to_string();
    let r = s.call(
        6,
        "memory_write",
        json!({"category": "a", "data": {"k": 2}, "expected_hash": "0".repeat(64)}),
    );
    assert_eq!(tool_json(&r)["error"]["code"], "conflict");
    assert_eq!(tool_json(&r)["error"]["current_hash"], hash.as_str());
    assert_eq!(s.close(), 0);
}

#[test]
fn huge_arguments_are_refused_as_too_large() {
    let env = TestEnv::new();
    let mut s = Session::start(&env, &["serve"]);
    s.initialize();
    let big = "x".repeat(2 * 1024 * 1024);
    let r = s.call(
        2,
        "memory_ingest",
        json!({"session_id": "s", "content": big}),
    );
    assert_eq!(
        tool_json(&r)["error"]["code"],
        "too_large",
        "{}",
        &r.to_string()[..300.min(r.to_string().len())]
    );
    let r = s.call(
        3,
        "memory_write",
        json!({"category": "big", "data": {"v": big}}),
    );
    assert_eq!(tool_json(&r)["error"]["code"], "too_large");
    let r = s.call(4, "memory_status", json!({}));
    assert_eq!(tool_json(&r)["chunks"], 0);
    assert_eq!(s.close(), 0);
}

#[test]
fn calls_before_initialized_notification_still_work() {
    let env = TestEnv::new();
    let mut s = Session::start(&env, &["serve"]);
    s.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}}));
    s.response(1);
    // No notifications/initialized: a lenient server still answers (or errors), never hangs.
    s.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let r = s.response(2);
    assert!(r.get("result").is_some() || r.get("error").is_some(), "{r}");
    assert_eq!(s.close(), 0);
}

#[test]
fn stdin_closed_before_initialize_exits_cleanly() {
    let env = TestEnv::new();
    let s = Session::start(&env, &["serve"]);
    assert_eq!(s.close(), 0);
}

#[test]
fn stdout_carries_only_json_rpc() {
    let env = TestEnv::new();
    let mut s = Session::start(&env, &["serve"]);
    s.initialize();
    s.call(
        2,
        "memory_ingest",
        json!({"session_id": "s", "content": "hello world"}),
    );
    s.call(3, "memory_search", json!({"query": "hello"}));
    drop(s.stdin.take());
    // Every remaining line parses as JSON-RPC.
    while let Ok(line) = s.lines.recv_timeout(Duration::from_secs(10)) {
        let v: Value =
            serde_json::from_str(&line).unwrap_or_else(|_| panic!("non-JSON on stdout: {line}"));
        assert_eq!(v["jsonrpc"], "2.0");
    }
    let _ = s.child.wait();
}

#[test]
fn two_servers_see_each_others_writes() {
    let env = TestEnv::new();
    let mut a = Session::start(&env, &["serve"]);
    let mut b = Session::start(&env, &["serve"]);
    a.initialize();
    b.initialize();
    let r = a.call(
        2,
        "memory_ingest",
        json!({"session_id": "s", "content": "the zeppelin landed at noon"}),
    );
    assert_eq!(tool_json(&r)["position"], 0, "{r}");
    let r = b.call(2, "memory_search", json!({"query": "zeppelin"}));
    assert_eq!(
        tool_json(&r)["results"][0]["content"],
        "the zeppelin landed at noon",
        "{r}"
    );
    a.call(
        3,
        "memory_write",
        json!({"category": "prefs", "data": {"color": "teal"}}),
    );
    let r = b.call(3, "memory_read", json!({"category": "prefs"}));
    assert_eq!(tool_json(&r)["data"]["color"], "teal", "{r}");
    let r = b.call(4, "memory_search", json!({"query": "teal"}));
    assert_eq!(tool_json(&r)["results"][0]["category"], "prefs", "{r}");
    assert_eq!(a.close(), 0);
    assert_eq!(b.close(), 0);
}

/// The contents of a server's hits for `query`.
fn contents(r: &Value) -> Vec<String> {
    tool_json(r)["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|h| h["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// How many hits a CLI search for `query` finds (up to 10, without context windows).
fn cli_hits(env: &TestEnv, query: &str) -> usize {
    let v = env.ok(&["search", query, "--limit", "10", "--context", "0"]);
    v["results"].as_array().unwrap().len()
}

/// The segment files of the chunk index on disk.
fn index_files(env: &TestEnv) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(env.path(".memdir/index/chunks"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && n != "meta.json")
        .collect()
}

#[test]
fn a_server_keeps_its_catch_ups_in_memory_and_other_processes_and_a_kill_lose_nothing() {
    let env = TestEnv::new();
    env.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--text",
        "alpha opening words",
    ]);
    let mut a = Session::start(&env, &["serve"]);
    a.initialize();
    // The first search builds the index on disk.
    let r = a.call(2, "memory_search", json!({"query": "alpha"}));
    assert_eq!(contents(&r), ["alpha opening words"]);
    let built = index_files(&env);
    let meta = std::fs::read(env.path(".memdir/index/chunks/meta.json")).unwrap();
    // A write and the search after it: the catch-up stays in the server's memory.
    a.call(
        3,
        "memory_ingest",
        json!({"session_id": "s", "content": "bravo second words"}),
    );
    let r = a.call(4, "memory_search", json!({"query": "bravo"}));
    assert_eq!(contents(&r), ["bravo second words"]);
    assert_eq!(index_files(&env), built);
    assert_eq!(
        std::fs::read(env.path(".memdir/index/chunks/meta.json")).unwrap(),
        meta
    );
    // Another process sees the write: it catches the disk up itself.
    let v = env.ok(&["search", "bravo", "--context", "0"]);
    assert_eq!(v["results"][0]["content"], "bravo second words", "{v}");
    assert_ne!(index_files(&env), built);
    // A second server, then the first again: each finds every write once.
    let mut b = Session::start(&env, &["serve"]);
    b.initialize();
    b.call(
        2,
        "memory_ingest",
        json!({"session_id": "t", "content": "charlie third words"}),
    );
    let r = b.call(
        3,
        "memory_search",
        json!({"query": "charlie words", "context": 0}),
    );
    assert_eq!(contents(&r).len(), 3, "{r}");
    a.call(
        5,
        "memory_ingest",
        json!({"session_id": "s", "content": "delta fourth words"}),
    );
    let r = a.call(
        6,
        "memory_search",
        json!({"query": "words", "limit": 10, "context": 0}),
    );
    let mut got = contents(&r);
    got.sort();
    assert_eq!(
        got,
        [
            "alpha opening words",
            "bravo second words",
            "charlie third words",
            "delta fourth words"
        ],
        "{r}"
    );
    // Killed with its last catch-ups only in memory: nothing is lost.
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let r = b.call(4, "memory_search", json!({"query": "delta"}));
    assert_eq!(contents(&r), ["delta fourth words"]);
    // Its catch-up of that write is in its memory only; a server that stops lands it.
    assert_eq!(
        env.ok(&["status"])["index"]["state"],
        "behind (caught up by the next search)"
    );
    assert_eq!(b.close(), 0);
    assert_eq!(env.ok(&["status"])["index"]["state"], "current");
    assert_eq!(cli_hits(&env, "words"), 4);
    env.assert_clean();
}

#[test]
fn a_server_whose_catch_ups_cannot_land_keeps_answering_and_leaves_the_disk_index_whole() {
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_TOOLS", "full");
    env.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--text",
        "alpha opening words",
    ]);
    env.ok(&["search", "alpha"]);
    // Every landing of what the server keeps in memory fails as on a full disk, after its
    // segment files were written and before `meta.json` (other processes keep nothing in
    // memory, so they never get there).
    env.set_env("MEMDIR_FAILPOINT", "index.land_meta=enospc");
    let mut a = Session::start(&env, &["serve"]);
    a.initialize();
    for (i, word) in ["bravo", "charlie"].iter().enumerate() {
        let id = 10 * i as u64;
        a.call(
            id + 1,
            "memory_ingest",
            json!({"session_id": "s", "content": format!("{word} more words")}),
        );
        let r = a.call(
            id + 2,
            "memory_search",
            json!({"query": word, "mode": "exact", "context": 0}),
        );
        assert_eq!(contents(&r), [format!("{word} more words")]);
        // The health report checks the index on disk, so the server's catch-ups land first:
        // that fails and changes nothing; the disk is behind, not damaged.
        let r = a.call(id + 3, "memory_doctor", json!({}));
        assert_eq!(tool_json(&r)["checks"]["index"]["state"], "behind", "{r}");
    }
    let r = a.call(
        30,
        "memory_search",
        json!({"query": "words", "limit": 10, "context": 0}),
    );
    assert_eq!(contents(&r).len(), 3, "{r}");
    assert_eq!(a.close(), 0);
    // The disk index is whole: another process opens it, catches it up and finds everything.
    assert_eq!(cli_hits(&env, "words"), 3);
    env.assert_clean();
}

#[test]
fn several_servers_ingesting_at_once_lose_nothing() {
    let env = TestEnv::new();
    let per = 15;
    let handles: Vec<_> = (0..4)
        .map(|w| {
            let mut s = Session::start(&env, &["serve"]);
            std::thread::spawn(move || {
                s.initialize();
                let mut positions = Vec::new();
                for i in 0..per {
                    let r = s.call(
                        10 + i,
                        "memory_ingest",
                        json!({"session_id": "shared", "content": format!("writer {w} chunk {i}")}),
                    );
                    assert_eq!(r["result"]["isError"], false, "{r}");
                    positions.push(tool_json(&r)["position"].as_u64().unwrap());
                }
                assert_eq!(s.close(), 0);
                positions
            })
        })
        .collect();
    let mut all: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort();
    assert_eq!(all, (0..4 * per).collect::<Vec<_>>());
    let fetched = env.ok(&["fetch", "shared", "--limit", "1000"]);
    assert_eq!(fetched["total"], 4 * per);
    env.assert_clean();
}

/// Over MCP too, a chunk whose source_id is already in its session is skipped and named.
#[test]
fn ingest_skips_a_known_source_id() {
    let env = TestEnv::new();
    let mut s = Session::start(&env, &["serve"]);
    s.initialize();
    let args = json!({"session_id": "s", "content": "hello", "source_id": "m1"});
    let a = s.call(2, "memory_ingest", args.clone());
    let first = tool_json(&a);
    assert_eq!(first["ok"], true, "{a}");
    assert!(first.get("skipped").is_none(), "{a}");
    let b = s.call(3, "memory_ingest", args);
    assert_eq!(tool_json(&b)["skipped"], true, "{b}");
    assert_eq!(tool_json(&b)["chunk_id"], first["chunk_id"]);
    let c = s.call(
        4,
        "memory_ingest",
        json!({"chunks": [{"session_id": "s", "content": "hello", "source_id": "m1"}, {"session_id": "s", "content": "new", "source_id": "m2"}]}),
    );
    let sc = &tool_json(&c);
    assert_eq!(sc["count"], 1, "{c}");
    assert_eq!(sc["skipped"], 1);
    assert_eq!(sc["skipped_chunks"][0]["index"], 0);
    assert_eq!(s.close(), 0);
    assert_eq!(env.session_contents("s"), ["hello", "new"]);
}
