//! Output for people (`--human`, what a terminal gets by default), colour rules,
//! `--json`, the confirmation of destructive commands without a target, completions and the
//! man page. (A real terminal, through a pty: tests/python/test_terminal.py.)

use crate::util::TestEnv;

fn seeded() -> TestEnv {
    let env = TestEnv::new();
    for (s, text) in [
        ("s1", "we raised the pool timeout to 30 seconds"),
        ("s1", "then the deploy finished"),
        ("s2", "unrelated chatter about lunch"),
    ] {
        env.ok(&[
            "ingest",
            "--session-id",
            s,
            "--project",
            "web",
            "--text",
            text,
        ]);
    }
    env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"editor":"vim","name":"Ada"}"#,
    ]);
    env.ok(&[
        "write",
        "base",
        "--merge",
        "--data",
        r#"{"editor":"helix"}"#,
    ]);
    env
}

fn human(env: &TestEnv, args: &[&str]) -> String {
    let mut all = vec!["--human", "--color", "never"];
    all.extend_from_slice(args);
    let r = env.run(&all);
    assert_eq!(r.code, 0, "{}: {}", r.cmd, r.stderr);
    assert!(
        serde_json::from_str::<serde_json::Value>(&r.stdout).is_err(),
        "{} printed JSON:\n{}",
        r.cmd,
        r.stdout
    );
    assert!(!r.stdout.contains('\x1b'), "colour despite --color never");
    r.stdout
}

#[test]
fn commands_print_for_people_with_human_format() {
    let env = seeded();
    let out = human(&env, &["search", "pool timeout", "--context", "1"]);
    assert!(out.contains(" 1. s1#0 "), "{out}");
    assert!(out.contains("· web · score "), "{out}");
    assert!(
        out.contains("▶ we raised the [pool] [timeout] to 30 seconds"),
        "{out}"
    );
    assert!(out.contains("      1 then the deploy finished"), "{out}");
    assert!(out.contains(" · bm25"), "{out}");
    // Context lines before the hit, the hit, then those after, in session order.
    let hit_at = out.find("▶").unwrap();
    assert!(
        out.find("      1 then the deploy").unwrap() > hit_at,
        "{out}"
    );
    assert!(out.lines().count() < 12, "compact: {out}");

    let out = human(&env, &["overview"]);
    let header = out.lines().next().unwrap();
    assert!(
        header.starts_with("session  project  chunks  last active"),
        "{out}"
    );
    assert!(out.contains("2 of 2 sessions"), "{out}");

    let out = human(&env, &["list"]);
    assert!(
        out.lines()
            .nth(1)
            .unwrap()
            .starts_with("base  document  2 "),
        "{out}"
    );

    let out = human(&env, &["diff", "base"]);
    assert!(out.contains("-  \"editor\": \"vim\","), "{out}");
    assert!(out.contains("+  \"editor\": \"helix\","), "{out}");

    let out = human(&env, &["history", "base"]);
    assert!(out.contains("version  op     when"), "{out}");
    assert!(out.contains("merge"), "{out}");

    let out = human(&env, &["status"]);
    assert!(
        out.contains("2 sessions, 3 chunks · 1 category (0 logs)"),
        "{out}"
    );

    let out = human(&env, &["write", "notes", "--data", "{}"]);
    assert!(out.starts_with("wrote notes v1 "), "{out}");
    let out = human(&env, &["ingest", "--session-id", "s3", "--text", "x"]);
    assert!(out.starts_with("ingested into s3 at position 0"), "{out}");
    let export = env.tmp.path().join("all.jsonl");
    env.ok(&["export", "--output", export.to_str().unwrap()]);
    let out = human(
        &env,
        &["import", "jsonl", export.to_str().unwrap(), "--dry-run"],
    );
    assert!(
        out.starts_with("would import 4 chunks in 3 sessions from 1 file"),
        "{out}"
    );
    let out = human(&env, &["forget", "--session-id", "s2", "--dry-run"]);
    assert!(
        out.starts_with("would forget 1 chunk and 0 versions"),
        "{out}"
    );
    let out = human(&env, &["verify-store"]);
    assert!(
        out.starts_with("ok: files, history, ledger and index agree"),
        "{out}"
    );
}

