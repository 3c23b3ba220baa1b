//! The CLI, command by command: every round trip and every error path, driving the built
//! binary the way a user or a hook does.

use serde_json::{Value, json};

use crate::util::{TestEnv, truth_files};

/// A 64-digit hash that no content has.
const NO_SUCH_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// blake3 of a file inside the store, as memdir reports it.
fn hash_of(env: &TestEnv, rel: &str) -> String {
    blake3::hash(&std::fs::read(env.path(rel)).unwrap())
        .to_hex()
        .to_string()
}

/// History file names of a category, oldest first.
fn history_files(env: &TestEnv, stem: &str) -> Vec<String> {
    let dir = env.path(&format!("history/{stem}"));
    let mut v: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// Every file and directory under the test's temp root that is not inside the store (the
/// empty `home/` aside).
fn entries_outside_store(env: &TestEnv) -> Vec<String> {
    let root = env.tmp.path();
    walkdir::WalkDir::new(root)
        .min_depth(1)
        .into_iter()
        .filter_entry(|e| e.path() != env.dir)
        .flatten()
        .map(|e| e.path().strip_prefix(root).unwrap().display().to_string())
        .filter(|p| p != "home")
        .collect()
}

/// Runs with stdin and requires exit `code`; returns the error object.
fn fail_stdin(env: &TestEnv, args: &[&str], input: &[u8], code: i32) -> Value {
    let r = env.run_stdin(args, input);
    if r.code != code {
        env.dump(&r);
        panic!("`{}` exited {}, expected {code}", r.cmd, r.code);
    }
    r.error()
}

/// Whether `s` is an HLC stamp `YYYYMMDDTHHMMSSmmmZ-CCCC`.
fn is_hlc(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 24
        && b.iter().enumerate().all(|(i, c)| match i {
            8 => *c == b'T',
            18 => *c == b'Z',
            19 => *c == b'-',
            _ => c.is_ascii_digit(),
        })
}

fn names(list: &Value) -> Vec<String> {
    list["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

fn contents(fetch: &Value) -> Vec<String> {
    fetch["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["content"].as_str().unwrap().to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------------

#[test]
fn write_read_round_trip() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"name": "Ada"}"#]);
    let r = env.ok(&["read", "base"]);
    assert_eq!(r["data"], json!({"name": "Ada"}));
    assert_eq!(r["meta"]["version"], 1);
    env.assert_clean();
}

#[test]
fn init_creates_gitignore_for_memdir_and_lf_gitattributes() {
    let env = TestEnv::new();
    let r = env.ok(&["init"]);
    assert_eq!(r["created"], true);
    let gitignore = env.read(".gitignore");
    assert!(
        gitignore.lines().any(|l| l.trim() == ".memdir/"),
        "{gitignore}"
    );
    let attrs = env.read(".gitattributes");
    assert!(
        attrs.lines().any(|l| l.trim() == "*.json text eol=lf"),
        "{attrs}"
    );
    assert!(
        attrs.lines().any(|l| l.trim() == "*.jsonl text eol=lf"),
        "{attrs}"
    );
    for d in ["categories", "history", "sessions", ".memdir"] {
        assert!(env.path(d).is_dir(), "{d} missing");
    }
    // A second init changes nothing and says so.
    let before = truth_files(&env.dir);
    let r = env.ok(&["init"]);
    assert_eq!(r["created"], false);
    assert_eq!(truth_files(&env.dir), before);
    env.assert_clean();
}

#[test]
fn init_keeps_a_user_edited_gitignore() {
    let env = TestEnv::new();
    env.ok(&["init"]);
    env.write_file(".gitignore", ".memdir/\nscratch/\n");
    env.ok(&["init"]);
    assert_eq!(env.read(".gitignore"), ".memdir/\nscratch/\n");
}

#[test]
fn reads_on_a_store_that_does_not_exist_answer_empty_and_create_nothing() {
    let env = TestEnv::new();
    let s = env.ok(&["status"]);
    assert_eq!(s["exists"], false);
    assert_eq!(s["sessions"], 0);
    assert_eq!(s["chunks"], 0);
    assert_eq!(s["categories"], 0);
    let l = env.ok(&["list"]);
    assert_eq!(l["count"], 0);
    assert_eq!(l["categories"], json!([]));
    let o = env.ok(&["overview"]);
    assert_eq!(o["sessions"], json!([]));
    assert_eq!(o["total"], 0);
    let e = env.fail(&["read", "base"], 4);
    assert_eq!(e["code"], "not_found");
    assert_eq!(e["available"], json!([]));
    env.fail(&["read", "base", "--version", "1"], 4);
    env.fail(&["fetch", "s1"], 4);
    env.fail(&["history", "base"], 4);
    env.fail(&["diff", "base"], 4);
    env.fail(&["delete", "base"], 4);
    env.fail(&["restore", "base", "--version", "1"], 4);
    let c = env.ok(&["compact"]);
    assert_eq!(c["removed"], 0);
    let v = env.ok(&["verify-store"]);
    assert_eq!(v["ok"], true);
    assert_eq!(v["exists"], false);
    assert!(!env.dir.exists(), "a read created the memory directory");
    assert_eq!(entries_outside_store(&env), Vec::<String>::new());
}

#[test]
fn first_write_without_init_creates_the_skeleton() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "hello"]);
    assert!(env.path(".gitignore").is_file());
    assert!(env.path(".gitattributes").is_file());
    assert!(env.path(".memdir/replica").is_file());
    env.assert_clean();
}

// ---------------------------------------------------------------------------------------------
// Ingest and fetch
// ---------------------------------------------------------------------------------------------

#[test]
fn ingest_text_file_and_stdin_append_positions_in_order() {
    let env = TestEnv::new();
    let a = env.ok(&[
        "ingest",
        "--session-id",
        "s1",
        "--project",
        "web",
        "--metadata",
        r#"{"role": "user"}"#,
        "--text",
        "the pool timed out",
    ]);
    assert_eq!(a["session_id"], "s1");
    assert_eq!(a["position"], 0);
    assert_eq!(a["ok"], true);
    let file = env.tmp.path().join("note.txt");
    std::fs::write(&file, "from a file\n").unwrap();
    let b = env.ok(&[
        "ingest",
        "--session-id",
        "s1",
        "--file",
        file.to_str().unwrap(),
    ]);
    assert_eq!(b["position"], 1);
    let c = env.ok_stdin(&["ingest", "--session-id", "s1"], b"from stdin");
    assert_eq!(c["position"], 2);

    let f = env.ok(&["fetch", "s1"]);
    assert_eq!(f["total"], 3);
    assert_eq!(
        contents(&f),
        vec!["the pool timed out", "from a file\n", "from stdin"]
    );
    let first = &f["chunks"][0];
    assert_eq!(first["position"], 0);
    assert_eq!(first["project"], "web");
    assert_eq!(first["metadata"], json!({"role": "user"}));
    assert_eq!(first["chunk_id"], a["chunk_id"]);
    assert!(is_hlc(first["hlc"].as_str().unwrap()), "{first}");

    // The segment is one JSON object per line with the documented fields, seq 0..n-1.
    let seg = env.segment_of("s1");
    let text = std::fs::read_to_string(&seg).unwrap();
    assert!(text.ends_with('\n'));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    for (i, l) in lines.iter().enumerate() {
        let keys: Vec<&String> = l.as_object().unwrap().keys().collect();
        let mut want = vec![
            "session_id",
            "replica",
            "seq",
            "hlc",
            "ts",
            "project",
            "metadata",
            "content",
        ];
        want.sort();
        let mut got: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
        got.sort();
        assert_eq!(got, want);
        assert_eq!(l["seq"], i);
        assert_eq!(l["session_id"], "s1");
    }
    let replica = env.ok(&["status"])["replica"].as_str().unwrap().to_string();
    assert_eq!(
        seg.file_name().unwrap().to_string_lossy(),
        format!("{replica}.jsonl")
    );
    env.assert_clean();
}

