//! `blame`: which version set each key's current value.

use serde_json::{Value, json};

use crate::util::TestEnv;

/// `memdir ARGS` as device `device`.
fn as_device(env: &TestEnv, device: &str, args: &[&str]) -> Value {
    let out = env.run_env(args, &[("MEMDIR_DEVICE", device)], b"");
    assert_eq!(out.run.code, 0, "{}", out.run.stderr);
    serde_json::from_str(&out.run.stdout).unwrap()
}

fn line<'a>(b: &'a Value, key: &str) -> &'a Value {
    b["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["key"] == key)
        .unwrap_or_else(|| panic!("no line for {key}: {b}"))
}

#[test]
fn each_key_is_blamed_on_the_version_that_set_its_value_not_on_later_rewrites() {
    let env = TestEnv::new();
    as_device(
        &env,
        "alice",
        &[
            "write",
            "profile",
            "--data",
            r#"{"city": "Lyon", "job": "baker"}"#,
            "--reason",
            "first",
        ],
    );
    as_device(
        &env,
        "bob",
        &[
            "write",
            "profile",
            "--merge",
            "--data",
            r#"{"job": "pilot"}"#,
            "--reason",
            "new job",
        ],
    );
    // A whole rewrite that keeps city and job as they were and adds pets.
    as_device(
        &env,
        "carol",
        &[
            "write",
            "profile",
            "--data",
            r#"{"city": "Lyon", "job": "pilot", "pets": 2}"#,
        ],
    );
    let b = env.ok(&["blame", "profile"]);
    assert_eq!(b["category"], "profile");
    assert_eq!(b["version"], 3);
    assert_eq!(b["keys"].as_array().unwrap().len(), 3);
    let city = line(&b, "city");
    assert_eq!(
        (city["version"].clone(), city["actor"].clone()),
        (json!(1), json!("alice"))
    );
    assert_eq!(city["reason"], "first");
    assert_eq!(city["value"], "Lyon");
    let job = line(&b, "job");
    assert_eq!(
        (job["version"].clone(), job["actor"].clone()),
        (json!(2), json!("bob"))
    );
    assert_eq!(job["reason"], "new job");
    assert_eq!(job["op"], "merge");
    let pets = line(&b, "pets");
    assert_eq!(
        (pets["version"].clone(), pets["actor"].clone()),
        (json!(3), json!("carol"))
    );
    assert_eq!(pets["reason"], Value::Null);
    assert!(job["timestamp"].as_str().unwrap().ends_with('Z'));
    assert!(
        b["keys"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l.get("at_least").is_none())
    );
    // The ids are the history files'.
    let h = env.ok(&["history", "profile"]);
    assert_eq!(job["id"], h["versions"][1]["id"]);
}

#[test]
fn a_value_changed_back_is_blamed_on_the_change_back() {
    let env = TestEnv::new();
    env.ok(&["write", "s", "--data", r#"{"mode": "a"}"#]);
    env.ok(&["write", "s", "--data", r#"{"mode": "b"}"#]);
    env.ok(&["write", "s", "--data", r#"{"mode": "a"}"#]);
    assert_eq!(line(&env.ok(&["blame", "s"]), "mode")["version"], 3);
}

#[test]
fn a_hand_edit_is_blamed_on_its_external_version() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"a": 1, "b": 1}"#]);
    std::fs::write(env.path("categories/base.json"), "{\"a\": 1, \"b\": 5}\n").unwrap();
    let b = env.ok(&["blame", "base"]);
    assert_eq!(b["version"], 2);
    assert_eq!(line(&b, "a")["version"], 1);
    assert_eq!(line(&b, "b")["version"], 2);
    assert_eq!(line(&b, "b")["actor"], "external");
}

#[test]
fn path_blames_the_keys_of_a_nested_object() {
    let env = TestEnv::new();
    env.ok(&[
        "write",
        "prefs",
        "--data",
        r#"{"editor": {"theme": "dark", "font": 12}, "x": 1}"#,
    ]);
    env.ok(&[
        "write",
        "prefs",
        "--data",
        r#"{"editor": {"theme": "dark", "font": 14}, "x": 1}"#,
    ]);
    let b = env.ok(&["blame", "prefs", "--path", "/editor"]);
    assert_eq!(b["path"], "/editor");
    assert_eq!(line(&b, "theme")["version"], 1);
    assert_eq!(line(&b, "font")["version"], 2);
    assert_eq!(line(&b, "font")["value"], 14);
    // The top level: editor changed in version 2 as a whole value.
    let top = env.ok(&["blame", "prefs"]);
    assert_eq!(line(&top, "editor")["version"], 2);
    assert_eq!(line(&top, "x")["version"], 1);
}

#[test]
fn versions_trimmed_by_compact_make_the_answer_a_lower_bound() {
    let env = TestEnv::new();
    env.ok(&["write", "c", "--data", r#"{"k": 1}"#]);
    env.ok(&["write", "c", "--data", r#"{"k": 1, "j": 2}"#]);
    env.ok(&["write", "c", "--data", r#"{"k": 1, "j": 2, "i": 3}"#]);
    env.ok(&["compact", "c", "--keep", "1"]);
    let b = env.ok(&["blame", "c"]);
    let k = line(&b, "k");
    assert_eq!(k["version"], 3);
    assert_eq!(k["at_least"], true);
}

#[test]
fn bad_requests_are_clear_errors_and_change_nothing() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"a": {"b": 1}, "n": 3}"#]);
    let before = crate::util::truth_files(&env.dir);
    for (args, code, needle) in [
        (vec!["blame", "nope"], "not_found", "does not exist"),
        (
            vec!["blame", "base", "--path", "a"],
            "invalid",
            "JSON Pointer",
        ),
        (
            vec!["blame", "base", "--path", "/n"],
            "invalid",
            "no object at",
        ),
        (
            vec!["blame", "base", "--path", "/zzz"],
            "invalid",
            "no object at",
        ),
        (vec!["blame", "../etc"], "invalid", ""),
    ] {
        let r = env.run(&args);
        assert_ne!(r.code, 0, "{args:?}");
        let e = r.error();
        assert_eq!(e["code"], code, "{args:?}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains(needle),
            "{args:?}: {e}"
        );
    }
    assert_eq!(crate::util::truth_files(&env.dir), before);
    env.ok(&["delete", "base"]);
    assert_eq!(env.run(&["blame", "base"]).error()["code"], "not_found");
}

#[test]
fn blame_reads_for_people_too() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"a": 1}"#, "--reason", "seed"]);
    let out = env.run(&["blame", "base", "--human"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("base"), "{}", out.stdout);
    assert!(out.stdout.contains("seed"), "{}", out.stdout);
    assert!(out.stdout.contains("test-device"), "{}", out.stdout);
}
