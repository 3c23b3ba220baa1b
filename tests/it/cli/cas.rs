//! Compare-and-swap: `--expected-hash` conflicts and create-only writes.

use serde_json::{Value, json};

use super::{NO_SUCH_HASH, history_files};
use crate::util::TestEnv;

#[test]
fn expected_hash_mismatch_is_a_conflict_with_the_current_hash() {
    let env = TestEnv::new();
    let w1 = env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    let h1 = w1["new_hash"].as_str().unwrap().to_string();
    let w2 = env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"v": 2}"#,
        "--expected-hash",
        &h1,
    ]);
    assert_eq!(w2["previous_hash"], h1.as_str());
    let h2 = w2["new_hash"].as_str().unwrap().to_string();
    // A stale hash loses, and learns the current one.
    let e = env.fail(
        &[
            "write",
            "base",
            "--data",
            r#"{"v": 3}"#,
            "--expected-hash",
            &h1,
        ],
        5,
    );
    assert_eq!(e["code"], "conflict");
    assert_eq!(e["current_hash"], h2.as_str());
    let e = env.fail(
        &[
            "write",
            "base",
            "--merge",
            "--data",
            r#"{"v": 3}"#,
            "--expected-hash",
            NO_SUCH_HASH,
        ],
        5,
    );
    assert_eq!(e["current_hash"], h2.as_str());
    let e = env.fail(&["delete", "base", "--expected-hash", &h1], 5);
    assert_eq!(e["current_hash"], h2.as_str());
    let e = env.fail(
        &["restore", "base", "--version", "1", "--expected-hash", &h1],
        5,
    );
    assert_eq!(e["current_hash"], h2.as_str());
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 2}));
    assert_eq!(history_files(&env, "base").len(), 2);
    // Retrying with the hash from the error succeeds.
    let w3 = env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"v": 3}"#,
        "--expected-hash",
        &h2,
    ]);
    let h3 = w3["new_hash"].as_str().unwrap().to_string();
    env.ok(&["delete", "base", "--expected-hash", &h3]);
    assert!(!env.path("categories/base.json").exists());
    env.assert_clean();
}

#[test]
fn expected_hash_absent_creates_only_if_the_category_does_not_exist() {
    let env = TestEnv::new();
    let w = env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"v": 1}"#,
        "--expected-hash",
        "absent",
    ]);
    assert_eq!(w["previous_hash"], Value::Null);
    let e = env.fail(
        &[
            "write",
            "base",
            "--data",
            r#"{"v": 2}"#,
            "--expected-hash",
            "absent",
        ],
        5,
    );
    assert_eq!(e["current_hash"], w["new_hash"]);
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 1}));
    // A hash for a category that does not exist is a conflict too, with no current hash.
    let e = env.fail(
        &[
            "write",
            "other",
            "--data",
            "{}",
            "--expected-hash",
            NO_SUCH_HASH,
        ],
        5,
    );
    assert_eq!(e["current_hash"], Value::Null);
    assert!(!env.path("categories/other.json").exists());
    // After a delete, "absent" holds again.
    env.ok(&["delete", "base"]);
    env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"v": 3}"#,
        "--expected-hash",
        "absent",
    ]);
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 3}));
    env.assert_clean();
}

#[test]
fn the_twelve_digits_a_terminal_shows_are_enough_for_expected_hash() {
    let env = TestEnv::new();
    let w1 = env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    let h1 = w1["new_hash"].as_str().unwrap().to_string();
    let shown = &h1[..12];
    // The prefix a person copies from `memdir read` on a terminal wins like the whole hash.
    let w2 = env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"v": 2}"#,
        "--expected-hash",
        shown,
    ]);
    assert_eq!(w2["previous_hash"], h1.as_str());
    // Once the category moved on, the old prefix is a conflict that names the current hash.
    let e = env.fail(&["delete", "base", "--expected-hash", shown], 5);
    assert_eq!(e["code"], "conflict");
    assert_eq!(e["current_hash"], w2["new_hash"]);
    // Fewer than twelve digits could match another version by chance: refused as invalid.
    let h2 = w2["new_hash"].as_str().unwrap();
    let e = env.fail(&["delete", "base", "--expected-hash", &h2[..11]], 3);
    assert_eq!(e["code"], "invalid");
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 2}));
}