#[test]
fn ingest_jsonl_batch_from_file_and_stdin() {
    let env = TestEnv::new();
    let path = env.tmp.path().join("chunks.jsonl");
    std::fs::write(
        &path,
        concat!(
            r#"{"session_id": "a", "content": "a0", "project": "p"}"#,
            "\n\n",
            r#"{"session_id": "b", "content": "b0", "metadata": {"k": 1}}"#,
            "\n",
            r#"{"session_id": "a", "content": "a1"}"#,
            "\n",
        ),
    )
    .unwrap();
    let r = env.ok(&["ingest", "--jsonl", path.to_str().unwrap()]);
    assert_eq!(r["ok"], true);
    assert_eq!(r["count"], 3);
    let rows = r["chunks"].as_array().unwrap();
    let got: Vec<(String, u64)> = rows
        .iter()
        .map(|c| {
            (
                c["session_id"].as_str().unwrap().to_string(),
                c["position"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, vec![("a".into(), 0), ("b".into(), 0), ("a".into(), 1)]);
    // --session-id and --project fill lines that lack them.
    let r = env.ok_stdin(
        &[
            "ingest",
            "--jsonl",
            "-",
            "--session-id",
            "b",
            "--project",
            "q",
        ],
        b"{\"content\": \"b1\"}\n{\"content\": \"c0\", \"session_id\": \"c\"}\n",
    );
    assert_eq!(r["count"], 2);
    assert_eq!(r["chunks"][0]["position"], 1);
    assert_eq!(contents(&env.ok(&["fetch", "a"])), vec!["a0", "a1"]);
    let b = env.ok(&["fetch", "b"]);
    assert_eq!(contents(&b), vec!["b0", "b1"]);
    assert_eq!(b["chunks"][0]["metadata"], json!({"k": 1}));
    assert_eq!(b["chunks"][1]["project"], "q");
    assert_eq!(contents(&env.ok(&["fetch", "c"])), vec!["c0"]);
    env.assert_clean();
}

#[test]
fn jsonl_batch_with_a_bad_line_anywhere_writes_nothing() {
    let good = r#"{"session_id": "s", "content": "ok"}"#;
    let cases: Vec<(&str, String, u64)> = vec![
        ("malformed first", format!("{{nope\n{good}\n{good}\n"), 1),
        ("malformed middle", format!("{good}\n{{nope\n{good}\n"), 2),
        ("malformed last", format!("{good}\n{good}\nnot json\n"), 3),
        (
            "missing content",
            format!("{good}\n{{\"session_id\": \"s\"}}\n"),
            2,
        ),
        (
            "unknown field",
            format!("{good}\n{{\"session_id\": \"s\", \"content\": \"x\", \"bogus\": 1}}\n"),
            2,
        ),
        ("not an object", format!("{good}\n[1, 2]\n"), 2),
    ];
    for (what, input, line) in cases {
        let env = TestEnv::new();
        env.ok(&["ingest", "--session-id", "s", "--text", "before"]);
        let before = std::fs::read(env.segment_of("s")).unwrap();
        let e = fail_stdin(&env, &["ingest", "--jsonl", "-"], input.as_bytes(), 3);
        assert_eq!(e["code"], "invalid", "{what}: {e}");
        assert_eq!(e["line"], line, "{what}: {e}");
        assert_eq!(
            std::fs::read(env.segment_of("s")).unwrap(),
            before,
            "{what}: the segment changed"
        );
        assert_eq!(contents(&env.ok(&["fetch", "s"])), vec!["before"], "{what}");
        env.assert_clean();
    }
}

#[test]
fn jsonl_validation_errors_name_the_line_and_write_nothing() {
    // Lines 1 and 3 are fine; line 4 (after a blank line) fails validation in the service, not
    // in the parser: the error must still name line 4 and nothing of the batch may be written.
    let env = TestEnv::new();
    let input = concat!(
        r#"{"session_id": "s", "content": "one"}"#,
        "\n\n",
        r#"{"session_id": "t", "content": "two"}"#,
        "\n",
        r#"{"session_id": "s", "content": "   "}"#,
        "\n",
    );
    let e = fail_stdin(&env, &["ingest", "--jsonl", "-"], input.as_bytes(), 3);
    assert_eq!(e["field"], "content", "{e}");
    env.fail(&["fetch", "s"], 4);
    env.fail(&["fetch", "t"], 4);
    assert_eq!(e["line"], 4, "jsonl errors must carry the line number: {e}");
}

#[test]
fn jsonl_batch_with_an_oversized_chunk_writes_nothing() {
    let env = TestEnv::new();
    let big = "x".repeat(256 * 1024 + 1);
    let input = format!(
        "{}\n{}\n",
        json!({"session_id": "s", "content": "small"}),
        json!({"session_id": "s", "content": big})
    );
    let e = fail_stdin(&env, &["ingest", "--jsonl", "-"], input.as_bytes(), 9);
    assert_eq!(e["code"], "too_large");
    env.fail(&["fetch", "s"], 4);
    assert!(
        !env.path("sessions/s").exists(),
        "a chunk of the refused batch reached the disk"
    );
}

#[test]
fn ingest_errors_exit_3_and_write_nothing() {
    let env = TestEnv::new();
    env.ok(&["init"]);
    let before = truth_files(&env.dir);
    let e = env.fail(&["ingest", "--text", "no session"], 3);
    assert_eq!(e["field"], "session_id");
    let e = fail_stdin(&env, &["ingest", "--session-id", "s"], b"", 3);
    assert_eq!(e["field"], "content");
    let e = env.fail(&["ingest", "--session-id", "s", "--text", "  \n "], 3);
    assert_eq!(e["field"], "content");
    let e = env.fail(
        &[
            "ingest",
            "--session-id",
            "s",
            "--metadata",
            "{",
            "--text",
            "x",
        ],
        3,
    );
    assert_eq!(e["field"], "metadata");
    let e = env.fail(
        &[
            "ingest",
            "--session-id",
            "s",
            "--metadata",
            "[1]",
            "--text",
            "x",
        ],
        3,
    );
    assert_eq!(e["field"], "metadata");
    let e = fail_stdin(&env, &["ingest", "--jsonl", "-"], b"\n\n", 3);
    assert_eq!(e["code"], "invalid");
    let e = env.fail(
        &["ingest", "--session-id", "s", "--file", "/nonexistent/file"],
        3,
    );
    assert_eq!(e["code"], "invalid");
    let e = fail_stdin(
        &env,
        &["ingest", "--session-id", "s"],
        &[0xff, 0xfe, b'a'],
        3,
    );
    assert_eq!(e["code"], "invalid");
    assert_eq!(truth_files(&env.dir), before);
    env.assert_clean();
}

#[test]
fn oversized_chunk_content_is_refused_with_exit_9() {
    let env = TestEnv::new();
    let limit = 256 * 1024;
    let path = env.tmp.path().join("big.txt");
    std::fs::write(&path, "x".repeat(limit + 1)).unwrap();
    let e = env.fail(
        &[
            "ingest",
            "--session-id",
            "s",
            "--file",
            path.to_str().unwrap(),
        ],
        9,
    );
    assert_eq!(e["code"], "too_large");
    assert_eq!(e["field"], "content");
    assert_eq!(e["limit"], limit);
    assert_eq!(e["size"], limit + 1);
    env.fail(&["fetch", "s"], 4);
    // Exactly at the limit is fine.
    std::fs::write(&path, "x".repeat(limit)).unwrap();
    env.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--file",
        path.to_str().unwrap(),
    ]);
    let f = env.ok(&["fetch", "s"]);
    assert_eq!(f["chunks"][0]["content"].as_str().unwrap().len(), limit);
    env.assert_clean();
}

#[test]
fn fetch_pages_with_next_position() {
    let env = TestEnv::new();
    let lines: String = (0..7)
        .map(|i| {
            format!(
                "{}\n",
                json!({"session_id": "s", "content": format!("c{i}")})
            )
        })
        .collect();
    env.ok_stdin(&["ingest", "--jsonl", "-"], lines.as_bytes());
    let p1 = env.ok(&["fetch", "s", "--limit", "3"]);
    assert_eq!(p1["total"], 7);
    assert_eq!(p1["position"], 0);
    assert_eq!(contents(&p1), vec!["c0", "c1", "c2"]);
    assert_eq!(p1["next_position"], 3);
    let p2 = env.ok(&["fetch", "s", "--position", "3", "--limit", "3"]);
    assert_eq!(contents(&p2), vec!["c3", "c4", "c5"]);
    assert_eq!(p2["chunks"][0]["position"], 3);
    assert_eq!(p2["next_position"], 6);
    let p3 = env.ok(&["fetch", "s", "--position", "6", "--limit", "3"]);
    assert_eq!(contents(&p3), vec!["c6"]);
    assert_eq!(p3["next_position"], Value::Null);
    let past = env.ok(&["fetch", "s", "--position", "50"]);
    assert_eq!(past["chunks"], json!([]));
    assert_eq!(past["next_position"], Value::Null);
    let all = env.ok(&["fetch", "s", "--limit", "1000"]);
    assert_eq!(all["chunks"].as_array().unwrap().len(), 7);
    for (i, c) in all["chunks"].as_array().unwrap().iter().enumerate() {
        assert_eq!(c["position"], i);
    }
}

#[test]
fn limits_out_of_range_exit_3() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "x"]);
    env.ok(&["write", "base", "--data", "{}"]);
    for args in [
        vec!["fetch", "s", "--limit", "0"],
        vec!["fetch", "s", "--limit", "1001"],
        vec!["fetch", "nope", "--limit", "0"],
        vec!["overview", "--limit", "0"],
        vec!["overview", "--limit", "1001"],
        vec!["history", "base", "--limit", "0"],
        vec!["history", "base", "--limit", "1001"],
        vec!["compact", "--keep", "0"],
    ] {
        let e = env.fail(&args, 3);
        assert_eq!(e["code"], "invalid", "{args:?}");
        assert!(e["field"].is_string(), "{args:?}: {e}");
    }
    env.ok(&["fetch", "s", "--limit", "1000"]);
    env.ok(&["overview", "--limit", "1000"]);
    env.ok(&["history", "base", "--limit", "1000"]);
}

