//! Ingesting chunks (text, JSONL, stdin) and fetching them back, with every error path.

use serde_json::{Value, json};

use super::{contents, fail_stdin, is_hlc};
use crate::util::{TestEnv, truth_files};

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
        vec!["compact", "--keep", "0", "--yes"],
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

/// An import keeps each chunk's original time (`ts`) while positions follow ingest order; the
/// catalog and the time filters use the original times; a bad time is refused naming `ts`.
#[test]
fn original_times_are_kept_apart_from_ingest_order() {
    let env = TestEnv::new();
    let lines = [
        r#"{"session_id": "old", "content": "first said later", "ts": "2024-03-02T10:00:00Z"}"#,
        r#"{"session_id": "old", "content": "said first", "ts": "2024-03-01"}"#,
        r#"{"session_id": "old", "content": "no time given"}"#,
    ]
    .join("\n");
    env.ok_stdin(&["ingest", "--jsonl", "-"], lines.as_bytes());
    let f = env.ok(&["fetch", "old"]);
    let chunks = f["chunks"].as_array().unwrap();
    let got: Vec<(&str, &str)> = chunks
        .iter()
        .map(|c| (c["content"].as_str().unwrap(), c["ts"].as_str().unwrap()))
        .collect();
    assert_eq!(got[0], ("first said later", "2024-03-02T10:00:00.000Z"));
    assert_eq!(got[1], ("said first", "2024-03-01T00:00:00.000Z"));
    assert_eq!(got[2].0, "no time given");
    assert!(got[2].1 > "2025", "{got:?}");
    let o = env.ok(&["overview", "--days", "0"]);
    assert_eq!(o["sessions"][0]["start_time"], "2024-03-01T00:00:00.000Z");
    let v = env.ok(&["search", "said", "--until", "2024-03-01", "--context", "0"]);
    let hits: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["content"].as_str().unwrap())
        .collect();
    assert_eq!(hits, ["said first"]);
    // One chunk with --ts; a bad time is refused, naming the field, and nothing is written.
    env.ok(&[
        "ingest",
        "--session-id",
        "one",
        "--ts",
        "1700000000000",
        "--text",
        "epoch",
    ]);
    let f = env.ok(&["fetch", "one"]);
    assert_eq!(f["chunks"][0]["ts"], "2023-11-14T22:13:20.000Z");
    let before = env.snapshot();
    let r = env.run(&[
        "ingest",
        "--session-id",
        "one",
        "--ts",
        "yesterday",
        "--text",
        "x",
    ]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(r.error()["field"], "ts");
    assert_eq!(env.snapshot(), before);
    env.assert_clean();
}

/// A chunk whose `source_id` is already in its session is skipped and reported (one chunk,
/// a batch, a repeat inside one batch); the key lives in the chunk's metadata, and the
/// ledger's key index comes back from the files after the ledger is deleted or a reindex.
#[test]
fn source_ids_make_a_second_ingest_add_nothing() {
    let env = TestEnv::new();
    let args = [
        "ingest",
        "--session-id",
        "s",
        "--source-id",
        "msg-1",
        "--text",
        "first",
    ];
    let a = env.ok(&args);
    assert!(a.get("skipped").is_none(), "{a}");
    let again = env.ok(&args);
    assert_eq!(again["skipped"], true);
    assert_eq!(again["chunk_id"], a["chunk_id"]);
    assert_eq!(again["position"], 0);
    // The same key in another session is another chunk.
    env.ok(&[
        "ingest",
        "--session-id",
        "t",
        "--source-id",
        "msg-1",
        "--text",
        "x",
    ]);
    let lines = [
        r#"{"session_id": "s", "content": "first", "source_id": "msg-1"}"#,
        r#"{"session_id": "s", "content": "second", "source_id": "msg-2"}"#,
        r#"{"session_id": "s", "content": "second again", "source_id": "msg-2"}"#,
        r#"{"session_id": "s", "content": "no key"}"#,
    ]
    .join("\n");
    let b = env.ok_stdin(&["ingest", "--jsonl", "-"], lines.as_bytes());
    assert_eq!(b["count"], 2, "{b}");
    assert_eq!(b["skipped"], 2);
    let sk = b["skipped_chunks"].as_array().unwrap();
    assert_eq!(sk[0]["line"], 1);
    assert_eq!(sk[0]["source_id"], "msg-1");
    assert_eq!(sk[0]["chunk_id"], a["chunk_id"]);
    assert_eq!(sk[1]["line"], 3);
    assert_eq!(sk[1]["chunk_id"], b["chunks"][0]["chunk_id"]);
    assert_eq!(env.session_contents("s"), ["first", "second", "no key"]);
    // The key is in the plain file, as metadata.
    let f = env.ok(&["fetch", "s"]);
    assert_eq!(f["chunks"][1]["metadata"]["source_id"], "msg-2");
    // Derived state gone: the key index is rebuilt from the files.
    std::fs::remove_file(env.path(".memdir/ledger.db")).unwrap();
    let _ = std::fs::remove_file(env.path(".memdir/ledger.db-wal"));
    let _ = std::fs::remove_file(env.path(".memdir/ledger.db-shm"));
    let b2 = env.ok_stdin(&["ingest", "--jsonl", "-"], lines.as_bytes());
    assert_eq!(
        (b2["count"].clone(), b2["skipped"].clone()),
        (json!(1), json!(3))
    );
    env.ok(&["reindex"]);
    let c = env.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--source-id",
        "msg-2",
        "--text",
        "z",
    ]);
    assert_eq!(c["skipped"], true);
    // The chunk without a key was saved twice; every keyed one once.
    assert_eq!(
        env.session_contents("s"),
        ["first", "second", "no key", "no key"]
    );
    env.assert_clean();
}

