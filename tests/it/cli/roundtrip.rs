//! Round trips: write then read, `init`, and reads on a store that does not exist.

use serde_json::json;

use super::entries_outside_store;
use crate::util::{TestEnv, truth_files};

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
    let c = env.ok(&["compact", "--yes"]);
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

#[test]
fn version_alone_answers_at_once_and_the_flag_of_a_command_stays_its_own() {
    let env = crate::util::TestEnv::new();
    let want = format!("memdir {}\n", env!("CARGO_PKG_VERSION"));
    for flag in ["--version", "-V"] {
        let r = env.run(&[flag]);
        assert_eq!(
            (r.code, r.stdout.as_str()),
            (0, want.as_str()),
            "{flag}: {}",
            r.stderr
        );
    }
    // After a command, --version is that command's (a category version), not the program's.
    env.ok(&["write", "base", "--data", r#"{"a": 1}"#]);
    assert_eq!(env.ok(&["read", "base", "--version", "1"])["data"]["a"], 1);
}
