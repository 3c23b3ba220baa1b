//! Files are the truth: hand edits, hand deletes and hand-appended lines are honoured, and
//! `.memdir/` can be deleted at any time without losing a single memory.

use serde_json::{Value, json};

use crate::util::{TestEnv, truth_files};

fn hash_of(env: &TestEnv, rel: &str) -> String {
    blake3::hash(&std::fs::read(env.path(rel)).unwrap())
        .to_hex()
        .to_string()
}

fn history_files(env: &TestEnv, stem: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(env.path(&format!("history/{stem}")))
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn contents(fetch: &Value) -> Vec<String> {
    fetch["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["content"].as_str().unwrap().to_string())
        .collect()
}

/// The last line of a session's only segment, parsed.
fn last_line(env: &TestEnv, session_dir: &str) -> Value {
    let text = std::fs::read_to_string(env.segment_of(session_dir)).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

/// The stamp `hlc` with its counter raised by `by`.
fn bump_hlc(hlc: &str, by: u32) -> String {
    let (time, counter) = hlc.split_at(20);
    let n: u32 = counter.parse().unwrap();
    format!("{time}{:04}", n + by)
}

/// Appends one line to a file, as `echo ... >>` would.
fn append_line(path: &std::path::Path, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(line.as_bytes()).unwrap();
    f.write_all(b"\n").unwrap();
}

// ---------------------------------------------------------------------------------------------
// Categories edited by hand
// ---------------------------------------------------------------------------------------------

#[test]
fn hand_edit_is_read_back_and_recorded_as_an_external_version() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"editor": "vim"}"#]);
    let edited = "{\"editor\":\"helix\",  \"note\": \"typed by hand\"}\n";
    env.write_file("categories/base.json", edited);
    let new_hash = hash_of(&env, "categories/base.json");

    let r = env.ok(&["read", "base"]);
    assert_eq!(
        r["data"],
        json!({"editor": "helix", "note": "typed by hand"})
    );
    assert_eq!(r["meta"]["hash"], new_hash.as_str());
    assert_eq!(r["meta"]["updated_by"], "external");
    assert_eq!(r["meta"]["version"], 2);
    // The user's bytes stay as they wrote them.
    assert_eq!(env.read("categories/base.json"), edited);

    let h = env.ok(&["history", "base"]);
    assert_eq!(h["total"], 2);
    let v = &h["versions"][0];
    assert_eq!(v["op"], "external");
    assert_eq!(v["actor"], "external");
    assert_eq!(v["hash"], new_hash.as_str());
    assert_eq!(v["version"], 2);
    // The history entry on disk keeps the edited content.
    let files = history_files(&env, "base");
    let entry: Value =
        serde_json::from_str(&env.read(&format!("history/base/{}", files[1]))).unwrap();
    assert_eq!(entry["op"], "external");
    assert_eq!(entry["actor"], "external");
    assert_eq!(entry["content"], r["data"]);
    assert_eq!(
        entry["parents"],
        json!([files[0].trim_end_matches(".json")])
    );
    // Adopted once: reading again adds nothing.
    env.ok(&["read", "base"]);
    env.ok(&["list"]);
    assert_eq!(history_files(&env, "base").len(), 2);
    // The diff shows the edit.
    let d = env.ok(&["diff", "base"]);
    assert!(
        d["diff"]
            .as_str()
            .unwrap()
            .contains("+  \"note\": \"typed by hand\""),
        "{d}"
    );
    env.assert_clean();
}

#[test]
fn hand_edit_is_noticed_by_list_and_history_before_any_read() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    env.write_file("categories/base.json", "{\"v\": 2, \"longer\": true}\n");
    let new_hash = hash_of(&env, "categories/base.json");
    let l = env.ok(&["list"]);
    assert_eq!(l["categories"][0]["hash"], new_hash.as_str());
    assert_eq!(l["categories"][0]["updated_by"], "external");
    assert_eq!(
        env.ok(&["history", "base"])["versions"][0]["op"],
        "external"
    );
}