#[test]
fn fetch_of_an_unknown_session_exits_4() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "x"]);
    let e = env.fail(&["fetch", "t"], 4);
    assert_eq!(e["code"], "not_found");
    assert_eq!(e["session_id"], "t");
}

// ---------------------------------------------------------------------------------------------
// Overview
// ---------------------------------------------------------------------------------------------

#[test]
fn overview_lists_sessions_newest_first_with_days_project_and_paging() {
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_CLOCK", "2026-01-01T00:00:00Z");
    env.ok(&[
        "ingest",
        "--session-id",
        "old",
        "--project",
        "web",
        "--metadata",
        r#"{"title": "Old talk"}"#,
        "--text",
        "first line\nsecond line",
    ]);
    env.set_env("MEMDIR_CLOCK", "2026-01-10T00:00:00Z");
    env.ok(&[
        "ingest",
        "--session-id",
        "new",
        "--project",
        "api",
        "--text",
        "\n  hello there\nmore",
    ]);
    env.set_env("MEMDIR_CLOCK", "2026-01-10T01:00:00Z");
    env.ok(&["ingest", "--session-id", "new", "--text", "second chunk"]);
    env.set_env("MEMDIR_CLOCK", "2026-01-05T00:00:00Z");
    env.ok(&[
        "ingest",
        "--session-id",
        "mid",
        "--project",
        "web",
        "--text",
        "m",
    ]);

    env.set_env("MEMDIR_CLOCK", "2026-01-11T00:00:00Z");
    // The default window is the last 7 days on every surface; 0 lists all.
    let recent = env.ok(&["overview"]);
    assert_eq!(recent["total"], 2, "{recent}");
    let all = env.ok(&["overview", "--days", "0"]);
    assert_eq!(all["total"], 3);
    let ids: Vec<&str> = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["new", "mid", "old"]);
    let new = &all["sessions"][0];
    assert_eq!(new["title"], "hello there");
    assert_eq!(new["message_count"], 2);
    assert_eq!(new["project"], "api");
    assert_eq!(new["start_time"], "2026-01-10T00:00:00.000Z");
    assert_eq!(new["last_active"], "2026-01-10T01:00:00.000Z");
    let old = &all["sessions"][2];
    assert_eq!(old["title"], "Old talk");
    assert_eq!(old["message_count"], 1);
    assert_eq!(old["start_time"], "2026-01-01T00:00:00.000Z");

    let recent = env.ok(&["overview", "--days", "3"]);
    assert_eq!(recent["total"], 1);
    assert_eq!(recent["sessions"][0]["id"], "new");
    let week = env.ok(&["overview", "--days", "7"]);
    assert_eq!(week["total"], 2);

    let web = env.ok(&["overview", "--days", "0", "--project", "web"]);
    let ids: Vec<&str> = web["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["mid", "old"]);
    let none = env.ok(&["overview", "--project", "nope"]);
    assert_eq!(none["sessions"], json!([]));

    let p1 = env.ok(&["overview", "--days", "0", "--limit", "2"]);
    assert_eq!(p1["sessions"].as_array().unwrap().len(), 2);
    assert_eq!(p1["next_offset"], 2);
    let p2 = env.ok(&["overview", "--days", "0", "--limit", "2", "--offset", "2"]);
    assert_eq!(p2["sessions"][0]["id"], "old");
    assert_eq!(p2["next_offset"], Value::Null);
}

// ---------------------------------------------------------------------------------------------
// Categories: read and write
// ---------------------------------------------------------------------------------------------

#[test]
fn read_meta_describes_the_file_and_leaves_user_keys_named_hash_and_meta_alone() {
    let env = TestEnv::new();
    let data = json!({"name": "Ada", "hash": "mine", "meta": {"x": 1}, "version": "v0"});
    let w = env.ok(&["write", "base", "--data", &data.to_string()]);
    let r = env.ok(&["read", "base"]);
    assert_eq!(r["data"], data);
    let meta = &r["meta"];
    let file_hash = hash_of(&env, "categories/base.json");
    assert_eq!(meta["hash"], file_hash.as_str());
    assert_eq!(w["new_hash"], file_hash.as_str());
    assert_eq!(meta["version"], 1);
    assert_eq!(meta["updated_by"], "test-device");
    assert_eq!(
        meta["size_bytes"],
        std::fs::metadata(env.path("categories/base.json"))
            .unwrap()
            .len()
    );
    assert_eq!(meta["updated_at"], w["timestamp"]);
    assert_eq!(meta["kind"], "document");
    // The file is pretty, key-sorted JSON with a trailing newline.
    assert_eq!(
        env.read("categories/base.json"),
        "{\n  \"hash\": \"mine\",\n  \"meta\": {\n    \"x\": 1\n  },\n  \"name\": \"Ada\",\n  \"version\": \"v0\"\n}\n"
    );
}

#[test]
fn read_fields_selects_top_level_keys_and_reports_missing_ones() {
    let env = TestEnv::new();
    env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"a": 1, "b": {"c": 2}, "d": 3}"#,
    ]);
    let r = env.ok(&["read", "base", "--fields", "a, b,zzz"]);
    assert_eq!(r["data"], json!({"a": 1, "b": {"c": 2}}));
    assert_eq!(r["missing_fields"], json!(["zzz"]));
    // The meta still describes the whole file.
    assert_eq!(
        r["meta"]["hash"],
        hash_of(&env, "categories/base.json").as_str()
    );
}

#[test]
fn read_version_returns_old_content() {
    let env = TestEnv::new();
    let w1 = env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    env.ok(&["write", "base", "--data", r#"{"v": 2}"#]);
    let r = env.ok(&["read", "base", "--version", "1"]);
    assert_eq!(r["data"], json!({"v": 1}));
    assert_eq!(r["meta"]["version"], 1);
    assert_eq!(r["meta"]["hash"], w1["new_hash"]);
    assert_eq!(r["meta"]["current"], false);
    let by_id = env.ok(&[
        "read",
        "base",
        "--version",
        w1["version_id"].as_str().unwrap(),
    ]);
    assert_eq!(by_id["data"], json!({"v": 1}));
    let e = env.fail(&["read", "base", "--version", "9"], 4);
    assert_eq!(e["versions"], json!([1, 2]));
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 2}));
}

#[test]
fn write_replaces_and_merge_patches_with_null_deleting_keys() {
    let env = TestEnv::new();
    env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"a": 1, "b": 2, "c": {"x": 1}}"#,
    ]);
    let m = env.ok(&[
        "write",
        "base",
        "--merge",
        "--data",
        r#"{"b": null, "c": {"y": 2}, "d": 4}"#,
        "--reason",
        "patch",
    ]);
    assert_eq!(m["op"], "merge");
    assert_eq!(m["version"], 2);
    // Merge is per top-level key: c is replaced whole, b is gone.
    assert_eq!(
        env.ok(&["read", "base"])["data"],
        json!({"a": 1, "c": {"y": 2}, "d": 4})
    );
    let w = env.ok(&["write", "base", "--data", r#"{"only": true}"#]);
    assert_eq!(w["op"], "write");
    assert_eq!(w["previous_hash"], m["new_hash"]);
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"only": true}));
    // Merging into a category that does not exist creates it; nulls are simply dropped.
    env.ok(&[
        "write",
        "fresh",
        "--merge",
        "--data",
        r#"{"k": 1, "gone": null}"#,
    ]);
    assert_eq!(env.ok(&["read", "fresh"])["data"], json!({"k": 1}));
    let h = env.ok(&["history", "base"]);
    assert_eq!(h["versions"][1]["reason"], "patch");
    env.assert_clean();
}

