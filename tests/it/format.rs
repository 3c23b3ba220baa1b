//! The store format version (`memdir.json`): written by init and by the first write to an
//! older store; a newer or unreadable format is refused by every command, which then changes
//! nothing.

use crate::util::TestEnv;

#[test]
fn init_records_the_format() {
    let env = TestEnv::new();
    env.ok(&["init"]);
    assert_eq!(env.read("memdir.json"), "{\n  \"format\": 1\n}\n");
    env.assert_clean();
}

#[test]
fn a_store_from_before_the_format_file_is_read_then_migrated_by_its_first_write() {
    let env = TestEnv::new();
    env.ok(&["write", "c", "--data", r#"{"a": 1}"#]);
    std::fs::remove_file(env.path("memdir.json")).unwrap();
    let v = env.ok(&["read", "c"]);
    assert_eq!(v["data"]["a"], 1);
    assert!(!env.path("memdir.json").exists(), "a read must not write");
    env.assert_clean();
    env.ok(&["write", "c", "--merge", "--data", r#"{"b": 2}"#]);
    assert_eq!(env.read("memdir.json"), "{\n  \"format\": 1\n}\n");
}

#[test]
fn a_newer_or_unreadable_format_is_refused_by_every_command() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "hello"]);
    env.ok(&["write", "c", "--data", r#"{"a": 1}"#]);
    for (text, code, want) in [
        ("{\n  \"format\": 4\n}\n", 8, "format 4"),
        ("not json", 7, "memdir.json"),
    ] {
        env.write_file("memdir.json", text);
        let before = env.snapshot();
        for args in [
            &["read", "c"][..],
            &["write", "c", "--data", r#"{"x": 1}"#],
            &["ingest", "--session-id", "s", "--text", "more"],
            &["search", "hello"],
            &["status"],
            &["verify-store"],
        ] {
            let r = env.run(args);
            assert_eq!(r.code, code, "{}: {}", r.cmd, r.stderr);
            assert!(
                r.error()["message"].as_str().unwrap().contains(want),
                "{}",
                r.stderr
            );
        }
        assert_eq!(env.snapshot(), before, "a refused store changed");
    }
}
