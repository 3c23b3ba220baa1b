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

/// Risk: importers skipped links and FIFOs named like transcripts without a word. They are
/// still never read, and the answer counts them.
#[test]
fn links_and_special_files_named_like_transcripts_are_skipped_and_counted() {
    let env = TestEnv::new();
    let (root, file) = claude_home(&env);
    let plain = env.ok(&["import", "claude-code", root.to_str().unwrap(), "--dry-run"]);
    let dir = file.parent().unwrap();
    let elsewhere = env.tmp.path().join("elsewhere.jsonl");
    std::fs::write(&elsewhere, fixture("claude-code-session.jsonl")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join("linked.jsonl")).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(dir.join("pipe.jsonl"))
            .status()
            .unwrap()
            .success()
    );
    // A link to a directory is neither followed nor counted unless named like a transcript.
    std::os::unix::fs::symlink(env.tmp.path(), dir.join("tree")).unwrap();
    let out = env.ok(&["import", "claude-code", root.to_str().unwrap(), "--dry-run"]);
    assert_eq!(out["chunks"], plain["chunks"], "{out}");
    assert_eq!(out["files"], plain["files"], "{out}");
    assert_eq!(out["skipped"]["link"], 1, "{out}");
    assert_eq!(out["skipped"]["special_file"], 1, "{out}");
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

/// Writes a `*-tree.json` bundle of the importer fixtures under `root`: `{"json": v}` as
/// pretty JSON, `{"text": s}` byte for byte, and each `sqlite` entry's SQL run into that file.
pub(crate) fn materialise(bundle: &str, root: &Path) {
    let b: Value = serde_json::from_slice(&fixture(bundle)).unwrap();
    for (rel, f) in b["files"].as_object().unwrap() {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let bytes = match f.get("text") {
            Some(t) => t.as_str().unwrap().as_bytes().to_vec(),
            None => serde_json::to_vec_pretty(&f["json"]).unwrap(),
        };
        std::fs::write(p, bytes).unwrap();
    }
    for (rel, sql) in b["sqlite"].as_object().into_iter().flatten() {
        let c = rusqlite::Connection::open(root.join(rel)).unwrap();
        c.execute_batch(sql.as_str().unwrap()).unwrap();
    }
}

/// The local-memory fixture as a database file in `dir`.
fn local_memory_db(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("memory.db");
    let c = rusqlite::Connection::open(&file).unwrap();
    c.execute_batch(std::str::from_utf8(&fixture("local-memory.sql")).unwrap())
        .unwrap();
    file
}