#[test]
fn byte_identical_write_is_unchanged_and_adds_no_history() {
    let env = TestEnv::new();
    let w = env.ok(&["write", "base", "--data", r#"{"a": 1, "b": [1, 2]}"#]);
    let files = history_files(&env, "base");
    assert_eq!(files.len(), 1);
    // Same content, other key order and spacing: the canonical bytes are the same.
    let again = env.ok(&["write", "base", "--data", r#"{ "b":[1,2],"a":1 }"#]);
    assert_eq!(again["unchanged"], true);
    assert_eq!(again["new_hash"], w["new_hash"]);
    assert_eq!(again["version"], 1);
    let merge = env.ok(&["write", "base", "--merge", "--data", r#"{"a": 1}"#]);
    assert_eq!(merge["unchanged"], true);
    assert_eq!(history_files(&env, "base"), files);
    assert_eq!(env.ok(&["history", "base"])["total"], 1);
}

#[test]
fn write_reads_data_from_a_file_and_from_stdin() {
    let env = TestEnv::new();
    let path = env.tmp.path().join("data.json");
    std::fs::write(&path, r#"{"from": "file"}"#).unwrap();
    env.ok(&["write", "a", "--file", path.to_str().unwrap()]);
    assert_eq!(env.ok(&["read", "a"])["data"], json!({"from": "file"}));
    env.ok_stdin(&["write", "b", "--file", "-"], br#"{"from": "stdin"}"#);
    assert_eq!(env.ok(&["read", "b"])["data"], json!({"from": "stdin"}));
    env.ok_stdin(&["append", "c", "--file", "-"], br#"{"from": "stdin"}"#);
    assert_eq!(
        env.ok(&["read", "c"])["data"]["entries"][0]["data"],
        json!({"from": "stdin"})
    );
}

#[test]
fn malformed_or_non_object_data_exits_3_and_changes_nothing() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"keep": 1}"#]);
    let before = truth_files(&env.dir);
    let hash = hash_of(&env, "categories/base.json");
    for bad in ["{", "{\"a\": }", "", "nul", "{'a': 1}"] {
        let e = env.fail(&["write", "base", "--data", bad], 3);
        assert_eq!(e["code"], "invalid", "{bad:?}");
        assert_eq!(e["field"], "data", "{bad:?}");
    }
    for not_object in ["[1, 2]", "\"text\"", "42", "null", "true"] {
        let e = env.fail(&["write", "base", "--data", not_object], 3);
        assert_eq!(e["field"], "data", "{not_object}");
        let e = env.fail(&["write", "base", "--merge", "--data", not_object], 3);
        assert_eq!(e["field"], "data", "{not_object}");
        let e = env.fail(&["append", "log", "--data", not_object], 3);
        assert_eq!(e["field"], "data", "{not_object}");
    }
    env.fail(&["write", "base", "--data", r#"{"_kind": "log"}"#], 3);
    env.fail(
        &["write", "base", "--expected-hash", "xyz", "--data", "{}"],
        3,
    );
    env.fail(&["delete", "base", "--expected-hash", "xyz"], 3);
    let e = env.fail(
        &[
            "write",
            "base",
            "--data",
            "{}",
            "--reason",
            &"r".repeat(1001),
        ],
        9,
    );
    assert_eq!(e["field"], "reason");
    assert_eq!(truth_files(&env.dir), before);
    assert_eq!(hash_of(&env, "categories/base.json"), hash);
    env.assert_clean();
}

#[test]
fn oversized_category_is_refused_with_exit_9() {
    let env = TestEnv::new();
    let path = env.tmp.path().join("big.json");
    std::fs::write(&path, json!({"k": "x".repeat(1024 * 1024)}).to_string()).unwrap();
    let e = env.fail(&["write", "big", "--file", path.to_str().unwrap()], 9);
    assert_eq!(e["code"], "too_large");
    assert_eq!(e["limit"], 1024 * 1024);
    assert!(!env.path("categories/big.json").exists());
    assert!(history_files(&env, "big").is_empty());
    // Growing a category past the limit by merges is refused too.
    let half = json!({"a": "x".repeat(600 * 1024)}).to_string();
    std::fs::write(&path, &half).unwrap();
    env.ok(&["write", "big", "--file", path.to_str().unwrap()]);
    std::fs::write(&path, json!({"b": "y".repeat(600 * 1024)}).to_string()).unwrap();
    let before = hash_of(&env, "categories/big.json");
    env.fail(
        &["write", "big", "--merge", "--file", path.to_str().unwrap()],
        9,
    );
    assert_eq!(hash_of(&env, "categories/big.json"), before);
    assert_eq!(history_files(&env, "big").len(), 1);
    env.assert_clean();
}

// ---------------------------------------------------------------------------------------------
// Compare-and-swap
// ---------------------------------------------------------------------------------------------

#[test]
fn expected_hash_mismatch_is_a_conflict_with_the_current_hash() {
    let env = TestEnv::new();
    let w1 = env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    let h1 = w1["new_hash"].as_str().unwrap().to_string();
    let w2 = env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"v": 2}"#,
        "--expected-hash",
        &h1,
    ]);
    assert_eq!(w2["previous_hash"], h1.as_str());
    let h2 = w2["new_hash"].as_str().unwrap().to_string();
    // A stale hash loses, and learns the current one.
    let e = env.fail(
        &[
            "write",
            "base",
            "--data",
            r#"{"v": 3}"#,
            "--expected-hash",
            &h1,
        ],
        5,
    );
    assert_eq!(e["code"], "conflict");
    assert_eq!(e["current_hash"], h2.as_str());
    let e = env.fail(
        &[
            "write",
            "base",
            "--merge",
            "--data",
            r#"{"v": 3}"#,
            "--expected-hash",
            NO_SUCH_HASH,
        ],
        5,
    );
    assert_eq!(e["current_hash"], h2.as_str());
    let e = env.fail(&["delete", "base", "--expected-hash", &h1], 5);
    assert_eq!(e["current_hash"], h2.as_str());
    let e = env.fail(
        &["restore", "base", "--version", "1", "--expected-hash", &h1],
        5,
    );
    assert_eq!(e["current_hash"], h2.as_str());
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 2}));
    assert_eq!(history_files(&env, "base").len(), 2);
    // Retrying with the hash from the error succeeds.
    let w3 = env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"v": 3}"#,
        "--expected-hash",
        &h2,
    ]);
    let h3 = w3["new_hash"].as_str().unwrap().to_string();
    env.ok(&["delete", "base", "--expected-hash", &h3]);
    assert!(!env.path("categories/base.json").exists());
    env.assert_clean();
}

#[test]
fn expected_hash_absent_creates_only_if_the_category_does_not_exist() {
    let env = TestEnv::new();
    let w = env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"v": 1}"#,
        "--expected-hash",
        "absent",
    ]);
    assert_eq!(w["previous_hash"], Value::Null);
    let e = env.fail(
        &[
            "write",
            "base",
            "--data",
            r#"{"v": 2}"#,
            "--expected-hash",
            "absent",
        ],
        5,
    );
    assert_eq!(e["current_hash"], w["new_hash"]);
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 1}));
    // A hash for a category that does not exist is a conflict too, with no current hash.
    let e = env.fail(
        &[
            "write",
            "other",
            "--data",
            "{}",
            "--expected-hash",
            NO_SUCH_HASH,
        ],
        5,
    );
    assert_eq!(e["current_hash"], Value::Null);
    assert!(!env.path("categories/other.json").exists());
    // After a delete, "absent" holds again.
    env.ok(&["delete", "base"]);
    env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"v": 3}"#,
        "--expected-hash",
        "absent",
    ]);
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 3}));
    env.assert_clean();
}

// ---------------------------------------------------------------------------------------------
// Logs
// ---------------------------------------------------------------------------------------------

