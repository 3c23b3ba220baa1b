//! MCP stdio framing: every line gets an answer, whatever its size or shape, and the server
//! keeps serving afterwards. Raw JSON-RPC lines, because an SDK would never send most of these.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::{TestEnv, tool_json};

const MIB: usize = 1024 * 1024;
/// `memdir::mcp::MAX_MESSAGE_BYTES`: twice the 32 MiB batch limit.
const MAX_MESSAGE_BYTES: usize = 64 * MIB;

struct Stdio {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Stdio {
    fn start(env: &TestEnv) -> Stdio {
        let mut child = env.spawn(&["serve"]);
        let stdin = child.stdin.take();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(l) = line else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut s = Stdio {
            child,
            stdin,
            lines,
        };
        s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}}).to_string());
        assert!(s.next()["result"]["serverInfo"].is_object());
        s.send(r#"{"jsonrpc": "2.0", "method": "notifications/initialized"}"#);
        s
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message on stdout, within a deadline: a line that gets no answer fails here
    /// instead of hanging the test.
    fn next(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the server answered nothing within 60 s");
        serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!(
                "stdout line is not JSON ({e}): {}",
                &line[..line.len().min(300)]
            )
        })
    }

    fn call_line(id: u64, tool: &str, args: &Value) -> String {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}}).to_string()
    }

    /// Closes stdin and waits (bounded) for a clean exit.
    fn close(mut self) -> i32 {
        let stdin = self.stdin.take();
        crate::util::close_and_wait(&mut self.child, stdin)
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    s[..s.len().min(400)].to_string()
}

/// The `error` of a tool result, or panics.
fn tool_error(r: &Value) -> Value {
    assert_eq!(r["result"]["isError"], true, "{}", short(r));
    tool_json(r)["error"].clone()
}

/// Text of `len` bytes with the characters JSON escapes in two bytes (quotes, newlines).
fn text(len: usize, seed: usize) -> String {
    let unit = format!("chunk {seed} says \"hello\"\nand goes on. ");
    let mut s = unit.repeat(len / unit.len() + 1);
    s.truncate(len);
    s
}