fn strs(chunks: &[Value], f: impl Fn(&Value) -> &Value) -> Vec<String> {
    chunks
        .iter()
        .map(|c| match f(c) {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// The opencode fixture gives the two chunks of the design note: the user's text with its
/// image as attachment metadata, the assistant's text with its model; synthetic, reasoning,
/// tool and step parts and the child session are counted, not kept. Twice = no change.
#[test]
fn opencode_fixture_gives_the_expected_chunks() {
    let mut env = TestEnv::new();
    let data = env.tmp.path().join("data");
    materialise("opencode-storage-tree.json", &data.join("opencode/storage"));
    // The default path: $XDG_DATA_HOME/opencode (else ~/.local/share/opencode).
    env.set_env("XDG_DATA_HOME", data.to_str().unwrap());
    let dry = env.ok(&["import", "opencode", "--dry-run"]);
    assert_eq!(
        (dry["chunks"].clone(), dry["sessions"].clone()),
        (json!(2), json!(1)),
        "{dry}"
    );
    assert!(!env.path("sessions").exists(), "a dry run writes nothing");
    let out = env.ok(&["import", "opencode"]);
    assert_eq!(out["chunks"], 2, "{out}");
    for (why, n) in [
        ("synthetic", 1),
        ("thinking", 1),
        ("tool_call", 1),
        ("step", 2),
        ("subagent_session", 1),
    ] {
        assert_eq!(out["skipped"][why], n, "{why}: {out}");
    }
    let got = chunks(&env, "opencode-ses_3a1f0c2b9ffeQmV4xT7nK2pLwZ");
    assert_eq!(
        keys(&got),
        [
            "oc:prt_c5e0d0100001DemoPart01AbCd",
            "oc:prt_c5e0d0700007DemoPart07AbCd"
        ]
    );
    assert_eq!(
        got[0]["content"],
        "How does the widget cache decide what to evict? See the attached diagram."
    );
    assert!(
        got[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("Eviction runs in two passes: ")
    );
    assert_eq!(
        strs(&got, |c| &c["metadata"]["role"]),
        ["user", "assistant"]
    );
    assert_eq!(got[0]["ts"], "2026-03-02T08:45:12.500Z");
    assert_eq!(got[1]["ts"], "2026-03-02T08:45:24.000Z");
    let a = &got[0]["metadata"]["attachments"][0];
    assert_eq!(
        (
            a["type"].clone(),
            a["media_type"].clone(),
            a["filename"].clone()
        ),
        (json!("image"), json!("image/png"), json!("eviction.png"))
    );
    assert!(!got[0].to_string().contains("base64"));
    assert_eq!(got[1]["metadata"]["model"], "anthropic/claude-sonnet-4-5");
    assert!(got.iter().all(|c| c["project"] == "acme-widgets"));
    assert_eq!(got[0]["metadata"]["title"], "Explain widget cache eviction");
    let child = env.run(&["fetch", "opencode-ses_3a1f0a11cffeR8sH1uJ5mN9qTy"]);
    assert_eq!(child.code, 4, "child sessions are left out");
    let before = env.snapshot();
    let again = env.ok(&["import", "opencode"]);
    assert_eq!(
        (again["chunks"].clone(), again["existing"].clone()),
        (json!(0), json!(2))
    );
    assert_eq!(env.snapshot(), before);
    env.assert_clean();
}

/// opencode storage at its worst: a part file that is not JSON, one with bytes that are not
/// UTF-8, a part type never seen, an assistant message still being written; each is counted
/// on its own and the rest comes in. A directory that is no storage is a clear error.
#[test]
fn opencode_edge_cases_are_skipped_one_by_one() {
    let env = TestEnv::new();
    let st = env.tmp.path().join("oc/storage");
    let w = |rel: &str, bytes: &[u8]| {
        let p = st.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    };
    w(
        "session/global/ses_a.json",
        br#"{"id": "ses_a", "projectID": "global", "directory": "/w/proj", "title": "t"}"#,
    );
    w(
        "message/ses_a/msg_1.json",
        br#"{"id": "msg_1", "role": "user", "time": {"created": 1772441112500}}"#,
    );
    w(
        "part/msg_1/prt_1.json",
        br#"{"id": "prt_1", "type": "text", "text": "first"}"#,
    );
    w(
        "part/msg_1/prt_2.json",
        b"{\"id\": \"prt_2\", \"type\": \"text\", \"text\": \"caf\xff\xfe\"}",
    );
    w(
        "part/msg_1/prt_3.json",
        b"{\"id\": \"prt_3\", \"type\": \"te",
    );
    w(
        "part/msg_1/prt_4.json",
        br#"{"id": "prt_4", "type": "hologram"}"#,
    );
    w(
        "message/ses_a/msg_2.json",
        br#"{"id": "msg_2", "role": "assistant", "time": {"created": 1772441113000}}"#,
    );
    w(
        "part/msg_2/prt_5.json",
        br#"{"id": "prt_5", "type": "text", "text": "still typing"}"#,
    );
    let out = env.ok(&[
        "import",
        "opencode",
        env.tmp.path().join("oc").to_str().unwrap(),
    ]);
    assert_eq!(out["chunks"], 2, "{out}");
    assert_eq!(out["bad_lines"], json!(["part/msg_1/prt_3.json"]));
    assert_eq!(out["skipped"]["malformed_file"], 1);
    assert_eq!(out["skipped"]["part:hologram"], 1);
    assert_eq!(out["skipped"]["in_flight_message"], 1);
    let got = chunks(&env, "opencode-ses_a");
    assert_eq!(
        strs(&got, |c| &c["content"]),
        ["first", "caf\u{FFFD}\u{FFFD}"]
    );
    assert_eq!(got[0]["project"], "proj");
    let r = env.run(&["import", "opencode", env.tmp.path().to_str().unwrap()]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(r.error()["field"], "path");
    assert!(
        r.stderr.contains("no opencode data directory"),
        "{}",
        r.stderr
    );
    env.assert_clean();
}

/// The local-memory fixture: the same session ids, chunks in position order numbered again
/// from 0 (the source's positions kept), project, estimated start time, title only when it
/// is not the id, metadata that is not an object kept aside; the database is not changed.
#[test]
fn local_memory_fixture_gives_the_expected_chunks() {
    let mut env = TestEnv::new();
    let db = local_memory_db(&env.tmp.path().join("lm"));
    let db_bytes = std::fs::read(&db).unwrap();
    env.set_env("MEMORY_DB_PATH", db.to_str().unwrap());
    let dry = env.ok(&["import", "local-memory", "--dry-run"]);
    assert_eq!(
        (dry["chunks"].clone(), dry["sessions"].clone()),
        (json!(7), json!(2)),
        "{dry}"
    );
    assert!(!env.path("sessions").exists(), "a dry run writes nothing");
    let out = env.ok(&["import", "local-memory"]);
    assert_eq!(out["chunks"], 7, "{out}");
    let got = chunks(&env, "sess-cache-2026-03");
    assert_eq!(
        keys(&got),
        (0..6)
            .filter(|p| *p != 2)
            .map(|p| format!("lm:sess-cache-2026-03:{p}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        strs(&got, |c| &c["metadata"]["import"]["position"]),
        ["0", "1", "3", "4", "5"]
    );
    assert_eq!(strs(&got, |c| &c["position"]), ["0", "1", "2", "3", "4"]);
    assert!(got.iter().all(|c| c["project"] == "acme-widgets"));
    assert!(got.iter().all(|c| c["ts"] == "2026-03-02T09:14:05.000Z"));
    assert!(got.iter().all(|c| c["metadata"]["ts_estimated"] == true));
    assert!(got.iter().all(|c| c["metadata"].get("title").is_none()));
    assert_eq!(
        got[0]["content"],
        "User: the widget cache TTL test is flaky"
    );
    assert_eq!(got[0]["metadata"]["role"], "user");
    assert_eq!(got[1]["metadata"]["role"], "assistant");
    assert_eq!(
        got[1]["metadata"]["reasoning"],
        "Considered clock skew first."
    );
    assert_eq!(got[2]["metadata"]["tool_calls"][0]["name"], "Bash");
    assert_eq!(got[2]["metadata"]["tool_call_results"][0]["exit_code"], 101);
    assert_eq!(got[3]["metadata"]["value"], json!([1, 2]));
    assert_eq!(got[4]["content"], "shared ops runbook line");
    let notes = chunks(&env, "notes-misc");
    assert_eq!(keys(&notes), ["lm:notes-misc:0", "lm:notes-misc:1"]);
    assert!(
        notes
            .iter()
            .all(|c| c.get("project").is_none_or(|p| p.is_null() || p == ""))
    );
    assert!(
        notes
            .iter()
            .all(|c| c["metadata"]["title"] == "Release notes")
    );
    assert_eq!(notes[1]["metadata"]["raw"], "not json");
    assert_eq!(notes[1]["content"], "shared ops runbook line");
    assert_eq!(notes[0]["ts"], "2026-02-27T17:00:00.000Z");

    let before = env.snapshot();
    let again = env.ok(&["import", "local-memory"]);
    assert_eq!(
        (again["chunks"].clone(), again["existing"].clone()),
        (json!(0), json!(7))
    );
    assert_eq!(env.snapshot(), before);
    assert_eq!(
        std::fs::read(&db).unwrap(),
        db_bytes,
        "the source is only read"
    );

    // A new chunk in the source: exactly one more.
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        "INSERT INTO chunks (session_id, position, content) VALUES ('notes-misc', 2, 'one more');",
    )
    .unwrap();
    drop(c);
    assert_eq!(env.ok(&["import", "local-memory"])["chunks"], 1);
    env.assert_clean();
}

/// A database that is no local-memory database, or no database at all, is a clear error that
/// names the file and changes nothing; text that is not UTF-8 is repaired; a missing default
/// path is named.
#[test]
fn local_memory_bad_databases_are_refused_and_bad_text_repaired() {
    let mut env = TestEnv::new();
    let junk = env.tmp.path().join("junk.db");
    std::fs::write(
        &junk,
        b"this is not SQLite at all, just bytes\n".repeat(200),
    )
    .unwrap();
    let r = env.run(&["import", "local-memory", junk.to_str().unwrap()]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(r.error()["field"], "path");
    assert!(r.stderr.contains("junk.db"), "{}", r.stderr);
    // A database cut short (a truncated copy).
    let db = local_memory_db(&env.tmp.path().join("lm"));
    let bytes = std::fs::read(&db).unwrap();
    let cut = env.tmp.path().join("cut.db");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let r = env.run(&["import", "local-memory", cut.to_str().unwrap()]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("cut.db"), "{}", r.stderr);
    let other = env.tmp.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE notes (x TEXT);")
        .unwrap();
    let r = env.run(&["import", "local-memory", other.to_str().unwrap()]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("no sessions table"), "{}", r.stderr);
    assert!(!env.path("sessions").exists(), "nothing was written");
    // The default path, missing: the error names it.
    let r = env.run(&["import", "local-memory"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains(".local/share/local-memory/memory.db"),
        "{}",
        r.stderr
    );
    env.set_env("MEMORY_DB_PATH", "/no/such/memory.db");
    let r = env.run(&["import", "local-memory"]);
    assert!(r.stderr.contains("/no/such/memory.db"), "{}", r.stderr);

    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        "INSERT INTO chunks (session_id, position, content, metadata) VALUES ('notes-misc', 2, CAST(X'636166C3A9FFFE21' AS TEXT), NULL);
         INSERT INTO chunks (session_id, position, content) VALUES ('notes-misc', 3, '   ');
         INSERT INTO chunks (session_id, position, content) VALUES ('lost', NULL, 'no place');",
    )
    .unwrap();
    drop(c);
    let out = env.ok(&["import", "local-memory", db.to_str().unwrap()]);
    assert_eq!(out["chunks"], 8, "{out}");
    assert_eq!(out["skipped"]["empty"], 1);
    assert_eq!(out["skipped"]["no_position"], 1);
    assert_eq!(
        chunks(&env, "notes-misc")[2]["content"],
        "café\u{FFFD}\u{FFFD}!"
    );
    env.assert_clean();
}

/// The MCP memory server's graph becomes the category the design note expects: entities
/// merged by name, relations sorted and de-duplicated, the dangling one flagged; malformed
/// and unknown lines are reported. A second import adds no version.
#[test]
fn mcp_memory_jsonl_fixture_gives_the_expected_category() {
    let mut env = TestEnv::new();
    let file = env.tmp.path().join("memory.jsonl");
    std::fs::write(&file, fixture("mcp-memory-server-memory.jsonl")).unwrap();
    env.set_env("MEMORY_FILE_PATH", file.to_str().unwrap());
    let dry = env.ok(&["import", "mcp-memory-jsonl", "--dry-run"]);
    assert_eq!(dry["categories"], 1, "{dry}");
    // For people: the versions, then what was left out and why, and where.
    let human = env.run(&["import", "mcp-memory-jsonl", "--dry-run", "--human"]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(
        human.stdout.starts_with(
            "would import 0 chunks in 0 sessions from 1 file (0 already there), 1 category version"
        ),
        "{}",
        human.stdout
    );
    assert!(human.stdout.contains("left out: duplicate_relation 1, entity_merged 1, malformed_line 1, record:observation 1\n"), "{}", human.stdout);
    assert!(
        human
            .stdout
            .contains("kept, marked: dangling_relation 1\nunreadable: memory.jsonl:10\n"),
        "{}",
        human.stdout
    );
    assert!(
        env.category_data("mcp-memory-graph").is_none(),
        "a dry run writes nothing"
    );
    let out = env.ok(&["import", "mcp-memory-jsonl"]);
    assert_eq!(out["categories"], 1, "{out}");
    assert_eq!(out["bad_lines"], json!(["memory.jsonl:10"]));
    assert_eq!(out["flagged"], json!({"dangling_relation": 1}));
    for (why, n) in [
        ("entity_merged", 1),
        ("duplicate_relation", 1),
        ("malformed_line", 1),
        ("record:observation", 1),
    ] {
        assert_eq!(out["skipped"][why], n, "{why}: {out}");
    }
    let want = json!({"entities": {
       "Dana Okafor": {"entityType": "person", "observations": ["Maintains the widgets repo",
          "Prefers short answers with code first", "Works in UTC+1", "Uses the fish shell"]},
       "ManualClock": {"entityType": "component", "observations": []},
       "widget-cache": {"entityType": "project", "observations": ["Rust crate inside acme/widgets",
          "TTL flake fixed on 2026-03-02 by injecting a Clock"]}},
     "relations": [
       {"from": "Dana Okafor", "relationType": "archived", "to": "Ghost Project", "dangling": true},
       {"from": "Dana Okafor", "relationType": "maintains", "to": "widget-cache"},
       {"from": "widget-cache", "relationType": "uses in tests", "to": "ManualClock"}]});
    assert_eq!(env.category_data("mcp-memory-graph").unwrap(), want);
    let before = env.snapshot();
    let again = env.ok(&["import", "mcp-memory-jsonl"]);
    assert_eq!(again["categories"], 0, "{again}");
    assert_eq!(again["skipped"]["version_already_imported"], 1);
    assert_eq!(env.snapshot(), before);
    assert_eq!(
        env.ok(&["import", "mcp-memory-jsonl", "--dry-run"])["categories"],
        0
    );
    env.assert_clean();
}

/// An import that gives a category the user already had a new current version says so, in
/// the dry run and in the summary (JSON `replaced`, and a line for people); the old version
/// stays in history. A category the import creates is not "replaced".
#[test]
fn an_import_over_an_existing_category_names_it_as_replaced() {
    let mut env = TestEnv::new();
    let file = env.tmp.path().join("memory.jsonl");
    std::fs::write(&file, fixture("mcp-memory-server-memory.jsonl")).unwrap();
    env.set_env("MEMORY_FILE_PATH", file.to_str().unwrap());
    let fresh = env.ok(&["import", "mcp-memory-jsonl", "--dry-run"]);
    assert!(fresh.get("replaced").is_none(), "{fresh}");
    env.ok(&["write", "mcp-memory-graph", "--data", r#"{"mine": true}"#]);
    let dry = env.ok(&["import", "mcp-memory-jsonl", "--dry-run"]);
    assert_eq!(dry["replaced"], json!(["mcp-memory-graph"]), "{dry}");
    let human = env.run(&["import", "mcp-memory-jsonl", "--dry-run", "--human"]);
    assert!(
        human.stdout.contains(
            "would replace the current version of mcp-memory-graph (the old one stays in history"
        ),
        "{}",
        human.stdout
    );
    assert_eq!(
        env.category_data("mcp-memory-graph").unwrap(),
        json!({"mine": true})
    );
    let out = env.ok(&["import", "mcp-memory-jsonl"]);
    assert_eq!(out["replaced"], json!(["mcp-memory-graph"]), "{out}");
    let h = env.ok(&["history", "mcp-memory-graph"]);
    assert_eq!(h["versions"].as_array().unwrap().len(), 2, "{h}");
    // Again: nothing new, nothing replaced.
    let again = env.ok(&["import", "mcp-memory-jsonl"]);
    assert!(again.get("replaced").is_none(), "{again}");
}

/// The server writes its file without a last newline: the last line still counts. Bytes that
/// are not UTF-8 are repaired; a file with no graph at all writes nothing; without
/// $MEMORY_FILE_PATH the path must be given.
#[test]
fn mcp_memory_jsonl_edge_cases() {
    let env = TestEnv::new();
    let file = env.tmp.path().join("graph.jsonl");
    let mut bytes =
        br#"{"type":"entity","name":"A","entityType":"t","observations":["caf"#.to_vec();
    bytes.extend_from_slice(b"\xff\"]}\n");
    bytes.extend_from_slice(br#"{"type":"relation","from":"A","to":"A","relationType":"self"}"#);
    std::fs::write(&file, &bytes).unwrap();
    let out = env.ok(&["import", "mcp-memory-jsonl", file.to_str().unwrap()]);
    assert_eq!(out["categories"], 1, "{out}");
    let got = env.category_data("mcp-memory-graph").unwrap();
    assert_eq!(got["entities"]["A"]["observations"], json!(["caf\u{FFFD}"]));
    assert_eq!(
        got["relations"],
        json!([{"from": "A", "relationType": "self", "to": "A"}])
    );
    let empty = env.tmp.path().join("empty.jsonl");
    std::fs::write(&empty, b"{broken\n\n").unwrap();
    let before = env.snapshot();
    let out = env.ok(&["import", "mcp-memory-jsonl", empty.to_str().unwrap()]);
    assert_eq!(out["categories"], 0, "{out}");
    assert_eq!(out["skipped"]["empty_graph"], 1);
    assert_eq!(env.snapshot(), before);
    let r = env.run(&["import", "mcp-memory-jsonl"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(r.error()["field"], "path");
    env.assert_clean();
}

/// The mcp-memory-rs fixture: base, projects (its backup first, then the current file, with
/// the reasons of the version rows whose hashes match) and the log workflow_laptop (entries
/// with their times and ids); the torn scratch is reported and not written, the tombstone not
/// restored, a name memdir refuses skipped and named. A second run adds nothing.
#[test]
fn mcp_memory_rs_fixture_gives_the_expected_categories() {
    let mut env = TestEnv::new();
    let base = env.tmp.path().join("mem");
    materialise("mcp-memory-rs-tree.json", &base);
    std::fs::write(base.join("categories/bad\tname.json"), b"{\"a\": 1}").unwrap();
    env.set_env("MCP_MEMORY_DIR", base.to_str().unwrap());
    let dry = env.ok(&["import", "mcp-memory-rs", "--dry-run"]);
    assert_eq!(dry["categories"], 4, "{dry}");
    assert!(
        env.category_data("base").is_none(),
        "a dry run writes nothing"
    );
    let out = env.ok(&["import", "mcp-memory-rs"]);
    assert_eq!(out["categories"], 4, "{out}");
    assert_eq!(out["skipped"]["unreadable_category"], 1);
    assert_eq!(out["skipped"]["tombstone_not_restored"], 1);
    assert_eq!(out["skipped"]["invalid_category_name"], 1);
    assert_eq!(
        out["bad_lines"],
        json!(["categories/bad\tname.json", "categories/scratch.json"])
    );
    let list = env.ok(&["list"]);
    let names: Vec<&str> = list["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["base", "projects", "workflow_laptop"]);
    assert_eq!(env.category_data("base").unwrap()["role"], "maintainer");
    assert_eq!(
        env.category_data("projects").unwrap()["gizmo"]["status"],
        "paused"
    );
    let h = env.ok(&["history", "projects"]);
    let reasons = strs(h["versions"].as_array().unwrap(), |v| &v["reason"]);
    assert_eq!(
        reasons,
        [
            "imported from mcp-memory-rs: TTL fix landed (by laptop)",
            "imported from mcp-memory-rs: track widgets (by laptop)"
        ]
    );
    let old = env.ok(&["read", "projects", "--version", "1"]);
    assert_eq!(
        old["data"]["widgets"]["notes"],
        json!(["cache TTL test is flaky"])
    );
    let log = env.ok(&["read", "workflow_laptop"]);
    assert_eq!(log["meta"]["kind"], "log");
    let entries = log["data"]["entries"].as_array().unwrap();
    assert_eq!(strs(entries, |e| &e["source_id"]), ["0", "1"]);
    assert_eq!(
        strs(entries, |e| &e["ts"]),
        [
            "2026-03-01T22:00:03.511208123+00:00",
            "2026-03-02T08:12:44.100000000+00:00"
        ]
    );
    assert_eq!(entries[1]["data"]["note"], "rotated the staging API token");
    assert_eq!(log["data"]["_retention"]["max_entries"], 200);
    // The log grows by memdir's own appends after the imported entries.
    let before = env.snapshot();
    let again = env.ok(&["import", "mcp-memory-rs"]);
    assert_eq!(again["categories"], 0, "{again}");
    assert_eq!(again["skipped"]["version_already_imported"], 4);
    assert_eq!(env.snapshot(), before);
    env.ok(&[
        "append",
        "workflow_laptop",
        "--data",
        r#"{"note": "after"}"#,
    ]);
    let entries = env.ok(&["read", "workflow_laptop"])["data"]["entries"].clone();
    assert_eq!(
        entries.as_array().unwrap().last().unwrap()["data"]["note"],
        "after"
    );
    // A category changed in memdir since: its imported versions are in history, so nothing
    // comes back over it.
    env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"name": "Dana", "role": "lead"}"#,
    ]);
    assert_eq!(env.ok(&["import", "mcp-memory-rs"])["categories"], 0);
    assert_eq!(env.category_data("base").unwrap()["role"], "lead");
    // A directory that is no base directory, and a missing default, are clear errors.
    let r = env.run(&["import", "mcp-memory-rs", env.tmp.path().to_str().unwrap()]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("no categories/"), "{}", r.stderr);
    env.set_env("MCP_MEMORY_DIR", "/no/such/memory");
    let r = env.run(&["import", "mcp-memory-rs"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("/no/such/memory"), "{}", r.stderr);
    env.assert_clean();
}

/// The opencode fixture loaded into the SQLite schema of current builds (`opencode.db`, the
/// JSON of each file without its ids in `data`) gives the same chunks and keys as the JSON
/// storage; with both in the data directory, each part comes in once.
#[test]
fn opencode_database_gives_the_same_chunks_as_the_storage() {
    let env = TestEnv::new();
    let data = env.tmp.path().join("data/opencode");
    let b: Value = serde_json::from_slice(&fixture("opencode-storage-tree.json")).unwrap();
    std::fs::create_dir_all(&data).unwrap();
    let db = rusqlite::Connection::open(data.join("opencode.db")).unwrap();
    db.execute_batch(
        "CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT, vcs TEXT, name TEXT, time_created INTEGER, time_updated INTEGER);
         CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT, slug TEXT, directory TEXT, title TEXT, version TEXT, time_created INTEGER, time_updated INTEGER);
         CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, time_updated INTEGER, data TEXT);
         CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, time_created INTEGER, time_updated INTEGER, data TEXT);",
    )
    .unwrap();
    for (rel, f) in b["files"].as_object().unwrap() {
        let mut v = f["json"].clone();
        let s = |k: &str| v[k].as_str().map(String::from);
        let (id, sid, mid) = (s("id"), s("sessionID"), s("messageID"));
        let created = v["time"]["created"].as_i64();
        let kind = rel.split('/').next().unwrap();
        match kind {
            "project" => db
                .execute(
                    "INSERT INTO project (id, worktree, vcs) VALUES (?1, ?2, ?3)",
                    rusqlite::params![id, s("worktree"), s("vcs")],
                )
                .unwrap(),
            "session" => db
                .execute(
                    "INSERT INTO session (id, project_id, parent_id, directory, title, version, time_created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    rusqlite::params![id, s("projectID"), s("parentID"), s("directory"), s("title"), s("version"), created],
                )
                .unwrap(),
            _ => {
                let o = v.as_object_mut().unwrap();
                for k in ["id", "sessionID", "messageID"] {
                    o.remove(k);
                }
                let data = v.to_string();
                if kind == "message" {
                    db.execute(
                        "INSERT INTO message (id, session_id, time_created, data) VALUES (?1, ?2, ?3, ?4)",
                        rusqlite::params![id, sid, created, data],
                    )
                    .unwrap()
                } else {
                    db.execute(
                        "INSERT INTO part (id, message_id, session_id, data) VALUES (?1, ?2, ?3, ?4)",
                        rusqlite::params![id, mid, sid, data],
                    )
                    .unwrap()
                }
            }
        };
    }
    drop(db);
    let out = env.ok(&["import", "opencode", data.to_str().unwrap()]);
    assert_eq!(out["chunks"], 2, "{out}");
    assert_eq!(out["skipped"]["subagent_session"], 1);
    let from_db = chunks(&env, "opencode-ses_3a1f0c2b9ffeQmV4xT7nK2pLwZ");

    let other = TestEnv::new();
    let st = other.tmp.path().join("oc");
    materialise("opencode-storage-tree.json", &st.join("storage"));
    other.ok(&["import", "opencode", st.to_str().unwrap()]);
    let from_files = chunks(&other, "opencode-ses_3a1f0c2b9ffeQmV4xT7nK2pLwZ");
    let strip = |cs: &[Value]| -> Vec<Value> {
        cs.iter()
            .map(|c| {
                let mut m = c["metadata"].clone();
                m.as_object_mut().unwrap().remove("import");
                json!([c["content"], c["ts"], c["project"], m])
            })
            .collect()
    };
    assert_eq!(strip(&from_db), strip(&from_files));
    assert_eq!(keys(&from_db), keys(&from_files));

    // The JSON storage beside the database: nothing new.
    materialise("opencode-storage-tree.json", &data.join("storage"));
    let both = env.ok(&["import", "opencode", data.to_str().unwrap()]);
    assert_eq!(
        (both["chunks"].clone(), both["existing"].clone()),
        (json!(0), json!(4))
    );
    env.assert_clean();
}

/// Importing categories needs a device that may write every category (the source names them,
/// unknown before it is read); a device with delete rights but not that is refused and no byte
/// changes, while it may still dry-run and import sessions; an admin device imports, as the
/// actor.
#[test]
fn importing_categories_needs_an_admin_device() {
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_DEVICE", "laptop");
    env.ok(&["write", "base", "--data", "{\"x\": 1}"]);
    let cfg = env.tmp.path().join("acl.toml");
    std::fs::write(
        &cfg,
        "[acl]\nadmin_devices = [\"laptop\"]\n\n[[acl.rules]]\ndevice = \"cleaner\"\nwrite = [\"mcp-*\"]\ningest = [\"*\"]\ndelete = true\n",
    )
    .unwrap();
    env.set_env("MEMDIR_CONFIG", cfg.to_str().unwrap());
    let file = env.tmp.path().join("memory.jsonl");
    std::fs::write(&file, fixture("mcp-memory-server-memory.jsonl")).unwrap();
    let db = local_memory_db(&env.tmp.path().join("lm"));
    env.set_env("MEMDIR_DEVICE", "cleaner");
    let before = env.snapshot();
    let e = env.fail(&["import", "mcp-memory-jsonl", file.to_str().unwrap()], 12);
    assert_eq!(e["code"], "forbidden", "{e}");
    assert_eq!(e["device"], "cleaner", "{e}");
    assert_eq!(env.snapshot(), before);
    // A dry run only needs to read every category, which no rule denies this device.
    let dry = env.ok(&[
        "import",
        "mcp-memory-jsonl",
        file.to_str().unwrap(),
        "--dry-run",
    ]);
    assert_eq!(dry["categories"], 1);
    assert_eq!(env.snapshot(), before);
    assert_eq!(
        env.ok(&["import", "local-memory", db.to_str().unwrap()])["chunks"],
        7
    );
    env.set_env("MEMDIR_DEVICE", "laptop");
    assert_eq!(
        env.ok(&["import", "mcp-memory-jsonl", file.to_str().unwrap()])["categories"],
        1
    );
    assert_eq!(
        env.ok(&["read", "mcp-memory-graph"])["meta"]["updated_by"],
        "laptop"
    );
}
