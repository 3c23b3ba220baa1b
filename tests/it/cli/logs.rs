//! Log categories: `append`, retention by count and by age, and the document/log kind check.

use serde_json::{Value, json};

use super::{hash_of, is_hlc};
use crate::util::{TestEnv, truth_files};

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
