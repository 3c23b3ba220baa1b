//! Hand edits to categories and sessions, malformed files included, show in the next search.

use serde_json::Value;

use super::{assert_window, contents, hand_edit_line, key, key_set, keys, rows, search};
use crate::util::TestEnv;

#[test]
fn a_hand_edited_category_value_is_found_and_the_old_value_is_not() {
    let env = TestEnv::new();
    env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"color": "turquoise", "pet": "heron"}"#,
    ]);
    assert_eq!(keys(&search(&env, &["turquoise"])), vec!["base:color"]);
    env.write_file(
        "categories/base.json",
        "{\n  \"color\": \"magenta\",\n  \"pet\": \"heron\"\n}\n",
    );
    let v = search(&env, &["magenta"]);
    assert_eq!(keys(&v), vec!["base:color"], "{v:#}");
    assert_eq!(rows(&v)[0]["updated_by"], "external");
    for mode in ["auto", "bm25", "exact"] {
        let v = search(&env, &["turquoise", "--mode", mode]);
        assert_eq!(v["count"], 0, "{mode}: {v:#}");
    }
    // The hash a hit reports is the edited file's.
    let hash = env.ok(&["read", "base"])["meta"]["hash"].clone();
    assert_eq!(rows(&search(&env, &["heron"]))[0]["hash"], hash);
    env.assert_clean();
}

#[test]
fn a_hand_deleted_category_file_is_no_longer_found() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"color": "turquoise"}"#]);
    env.ok(&["write", "other", "--data", r#"{"color": "turquoise too"}"#]);
    assert_eq!(search(&env, &["turquoise"])["count"], 2);
    std::fs::remove_file(env.path("categories/base.json")).unwrap();
    for mode in ["auto", "bm25", "exact"] {
        let v = search(&env, &["turquoise", "--mode", mode]);
        assert_eq!(keys(&v), vec!["other:color"], "{mode}: {v:#}");
    }
    env.assert_clean();
}

#[test]
fn a_hand_edited_session_line_is_found_by_its_new_words_only() {
    let env = TestEnv::new();
    for t in ["we flew to zanzibar", "then took a ferry", "and a long nap"] {
        env.ok(&["ingest", "--session-id", "trip", "--text", t]);
    }
    env.ok(&[
        "ingest",
        "--session-id",
        "other",
        "--text",
        "unrelated words",
    ]);
    assert_eq!(search(&env, &["zanzibar", "--mode", "exact"])["count"], 1);
    hand_edit_line(&env, "trip", 0, "we flew to kilimanjaro instead");
    let v = search(&env, &["kilimanjaro"]);
    assert_eq!(rows(&v)[0]["content"], "we flew to kilimanjaro instead");
    assert_eq!(key(&rows(&v)[0]), "trip#0");
    for mode in ["auto", "bm25", "exact"] {
        let v = search(&env, &["zanzibar", "--mode", mode]);
        assert!(
            contents(&v).iter().all(|c| !c.contains("zanzibar")),
            "{mode}: the old words are still served: {v:#}"
        );
        assert_eq!(v["count"], 0, "{mode}: {v:#}");
    }
    // The window shows the edited text too.
    let v = search(&env, &["ferry", "--mode", "exact"]);
    assert_eq!(
        rows(&v)[0]["context"][0]["content"],
        "we flew to kilimanjaro instead"
    );
    env.assert_clean();
}

#[test]
fn a_hand_appended_session_line_is_found() {
    let env = TestEnv::new();
    for t in ["first line", "second line"] {
        env.ok(&["ingest", "--session-id", "log", "--text", t]);
    }
    search(&env, &["line"]);
    let path = env.segment_of("log");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    last["seq"] = Value::from(last["seq"].as_u64().unwrap() + 1);
    let hlc = last["hlc"].as_str().unwrap().to_string();
    let (time, counter) = hlc.split_at(20);
    last["hlc"] = Value::from(format!("{time}{:04}", counter.parse::<u32>().unwrap() + 1));
    last["content"] = Value::from("a narwhal typed by hand");
    std::fs::write(&path, format!("{text}{last}\n")).unwrap();
    let v = search(&env, &["narwhal", "--mode", "exact"]);
    assert_eq!(keys(&v), vec!["log#2"], "{v:#}");
    assert_window(&env, &rows(&v)[0], 0, 2);
    env.assert_clean();
}

#[test]
fn a_malformed_category_file_breaks_no_other_search() {
    let env = TestEnv::new();
    env.ok(&[
        "write",
        "good",
        "--data",
        r#"{"x": "walrus in a good file"}"#,
    ]);
    env.ok(&["write", "bad", "--data", r#"{"x": "walrus in a bad file"}"#]);
    env.ok(&["ingest", "--session-id", "s", "--text", "walrus in a chunk"]);
    env.write_file("categories/bad.json", "{\"x\": \"walrus broken");
    for mode in ["auto", "bm25", "exact"] {
        let v = search(&env, &["walrus", "--mode", mode, "--limit", "100"]);
        let k = key_set(&v);
        assert!(k.contains("good:x") && k.contains("s#0"), "{mode}: {v:#}");
    }
    env.ok(&["reindex"]);
    let v = search(&env, &["walrus", "--limit", "100"]);
    assert!(key_set(&v).contains("good:x"), "{v:#}");
}

#[test]
fn a_hand_deleted_session_directory_is_gone_from_results() {
    let env = TestEnv::new();
    for (s, t) in [
        ("doomed", "ECONNREFUSED in the doomed session"),
        ("doomed", "the doomed pelican"),
        ("kept", "ECONNREFUSED in the kept session"),
    ] {
        env.ok(&["ingest", "--session-id", s, "--text", t]);
    }
    assert_eq!(search(&env, &["ECONNREFUSED"])["count"], 2);
    std::fs::remove_dir_all(env.path("sessions/doomed")).unwrap();
    let v = search(&env, &["ECONNREFUSED"]);
    assert_eq!(keys(&v), vec!["kept#0"], "{v:#}");
    for mode in ["auto", "bm25", "exact"] {
        let v = search(&env, &["pelican", "--mode", mode]);
        assert_eq!(v["count"], 0, "{mode}: {v:#}");
        let v = search(&env, &["session", "--mode", mode, "--session", "doomed"]);
        assert_eq!(v["count"], 0, "{mode}: {v:#}");
    }
    env.assert_clean();
}