#[test]
fn every_line_over_the_old_16_mib_cap_or_malformed_gets_an_answer_and_serving_goes_on() {
    let env = TestEnv::new();
    let mut s = Stdio::start(&env);

    // 17 MiB: one chunk far over its 256 KiB limit; a tool error, not silence.
    let line = Stdio::call_line(
        2,
        "memory_ingest",
        &json!({"session_id": "s", "content": text(17 * MIB, 0)}),
    );
    assert!(line.len() > 17 * MIB);
    s.send(&line);
    let r = s.next();
    assert_eq!(r["id"], 2);
    assert_eq!(tool_error(&r)["code"], "too_large", "{}", short(&r));

    // 40 MiB: a batch over the 32 MiB content limit.
    let chunks: Vec<Value> = (0..160)
        .map(|i| json!({"session_id": "s", "content": text(256 * 1024, i)}))
        .collect();
    let line = Stdio::call_line(3, "memory_ingest", &json!({"chunks": chunks}));
    assert!(line.len() > 40 * MIB && line.len() < MAX_MESSAGE_BYTES);
    s.send(&line);
    let r = s.next();
    assert_eq!(r["id"], 3);
    let e = tool_error(&r);
    assert_eq!(e["code"], "too_large", "{}", short(&r));
    assert_eq!(e["field"], "chunks");

    // Not JSON: a parse error with a null id (JSON-RPC 2.0 §5.1).
    s.send("{this is not json");
    let r = s.next();
    assert_eq!(r["id"], Value::Null, "{r}");
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(r["error"]["data"]["code"], "invalid", "{r}");

    // Over the message limit, with the id last (as some clients order their keys): the
    // answer still carries the id, so the client's pending call ends.
    let pad = "x".repeat(MAX_MESSAGE_BYTES + MIB);
    s.send(&format!(
        r#"{{"jsonrpc": "2.0", "method": "tools/call", "params": {{"name": "memory_ingest", "arguments": {{"session_id": "s", "content": "{pad}"}}}}, "id": "big"}}"#
    ));
    let r = s.next();
    assert_eq!(r["id"], "big", "{r}");
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert_eq!(r["error"]["data"]["code"], "too_large", "{r}");
    assert_eq!(r["error"]["data"]["limit"], MAX_MESSAGE_BYTES, "{r}");

    // Nested deeper than serde_json parses: a parse error that keeps the id.
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    s.send(&format!(
        r#"{{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {{"name": "memory_write", "arguments": {{"category": "c", "data": {{"v": {deep}}}}}}}}}"#
    ));
    let r = s.next();
    assert_eq!(r["id"], 5, "{r}");
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(r["error"]["data"]["field"], "data", "{r}");

    // Well-formed JSON that is not a request: Invalid Request, with its id.
    s.send(r#"{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": "not an object"}"#);
    let r = s.next();
    assert_eq!(r["id"], 6, "{r}");
    assert_eq!(r["error"]["code"], -32600, "{r}");

    // And the server still serves.
    s.send(r#"{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}"#);
    let r = s.next();
    assert_eq!(r["id"], 7, "{}", short(&r));
    assert!(r["result"]["tools"].as_array().unwrap().len() > 5);
    assert_eq!(s.close(), 0);
    assert!(
        crate::util::truth_files(&env.dir).is_empty(),
        "refused lines wrote nothing"
    );
}

#[test]
fn a_batch_at_the_documented_content_limit_fits_in_one_stdio_message() {
    let env = TestEnv::new();
    let mut s = Stdio::start(&env);
    // 128 chunks of 256 KiB: exactly the 32 MiB batch limit, with escaped characters.
    let chunks: Vec<Value> = (0..128)
        .map(|i| json!({"session_id": "big", "content": text(256 * 1024, i)}))
        .collect();
    let line = Stdio::call_line(2, "memory_ingest", &json!({"chunks": chunks}));
    assert!(line.len() > 32 * MIB && line.len() < MAX_MESSAGE_BYTES);
    s.send(&line);
    let r = s.next();
    assert_eq!(r["result"]["isError"], false, "{}", short(&r));
    assert_eq!(
        tool_json(&r)["chunks"].as_array().map(Vec::len),
        Some(128),
        "{}",
        short(&r)
    );
    assert_eq!(s.close(), 0);
}

#[test]
fn integers_that_would_lose_digits_are_refused_naming_the_field() {
    let env = TestEnv::new();
    let mut s = Stdio::start(&env);
    // serde_json turns this literal into a float; the CLI refuses it, and so does MCP.
    s.send(r#"{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "memory_write", "arguments": {"category": "c", "data": {"n": [1, 123456789012345678901234567890]}}}}"#);
    let r = s.next();
    let e = tool_error(&r);
    assert_eq!(e["code"], "invalid", "{r}");
    assert_eq!(e["field"], "data", "{r}");
    assert_eq!(e["path"], "data.n[1]", "{r}");
    // Floats stay floats; an integer written as 5.0 is 5 where an integer is wanted.
    let r = s.send_call(
        3,
        "memory_write",
        json!({"category": "c", "data": {"f": 1.5e300, "g": 5.0, "big": 18446744073709551615u64}}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let r = s.send_call(4, "memory_history", json!({"category": "c", "limit": 5.0}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    for (id, limit) in [(5, json!(5.5)), (6, json!(1e300)), (7, json!(-1))] {
        let r = s.send_call(id, "memory_search", json!({"query": "x", "limit": limit}));
        let e = tool_error(&r);
        assert_eq!(e["code"], "invalid", "{r}");
        assert_eq!(e["field"], "limit", "{r}");
    }
    let files = crate::util::truth_files(&env.dir);
    assert_eq!(
        files
            .iter()
            .filter(|f| f.starts_with("categories/") || f.starts_with("history/"))
            .count(),
        2,
        "one category file and one version of it: {files:?}"
    );
    assert_eq!(s.close(), 0);
}

impl Stdio {
    fn send_call(&mut self, id: u64, tool: &str, args: Value) -> Value {
        self.send(&Stdio::call_line(id, tool, &args));
        let r = self.next();
        assert_eq!(r["id"], id, "{}", short(&r));
        r
    }
}