#[test]
fn same_size_hand_edit_with_an_unchanged_mtime_is_still_noticed() {
    // An edit that keeps the size and the modification time (a `cp -p` of a same-size file, or
    // an edit within one tick of a coarse file-system clock) is still an edit.
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    let path = env.path("categories/base.json");
    let old_len = std::fs::metadata(&path).unwrap().len();
    crate::util::write_keeping_mtime(&path, "{\n  \"v\": 2\n}\n");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), old_len);
    let new_hash = hash_of(&env, "categories/base.json");
    let l = env.ok(&["list"]);
    assert_eq!(
        l["categories"][0]["hash"],
        new_hash.as_str(),
        "list serves the hash of the content before the hand edit"
    );
    assert_eq!(
        env.ok(&["history", "base"])["versions"][0]["op"],
        "external"
    );
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 2}));
}

#[test]
fn write_with_the_pre_edit_hash_is_refused_after_a_hand_edit() {
    let env = TestEnv::new();
    let w = env.ok(&["write", "base", "--data", r#"{"a": 1}"#]);
    let pre = w["new_hash"].as_str().unwrap().to_string();
    let edited = "{\n  \"a\": 1,\n  \"b\": \"by hand\"\n}\n";
    env.write_file("categories/base.json", edited);
    let post = hash_of(&env, "categories/base.json");
    // No read in between: the write itself must notice the edit.
    let e = env.fail(
        &[
            "write",
            "base",
            "--merge",
            "--data",
            r#"{"c": 3}"#,
            "--expected-hash",
            &pre,
        ],
        5,
    );
    assert_eq!(e["code"], "conflict");
    assert_eq!(e["current_hash"], post.as_str());
    let e = env.fail(
        &[
            "write",
            "base",
            "--data",
            r#"{"c": 3}"#,
            "--expected-hash",
            &pre,
        ],
        5,
    );
    assert_eq!(e["current_hash"], post.as_str());
    env.fail(&["delete", "base", "--expected-hash", &pre], 5);
    assert_eq!(env.read("categories/base.json"), edited);
    // With the new hash the merge goes through and keeps the hand-edited key.
    env.ok(&[
        "write",
        "base",
        "--merge",
        "--data",
        r#"{"c": 3}"#,
        "--expected-hash",
        &post,
    ]);
    assert_eq!(
        env.ok(&["read", "base"])["data"],
        json!({"a": 1, "b": "by hand", "c": 3})
    );
    let ops: Vec<String> = env.ok(&["history", "base"])["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["op"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ops, vec!["merge", "external", "write"]);
    env.assert_clean();
}

#[test]
fn merge_without_expected_hash_builds_on_the_hand_edit() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"a": 1}"#]);
    env.write_file("categories/base.json", "{\"a\": 1, \"hand\": true}\n");
    env.ok(&["write", "base", "--merge", "--data", r#"{"b": 2}"#]);
    assert_eq!(
        env.ok(&["read", "base"])["data"],
        json!({"a": 1, "hand": true, "b": 2})
    );
    // The hand edit is a version of its own, restorable.
    let h = env.ok(&["history", "base"]);
    assert_eq!(h["versions"][1]["op"], "external");
    env.ok(&["restore", "base", "--version", "2"]);
    assert_eq!(
        env.ok(&["read", "base"])["data"],
        json!({"a": 1, "hand": true})
    );
}

#[test]
fn hand_created_category_is_adopted() {
    let env = TestEnv::new();
    env.ok(&["init"]);
    env.write_file("categories/notes.json", "{\"todo\": [\"buy milk\"]}\n");
    let r = env.ok(&["read", "notes"]);
    assert_eq!(r["data"], json!({"todo": ["buy milk"]}));
    assert_eq!(r["meta"]["version"], 1);
    assert_eq!(r["meta"]["updated_by"], "external");
    let l = env.ok(&["list"]);
    assert_eq!(l["categories"][0]["name"], "notes");
    let h = env.ok(&["history", "notes"]);
    assert_eq!(h["versions"][0]["op"], "external");
    assert_eq!(h["versions"][0]["parents"], json!([]));
    env.assert_clean();
}

#[test]
fn hand_delete_records_a_tombstone_by_external() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    env.ok(&["write", "other", "--data", r#"{"o": 1}"#]);
    std::fs::remove_file(env.path("categories/base.json")).unwrap();

    let e = env.fail(&["read", "base"], 4);
    assert_eq!(e["available"], json!(["other"]));
    let h = env.ok(&["history", "base"]);
    assert_eq!(h["status"], "deleted");
    let v = &h["versions"][0];
    assert_eq!(v["op"], "delete");
    assert_eq!(v["actor"], "external");
    assert_eq!(v["hash"], Value::Null);
    assert_eq!(v["version"], 2);
    let files = history_files(&env, "base");
    assert_eq!(files.len(), 2, "history must be kept and gain a tombstone");
    let tomb: Value =
        serde_json::from_str(&env.read(&format!("history/base/{}", files[1]))).unwrap();
    assert_eq!(tomb["op"], "delete");
    assert_eq!(tomb["actor"], "external");
    assert_eq!(tomb["content"], Value::Null);
    let list = env.ok(&["list"]);
    let names: Vec<&str> = list["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["other"]);
    // Recorded once, and restorable.
    env.ok(&["list"]);
    assert_eq!(history_files(&env, "base").len(), 2);
    env.ok(&["restore", "base", "--version", "1"]);
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 1}));
    env.assert_clean();
}

#[test]
fn fixing_a_malformed_hand_edit_by_hand_makes_it_readable_again() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    env.write_file("categories/base.json", "{\"v\": 2,\n");
    env.fail(&["read", "base"], 7);
    env.fail(&["write", "base", "--data", r#"{"v": 9}"#], 7);
    env.write_file("categories/base.json", "{\"v\": 2}\n");
    let r = env.ok(&["read", "base"]);
    assert_eq!(r["data"], json!({"v": 2}));
    assert_eq!(r["meta"]["updated_by"], "external");
    // The malformed state was never a version.
    let ops: Vec<String> = env.ok(&["history", "base"])["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["op"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ops, vec!["external", "write"]);
    env.assert_clean();
}

#[test]
fn hand_edited_log_keeps_working_as_a_log() {
    let env = TestEnv::new();
    env.ok(&["append", "journal", "--data", r#"{"e": 1}"#]);
    let mut log: Value = serde_json::from_str(&env.read("categories/journal.json")).unwrap();
    log["entries"][0]["data"] = json!({"e": "corrected by hand"});
    env.write_file(
        "categories/journal.json",
        &serde_json::to_string_pretty(&log).unwrap(),
    );
    env.ok(&["append", "journal", "--data", r#"{"e": 2}"#]);
    let data = env.ok(&["read", "journal"])["data"].clone();
    assert_eq!(
        data["entries"][0]["data"],
        json!({"e": "corrected by hand"})
    );
    assert_eq!(data["entries"][1]["data"], json!({"e": 2}));
    let ops: Vec<String> = env.ok(&["history", "journal"])["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["op"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ops, vec!["append", "external", "append"]);
    env.assert_clean();
}

// ---------------------------------------------------------------------------------------------
// Sessions edited by hand
// ---------------------------------------------------------------------------------------------

#[test]
fn hand_appended_chunk_line_is_fetched() {
    let env = TestEnv::new();
    env.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--project",
        "p",
        "--text",
        "one",
    ]);
    env.ok(&["ingest", "--session-id", "s", "--text", "two"]);
    assert_eq!(env.ok(&["overview"])["sessions"][0]["message_count"], 2);
    let last = last_line(&env, "s");
    let line = json!({
        "session_id": "s",
        "replica": last["replica"],
        "seq": 2,
        "hlc": bump_hlc(last["hlc"].as_str().unwrap(), 1),
        "ts": last["ts"],
        "project": "p",
        "metadata": {"by": "hand"},
        "content": "added by hand",
    });
    append_line(&env.segment_of("s"), &line.to_string());

    let f = env.ok(&["fetch", "s"]);
    assert_eq!(contents(&f), vec!["one", "two", "added by hand"]);
    let c = &f["chunks"][2];
    assert_eq!(c["position"], 2);
    assert_eq!(c["metadata"], json!({"by": "hand"}));
    assert_eq!(
        c["chunk_id"],
        format!("{}:2", last["replica"].as_str().unwrap()).as_str()
    );
    let o = env.ok(&["overview"]);
    assert_eq!(o["sessions"][0]["message_count"], 3);
    assert_eq!(env.ok(&["status"])["chunks"], 3);
    env.assert_clean();
}

#[test]
fn ingest_after_a_hand_appended_chunk_continues_after_it() {
    // The hand-appended line carries a later stamp than memdir's clock has issued (it was
    // written 5 s "ahead"): the next chunk must still get the next seq, a larger stamp and
    // the next position, and no position handed out earlier may move.
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_CLOCK", "2026-01-01T00:00:00Z");
    env.ok(&["ingest", "--session-id", "s", "--text", "one"]);
    let last = last_line(&env, "s");
    let line = json!({
        "session_id": "s",
        "replica": last["replica"],
        "seq": 1,
        "hlc": "20260101T000005000Z-0000",
        "ts": "2026-01-01T00:00:05.000Z",
        "project": "",
        "metadata": {},
        "content": "added by hand",
    });
    append_line(&env.segment_of("s"), &line.to_string());
    let before = env.ok(&["fetch", "s"]);
    assert_eq!(contents(&before), vec!["one", "added by hand"]);

    let r = env.ok(&["ingest", "--session-id", "s", "--text", "three"]);
    let after = env.ok(&["fetch", "s"]);
    assert_eq!(
        contents(&after),
        vec!["one", "added by hand", "three"],
        "a chunk ingested after the hand-appended one sorts before it"
    );
    assert_eq!(r["position"], 2);
    assert_eq!(after["chunks"][2]["position"], r["position"]);
    let l = last_line(&env, "s");
    assert_eq!(l["seq"], 2);
    assert!(
        l["hlc"].as_str().unwrap() > "20260101T000005000Z-0000",
        "stamp {} does not follow the hand-appended one",
        l["hlc"]
    );
    env.assert_clean();
}

#[test]
fn segment_of_another_replica_arriving_by_hand_is_merged_into_the_session() {
    // As after a `git pull`: another device's segment appears next to ours.
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_CLOCK", "2026-01-01T00:00:00Z");
    env.ok(&["ingest", "--session-id", "s", "--text", "local 0"]);
    env.ok(&["ingest", "--session-id", "s", "--text", "local 1"]);
    let remote: String = (0..2)
        .map(|i| {
            format!(
                "{}\n",
                json!({
                    "session_id": "s", "replica": "laptop-abcd", "seq": i,
                    "hlc": format!("20260101T00000{}000Z-0000", i + 1),
                    "ts": format!("2026-01-01T00:00:0{}.000Z", i + 1),
                    "project": "", "metadata": {}, "content": format!("remote {i}"),
                })
            )
        })
        .collect();
    env.write_file("sessions/s/laptop-abcd.jsonl", &remote);
    env.write_file(
        "sessions/only-remote/laptop-abcd.jsonl",
        &format!(
            "{}\n",
            json!({
                "session_id": "only-remote", "replica": "laptop-abcd", "seq": 0,
                "hlc": "20260101T000003000Z-0000", "ts": "2026-01-01T00:00:03.000Z",
                "project": "x", "metadata": {}, "content": "hello from the laptop",
            })
        ),
    );
    let f = env.ok(&["fetch", "s"]);
    assert_eq!(
        contents(&f),
        vec!["local 0", "local 1", "remote 0", "remote 1"]
    );
    assert_eq!(f["chunks"][2]["chunk_id"], "laptop-abcd:0");
    let positions: Vec<u64> = f["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["position"].as_u64().unwrap())
        .collect();
    assert_eq!(positions, vec![0, 1, 2, 3]);
    let o = env.ok(&["overview"]);
    assert_eq!(o["total"], 2);
    let s = o["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "s")
        .unwrap();
    assert_eq!(s["message_count"], 4);
    assert_eq!(
        contents(&env.ok(&["fetch", "only-remote"])),
        vec!["hello from the laptop"]
    );
    env.assert_clean();
}

#[test]
fn malformed_hand_appended_line_is_skipped_and_reported() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "one"]);
    append_line(&env.segment_of("s"), "{this is not a chunk}");
    assert_eq!(contents(&env.ok(&["fetch", "s"])), vec!["one"]);
    let st = env.ok(&["status"]);
    assert_eq!(st["malformed_lines"].as_array().unwrap().len(), 1, "{st}");
    assert_eq!(env.run(&["verify-store"]).code, 1);
    // Other sessions are unaffected.
    env.ok(&["ingest", "--session-id", "t", "--text", "two"]);
    assert_eq!(contents(&env.ok(&["fetch", "t"])), vec!["two"]);
}

// ---------------------------------------------------------------------------------------------
// `.memdir/` is disposable
// ---------------------------------------------------------------------------------------------

/// A store with a bit of everything: documents with several versions, a merge, a hand edit,
/// a deleted and a restored category, a log, and sessions with projects and metadata.
fn rich_store() -> TestEnv {
    let env = TestEnv::new();
    env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"name": "Ada", "editor": "vim"}"#,
        "--reason",
        "first",
    ]);
    env.ok(&[
        "write",
        "base",
        "--merge",
        "--data",
        r#"{"editor": "helix", "lang": "rust"}"#,
    ]);
    env.write_file(
        "categories/base.json",
        "{\"name\": \"Ada\", \"editor\": \"helix\", \"lang\": \"rust\", \"hand\": 1}\n",
    );
    env.ok(&["read", "base"]);
    env.ok(&["write", "gone", "--data", r#"{"x": 1}"#]);
    env.ok(&["delete", "gone"]);
    env.ok(&["write", "back", "--data", r#"{"v": 1}"#]);
    env.ok(&["write", "back", "--data", r#"{"v": 2}"#]);
    env.ok(&["delete", "back"]);
    env.ok(&["restore", "back", "--version", "1"]);
    for i in 0..3 {
        env.ok(&["append", "journal", "--data", &json!({"e": i}).to_string()]);
    }
    let batch: String = (0..5)
        .map(|i| {
            format!(
                "{}\n",
                json!({"session_id": if i % 2 == 0 { "s1" } else { "s2" },
                       "content": format!("chunk {i}"), "project": "web",
                       "metadata": {"i": i}})
            )
        })
        .collect();
    env.ok_stdin(&["ingest", "--jsonl", "-"], batch.as_bytes());
    env.ok(&["ingest", "--session-id", "Odd:Id", "--text", "odd"]);
    env
}

/// Everything a reader can see, as JSON.
fn observe(env: &TestEnv) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("list".into(), env.ok(&["list"]));
    out.insert("overview".into(), env.ok(&["overview"]));
    for c in ["base", "back", "journal"] {
        out.insert(format!("read {c}"), env.ok(&["read", c]));
        out.insert(
            format!("read {c} v1"),
            env.ok(&["read", c, "--version", "1"]),
        );
        out.insert(format!("diff {c}"), env.ok(&["diff", c]));
    }
    for c in ["base", "gone", "back", "journal"] {
        out.insert(format!("history {c}"), env.ok(&["history", c]));
    }
    out.insert("read gone".into(), env.fail(&["read", "gone"], 4));
    for s in ["s1", "s2", "Odd:Id"] {
        out.insert(format!("fetch {s}"), env.ok(&["fetch", s]));
    }
    out.insert(
        "fetch page".into(),
        env.ok(&["fetch", "s1", "--position", "1", "--limit", "1"]),
    );
    let st = env.ok(&["status"]);
    let mut counts = serde_json::Map::new();
    for k in [
        "sessions",
        "chunks",
        "categories",
        "logs",
        "malformed",
        "malformed_lines",
    ] {
        counts.insert(k.into(), st[k].clone());
    }
    out.insert("status".into(), Value::Object(counts));
    Value::Object(out)
}

fn assert_same(before: &Value, after: &Value) {
    for (k, v) in before.as_object().unwrap() {
        assert_eq!(
            &after[k], v,
            "`{k}` differs after deleting .memdir/\nbefore: {v:#}\nafter: {:#}",
            after[k]
        );
    }
}

#[test]
fn deleting_dot_memdir_loses_nothing() {
    let env = rich_store();
    env.assert_clean();
    let files_before = truth_files(&env.dir);
    let before = observe(&env);
    std::fs::remove_dir_all(env.path(".memdir")).unwrap();
    // verify-store is read-only and finds the files clean without a ledger.
    env.assert_clean();
    let after = observe(&env);
    assert_same(&before, &after);
    // Reading rebuilt only derived state: the truth files are as they were.
    assert_eq!(truth_files(&env.dir), files_before);
    env.assert_clean();
}

#[test]
fn writes_after_deleting_dot_memdir_continue_versions_and_positions() {
    let mut env = rich_store();
    let base_hash = env.ok(&["read", "base"])["meta"]["hash"]
        .as_str()
        .unwrap()
        .to_string();
    let base_version = env.ok(&["read", "base"])["meta"]["version"]
        .as_u64()
        .unwrap();
    let s1_total = env.ok(&["fetch", "s1"])["total"].as_u64().unwrap();
    let journal_len = env.ok(&["read", "journal"])["data"]["entries"]
        .as_array()
        .unwrap()
        .len();
    std::fs::remove_dir_all(env.path(".memdir")).unwrap();
    // This machine now mints a new replica id, as a fresh clone would.
    env.set_env("MEMDIR_SEED", "another-seed");

    // The first command is a write: compare-and-swap still works against the file.
    let w = env.ok(&[
        "write",
        "base",
        "--merge",
        "--data",
        r#"{"after": true}"#,
        "--expected-hash",
        &base_hash,
    ]);
    assert_eq!(w["version"], base_version + 1);
    env.fail(
        &[
            "write",
            "base",
            "--data",
            "{}",
            "--expected-hash",
            &base_hash,
        ],
        5,
    );
    let i = env.ok(&["ingest", "--session-id", "s1", "--text", "after"]);
    assert_eq!(i["position"], s1_total);
    let f = env.ok(&["fetch", "s1"]);
    assert_eq!(f["total"], s1_total + 1);
    assert_eq!(f["chunks"][s1_total as usize]["content"], "after");
    let a = env.ok(&["append", "journal", "--data", r#"{"e": "after"}"#]);
    assert_eq!(a["entries"], journal_len + 1);
    let entries = env.ok(&["read", "journal"])["data"]["entries"].clone();
    let ids: Vec<&str> = entries
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted);
    assert_eq!(entries[journal_len]["data"], json!({"e": "after"}));
    // Deleted categories stay deleted; restore still reaches their history.
    env.fail(&["read", "gone"], 4);
    env.ok(&["restore", "gone", "--version", "1"]);
    assert_eq!(env.ok(&["read", "gone"])["data"], json!({"x": 1}));
    env.assert_clean();
}

#[test]
fn hand_edit_made_while_dot_memdir_is_gone_is_still_adopted() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    std::fs::remove_dir_all(env.path(".memdir")).unwrap();
    env.write_file("categories/base.json", "{\"v\": 2}\n");
    let r = env.ok(&["read", "base"]);
    assert_eq!(r["data"], json!({"v": 2}));
    assert_eq!(r["meta"]["updated_by"], "external");
    assert_eq!(
        env.ok(&["history", "base"])["versions"][0]["op"],
        "external"
    );
    env.assert_clean();
}

/// A session directory unchanged since its last full listing is not listed again: only its
/// known segments are checked. Every hand change still shows: an append to a known segment,
/// a segment added next to it, one removed.
#[test]
fn hand_changes_in_a_session_directory_listed_before_are_all_noticed() {
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_CLOCK", "2026-01-01T00:00:00Z");
    env.ok(&["ingest", "--session-id", "s", "--text", "local 0"]);
    // Old enough for a scan to trust the directory's stamp from here on.
    std::thread::sleep(std::time::Duration::from_millis(2300));
    env.ok(&["overview"]);
    let (ledger, _) = memdir_engine::ledger::Ledger::open(
        &env.path(".memdir/ledger.db"),
        std::time::Duration::from_secs(5),
    )
    .unwrap();
    assert!(
        ledger
            .session_dir_stamps()
            .unwrap()
            .contains_key("sessions/s"),
        "the listing of sessions/s is recorded"
    );
    drop(ledger);
    assert_eq!(contents(&env.ok(&["fetch", "s"])), vec!["local 0"]);
    // An append to the known segment: its size and stamp change, not the directory's.
    let mut line = last_line(&env, "s");
    line["seq"] = json!(1);
    line["hlc"] = json!(bump_hlc(line["hlc"].as_str().unwrap(), 1));
    line["content"] = json!("appended by hand");
    append_line(&env.segment_of("s"), &line.to_string());
    assert_eq!(
        contents(&env.ok(&["fetch", "s"])),
        vec!["local 0", "appended by hand"]
    );
    // A segment of another replica added next to it.
    std::thread::sleep(std::time::Duration::from_millis(2300));
    env.ok(&["overview"]);
    let remote = json!({
        "session_id": "s", "replica": "laptop-abcd", "seq": 0,
        "hlc": "20260101T000009000Z-0000", "ts": "2026-01-01T00:00:09.000Z",
        "project": "", "metadata": {}, "content": "from the laptop",
    });
    env.write_file("sessions/s/laptop-abcd.jsonl", &format!("{remote}\n"));
    assert_eq!(
        contents(&env.ok(&["fetch", "s"])),
        vec!["local 0", "appended by hand", "from the laptop"]
    );
    let found = env.ok(&["search", "laptop", "--mode", "bm25"]);
    assert_eq!(found["count"], 1, "{found:#}");
    // And removed again.
    std::thread::sleep(std::time::Duration::from_millis(2300));
    env.ok(&["overview"]);
    std::fs::remove_file(env.path("sessions/s/laptop-abcd.jsonl")).unwrap();
    assert_eq!(
        contents(&env.ok(&["fetch", "s"])),
        vec!["local 0", "appended by hand"]
    );
    let gone = env.ok(&["search", "laptop", "--mode", "bm25"]);
    assert_eq!(gone["count"], 0, "{gone:#}");
    // Segment rows lost while the directory's stamp stays (a ledger schema change drops
    // them): the directory is listed again, nothing goes missing.
    std::thread::sleep(std::time::Duration::from_millis(2300));
    env.ok(&["overview"]);
    let db = rusqlite::Connection::open(env.path(".memdir/ledger.db")).unwrap();
    db.execute("DELETE FROM segment", []).unwrap();
    drop(db);
    let o = env.ok(&["overview", "--days", "0"]);
    assert_eq!(o["total"], 1, "{o:#}");
    assert_eq!(o["sessions"][0]["message_count"], 2, "{o:#}");
    env.assert_clean();
}

/// A long-lived process (a server) keeps the content it wrote last and does not parse that
/// file again while its bytes are unchanged. A hand edit in between is still the base of the
/// next merge, and is recorded as its own version first.
#[test]
fn a_server_merging_after_a_hand_edit_builds_on_the_edit() {
    let s = InProcess::new("prefs");
    let (dir, merge, read) = (&s.dir, |data| s.merge(data), || s.read());
    merge(json!({"a": 1, "b": 2}));
    merge(json!({"c": 3}));
    let w = merge(json!({"b": null}));
    assert_eq!(w.version, 3);
    // Behind the process's back, right after its write: same shape, other values.
    let file = dir.path().join("store/categories/prefs.json");
    std::fs::write(&file, "{\"a\": 10, \"c\": 30, \"hand\": true}\n").unwrap();
    let w = merge(json!({"d": 4}));
    assert_eq!(read(), json!({"a": 10, "c": 30, "d": 4, "hand": true}));
    assert_eq!(w.version, 5, "the hand edit is a version of its own: {w:?}");
    // The file holds what the response says, byte for byte.
    let hash_of_file = || {
        blake3::hash(&std::fs::read(&file).unwrap())
            .to_hex()
            .to_string()
    };
    assert_eq!(w.new_hash, Some(hash_of_file()));
    // Without a hand edit, merges keep building on the last one.
    merge(json!({"e": 5}));
    let w = merge(json!({"a": null}));
    assert_eq!(w.new_hash, Some(hash_of_file()));
    assert_eq!(read(), json!({"c": 30, "d": 4, "e": 5, "hand": true}));
    // An edit that keeps the length and the modification time of the file just written and
    // read (the process holds those bytes and their content): the process compares the bytes,
    // not the size or the clock.
    merge(json!({"g": 8}));
    assert_eq!(read()["g"], 8);
    let before = std::fs::read(&file).unwrap();
    let edited = String::from_utf8(before.clone())
        .unwrap()
        .replace("\"e\": 5", "\"e\": 6");
    assert_eq!(edited.len(), before.len());
    crate::util::write_keeping_mtime(&file, &edited);
    let w = merge(json!({"f": 7}));
    assert_eq!(
        read(),
        json!({"c": 30, "d": 4, "e": 6, "f": 7, "g": 8, "hand": true})
    );
    assert_eq!(w.new_hash, Some(hash_of_file()));
    // A hand edit laid out like memdir's files but with its keys out of order, read by the
    // process, then merged into: the merge must not splice into bytes it did not write, and
    // the file is canonical again.
    std::fs::write(&file, "{\n  \"z\": 1,\n  \"b\": 2\n}\n").unwrap();
    assert_eq!(read(), json!({"b": 2, "z": 1}));
    let w = merge(json!({"m": 3}));
    let want = json!({"b": 2, "m": 3, "z": 1});
    assert_eq!(read(), want);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        memdir_store::codec::to_pretty(&want)
    );
    assert_eq!(w.new_hash, Some(hash_of_file()));
}

/// A large category file is compared with the disk while a merge builds its new bytes, not
/// before, and only when its size and change time still match the ledger. An edit that keeps
/// both (a file system whose clock did not tick between the write and the edit; simulated
/// here by recording the edited file's stamp in the ledger), made right after the process
/// wrote or read the file, is still the base of the next merge and a version of its own.
#[test]
fn a_large_category_edited_by_hand_keeping_size_and_mtime_is_the_base_of_the_next_merge() {
    use memdir_api::HistoryRequest;
    use std::os::unix::fs::MetadataExt;
    let s = InProcess::new("big");
    let (dir, m, merge, read) = (&s.dir, &s.m, |data| s.merge(data), || s.read());
    let file = dir.path().join("store/categories/big.json");
    let whole: serde_json::Map<String, Value> = (0..4000)
        .map(|k| {
            (
                format!("key-{k:05}"),
                json!(format!("value {k:05} {}", "x".repeat(80))),
            )
        })
        .collect();
    merge(Value::Object(whole));
    assert!(std::fs::metadata(&file).unwrap().len() > 300_000);
    // Edits the file in place (one value changed, same length), then records the file's
    // stamp in the ledger as if its timestamps had not moved.
    let edit_unseen_by_stat = |from: &str, to: &str| {
        let before = std::fs::read_to_string(&file).unwrap();
        let edited = before.replacen(from, to, 1);
        assert_ne!(edited, before);
        assert_eq!(edited.len(), before.len());
        std::fs::write(&file, &edited).unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        let mtime = meta.mtime() * 1_000_000_000 + meta.mtime_nsec();
        let ctime = meta.ctime() * 1_000_000_000 + meta.ctime_nsec();
        let db = rusqlite::Connection::open(dir.path().join("store/.memdir/ledger.db")).unwrap();
        let n = db
            .execute(
                "UPDATE category SET mtime_ns = ?1 WHERE name = 'big'",
                [mtime.max(ctime)],
            )
            .unwrap();
        assert_eq!(n, 1);
    };
    let hash_of_file = || {
        blake3::hash(&std::fs::read(&file).unwrap())
            .to_hex()
            .to_string()
    };
    // Right after a merge the process holds the file's bytes.
    merge(json!({"after": 1}));
    edit_unseen_by_stat("value 00007 ", "VALUE 00007 ");
    let w = merge(json!({"next": 2}));
    let now = read();
    assert!(
        now["key-00007"].as_str().unwrap().starts_with("VALUE"),
        "the edit is kept"
    );
    assert_eq!(
        (now["after"].clone(), now["next"].clone()),
        (json!(1), json!(2))
    );
    assert_eq!(w.new_hash, Some(hash_of_file()));
    assert_eq!(w.version, 4, "the hand edit is a version of its own: {w:?}");
    // Right after a read, too.
    read();
    edit_unseen_by_stat("value 03999 ", "VALUE 03999 ");
    let w = merge(json!({"last": 3}));
    let now = read();
    assert!(now["key-03999"].as_str().unwrap().starts_with("VALUE"));
    assert!(now["key-00007"].as_str().unwrap().starts_with("VALUE"));
    assert_eq!(now["last"], 3);
    assert_eq!(w.new_hash, Some(hash_of_file()));
    let h = m
        .categories()
        .history(&HistoryRequest {
            category: "big".into(),
            limit: 50,
            ..Default::default()
        })
        .unwrap();
    let ops: Vec<Option<String>> = h.versions.iter().map(|v| v.op.clone()).collect();
    let external = ops.iter().filter(|o| o.as_deref() == Some("external"));
    assert_eq!(external.count(), 2, "{ops:?}");
}

/// A store opened in this process, as a server holds it, and one category in it.
struct InProcess {
    dir: tempfile::TempDir,
    m: memdir_engine::service::Memdir,
    category: &'static str,
}

impl InProcess {
    fn new(category: &'static str) -> InProcess {
        let dir = tempfile::tempdir().unwrap();
        let m = memdir_engine::service::Memdir::open(dir.path().join("store")).unwrap();
        InProcess { dir, m, category }
    }

    fn merge(&self, data: Value) -> memdir_api::WriteResponse {
        self.m
            .categories()
            .write(&memdir_api::WriteRequest {
                category: self.category.into(),
                data,
                merge: true,
                ..Default::default()
            })
            .unwrap()
    }

    fn read(&self) -> Value {
        self.m
            .categories()
            .read(&memdir_api::ReadRequest {
                category: self.category.into(),
                fields: None,
                version: None,
                as_of: None,
            })
            .unwrap()
            .data
    }
}
