//! Hostile and odd category names and session ids stay inside the store or are refused.

use serde_json::json;

use super::{contents, entries_outside_store, fail_stdin, names};
use crate::util::{TestEnv, truth_files};

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
