//! Corrupt and oversized files on disk, and other edges: huge numbers, closed stdout, `--dir`.

use serde_json::json;

use super::{NO_SUCH_HASH, contents, entries_outside_store, hash_of, names};
use crate::util::TestEnv;

#[test]
fn corrupt_category_file_is_reported_and_never_overwritten_without_say_so() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    env.ok(&["write", "other", "--data", r#"{"fine": true}"#]);
    env.ok(&["ingest", "--session-id", "s", "--text", "still here"]);
    let broken = "{\"v\": 2,,\n";
    env.write_file("categories/base.json", broken);
    let broken_hash = hash_of(&env, "categories/base.json");

    let e = env.fail(&["read", "base"], 7);
    assert_eq!(e["code"], "corrupt");
    assert_eq!(e["current_hash"], broken_hash.as_str());
    assert_eq!(e["category"], "base");
    // Other reads keep working.
    assert_eq!(env.ok(&["read", "other"])["data"], json!({"fine": true}));
    assert_eq!(contents(&env.ok(&["fetch", "s"])), vec!["still here"]);
    let l = env.ok(&["list"]);
    assert_eq!(names(&l), vec!["base", "other"]);
    assert_eq!(l["categories"][0]["status"], "malformed");
    assert_eq!(env.ok(&["status"])["malformed"], json!(["base"]));
    let r = env.run(&["verify-store"]);
    assert_eq!(r.code, 1, "verify-store must report the malformed file");
    // Writes without the caller's say are refused and leave the file alone.
    let e = env.fail(&["write", "base", "--data", r#"{"v": 3}"#], 7);
    assert_eq!(e["current_hash"], broken_hash.as_str());
    env.fail(&["write", "base", "--merge", "--data", r#"{"v": 3}"#], 7);
    env.fail(&["append", "base", "--data", r#"{"v": 3}"#], 7);
    env.fail(&["restore", "base", "--version", "1"], 7);
    env.fail(
        &[
            "write",
            "base",
            "--data",
            r#"{"v": 3}"#,
            "--expected-hash",
            NO_SUCH_HASH,
        ],
        5,
    );
    env.fail(
        &[
            "write",
            "base",
            "--data",
            r#"{"v": 3}"#,
            "--expected-hash",
            "absent",
        ],
        5,
    );
    assert_eq!(env.read("categories/base.json"), broken);
    // The hash shown as current_hash is the say-so.
    let w = env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"v": 3}"#,
        "--expected-hash",
        &broken_hash,
    ]);
    assert_eq!(w["previous_hash"], broken_hash.as_str());
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 3}));
    env.assert_clean();
}

#[test]
fn corrupt_category_can_be_restored_with_its_hash() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    env.write_file("categories/base.json", "[1, 2, 3]\n");
    let h = hash_of(&env, "categories/base.json");
    let e = env.fail(&["read", "base"], 7);
    assert_eq!(e["current_hash"], h.as_str());
    env.ok(&["restore", "base", "--version", "1", "--expected-hash", &h]);
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 1}));
    env.assert_clean();
}

