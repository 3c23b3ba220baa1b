//! `memdir import`: each importer on its fixture (the chunks the importer design note
//! expects), the edge cases of foreign JSONL, and idempotence.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::util::TestEnv;

const CC_SESSION: &str = "5b2f0c7e-3d1a-4e8b-9f60-2c4d8a1e7b93";
const CODEX_THREAD: &str = "019c8a2e-5f10-7b3d-a8c4-1e2f3a4b5c6d";

fn fixture(name: &str) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/importers");
    std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A Claude Code config directory holding the fixture transcript; returns (root, file).
fn claude_home(env: &TestEnv) -> (PathBuf, PathBuf) {
    let root = env.tmp.path().join("claude");
    let dir = root.join("projects/-home-dev-acme-widgets");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{CC_SESSION}.jsonl"));
    std::fs::write(&file, fixture("claude-code-session.jsonl")).unwrap();
    (root, file)
}

fn chunks(env: &TestEnv, session: &str) -> Vec<Value> {
    let f = env.ok(&["fetch", session, "--limit", "1000"]);
    f["chunks"].as_array().unwrap().clone()
}

fn keys(chunks: &[Value]) -> Vec<String> {
    chunks
        .iter()
        .map(|c| c["metadata"]["source_id"].as_str().unwrap().to_string())
        .collect()
}