#[test]
fn append_creates_a_log_with_sorted_ids_and_default_retention() {
    let env = TestEnv::new();
    let mut ids = Vec::new();
    for i in 0..3 {
        let r = env.ok(&[
            "append",
            "journal",
            "--data",
            &json!({"event": i}).to_string(),
        ]);
        assert_eq!(r["entries"], i + 1);
        assert_eq!(r["dropped"], 0);
        ids.push(r["id"].as_str().unwrap().to_string());
    }
    let replica = env.ok(&["status"])["replica"].as_str().unwrap().to_string();
    let log: Value = serde_json::from_str(&env.read("categories/journal.json")).unwrap();
    let keys: Vec<&String> = log.as_object().unwrap().keys().collect();
    assert_eq!(keys, vec!["_kind", "_retention", "entries"]);
    assert_eq!(log["_kind"], "log");
    assert_eq!(log["_retention"]["max_entries"], 200);
    assert_eq!(log["_retention"]["max_age_days"], Value::Null);
    let entries = log["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 3);
    for (i, e) in entries.iter().enumerate() {
        let mut k: Vec<&String> = e.as_object().unwrap().keys().collect();
        k.sort();
        assert_eq!(k, vec!["data", "id", "ts"]);
        assert_eq!(e["data"], json!({"event": i}));
        let id = e["id"].as_str().unwrap();
        assert_eq!(id, ids[i]);
        assert!(is_hlc(&id[..24]), "{id}");
        assert_eq!(&id[24..], format!("-{replica}"), "{id}");
    }
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, ids, "ids must be unique and sorted");
    let r = env.ok(&["read", "journal"]);
    assert_eq!(r["meta"]["kind"], "log");
    let l = env.ok(&["list"]);
    assert_eq!(l["categories"][0]["kind"], "log");
    assert_eq!(
        env.ok(&["history", "journal"])["versions"][0]["op"],
        "append"
    );
    env.assert_clean();
}