/// Bad keys are refused naming `source_id`, and nothing is written.
#[test]
fn bad_source_ids_are_refused() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "x"]);
    let before = env.snapshot();
    let long = "k".repeat(513);
    for (key, meta) in [
        ("", "{}"),
        (long.as_str(), "{}"),
        ("a\u{7}b", "{}"),
        ("one", r#"{"source_id": "other"}"#),
    ] {
        let r = env.run(&[
            "ingest",
            "--session-id",
            "s",
            "--source-id",
            key,
            "--metadata",
            meta,
            "--text",
            "y",
        ]);
        assert!(r.code == 3 || r.code == 9, "{key:?}: {}", r.stderr);
        assert_eq!(r.error()["field"], "source_id", "{}", r.stderr);
    }
    let r = env.run_stdin(
        &["ingest", "--jsonl", "-"],
        br#"{"chunks": [], "source_id": "x"}"#,
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(env.snapshot(), before);
}

/// A JSONL file larger than one batch (the old 10,000-chunk limit) is streamed in batches;
/// a bad line anywhere in a file is refused before anything is saved; run again, a file
/// with keys adds nothing.
#[test]
fn large_jsonl_files_stream_in_batches() {
    let env = TestEnv::new();
    let path = env.tmp.path().join("big.jsonl");
    let mut text = String::new();
    for i in 0..12_345 {
        text.push_str(&format!(
            "{{\"session_id\": \"s{}\", \"content\": \"turn {i}\", \"source_id\": \"k{i}\"}}\n",
            i % 3
        ));
    }
    let mut bad = text.clone();
    bad.push_str("{\"session_id\": \"s0\", \"content\": \"\"}\n");
    std::fs::write(&path, &bad).unwrap();
    let before = env.snapshot();
    let r = env.run(&["ingest", "--jsonl", path.to_str().unwrap()]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(r.error()["line"], 12_346);
    assert_eq!(env.snapshot(), before);
    std::fs::write(&path, &text).unwrap();
    let out = env.ok(&["ingest", "--jsonl", path.to_str().unwrap()]);
    assert_eq!(out["count"], 12_345, "{out}");
    assert_eq!(out["batches"], 2);
    assert!(
        out.get("chunks").is_none(),
        "a streamed result lists no chunks"
    );
    let f = env.ok(&["fetch", "s1", "--position", "4114", "--limit", "1"]);
    assert_eq!(f["total"], 4115);
    assert_eq!(f["chunks"][0]["content"], "turn 12343");
    let again = env.ok(&["ingest", "--jsonl", path.to_str().unwrap()]);
    assert_eq!(again["count"], 0);
    assert_eq!(again["skipped"], 12_345);
    assert_eq!(again["skipped_chunks"].as_array().unwrap().len(), 1_000);
    let o = env.ok(&["overview", "--days", "0"]);
    let total: u64 = o["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["message_count"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 12_345);
}

#[test]
fn a_jsonl_line_may_give_ts_as_epoch_milliseconds() {
    let env = TestEnv::new();
    // 2025-11-30T12:00:00Z, as a log or `Date.now()` writes it; and the same time as text.
    let input = concat!(
        r#"{"session_id": "s", "content": "numeric", "ts": 1764504000000}"#,
        "\n",
        r#"{"session_id": "s", "content": "text", "ts": "2025-11-30T12:00:00Z"}"#,
        "\n",
    );
    env.ok_stdin(&["ingest", "--jsonl", "-"], input.as_bytes());
    let page = env.ok(&["fetch", "s"]);
    let ts: Vec<&str> = page["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["ts"].as_str().unwrap())
        .collect();
    assert_eq!(ts, ["2025-11-30T12:00:00.000Z", "2025-11-30T12:00:00.000Z"]);
    // A negative or fractional number is no time: refused, naming the line.
    let bad = r#"{"session_id": "s", "content": "x", "ts": -5}"#;
    let e = fail_stdin(&env, &["ingest", "--jsonl", "-"], bad.as_bytes(), 3);
    assert_eq!(e["line"], 1, "{e}");
}