fn append(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

/// The Claude Code fixture gives exactly the five chunks of the design note, with time,
/// role, kind, project, branch, model, title and attachments; the unterminated tail waits for
/// its newline; a second run adds nothing; completing the tail adds exactly one chunk.
#[test]
fn claude_code_fixture_gives_the_expected_chunks() {
    let mut env = TestEnv::new();
    let (root, file) = claude_home(&env);
    // The default path: $CLAUDE_CONFIG_DIR (else ~/.claude).
    env.set_env("CLAUDE_CONFIG_DIR", root.to_str().unwrap());
    let dry = env.ok(&["import", "claude-code", "--dry-run"]);
    assert_eq!(dry["chunks"], 5, "{dry}");
    assert_eq!(dry["sessions"], 1);
    assert_eq!(dry["skipped"]["unterminated_tail"], 1);
    assert!(!env.path("sessions").exists(), "a dry run writes nothing");
    let out = env.ok(&["import", "claude-code"]);
    assert_eq!(out["chunks"], 5, "{out}");
    assert_eq!(out["files"], 1);
    for (why, n) in [
        ("thinking", 1),
        ("tool_call", 1),
        ("tool_result", 1),
        ("sidechain", 1),
        ("api_error", 1),
        ("harness_text", 1),
        ("record:progress", 1),
        ("record:system", 1),
    ] {
        assert_eq!(out["skipped"][why], n, "{why}: {out}");
    }
    let session = format!("cc-{CC_SESSION}");
    let got = chunks(&env, &session);
    let want: Vec<String> = ["01", "04", "0a", "0b", "0c"]
        .iter()
        .map(|n| format!("cc:0f1a2b3c-00{n}-4a00-8000-0000000000{n}"))
        .collect();
    assert_eq!(keys(&got), want);
    let roles: Vec<(&str, &str)> = got
        .iter()
        .map(|c| {
            (
                c["metadata"]["role"].as_str().unwrap(),
                c["metadata"]["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        roles,
        [
            ("user", "message"),
            ("assistant", "message"),
            ("system", "compact_summary"),
            ("user", "message"),
            ("assistant", "message"),
        ]
    );
    assert!(got.iter().all(|c| c["project"] == "acme-widgets"));
    assert_eq!(got[0]["metadata"]["git_branch"], "fix/cache-ttl");
    assert_eq!(got[0]["ts"], "2026-03-02T09:14:05.120Z");
    assert_eq!(
        got[0]["metadata"]["title"],
        "Widget cache TTL flake traced to a double clock read"
    );
    assert_eq!(got[1]["metadata"]["model"], "claude-sonnet-4-5");
    assert_eq!(
        got[3]["content"],
        "Here is the CI screenshot of the failing run."
    );
    assert_eq!(
        got[3]["metadata"]["attachments"][0]["media_type"],
        "image/png"
    );
    assert_eq!(
        got[0]["metadata"]["import"]["path"],
        format!("-home-dev-acme-widgets/{CC_SESSION}.jsonl")
    );
    assert!(!got[0].to_string().contains("/home/dev/.claude"));
    let o = env.ok(&["overview", "--days", "0"]);
    assert_eq!(
        o["sessions"][0]["title"],
        "Widget cache TTL flake traced to a double clock read"
    );

    // Twice: nothing new, and not a byte of the store changes but the ledger.
    let before = env.snapshot();
    let again = env.ok(&["import", "claude-code"]);
    assert_eq!(
        (again["chunks"].clone(), again["existing"].clone()),
        (json!(0), json!(5))
    );
    assert_eq!(env.snapshot(), before);
    let dry = env.ok(&["import", "claude-code", "--dry-run"]);
    assert_eq!(
        (dry["chunks"].clone(), dry["existing"].clone()),
        (json!(0), json!(5))
    );

    // The tail completed: exactly one more chunk.
    append(
        &file,
        b" test for the clock injection.\"},\"uuid\":\"0f1a2b3c-000e-4a00-8000-00000000000e\",\"timestamp\":\"2026-03-02T09:41:10.000Z\"}\n",
    );
    let third = env.ok(&["import", "claude-code", file.to_str().unwrap()]);
    assert_eq!(third["chunks"], 1, "{third}");
    let got = chunks(&env, &session);
    assert_eq!(got.len(), 6);
    assert_eq!(
        got[5]["metadata"]["source_id"],
        "cc:0f1a2b3c-000e-4a00-8000-00000000000e"
    );
    assert_eq!(got[5]["metadata"]["role"], "user");
    env.assert_clean();
}

/// Foreign JSONL at its worst: a malformed line in the middle, unknown record types, a huge
/// tool output, bytes that are not UTF-8, a lone surrogate escape; each is skipped or
/// repaired on its own and the rest is imported.
#[test]
fn claude_code_edge_cases_are_skipped_or_repaired_one_by_one() {
    let env = TestEnv::new();
    let dir = env.tmp.path().join("claude/projects/-x");
    std::fs::create_dir_all(&dir).unwrap();
    let rec = |uuid: &str, ty: &str, content: Value| {
        json!({"type": ty, "uuid": uuid, "cwd": "/w/proj", "timestamp": "2026-01-01T00:00:00Z",
               "message": {"role": ty, "content": content}})
        .to_string()
    };
    let huge = "x".repeat(3 * 1024 * 1024);
    let mut file: Vec<u8> = Vec::new();
    for line in [
        rec("u1", "user", json!("hello there")),
        "{not json".to_string(),
        json!({"type": "brand-new-kind", "uuid": "u2"}).to_string(),
        rec("u3", "user", json!([{"type": "tool_result", "tool_use_id": "t", "content": huge}])),
        rec("u4", "assistant", json!([{"type": "text", "text": "a long answer"}, {"type": "hologram"}])),
        rec("u5", "user", json!("café NONUTF")),
        r#"{"type":"user","uuid":"u6","cwd":"/w/proj","message":{"role":"user","content":"cut \ud83d"}}"#.to_string(),
    ] {
        file.extend_from_slice(line.as_bytes());
        file.push(b'\n');
    }
    // Invalid UTF-8 inside the string of line 5.
    let at = file.windows(6).position(|w| w == b"NONUTF").unwrap();
    file[at] = 0xff;
    file[at + 1] = 0xfe;
    std::fs::write(dir.join("s1.jsonl"), &file).unwrap();
    let root = env.tmp.path().join("claude");
    let out = env.ok(&["import", "claude-code", root.to_str().unwrap()]);
    assert_eq!(out["chunks"], 4, "{out}");
    assert_eq!(out["bad_lines"], json!(["-x/s1.jsonl:2"]));
    assert_eq!(out["skipped"]["record:brand-new-kind"], 1);
    assert_eq!(out["skipped"]["tool_result"], 1);
    assert_eq!(out["skipped"]["block:hologram"], 1);
    let got = chunks(&env, "cc-s1");
    let contents: Vec<&str> = got.iter().map(|c| c["content"].as_str().unwrap()).collect();
    assert_eq!(
        contents,
        [
            "hello there",
            "a long answer",
            "café \u{FFFD}\u{FFFD}NUTF",
            "cut \u{FFFD}"
        ]
    );
    assert_eq!(got[0]["project"], "proj");
    env.assert_clean();
}

/// A user message larger than a chunk may be is cut with a marker, keeping its size.
#[test]
fn huge_messages_are_cut_not_refused() {
    let env = TestEnv::new();
    let dir = env.tmp.path().join("cc/projects/p");
    std::fs::create_dir_all(&dir).unwrap();
    let big = "word ".repeat(100_000);
    let line = json!({"type": "user", "uuid": "u1", "message": {"role": "user", "content": big}});
    std::fs::write(dir.join("s.jsonl"), format!("{line}\n")).unwrap();
    let out = env.ok(&[
        "import",
        "claude-code",
        env.tmp.path().join("cc").to_str().unwrap(),
    ]);
    assert_eq!(out["chunks"], 1, "{out}");
    let got = chunks(&env, "cc-s");
    assert_eq!(got[0]["metadata"]["truncated_from"], big.trim().len());
    assert!(
        got[0]["content"]
            .as_str()
            .unwrap()
            .ends_with("[… cut by memdir import]")
    );
}

/// The Codex fixture gives the three chunks of the design note (typed messages from the
/// event log, never their mirrors or injected context; the compaction summary); the tail
/// completed adds one.
#[test]
fn codex_fixture_gives_the_expected_chunks() {
    let mut env = TestEnv::new();
    let home = env.tmp.path().join("codex");
    let dir = home.join("sessions/2026/03/02");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("rollout-2026-03-02T10-05-11-{CODEX_THREAD}.jsonl"));
    std::fs::write(&file, fixture("codex-rollout.jsonl")).unwrap();
    env.set_env("CODEX_HOME", home.to_str().unwrap());
    let out = env.ok(&["import", "codex"]);
    assert_eq!(out["chunks"], 3, "{out}");
    assert_eq!(out["skipped"]["tool_call"], 2);
    assert_eq!(out["skipped"]["tool_result"], 2);
    let session = format!("codex-{CODEX_THREAD}");
    let got = chunks(&env, &session);
    let want: Vec<String> = [3, 10, 13]
        .iter()
        .map(|n| format!("codex:{CODEX_THREAD}:{n}"))
        .collect();
    assert_eq!(keys(&got), want);
    assert_eq!(got[0]["metadata"]["role"], "user");
    assert_eq!(
        got[0]["content"],
        "Add a --json flag to `widgets list` so scripts can read the output."
    );
    assert_eq!(
        got[0]["metadata"]["attachments"][0]["media_type"],
        "image/png"
    );
    assert_eq!(got[0]["ts"], "2026-03-02T09:05:20.018Z");
    assert_eq!(got[1]["metadata"]["role"], "assistant");
    assert_eq!(got[1]["metadata"]["model"], "gpt-5-codex");
    assert_eq!(got[2]["metadata"]["kind"], "compact_summary");
    assert!(got.iter().all(|c| c["project"] == "acme-widgets"));
    assert_eq!(got[0]["metadata"]["git_branch"], "main");
    let before = env.snapshot();
    assert_eq!(env.ok(&["import", "codex"])["chunks"], 0);
    assert_eq!(env.snapshot(), before);
    append(&file, b"put.\",\"images\":[],\"kind\":\"plain\"}}\n");
    assert_eq!(env.ok(&["import", "codex"])["chunks"], 1);
    assert_eq!(
        keys(&chunks(&env, &session)).last().unwrap(),
        &format!("codex:{CODEX_THREAD}:14")
    );
}

/// A bare-era rollout (a header without type, bare message lines, no timestamps) gives its
/// messages through the fallback rule, timed by the header.
#[test]
fn codex_bare_era_files_use_the_fallback_rule() {
    let env = TestEnv::new();
    let file = env.tmp.path().join("rollout-old.jsonl");
    let lines = [
        json!({"id": "0a1b2c3d-0000-4000-8000-000000000001", "timestamp": "2025-08-01T10:00:00Z", "instructions": null}),
        json!({"record_type": "state"}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n<cwd>/w/app</cwd>\n</environment_context>"}]}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "rename the flag"}]}),
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "renamed"}]}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let out = env.ok(&["import", "codex", file.to_str().unwrap()]);
    assert_eq!(out["chunks"], 2, "{out}");
    let got = chunks(&env, "codex-0a1b2c3d-0000-4000-8000-000000000001");
    let c: Vec<&str> = got.iter().map(|c| c["content"].as_str().unwrap()).collect();
    assert_eq!(c, ["rename the flag", "renamed"]);
    assert_eq!(got[0]["ts"], "2025-08-01T10:00:00.000Z");
    assert_eq!(got[0]["metadata"]["ts_estimated"], true);
}

/// memdir's own lines, from `ingest` input or from a segment, come back keyed: importing a
/// store's segment into another store twice adds its chunks once; a bad line is named.
#[test]
fn jsonl_import_reads_chunk_lines_and_is_idempotent() {
    let src = TestEnv::new();
    src.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--project",
        "p",
        "--text",
        "one",
    ]);
    src.ok(&["ingest", "--session-id", "s", "--text", "two"]);
    let seg = std::fs::read(src.segment_of("s")).unwrap();
    let env = TestEnv::new();
    let file = env.tmp.path().join("in.jsonl");
    let mut text = seg.clone();
    text.extend_from_slice(
        b"{\"session_id\": \"t\", \"content\": \"plain\", \"ts\": \"2024-05-01\"}\n[1,2]\n",
    );
    std::fs::write(&file, &text).unwrap();
    let out = env.ok(&["import", "jsonl", file.to_str().unwrap()]);
    assert_eq!(out["chunks"], 3, "{out}");
    assert_eq!(out["bad_lines"], json!(["in.jsonl:4"]));
    assert_eq!(env.session_contents("s"), ["one", "two"]);
    let s = chunks(&env, "s");
    assert_eq!(s[0]["project"], "p");
    assert!(
        s[0]["metadata"]["source_id"]
            .as_str()
            .unwrap()
            .starts_with("memdir:")
    );
    assert_eq!(chunks(&env, "t")[0]["ts"], "2024-05-01T00:00:00.000Z");
    let again = env.ok(&["import", "jsonl", file.to_str().unwrap()]);
    assert_eq!(
        (again["chunks"].clone(), again["existing"].clone()),
        (json!(0), json!(3))
    );
    let r = env.run(&["import", "jsonl"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(r.error()["field"], "path");
    let r = env.run(&["import", "nosuch", file.to_str().unwrap()]);
    assert_eq!(r.code, 3);
    assert_eq!(r.error()["field"], "format");
    let r = env.run(&["import", "codex", "/no/such/dir"]);
    assert_eq!(r.code, 3);
}
