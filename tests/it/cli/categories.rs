//! Categories: `read` with meta, fields and versions, and `write` with replace, merge and sizes.

use serde_json::json;

use super::{hash_of, history_files};
use crate::util::{TestEnv, truth_files};

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
