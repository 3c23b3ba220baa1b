//! Category lifecycle: list, delete, history, diff, restore and compact.

use serde_json::{Value, json};

use super::{hash_of, history_files, names};
use crate::util::TestEnv;

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
    let r = env.ok(&["compact", "--keep", "1", "--yes"]);
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