#[test]
fn log_retention_max_entries_keeps_the_newest() {
    let env = TestEnv::new();
    for i in 0..3 {
        env.ok(&["append", "log", "--data", &json!({"n": i}).to_string()]);
    }
    let r = env.ok(&[
        "append",
        "log",
        "--data",
        r#"{"n": 3}"#,
        "--max-entries",
        "2",
    ]);
    assert_eq!(r["entries"], 2);
    assert_eq!(r["dropped"], 2);
    let log = env.ok(&["read", "log"])["data"].clone();
    assert_eq!(log["_retention"]["max_entries"], 2);
    let kept: Vec<Value> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["data"]["n"].clone())
        .collect();
    assert_eq!(kept, vec![json!(2), json!(3)]);
    // The retention is remembered by later appends.
    env.ok(&["append", "log", "--data", r#"{"n": 4}"#]);
    assert_eq!(
        env.ok(&["read", "log"])["data"]["entries"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn log_default_retention_trims_at_200_entries() {
    // A log of 200 entries (as another device or an editor left it) grows by one: the
    // oldest goes.
    let env = TestEnv::new();
    env.ok(&["append", "log", "--data", r#"{"n": -1}"#]);
    let replica = env.ok(&["status"])["replica"].as_str().unwrap().to_string();
    let entries: Vec<Value> = (0..200)
        .map(|i| {
            json!({
                "id": format!("20250101T000000000Z-{i:04}-{replica}"),
                "ts": "2025-01-01T00:00:00.000Z",
                "data": {"n": i},
            })
        })
        .collect();
    let log = json!({"_kind": "log", "_retention": {"max_entries": 200, "max_age_days": null}, "entries": entries});
    env.write_file(
        "categories/log.json",
        &serde_json::to_string_pretty(&log).unwrap(),
    );
    let r = env.ok(&["append", "log", "--data", r#"{"n": 200}"#]);
    assert_eq!(r["entries"], 200);
    assert_eq!(r["dropped"], 1);
    let data = env.ok(&["read", "log"])["data"].clone();
    let entries = data["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 200);
    assert_eq!(entries[0]["data"]["n"], 1);
    assert_eq!(entries[199]["data"]["n"], 200);
    env.assert_clean();
}

#[test]
fn log_retention_max_age_days_drops_old_entries() {
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_CLOCK", "2026-01-01T00:00:00Z");
    env.ok(&["append", "log", "--data", r#"{"day": 1}"#]);
    env.set_env("MEMDIR_CLOCK", "2026-01-02T00:00:00Z");
    env.ok(&["append", "log", "--data", r#"{"day": 2}"#]);
    env.set_env("MEMDIR_CLOCK", "2026-01-08T00:00:00Z");
    env.ok(&["append", "log", "--data", r#"{"day": 8}"#]);
    env.set_env("MEMDIR_CLOCK", "2026-01-10T00:00:00Z");
    let r = env.ok(&[
        "append",
        "log",
        "--data",
        r#"{"day": 10}"#,
        "--max-age-days",
        "3",
    ]);
    assert_eq!(r["dropped"], 2);
    let data = env.ok(&["read", "log"])["data"].clone();
    assert_eq!(data["_retention"]["max_age_days"], 3);
    let days: Vec<Value> = data["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["data"]["day"].clone())
        .collect();
    assert_eq!(days, vec![json!(8), json!(10)]);
    env.assert_clean();
}

#[test]
fn log_age_retention_is_measured_from_the_newest_entry_not_from_now() {
    // A log synced from a device whose newest entry is day 50 is trimmed relative to day 50,
    // even though this device's clock says day 20: two devices trimming it agree.
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_CLOCK", "2026-01-20T00:00:00Z");
    env.ok(&["init"]);
    let log = json!({
        "_kind": "log",
        "_retention": {"max_entries": 200, "max_age_days": 30},
        "entries": [
            {"id": "20260101T000000000Z-0000-other-aaaa", "ts": "2026-01-01T00:00:00.000Z", "data": {"day": 1}},
            {"id": "20260110T000000000Z-0000-other-aaaa", "ts": "2026-01-10T00:00:00.000Z", "data": {"day": 10}},
            {"id": "20260219T000000000Z-0000-other-aaaa", "ts": "2026-02-19T00:00:00.000Z", "data": {"day": 50}},
        ],
    });
    env.write_file(
        "categories/log.json",
        &serde_json::to_string_pretty(&log).unwrap(),
    );
    env.ok(&["append", "log", "--data", r#"{"day": "now"}"#]);
    let data = env.ok(&["read", "log"])["data"].clone();
    let days: Vec<Value> = data["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["data"]["day"].clone())
        .collect();
    assert!(!days.contains(&json!(1)), "{days:?}");
    assert!(!days.contains(&json!(10)), "{days:?}");
    assert!(days.contains(&json!(50)), "{days:?}");
    let ids: Vec<&str> = data["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "log entry ids must stay sorted");
}

#[test]
fn write_to_a_log_and_append_to_a_document_are_refused_with_exit_5() {
    let env = TestEnv::new();
    env.ok(&["append", "journal", "--data", r#"{"e": 1}"#]);
    env.ok(&["write", "base", "--data", r#"{"a": 1}"#]);
    let before = truth_files(&env.dir);
    let log_hash = hash_of(&env, "categories/journal.json");
    let e = env.fail(&["write", "journal", "--data", r#"{"x": 1}"#], 5);
    assert_eq!(e["code"], "conflict");
    assert_eq!(e["kind"], "log");
    let e = env.fail(&["write", "journal", "--merge", "--data", r#"{"x": 1}"#], 5);
    assert_eq!(e["kind"], "log");
    let e = env.fail(&["append", "base", "--data", r#"{"x": 1}"#], 5);
    assert_eq!(e["code"], "conflict");
    assert_eq!(e["kind"], "document");
    assert_eq!(truth_files(&env.dir), before);
    assert_eq!(hash_of(&env, "categories/journal.json"), log_hash);
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"a": 1}));
}

#[test]
fn append_retention_arguments_out_of_range_exit_3() {
    let env = TestEnv::new();
    for args in [
        vec!["--max-entries", "0"],
        vec!["--max-entries", "100001"],
        vec!["--max-age-days", "0"],
        vec!["--max-age-days", "36501"],
    ] {
        let mut a = vec!["append", "log", "--data", "{}"];
        a.extend(args.iter().copied());
        let e = env.fail(&a, 3);
        assert_eq!(e["code"], "invalid", "{args:?}");
    }
    assert!(!env.path("categories/log.json").exists());
    let e = env.fail(
        &[
            "append",
            "log",
            "--data",
            &json!({"k": "x".repeat(64 * 1024)}).to_string(),
        ],
        9,
    );
    assert_eq!(e["field"], "data");
}

// ---------------------------------------------------------------------------------------------
// List, delete, history, diff, restore, compact
// ---------------------------------------------------------------------------------------------

#[test]
fn list_shows_every_category_with_hash_version_size_and_writer() {
    let env = TestEnv::new();
    env.ok(&["write", "zeta", "--data", r#"{"z": 1}"#]);
    env.ok(&["write", "alpha", "--data", r#"{"a": 1}"#]);
    env.ok(&["write", "alpha", "--data", r#"{"a": 2}"#]);
    env.ok(&["append", "journal", "--data", r#"{"e": 1}"#]);
    let l = env.ok(&["list"]);
    assert_eq!(l["count"], 3);
    assert_eq!(names(&l), vec!["alpha", "journal", "zeta"]);
    let alpha = &l["categories"][0];
    assert_eq!(
        alpha["hash"],
        hash_of(&env, "categories/alpha.json").as_str()
    );
    assert_eq!(alpha["version"], 2);
    assert_eq!(alpha["kind"], "document");
    assert_eq!(alpha["status"], "ok");
    assert_eq!(alpha["updated_by"], "test-device");
    assert!(alpha["updated_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        alpha["size_bytes"],
        std::fs::metadata(env.path("categories/alpha.json"))
            .unwrap()
            .len()
    );
    assert_eq!(l["categories"][1]["kind"], "log");
}

#[test]
fn delete_keeps_history_and_writes_a_tombstone() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    env.ok(&["write", "base", "--data", r#"{"v": 2}"#]);
    env.ok(&["write", "other", "--data", "{}"]);
    let before = history_files(&env, "base");
    let d = env.ok(&["delete", "base", "--reason", "cleanup"]);
    assert_eq!(d["deleted"], true);
    assert_eq!(d["version"], 3);
    assert!(!env.path("categories/base.json").exists());
    let after = history_files(&env, "base");
    assert_eq!(after.len(), 3);
    assert_eq!(&after[..2], &before[..], "a delete must not remove history");
    let tomb: Value =
        serde_json::from_str(&env.read(&format!("history/base/{}", after[2]))).unwrap();
    assert_eq!(tomb["op"], "delete");
    assert_eq!(tomb["hash"], Value::Null);
    assert_eq!(tomb["content"], Value::Null);
    assert_eq!(tomb["actor"], "test-device");
    assert_eq!(tomb["reason"], "cleanup");
    assert_eq!(format!("{}.json", tomb["id"].as_str().unwrap()), after[2]);
    assert_eq!(tomb["parents"], json!([after[1].trim_end_matches(".json")]));

    let e = env.fail(&["read", "base"], 4);
    assert_eq!(e["code"], "not_found");
    assert_eq!(e["available"], json!(["other"]));
    assert!(e["message"].as_str().unwrap().contains("other"), "{e}");
    assert_eq!(names(&env.ok(&["list"])), vec!["other"]);
    let h = env.ok(&["history", "base"]);
    assert_eq!(h["status"], "deleted");
    assert_eq!(h["versions"][0]["op"], "delete");
    // Old versions stay readable, the tombstone does not.
    assert_eq!(
        env.ok(&["read", "base", "--version", "2"])["data"],
        json!({"v": 2})
    );
    env.fail(&["read", "base", "--version", "3"], 4);
    // Deleting again finds nothing.
    env.fail(&["delete", "base"], 4);
    env.assert_clean();
}

#[test]
fn unknown_category_exits_4_and_lists_available_names() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", "{}"]);
    env.ok(&["append", "journal", "--data", "{}"]);
    for args in [
        vec!["read", "nope"],
        vec!["history", "nope"],
        vec!["diff", "nope"],
        vec!["delete", "nope"],
        vec!["restore", "nope", "--version", "1"],
        vec!["compact", "nope"],
    ] {
        let e = env.fail(&args, 4);
        assert_eq!(e["code"], "not_found", "{args:?}");
        assert_eq!(e["available"], json!(["base", "journal"]), "{args:?}: {e}");
        assert_eq!(e["category"], "nope", "{args:?}");
    }
}

#[test]
fn history_lists_versions_newest_first() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"v": 1}"#, "--reason", "one"]);
    env.ok(&[
        "write",
        "base",
        "--merge",
        "--data",
        r#"{"w": 2}"#,
        "--reason",
        "two",
    ]);
    env.ok(&["delete", "base"]);
    env.ok(&["restore", "base", "--version", "1"]);
    let h = env.ok(&["history", "base"]);
    assert_eq!(h["total"], 4);
    let v = h["versions"].as_array().unwrap();
    let ops: Vec<&str> = v.iter().map(|e| e["op"].as_str().unwrap()).collect();
    assert_eq!(ops, vec!["restore", "delete", "merge", "write"]);
    let versions: Vec<u64> = v.iter().map(|e| e["version"].as_u64().unwrap()).collect();
    assert_eq!(versions, vec![4, 3, 2, 1]);
    assert_eq!(v[3]["reason"], "one");
    assert_eq!(v[2]["reason"], "two");
    for e in v {
        assert_eq!(e["actor"], "test-device");
        assert!(e["timestamp"].is_string());
        assert!(e["id"].is_string());
    }
    assert_eq!(v[0]["hash"], hash_of(&env, "categories/base.json").as_str());
    assert_eq!(v[1]["hash"], Value::Null);
    let ids: Vec<&str> = v.iter().map(|e| e["id"].as_str().unwrap()).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.reverse();
    assert_eq!(ids, sorted);
    let one = env.ok(&["history", "base", "--limit", "1"]);
    assert_eq!(one["versions"].as_array().unwrap().len(), 1);
    assert_eq!(one["total"], 4);
    assert_eq!(one["versions"][0]["op"], "restore");
}

#[test]
fn diff_shows_a_unified_diff_between_versions() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"a": 1, "b": 2}"#]);
    env.ok(&["write", "base", "--data", r#"{"a": 1, "b": 3}"#]);
    env.ok(&["write", "base", "--data", r#"{"a": 9, "b": 3}"#]);
    let d = env.ok(&["diff", "base"]);
    assert_eq!(d["from"], 2);
    assert_eq!(d["to"], 3);
    let text = d["diff"].as_str().unwrap();
    assert!(text.starts_with("--- base@2\n+++ base@3\n@@ "), "{text}");
    assert!(text.contains("\n-  \"a\": 1,\n"), "{text}");
    assert!(text.contains("\n+  \"a\": 9,\n"), "{text}");
    assert!(text.contains("\n   \"b\": 3\n"), "{text}");
    let d = env.ok(&["diff", "base", "--from", "1", "--to", "2"]);
    let text = d["diff"].as_str().unwrap();
    assert!(
        text.contains("\n-  \"b\": 2\n") && text.contains("\n+  \"b\": 3\n"),
        "{text}"
    );
    assert!(!text.contains("\"a\": 9"), "{text}");
    // The first version diffs against nothing.
    let d = env.ok(&["diff", "base", "--to", "1"]);
    assert_eq!(d["from"], Value::Null);
    assert!(
        d["diff"]
            .as_str()
            .unwrap()
            .starts_with("--- /dev/null\n+++ base@1\n")
    );
    // Unchanged versions give an empty diff.
    let d = env.ok(&["diff", "base", "--from", "2", "--to", "2"]);
    assert_eq!(d["diff"], "");
    env.fail(&["diff", "base", "--from", "7"], 4);
}

#[test]
fn restore_writes_an_old_version_as_a_new_one() {
    let env = TestEnv::new();
    let w1 = env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    env.ok(&["write", "base", "--data", r#"{"v": 2}"#]);
    let r = env.ok(&["restore", "base", "--version", "1", "--reason", "undo"]);
    assert_eq!(r["restored_from"], 1);
    assert_eq!(r["version"], 3);
    assert_eq!(r["new_hash"], w1["new_hash"]);
    let read = env.ok(&["read", "base"]);
    assert_eq!(read["data"], json!({"v": 1}));
    assert_eq!(read["meta"]["version"], 3);
    let h = env.ok(&["history", "base"]);
    assert_eq!(h["versions"][0]["op"], "restore");
    assert_eq!(h["versions"][0]["reason"], "undo");
    assert_eq!(history_files(&env, "base").len(), 3);
    // By id too.
    let id = h["versions"][1]["id"].as_str().unwrap().to_string();
    env.ok(&["restore", "base", "--version", &id]);
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 2}));
    env.fail(&["restore", "base", "--version", "99"], 4);
    env.assert_clean();
}

#[test]
fn restore_after_delete_brings_the_category_back() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    env.ok(&["delete", "base"]);
    // A tombstone is not something to restore.
    let e = env.fail(&["restore", "base", "--version", "2"], 3);
    assert_eq!(e["field"], "version");
    let r = env.ok(&["restore", "base", "--version", "1"]);
    assert_eq!(r["previous_hash"], Value::Null);
    assert_eq!(r["version"], 3);
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 1}));
    assert_eq!(names(&env.ok(&["list"])), vec!["base"]);
    let h = env.ok(&["history", "base"]);
    let ops: Vec<&str> = h["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, vec!["restore", "delete", "write"]);
    env.assert_clean();
}

#[test]
fn compact_keeps_the_newest_versions_the_head_and_tombstones() {
    let env = TestEnv::new();
    for i in 1..=3 {
        env.ok(&["write", "c", "--data", &json!({"v": i}).to_string()]);
    }
    env.ok(&["delete", "c"]);
    for i in 5..=8 {
        env.ok(&["write", "c", "--data", &json!({"v": i}).to_string()]);
    }
    for i in 1..=3 {
        env.ok(&["write", "d", "--data", &json!({"v": i}).to_string()]);
    }
    assert_eq!(history_files(&env, "c").len(), 8);
    let r = env.ok(&["compact", "c", "--keep", "2"]);
    assert_eq!(r["removed"], 5);
    let h = env.ok(&["history", "c"]);
    let kept: Vec<(u64, &str)> = h["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["version"].as_u64().unwrap(), e["op"].as_str().unwrap()))
        .collect();
    assert_eq!(kept, vec![(8, "write"), (7, "write"), (4, "delete")]);
    // Only the named category was compacted.
    assert_eq!(history_files(&env, "d").len(), 3);
    // The current content and version are untouched.
    let read = env.ok(&["read", "c"]);
    assert_eq!(read["data"], json!({"v": 8}));
    assert_eq!(read["meta"]["version"], 8);
    env.assert_clean();
    // Compacting everything, keeping one: the head stays.
    let r = env.ok(&["compact", "--keep", "1"]);
    assert_eq!(r["removed"], 3);
    assert_eq!(history_files(&env, "d").len(), 1);
    assert_eq!(env.ok(&["history", "d"])["versions"][0]["version"], 3);
    // Writes after compaction continue the numbering.
    let w = env.ok(&["write", "d", "--data", r#"{"v": 4}"#]);
    assert_eq!(w["version"], 4);
    env.assert_clean();
}

#[test]
fn compact_keeps_the_head_even_when_it_is_a_tombstone() {
    let env = TestEnv::new();
    for i in 1..=4 {
        env.ok(&["write", "c", "--data", &json!({"v": i}).to_string()]);
    }
    env.ok(&["delete", "c"]);
    env.ok(&["compact", "c", "--keep", "1"]);
    let h = env.ok(&["history", "c"]);
    assert_eq!(h["versions"].as_array().unwrap().len(), 1);
    assert_eq!(h["versions"][0]["op"], "delete");
    env.fail(&["read", "c"], 4);
    env.assert_clean();
}

// ---------------------------------------------------------------------------------------------
// Hostile names
// ---------------------------------------------------------------------------------------------

#[test]
fn hostile_category_names_are_rejected_and_touch_nothing_outside_the_store() {
    let env = TestEnv::new();
    env.ok(&["init"]);
    let before = truth_files(&env.dir);
    let long = "x".repeat(129);
    for name in [
        "../x",
        "../../escape",
        "/etc/passwd",
        "/tmp/x",
        "a/b",
        "a\\b",
        "..",
        ".",
        "",
        "a\nb",
        "a\tb",
        "a\rb",
        "\u{7f}",
        " lead",
        "trail ",
        long.as_str(),
    ] {
        let e = env.fail(&["write", name, "--data", r#"{"a": 1}"#], 3);
        assert_eq!(e["code"], "invalid", "{name:?}");
        assert_eq!(e["field"], "category", "{name:?}");
        env.fail(&["append", name, "--data", r#"{"a": 1}"#], 3);
        env.fail(&["read", name], 3);
        env.fail(&["delete", name], 3);
        env.fail(&["history", name], 3);
        env.fail(&["restore", name, "--version", "1"], 3);
    }
    assert_eq!(truth_files(&env.dir), before);
    assert_eq!(entries_outside_store(&env), Vec::<String>::new());
    env.assert_clean();
}

#[test]
fn odd_but_valid_category_names_stay_one_file_inside_categories() {
    let env = TestEnv::new();
    let names_in = [
        "CON",
        "con",
        "nul.txt",
        "a:b",
        "Foo",
        "foo",
        ".hidden",
        "trailing.",
        "ünï",
        "😀",
        "a b",
    ];
    for (i, n) in names_in.iter().enumerate() {
        env.ok(&["write", n, "--data", &json!({"i": i}).to_string()]);
    }
    for (i, n) in names_in.iter().enumerate() {
        assert_eq!(env.ok(&["read", n])["data"], json!({"i": i}), "{n}");
    }
    let l = env.ok(&["list"]);
    let mut listed = names(&l);
    listed.sort();
    let mut want: Vec<String> = names_in.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(listed, want);
    let files: Vec<String> = std::fs::read_dir(env.path("categories"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), names_in.len());
    let mut lower: Vec<String> = files.iter().map(|f| f.to_lowercase()).collect();
    lower.sort();
    lower.dedup();
    assert_eq!(lower.len(), files.len(), "case-only twins: {files:?}");
    for f in &files {
        assert!(f.is_ascii(), "{f}");
        assert!(!f.contains(':') && !f.starts_with('.'), "{f}");
        let stem = f.trim_end_matches(".json").to_lowercase();
        let base = stem.split('.').next().unwrap();
        assert!(
            !["con", "prn", "aux", "nul"].contains(&base),
            "Windows-reserved name {f}"
        );
    }
    assert_eq!(entries_outside_store(&env), Vec::<String>::new());
    env.assert_clean();
}

#[test]
fn hostile_session_ids_map_to_distinct_directories_inside_sessions() {
    let env = TestEnv::new();
    let ids = [
        "../../x", "..", ".", "/abs", "CON", "con", "a:b", "Foo", "foo", "a/b", "a\\b", ".x", "x.",
        "nul.txt",
    ];
    for id in ids {
        env.ok(&[
            "ingest",
            "--session-id",
            id,
            "--text",
            &format!("content of {id}"),
        ]);
    }
    for id in ids {
        let f = env.ok(&["fetch", id]);
        assert_eq!(f["session_id"], id);
        assert_eq!(contents(&f), vec![format!("content of {id}")], "{id}");
    }
    let dirs: Vec<String> = std::fs::read_dir(env.path("sessions"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            assert!(e.file_type().unwrap().is_dir());
            e.file_name().to_string_lossy().into_owned()
        })
        .collect();
    assert_eq!(dirs.len(), ids.len(), "{dirs:?}");
    let mut lower: Vec<String> = dirs.iter().map(|d| d.to_lowercase()).collect();
    lower.sort();
    lower.dedup();
    assert_eq!(lower.len(), ids.len(), "case-only twins: {dirs:?}");
    for d in &dirs {
        assert!(
            d.is_ascii() && !d.contains(':') && !d.starts_with('.'),
            "{d}"
        );
        assert!(d != "." && d != "..", "{d}");
    }
    // Everything lives under sessions/<one component>/<replica>.jsonl.
    for f in truth_files(&env.dir) {
        if f.starts_with("sessions/") {
            assert_eq!(f.matches('/').count(), 2, "{f}");
        }
    }
    let o = env.ok(&["overview"]);
    let mut listed: Vec<String> = o["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    listed.sort();
    let mut want: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(listed, want);
    assert_eq!(entries_outside_store(&env), Vec::<String>::new());
    env.assert_clean();
}

#[test]
fn session_ids_with_control_characters_are_rejected() {
    let env = TestEnv::new();
    env.ok(&["init"]);
    let before = truth_files(&env.dir);
    for id in ["a\nb", "a\tb", "", " lead", "trail "] {
        let e = env.fail(&["ingest", "--session-id", id, "--text", "x"], 3);
        assert_eq!(e["field"], "session_id", "{id:?}");
    }
    env.fail(
        &["ingest", "--session-id", &"s".repeat(257), "--text", "x"],
        3,
    );
    // NUL cannot travel in argv, but it can in JSONL.
    let e = fail_stdin(
        &env,
        &["ingest", "--jsonl", "-"],
        b"{\"session_id\": \"a\\u0000b\", \"content\": \"x\"}\n",
        3,
    );
    assert_eq!(e["field"], "session_id");
    env.fail(&["fetch", "a\nb"], 3);
    assert_eq!(truth_files(&env.dir), before);
    assert_eq!(entries_outside_store(&env), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------------
// A corrupt file on disk
// ---------------------------------------------------------------------------------------------

#[test]
fn corrupt_category_file_is_reported_and_never_overwritten_without_say_so() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    env.ok(&["write", "other", "--data", r#"{"fine": true}"#]);
    env.ok(&["ingest", "--session-id", "s", "--text", "still here"]);
    let broken = "{\"v\": 2,,\n";
    env.write_file("categories/base.json", broken);
    let broken_hash = hash_of(&env, "categories/base.json");

    let e = env.fail(&["read", "base"], 7);
    assert_eq!(e["code"], "corrupt");
    assert_eq!(e["current_hash"], broken_hash.as_str());
    assert_eq!(e["category"], "base");
    // Other reads keep working.
    assert_eq!(env.ok(&["read", "other"])["data"], json!({"fine": true}));
    assert_eq!(contents(&env.ok(&["fetch", "s"])), vec!["still here"]);
    let l = env.ok(&["list"]);
    assert_eq!(names(&l), vec!["base", "other"]);
    assert_eq!(l["categories"][0]["status"], "malformed");
    assert_eq!(env.ok(&["status"])["malformed"], json!(["base"]));
    let r = env.run(&["verify-store"]);
    assert_eq!(r.code, 1, "verify-store must report the malformed file");
    // Writes without the caller's say are refused and leave the file alone.
    let e = env.fail(&["write", "base", "--data", r#"{"v": 3}"#], 7);
    assert_eq!(e["current_hash"], broken_hash.as_str());
    env.fail(&["write", "base", "--merge", "--data", r#"{"v": 3}"#], 7);
    env.fail(&["append", "base", "--data", r#"{"v": 3}"#], 7);
    env.fail(&["restore", "base", "--version", "1"], 7);
    env.fail(
        &[
            "write",
            "base",
            "--data",
            r#"{"v": 3}"#,
            "--expected-hash",
            NO_SUCH_HASH,
        ],
        5,
    );
    env.fail(
        &[
            "write",
            "base",
            "--data",
            r#"{"v": 3}"#,
            "--expected-hash",
            "absent",
        ],
        5,
    );
    assert_eq!(env.read("categories/base.json"), broken);
    // The hash shown as current_hash is the say-so.
    let w = env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"v": 3}"#,
        "--expected-hash",
        &broken_hash,
    ]);
    assert_eq!(w["previous_hash"], broken_hash.as_str());
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 3}));
    env.assert_clean();
}

#[test]
fn corrupt_category_can_be_restored_with_its_hash() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    env.write_file("categories/base.json", "[1, 2, 3]\n");
    let h = hash_of(&env, "categories/base.json");
    let e = env.fail(&["read", "base"], 7);
    assert_eq!(e["current_hash"], h.as_str());
    env.ok(&["restore", "base", "--version", "1", "--expected-hash", &h]);
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 1}));
    env.assert_clean();
}

#[test]
fn oversized_hand_placed_category_does_not_break_other_commands() {
    // A file over the 1 MiB write limit arrives by hand (or git pull): reads of other
    // categories, list and status must keep working.
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    env.write_file(
        "categories/huge.json",
        &json!({"k": "x".repeat(2 * 1024 * 1024)}).to_string(),
    );
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 1}));
    let l = env.ok(&["list"]);
    assert!(names(&l).contains(&"base".to_string()));
    env.ok(&["status"]);
    env.ok(&["write", "base", "--data", r#"{"v": 2}"#]);
}

#[test]
fn integers_beyond_64_bits_are_kept_exactly_or_refused() {
    // Silently rounding 18446744073709551616 to 1.8446744073709552e19 loses the user's data.
    let env = TestEnv::new();
    let r = env.run(&["write", "n", "--data", r#"{"id": 18446744073709551616}"#]);
    match r.code {
        0 => {
            let text = env.read("categories/n.json");
            assert!(
                text.contains("18446744073709551616"),
                "the number was rounded on disk:\n{text}"
            );
        }
        3 => assert!(!env.path("categories/n.json").exists()),
        c => {
            env.dump(&r);
            panic!("exit {c}");
        }
    }
}

#[test]
fn overview_with_a_huge_days_value_neither_panics_nor_hides_sessions() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "x"]);
    for days in ["200000000000", "18446744073709551615"] {
        let r = env.run(&["overview", "--days", days]);
        match r.code {
            0 => assert_eq!(r.json()["total"], 1, "--days {days}: {}", r.stdout),
            3 => {}
            c => {
                env.dump(&r);
                panic!("--days {days} exited {c}");
            }
        }
    }
}

#[test]
fn names_within_the_documented_length_limits_are_stored_or_refused_as_invalid() {
    // 128 characters for a category and 256 for a session id are documented as valid; their
    // escaped file names must not hit the file system's name limit as an I/O error (exit 8).
    let env = TestEnv::new();
    let category = "A".repeat(128);
    let session = "s".repeat(256);
    let wide_session = "ü".repeat(100);
    for (args, what) in [
        (
            vec!["write", category.as_str(), "--data", r#"{"a": 1}"#],
            "category",
        ),
        (
            vec!["ingest", "--session-id", session.as_str(), "--text", "x"],
            "session",
        ),
        (
            vec![
                "ingest",
                "--session-id",
                wide_session.as_str(),
                "--text",
                "x",
            ],
            "session",
        ),
    ] {
        let r = env.run(&args);
        assert!(
            r.code == 0 || r.code == 3,
            "{what} name of documented length: exit {}\n{}",
            r.code,
            r.stderr
        );
    }
    if env.dir.exists() {
        env.assert_clean();
    }
    assert_eq!(entries_outside_store(&env), Vec::<String>::new());
}

#[test]
fn closed_stdout_does_not_panic() {
    // `memdir fetch s | head -c 10`: the reader goes away mid-output.
    let env = TestEnv::new();
    let path = env.tmp.path().join("big.txt");
    std::fs::write(&path, "y".repeat(200 * 1024)).unwrap();
    env.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--file",
        path.to_str().unwrap(),
    ]);
    let mut child = env
        .command(&["fetch", "s"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Read;
        let mut out = child.stdout.take().unwrap();
        let mut buf = [0u8; 10];
        out.read_exact(&mut buf).unwrap();
        // Dropping `out` closes the pipe while 200 KiB are still to be written.
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked") && out.status.code() != Some(101),
        "exit {:?}, stderr:\n{stderr}",
        out.status.code()
    );
}

#[test]
fn dir_flag_wins_over_memdir_dir_and_xdg_data_home_is_the_default() {
    let mut env = TestEnv::new();
    let flag_dir = env.tmp.path().join("flagged");
    env.ok(&[
        "--dir",
        flag_dir.to_str().unwrap(),
        "write",
        "base",
        "--data",
        "{}",
    ]);
    assert!(flag_dir.join("categories/base.json").is_file());
    assert!(!env.dir.exists());
    env.ok(&["write", "env", "--data", "{}"]);
    assert!(env.path("categories/env.json").is_file());
    // Without MEMDIR_DIR: $XDG_DATA_HOME/memdir, else ~/.local/share/memdir.
    env.envs.retain(|(k, _)| k != "MEMDIR_DIR");
    let xdg = env.tmp.path().join("xdg");
    env.set_env("XDG_DATA_HOME", xdg.to_str().unwrap());
    env.ok(&["write", "xdg", "--data", "{}"]);
    assert!(xdg.join("memdir/categories/xdg.json").is_file());
    env.envs.retain(|(k, _)| k != "XDG_DATA_HOME");
    env.ok(&["write", "home", "--data", "{}"]);
    assert!(
        env.tmp
            .path()
            .join("home/.local/share/memdir/categories/home.json")
            .is_file()
    );
}