#[test]
fn oversized_hand_placed_category_does_not_break_other_commands() {
    // A file over the 1 MiB write limit arrives by hand (or git pull): reads of other
    // categories, list and status must keep working.
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    env.write_file(
        "categories/huge.json",
        &json!({"k": "x".repeat(2 * 1024 * 1024)}).to_string(),
    );
    assert_eq!(env.ok(&["read", "base"])["data"], json!({"v": 1}));
    let l = env.ok(&["list"]);
    assert!(names(&l).contains(&"base".to_string()));
    env.ok(&["status"]);
    env.ok(&["write", "base", "--data", r#"{"v": 2}"#]);
}

#[test]
fn integers_beyond_64_bits_are_kept_exactly_or_refused() {
    // Silently rounding 18446744073709551616 to 1.8446744073709552e19 loses the user's data.
    let env = TestEnv::new();
    let r = env.run(&["write", "n", "--data", r#"{"id": 18446744073709551616}"#]);
    match r.code {
        0 => {
            let text = env.read("categories/n.json");
            assert!(
                text.contains("18446744073709551616"),
                "the number was rounded on disk:\n{text}"
            );
        }
        3 => assert!(!env.path("categories/n.json").exists()),
        c => {
            env.dump(&r);
            panic!("exit {c}");
        }
    }
}

#[test]
fn overview_with_a_huge_days_value_neither_panics_nor_hides_sessions() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "x"]);
    for days in ["200000000000", "18446744073709551615"] {
        let r = env.run(&["overview", "--days", days]);
        match r.code {
            0 => assert_eq!(r.json()["total"], 1, "--days {days}: {}", r.stdout),
            3 => {}
            c => {
                env.dump(&r);
                panic!("--days {days} exited {c}");
            }
        }
    }
}

#[test]
fn names_within_the_documented_length_limits_are_stored_or_refused_as_invalid() {
    // 128 characters for a category and 256 for a session id are documented as valid; their
    // escaped file names must not hit the file system's name limit as an I/O error (exit 8).
    let env = TestEnv::new();
    let category = "A".repeat(128);
    let session = "s".repeat(256);
    let wide_session = "ü".repeat(100);
    for (args, what) in [
        (
            vec!["write", category.as_str(), "--data", r#"{"a": 1}"#],
            "category",
        ),
        (
            vec!["ingest", "--session-id", session.as_str(), "--text", "x"],
            "session",
        ),
        (
            vec![
                "ingest",
                "--session-id",
                wide_session.as_str(),
                "--text",
                "x",
            ],
            "session",
        ),
    ] {
        let r = env.run(&args);
        assert!(
            r.code == 0 || r.code == 3,
            "{what} name of documented length: exit {}\n{}",
            r.code,
            r.stderr
        );
    }
    if env.dir.exists() {
        env.assert_clean();
    }
    assert_eq!(entries_outside_store(&env), Vec::<String>::new());
}

#[test]
fn closed_stdout_does_not_panic() {
    // `memdir fetch s | head -c 10`: the reader goes away mid-output.
    let env = TestEnv::new();
    let path = env.tmp.path().join("big.txt");
    std::fs::write(&path, "y".repeat(200 * 1024)).unwrap();
    env.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--file",
        path.to_str().unwrap(),
    ]);
    let mut child = env
        .command(&["fetch", "s"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Read;
        let mut out = child.stdout.take().unwrap();
        let mut buf = [0u8; 10];
        out.read_exact(&mut buf).unwrap();
        // Dropping `out` closes the pipe while 200 KiB are still to be written.
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked") && out.status.code() != Some(101),
        "exit {:?}, stderr:\n{stderr}",
        out.status.code()
    );
}

#[test]
fn dir_flag_wins_over_memdir_dir_and_xdg_data_home_is_the_default() {
    let mut env = TestEnv::new();
    let flag_dir = env.tmp.path().join("flagged");
    env.ok(&[
        "--dir",
        flag_dir.to_str().unwrap(),
        "write",
        "base",
        "--data",
        "{}",
    ]);
    assert!(flag_dir.join("categories/base.json").is_file());
    assert!(!env.dir.exists());
    env.ok(&["write", "env", "--data", "{}"]);
    assert!(env.path("categories/env.json").is_file());
    // Without MEMDIR_DIR: $XDG_DATA_HOME/memdir, else ~/.local/share/memdir.
    env.envs.retain(|(k, _)| k != "MEMDIR_DIR");
    let xdg = env.tmp.path().join("xdg");
    env.set_env("XDG_DATA_HOME", xdg.to_str().unwrap());
    env.ok(&["write", "xdg", "--data", "{}"]);
    assert!(xdg.join("memdir/categories/xdg.json").is_file());
    env.envs.retain(|(k, _)| k != "XDG_DATA_HOME");
    env.ok(&["write", "home", "--data", "{}"]);
    assert!(
        env.tmp
            .path()
            .join("home/.local/share/memdir/categories/home.json")
            .is_file()
    );
}

#[test]
fn doctor_reports_the_store_on_the_command_line_and_exits_1_on_a_problem() {
    let env = TestEnv::new();
    env.ok(&["write", "base", "--data", r#"{"v": 1}"#]);
    let r = env.run(&["doctor"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let d = r.json();
    assert_eq!(d["checks"]["ok"], true);
    assert_eq!(d["status"]["categories"], 1);
    assert!(d["dir"].as_str().is_some_and(|p| !p.is_empty()), "{d}");
    // A malformed category: the same report, the check fails, and the exit code says so; the
    // doctor changes nothing (the file keeps its bytes).
    env.write_file("categories/base.json", "{not json");
    let r = env.run(&["doctor"]);
    assert_eq!(
        r.code, 1,
        "doctor must report the malformed file: {}",
        r.stdout
    );
    assert_eq!(r.json()["checks"]["ok"], false);
    assert_eq!(
        std::fs::read(env.dir.join("categories/base.json")).unwrap(),
        b"{not json"
    );
    // For people: one line about the store, then the status and the check.
    let r = env.run(&["--human", "doctor"]);
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("writing as"), "{}", r.stdout);
    assert!(r.stdout.contains("problem"), "{}", r.stdout);
}