#[test]
fn colour_follows_the_color_flag_and_no_color() {
    let mut env = seeded();
    let r = env.run(&["--human", "--color", "always", "diff", "base"]);
    assert!(r.stdout.contains("\x1b[31m-"), "{}", r.stdout);
    assert!(r.stdout.contains("\x1b[32m+"), "{}", r.stdout);
    let r = env.run(&["--human", "search", "pool"]);
    assert!(!r.stdout.contains('\x1b'), "auto colour off a terminal");
    env.set_env("NO_COLOR", "1");
    let r = env.run(&["--human", "--color", "always", "search", "pool"]);
    assert!(
        r.stdout.contains('\x1b'),
        "--color always wins over NO_COLOR"
    );
}

#[test]
fn json_is_unchanged_off_a_terminal_and_with_json() {
    let env = seeded();
    let plain = env.run(&["search", "pool"]).stdout;
    let forced = env.run(&["--json", "search", "pool"]).stdout;
    // Asking for both is a usage error, not a guess.
    assert_eq!(env.run(&["--human", "--json", "search", "pool"]).code, 2);
    let a: serde_json::Value = serde_json::from_str(&plain).unwrap();
    let b: serde_json::Value = serde_json::from_str(&forced).unwrap();
    assert_eq!(a["results"][0]["session_id"], "s1");
    assert_eq!(a, b);
}

#[test]
fn errors_for_people_are_one_line_and_the_hint() {
    let env = seeded();
    let r = env.run(&["--human", "--color", "never", "read", "nope"]);
    assert_eq!(r.code, 4);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert!(
        lines[0].starts_with("error (not_found): category \"nope\" does not exist"),
        "{}",
        r.stderr
    );
    assert!(
        lines[1].starts_with("  hint: `memdir list`"),
        "{}",
        r.stderr
    );
    // Off a terminal, errors stay JSON.
    let e = env.fail(&["read", "nope"], 4);
    assert_eq!(e["code"], "not_found");
}

#[test]
fn compact_without_a_category_needs_yes_off_a_terminal() {
    let env = seeded();
    env.ok(&["write", "base", "--data", r#"{"v":3}"#]);
    let before = env.snapshot();
    let e = env.fail(&["compact", "--keep", "1"], 3);
    assert_eq!(e["field"], "yes", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("every category"),
        "{e}"
    );
    assert!(env.snapshot() == before, "refused, but a file changed");
    // Naming the category needs no confirmation; --yes does it for all.
    env.ok(&["compact", "base", "--keep", "2"]);
    let r = env.ok(&["compact", "--keep", "1", "--yes"]);
    assert_eq!(r["removed"], 1, "{r}");
}

#[test]
fn completions_and_man_pages_come_from_the_same_definitions() {
    let env = TestEnv::new();
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let r = env.run(&["completions", shell]);
        assert_eq!(r.code, 0, "{shell}: {}", r.stderr);
        for word in ["search", "verify-store", "expected-hash"] {
            assert!(r.stdout.contains(word), "{shell} completions lack {word}");
        }
    }
    assert_ne!(env.run(&["completions", "tcsh"]).code, 0);
    let page = env.run(&["man"]).stdout;
    assert!(page.contains(".TH memdir 1"), "{page}");
    assert!(page.contains("verify\\-store"), "{page}");
    let dir = env.tmp.path().join("man1");
    let r = env.ok(&["man", "--out", dir.to_str().unwrap()]);
    assert!(r["written"].as_array().unwrap().len() > 20, "{r}");
    let search = std::fs::read_to_string(dir.join("memdir-search.1")).unwrap();
    assert!(
        search.contains(".TH memdir-search 1  \"memdir 0."),
        "{search}"
    );
    assert!(search.contains("\\-\\-since"), "{search}");
}
