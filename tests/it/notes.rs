//! Notes through the CLI: the Markdown files under `notes/`, every change a version, compare-
//! and-swap, hand edits adopted, search by heading section, bad input refused, many writers at
//! once and crashes mid-write losing nothing acknowledged.

use serde_json::Value;

use crate::util::TestEnv;

fn history_of(env: &TestEnv, path: &str) -> Vec<Value> {
    env.ok(&["note", "history", path])["versions"]
        .as_array()
        .unwrap()
        .clone()
}

fn ops_of(env: &TestEnv, path: &str) -> Vec<String> {
    history_of(env, path)
        .iter()
        .map(|v| v["op"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_note_is_a_plain_file_and_every_change_a_version() {
    let env = TestEnv::new();
    let w = env.ok(&[
        "note",
        "write",
        "projects/orbital.md",
        "--text",
        "# Orbital\n\nDeploys go through staging-1.\n",
    ]);
    assert_eq!(w["version"], 1);
    assert_eq!(w["op"], "write");
    // The file is where a person looks for it, byte for byte.
    assert_eq!(
        env.read("notes/projects/orbital.md"),
        "# Orbital\n\nDeploys go through staging-1.\n"
    );
    assert!(
        env.read("memdir.json").contains("\"format\": 3"),
        "the first note raises the store format"
    );
    let a = env.ok(&[
        "note",
        "append",
        "projects/orbital.md",
        "--text",
        "- rollbacks take 5 minutes",
    ]);
    assert_eq!(a["line"], 4);
    let e = env.ok(&[
        "note",
        "edit",
        "projects/orbital.md",
        "--old-str",
        "staging-1",
        "--new-str",
        "staging-2",
    ]);
    assert_eq!(e["line"], 3);
    let i = env.ok(&[
        "note",
        "edit",
        "projects/orbital.md",
        "--insert-line",
        "1",
        "--insert-text",
        "Owner: Ada",
    ]);
    assert_eq!(i["version"], 4);
    let r = env.ok(&["note", "read", "projects/orbital.md"]);
    assert_eq!(
        r["text"],
        "# Orbital\nOwner: Ada\n\nDeploys go through staging-2.\n- rollbacks take 5 minutes\n"
    );
    assert_eq!(r["lines"], 5);
    assert_eq!(r["version"], 4);
    let part = env.ok(&["note", "read", "projects/orbital.md", "--view-range", "2,3"]);
    assert_eq!(part["text"], "Owner: Ada\n\n");
    assert_eq!(part["range"], serde_json::json!([2, 3]));
    // Old versions stay readable, by number and by hash.
    let v1 = env.ok(&["note", "read", "projects/orbital.md", "--version", "1"]);
    assert_eq!(v1["text"], "# Orbital\n\nDeploys go through staging-1.\n");
    assert_eq!(v1["current"], false);
    let by_hash = env.ok(&[
        "note",
        "read",
        "projects/orbital.md",
        "--version",
        &w["hash"].as_str().unwrap()[..12],
    ]);
    assert_eq!(by_hash["version"], 1);
    assert_eq!(
        ops_of(&env, "projects/orbital.md"),
        ["edit", "edit", "append", "write"]
    );
    let d = env.ok(&[
        "note",
        "diff",
        "projects/orbital.md",
        "--from",
        "2",
        "--to",
        "3",
    ]);
    assert!(
        d["diff"]
            .as_str()
            .unwrap()
            .contains("-Deploys go through staging-1.\n+Deploys go through staging-2.")
    );
    // Restore writes the old text again as a new version; nothing is lost.
    let rs = env.ok(&["note", "restore", "projects/orbital.md", "--version", "1"]);
    assert_eq!(rs["version"], 5);
    assert_eq!(
        env.read("notes/projects/orbital.md"),
        "# Orbital\n\nDeploys go through staging-1.\n"
    );
    // The same text again is no new version.
    let same = env.ok(&[
        "note",
        "write",
        "projects/orbital.md",
        "--text",
        "# Orbital\n\nDeploys go through staging-1.\n",
    ]);
    assert_eq!(same["unchanged"], true);
    assert_eq!(history_of(&env, "projects/orbital.md").len(), 5);
    // Rename: history follows, the old path keeps its own with a tombstone.
    env.ok(&["note", "mv", "projects/orbital.md", "archive/orbital.md"]);
    assert!(
        !env.path("notes/projects").exists(),
        "an emptied folder is removed"
    );
    assert_eq!(ops_of(&env, "archive/orbital.md"), ["rename"]);
    assert_eq!(ops_of(&env, "projects/orbital.md")[0], "delete");
    let gone = env.ok(&["note", "history", "projects/orbital.md"]);
    assert_eq!(gone["exists"], false);
    env.fail(&["note", "read", "projects/orbital.md"], 4);
    // Delete leaves a tombstone; restore brings the text back.
    env.ok(&["note", "rm", "archive/orbital.md"]);
    assert!(!env.path("notes/archive/orbital.md").exists());
    env.ok(&["note", "restore", "archive/orbital.md", "--version", "1"]);
    assert_eq!(
        env.read("notes/archive/orbital.md"),
        "# Orbital\n\nDeploys go through staging-1.\n"
    );
    let ls = env.ok(&["note", "ls"]);
    let paths: Vec<&str> = ls["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["archive/", "archive/orbital.md"]);
    env.assert_clean();
}

#[test]
fn a_stale_hash_loses_and_create_only_refuses_an_existing_note() {
    let env = TestEnv::new();
    let w1 = env.ok(&[
        "note",
        "write",
        "a.md",
        "--text",
        "one\n",
        "--expected-hash",
        "absent",
    ]);
    let h1 = w1["hash"].as_str().unwrap().to_string();
    let e = env.fail(
        &[
            "note",
            "write",
            "a.md",
            "--text",
            "x\n",
            "--expected-hash",
            "absent",
        ],
        5,
    );
    assert_eq!(e["code"], "conflict");
    assert_eq!(e["current_hash"], h1.as_str());
    let w2 = env.ok(&[
        "note",
        "write",
        "a.md",
        "--text",
        "two\n",
        "--expected-hash",
        &h1,
    ]);
    let h2 = w2["hash"].as_str().unwrap().to_string();
    // The hash from before the second write no longer holds, for every kind of change.
    for args in [
        vec!["note", "write", "a.md", "--text", "three\n"],
        vec!["note", "append", "a.md", "--text", "three"],
        vec!["note", "edit", "a.md", "--old-str", "two", "--new-str", "3"],
        vec!["note", "rm", "a.md"],
        vec!["note", "mv", "a.md", "b.md"],
        vec!["note", "restore", "a.md", "--version", "1"],
    ] {
        let mut args = args.clone();
        args.extend(["--expected-hash", &h1]);
        let e = env.fail(&args, 5);
        assert_eq!(e["current_hash"], h2.as_str(), "{args:?}");
    }
    assert_eq!(env.read("notes/a.md"), "two\n");
    assert_eq!(history_of(&env, "a.md").len(), 2);
    // An edit whose text is not there, or is there twice, changes nothing.
    env.ok(&["note", "append", "a.md", "--text", "two"]);
    let e = env.fail(
        &["note", "edit", "a.md", "--old-str", "two", "--new-str", "2"],
        5,
    );
    assert_eq!(e["lines"], serde_json::json!([1, 2]));
    let e = env.fail(
        &[
            "note",
            "edit",
            "a.md",
            "--old-str",
            "nine",
            "--new-str",
            "9",
        ],
        4,
    );
    assert_eq!(e["field"], "old_str");
    let e = env.fail(
        &[
            "note",
            "edit",
            "a.md",
            "--insert-line",
            "7",
            "--insert-text",
            "x",
        ],
        3,
    );
    assert_eq!(e["field"], "insert_line");
    assert_eq!(env.read("notes/a.md"), "two\ntwo\n");
    assert_eq!(history_of(&env, "a.md").len(), 3);
}

#[test]
fn hand_edits_are_adopted_before_a_change_and_never_overwritten_unseen() {
    let mut env = TestEnv::new();
    // Every open looks at every note (the interval's own test is below).
    env.set_env("MEMDIR_SCAN_INTERVAL_MS", "0");
    env.ok(&["note", "write", "MEMORY.md", "--text", "# Memory\n- a\n"]);
    // A person edits the file in an editor.
    env.write_file("notes/MEMORY.md", "# Memory\n- a\n- b (by hand)\n");
    let r = env.ok(&["note", "read", "MEMORY.md"]);
    assert_eq!(r["text"], "# Memory\n- a\n- b (by hand)\n");
    assert_eq!(r["updated_by"], "external");
    let hand_hash = r["hash"].as_str().unwrap().to_string();
    // An agent's append applies to the hand-edited text, which becomes a version first.
    env.ok(&[
        "note",
        "append",
        "MEMORY.md",
        "--text",
        "- c",
        "--expected-hash",
        &hand_hash,
    ]);
    assert_eq!(
        env.read("notes/MEMORY.md"),
        "# Memory\n- a\n- b (by hand)\n- c\n"
    );
    let h = history_of(&env, "MEMORY.md");
    assert_eq!(h[1]["op"], "external");
    assert_eq!(h[1]["actor"], "external");
    let v2 = env.ok(&["note", "read", "MEMORY.md", "--version", "2"]);
    assert_eq!(v2["text"], "# Memory\n- a\n- b (by hand)\n");
    // A note created by hand is found, searched and adopted on its first change.
    env.write_file(
        "notes/ideas/wiki.md",
        "# Wiki\nuse mdbook for the handbook\n",
    );
    let found = env.ok(&["search", "mdbook handbook", "--kind", "note"]);
    assert_eq!(found["results"][0]["path"], "ideas/wiki.md");
    env.ok(&[
        "note",
        "edit",
        "ideas/wiki.md",
        "--old-str",
        "mdbook",
        "--new-str",
        "zola",
    ]);
    assert_eq!(ops_of(&env, "ideas/wiki.md"), ["edit", "external"]);
    // A note removed by hand is a tombstone once memdir next changes it.
    std::fs::remove_file(env.path("notes/ideas/wiki.md")).unwrap();
    env.ok(&["note", "write", "ideas/wiki.md", "--text", "again\n"]);
    assert_eq!(
        ops_of(&env, "ideas/wiki.md"),
        ["write", "delete", "edit", "external"]
    );
    assert_eq!(history_of(&env, "ideas/wiki.md")[1]["actor"], "external");
    // verify-store sees the store as found; the next command adopts the edit.
    env.write_file("notes/ideas/wiki.md", "edited again\n");
    let v = env.run(&["verify-store"]).json();
    assert_eq!(v["problems"][0]["kind"], "unadopted_change", "{v}");
    env.ok(&["status"]);
    assert_eq!(env.ok(&["verify-store"])["ok"], true);
    assert_eq!(history_of(&env, "ideas/wiki.md")[0]["op"], "external");
}

#[test]
fn a_search_sees_a_hand_edit_made_a_scan_interval_before_it() {
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_SCAN_INTERVAL_MS", "60000");
    env.ok(&["note", "write", "a.md", "--text", "# A\nalpha\n"]);
    env.ok(&["search", "alpha"]);
    // Within the interval of the last scan (by any process) an open leaves notes unlooked at:
    // a note made by hand just now is not searched yet...
    env.write_file("notes/b.md", "# B\nquokka sightings\n");
    let r = env.ok(&["search", "quokka", "--kind", "note"]);
    assert_eq!(r["results"].as_array().unwrap().len(), 0, "{r}");
    // ...but the note's own commands see it at once, adopted as a version of its own, and
    // from then on search finds it.
    assert_eq!(ops_of(&env, "b.md"), ["external"]);
    let r = env.ok(&["search", "quokka", "--kind", "note"]);
    assert_eq!(r["results"][0]["path"], "b.md", "{r}");
    // status answers for every note whenever the last scan was.
    env.write_file("notes/a.md", "# A\nalpha and wombat\n");
    env.ok(&["status"]);
    let r = env.ok(&["search", "wombat", "--kind", "note"]);
    assert_eq!(r["results"][0]["path"], "a.md", "{r}");
    assert_eq!(ops_of(&env, "a.md"), ["external", "write"]);
    // Once the interval has passed, the next open looks again.
    env.set_env("MEMDIR_SCAN_INTERVAL_MS", "300");
    env.ok(&["status"]);
    env.write_file("notes/c.md", "# C\nnumbat burrows\n");
    std::thread::sleep(std::time::Duration::from_millis(400));
    let r = env.ok(&["search", "numbat", "--kind", "note"]);
    assert_eq!(r["results"][0]["path"], "c.md", "{r}");
    // An interval of 0 looks at every open.
    env.set_env("MEMDIR_SCAN_INTERVAL_MS", "0");
    env.write_file("notes/c.md", "# C\nbilby burrows\n");
    let r = env.ok(&["search", "bilby", "--kind", "note"]);
    assert_eq!(r["results"][0]["path"], "c.md", "{r}");
    assert_eq!(env.ok(&["verify-store"])["ok"], true);
}

#[test]
fn path_tricks_oversized_text_and_unreadable_files_are_refused_and_change_nothing() {
    let env = TestEnv::new();
    env.ok(&["note", "write", "Notes.md", "--text", "keep\n"]);
    let before = env.snapshot();
    for bad in [
        "../escape.md",
        "a/../../escape.md",
        "/abs.md",
        ".hidden.md",
        "a/.git/config",
        "a\\b.md",
        "c:x.md",
        "con.md",
        "a//b.md",
        "a/b/c/d/e/f/g/h/i.md",
        "",
    ] {
        let e = env.fail(&["note", "write", bad, "--text", "x"], 3);
        assert_eq!(e["field"], "path", "{bad:?}");
    }
    // A case twin would share a file on a case-insensitive file system.
    let e = env.fail(&["note", "write", "notes.md", "--text", "x"], 5);
    assert!(e["message"].as_str().unwrap().contains("Notes.md"), "{e}");
    let big = env.path("../big.md");
    std::fs::write(&big, "x".repeat(256 * 1024 + 1)).unwrap();
    let e = env.fail(
        &["note", "write", "big.md", "--file", big.to_str().unwrap()],
        9,
    );
    assert_eq!(e["code"], "too_large");
    assert_eq!(env.snapshot(), before, "a refused write changed the store");
    // A file that is not text is reported, never written over.
    std::fs::write(env.path("notes/bin.md"), [0xff, 0xfe, 0x00, 0x41]).unwrap();
    let e = env.fail(&["note", "read", "bin.md"], 7);
    assert_eq!(e["code"], "corrupt");
    env.fail(&["note", "write", "bin.md", "--text", "x"], 7);
    assert_eq!(
        std::fs::read(env.path("notes/bin.md")).unwrap(),
        [0xff, 0xfe, 0x00, 0x41]
    );
    // A link under notes/ is never followed.
    #[cfg(unix)]
    {
        let outside = env.path("../outside.md");
        std::fs::write(&outside, "outside\n").unwrap();
        std::os::unix::fs::symlink(&outside, env.path("notes/link.md")).unwrap();
        env.fail(&["note", "read", "link.md"], 7);
        env.fail(&["note", "write", "link.md", "--text", "x"], 7);
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside\n");
    }
}

#[test]
fn notes_are_searched_by_heading_section_with_the_kind_filter() {
    let env = TestEnv::new();
    env.ok(&[
        "note",
        "write",
        "runbook.md",
        "--text",
        "# Runbook\nintro\n## Deploys\nWe deploy on Tuesdays after the freeze.\n## Incidents\nPage the on-call.\n",
    ]);
    env.ok(&[
        "write",
        "base",
        "--data",
        r#"{"deploys": "Tuesdays are deploy days"}"#,
    ]);
    env.ok(&[
        "ingest",
        "--session-id",
        "s1",
        "--text",
        "we talked about deploy days on Tuesdays",
    ]);
    let all = env.ok(&["search", "deploy Tuesdays", "--limit", "10"]);
    let kinds: Vec<&str> = all["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["kind"].as_str().unwrap())
        .collect();
    for k in ["note", "category", "chunk"] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    let notes = env.ok(&["search", "deploy Tuesdays", "--kind", "note"]);
    let hit = &notes["results"][0];
    assert_eq!(hit["kind"], "note");
    assert_eq!(hit["path"], "runbook.md");
    assert_eq!(hit["heading"], "Runbook > Deploys");
    assert_eq!(hit["lines"], serde_json::json!([3, 4]));
    assert_eq!(hit["uri"], "memdir://notes/runbook.md");
    assert!(
        notes["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["kind"] == "note")
    );
    let cats = env.ok(&["search", "deploy Tuesdays", "--kind", "category"]);
    assert!(
        cats["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["kind"] == "category")
    );
    let exact = env.ok(&["search", "\"Page the on-call\"", "--kind", "note"]);
    assert_eq!(exact["results"][0]["heading"], "Runbook > Incidents");
    // A change is searchable at once; a deleted note is not found.
    env.ok(&[
        "note",
        "edit",
        "runbook.md",
        "--old-str",
        "Tuesdays",
        "--new-str",
        "Wednesdays",
    ]);
    let after = env.ok(&["search", "Wednesdays", "--kind", "note"]);
    assert_eq!(after["results"][0]["path"], "runbook.md");
    env.ok(&["note", "rm", "runbook.md"]);
    assert_eq!(
        env.ok(&["search", "Wednesdays", "--kind", "note"])["count"],
        0
    );
    // Reindex rebuilds note documents from the files; verify-store finds the index whole.
    env.ok(&["note", "write", "b.md", "--text", "# B\nzebra crossing\n"]);
    std::fs::remove_dir_all(env.path(".memdir/index")).unwrap();
    env.ok(&["reindex"]);
    assert_eq!(env.ok(&["search", "zebra", "--kind", "note"])["count"], 1);
    let v = env.ok(&["verify-store"]);
    assert_eq!(v["ok"], true, "{v}");
}

/// Eight processes append to and edit one note at once: every acknowledged change is there.
#[test]
fn eight_writers_on_one_note_lose_nothing_acknowledged() {
    const WRITERS: usize = 8;
    const EACH: usize = 6;
    let env = TestEnv::new();
    env.ok(&["note", "write", "shared.md", "--text", "# Shared\n"]);
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let env = &env;
            s.spawn(move || {
                for i in 0..EACH {
                    let mark = format!("w{w}-i{i}");
                    let r = env.run(&[
                        "note",
                        "append",
                        "shared.md",
                        "--text",
                        &format!("{mark} pending"),
                    ]);
                    assert_eq!(r.code, 0, "append {mark}: {}", r.stderr);
                    // Each writer then edits its own line, applied to the note as it is.
                    let r = env.run(&[
                        "note",
                        "edit",
                        "shared.md",
                        "--old-str",
                        &format!("{mark} pending"),
                        "--new-str",
                        &format!("{mark} done"),
                    ]);
                    assert_eq!(r.code, 0, "edit {mark}: {}", r.stderr);
                }
            });
        }
    });
    let text = env.read("notes/shared.md");
    for w in 0..WRITERS {
        for i in 0..EACH {
            assert!(
                text.contains(&format!("w{w}-i{i} done\n")),
                "w{w}-i{i} lost:\n{text}"
            );
        }
    }
    assert!(!text.contains("pending"), "{text}");
    assert_eq!(text.lines().count(), 1 + WRITERS * EACH);
    let total = env.ok(&["note", "history", "shared.md", "--limit", "1"])["total"].clone();
    assert_eq!(total, 1 + 2 * WRITERS * EACH);
}

/// A crash at each step of a note write's commit leaves the old note or the new one, with a
/// history that says which, and the next write goes on from it.
#[test]
fn a_crash_during_a_note_write_leaves_the_old_or_the_new_note() {
    let env = TestEnv::new();
    env.ok(&["note", "write", "n.md", "--text", "old\n"]);
    for fp in [
        "txn.after_stage",
        "txn.after_manifest",
        "txn.after_first_rename",
        "txn.after_publish",
        "ledger.before_update",
    ] {
        let r = env.run_env(
            &["note", "write", "n.md", "--text", &format!("new {fp}\n")],
            &[("MEMDIR_FAILPOINT", fp)],
            b"",
        );
        assert_eq!(
            r.signal,
            Some(6),
            "{fp}: expected an abort: {}",
            r.run.stderr
        );
        assert!(r.run.stdout.is_empty(), "{fp}: acknowledged");
        // The next command recovers: the note and its newest version agree.
        let now = env.ok(&["note", "read", "n.md"]);
        let text = now["text"].as_str().unwrap().to_string();
        assert!(
            text == "old\n" || text.starts_with("new "),
            "{fp}: {text:?}"
        );
        let head = &history_of(&env, "n.md")[0];
        assert_eq!(
            head["hash"], now["hash"],
            "{fp}: the history's head is not the file"
        );
        assert_ne!(
            now["updated_by"], "external",
            "{fp}: a torn write looked like a hand edit"
        );
        assert!(env.staging_entries().is_empty(), "{fp}: staging left");
        // Back to a known state for the next failpoint.
        env.ok(&["note", "write", "n.md", "--text", "old\n"]);
    }
}

/// `kill -9` at random instants while appends run: every append acknowledged is in the note.
#[test]
fn kill_nine_during_note_appends_loses_nothing_acknowledged() {
    let env = TestEnv::new();
    env.ok(&["note", "write", "log.md", "--text", "# Log\n"]);
    let mut acknowledged = Vec::new();
    let mut rng = crate::util::Rng(7);
    for i in 0..40 {
        let line = format!("entry {i}");
        let mut child = env.spawn(&["note", "append", "log.md", "--text", &line]);
        std::thread::sleep(std::time::Duration::from_millis(rng.below(12)));
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        if out.status.success() && !out.stdout.is_empty() {
            acknowledged.push(line);
        }
    }
    // The next command recovers whatever was half done.
    let text = env.ok(&["note", "read", "log.md"])["text"]
        .as_str()
        .unwrap()
        .to_string();
    for line in &acknowledged {
        assert!(
            text.contains(&format!("{line}\n")),
            "{line} acknowledged but lost:\n{text}"
        );
    }
    let head = &history_of(&env, "log.md")[0];
    assert_eq!(head["hash"], env.ok(&["note", "read", "log.md"])["hash"]);
    env.assert_clean();
}

#[test]
fn an_old_version_of_a_note_can_be_forgotten_but_not_the_current_one() {
    let env = TestEnv::new();
    env.ok(&[
        "note",
        "write",
        "s.md",
        "--text",
        "password hint: blue falcon\n",
    ]);
    env.ok(&["note", "write", "s.md", "--text", "nothing secret\n"]);
    let e = env.fail(&["forget", "--note", "s.md", "--version", "2", "--yes"], 5);
    assert_eq!(e["code"], "conflict");
    let dry = env.ok(&["forget", "--note", "s.md", "--version", "1", "--dry-run"]);
    assert_eq!(dry["count"], 1);
    let f = env.ok(&["forget", "--note", "s.md", "--version", "1", "--yes"]);
    assert_eq!(f["versions"][0]["category"], "notes/s.md");
    let again = env.ok(&["forget", "--note", "s.md", "--version", "1", "--yes"]);
    assert_eq!(again["count"], 0);
    let e = env.fail(&["note", "read", "s.md", "--version", "1"], 4);
    assert!(e["message"].as_str().unwrap().contains("no text"), "{e}");
    // No truth file holds the forgotten text any more; the history keeps its place.
    for f in crate::util::truth_files(&env.path("")) {
        let bytes = std::fs::read(env.path(&f)).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("blue falcon"),
            "{f}"
        );
    }
    assert_eq!(history_of(&env, "s.md").len(), 2);
    assert_eq!(env.ok(&["verify-store"])["ok"], true);
    env.fail(&["forget", "--note", "../x", "--version", "1", "--yes"], 3);
}

#[test]
fn the_clients_memory_files_come_in_as_notes_once() {
    let env = TestEnv::new();
    let home = env.path("../home");
    let claude = home.join(".claude");
    let mem = claude.join("projects/-home-me-app/memory");
    std::fs::create_dir_all(mem.join("topics")).unwrap();
    std::fs::write(mem.join("MEMORY.md"), "# App memory\n- uses pnpm\n").unwrap();
    std::fs::write(mem.join("topics/testing.md"), "# Testing\nrun vitest\n").unwrap();
    std::fs::write(claude.join("CLAUDE.md"), "# Me\nI prefer short answers\n").unwrap();
    // A transcript beside the memory is a session, not a note.
    std::fs::write(claude.join("projects/-home-me-app/abc.jsonl"), "{}\n").unwrap();
    let claude_dir = claude.to_str().unwrap();
    let r = env.ok(&["import", "claude-memory", claude_dir]);
    assert_eq!(r["notes"], 3, "{r}");
    assert_eq!(
        env.read("notes/imports/claude-code/-home-me-app/MEMORY.md"),
        "# App memory\n- uses pnpm\n"
    );
    assert!(
        env.path("notes/imports/claude-code/-home-me-app/topics/testing.md")
            .exists()
    );
    assert!(env.path("notes/imports/claude-code/CLAUDE.md").exists());
    // A second run adds nothing; a changed file adds one version.
    let again = env.ok(&["import", "claude-memory", claude_dir]);
    assert_eq!(again["notes"], 0);
    std::fs::write(
        mem.join("MEMORY.md"),
        "# App memory\n- uses pnpm\n- node 22\n",
    )
    .unwrap();
    let third = env.ok(&["import", "claude-memory", claude_dir]);
    assert_eq!(third["notes"], 1);
    assert_eq!(
        history_of(&env, "imports/claude-code/-home-me-app/MEMORY.md").len(),
        2
    );
    // The version keeps the file's time, not the import's.
    let mtime = std::fs::metadata(mem.join("MEMORY.md"))
        .unwrap()
        .modified()
        .unwrap();
    let secs = mtime
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let ts = history_of(&env, "imports/claude-code/-home-me-app/MEMORY.md")[0]["timestamp"]
        .as_str()
        .unwrap()
        .to_string();
    let got = chrono_like_secs(&ts);
    assert!((got - secs).abs() <= 1, "{ts} vs {secs}");
    // Codex's memories and a project's Cursor rules.
    let codex = home.join(".codex");
    std::fs::create_dir_all(codex.join("memories")).unwrap();
    std::fs::write(codex.join("memories/build.md"), "cargo build --release\n").unwrap();
    std::fs::write(codex.join("AGENTS.md"), "# Agents\nbe brief\n").unwrap();
    let c = env.ok(&["import", "codex-memories", codex.to_str().unwrap()]);
    assert_eq!(c["notes"], 2, "{c}");
    assert!(env.path("notes/imports/codex/memories/build.md").exists());
    let proj = env.path("../orbital");
    std::fs::create_dir_all(proj.join(".cursor/rules")).unwrap();
    std::fs::write(
        proj.join(".cursor/rules/style.mdc"),
        "---\nglobs: *.rs\n---\nuse rustfmt\n",
    )
    .unwrap();
    std::fs::write(proj.join(".cursorrules"), "be terse\n").unwrap();
    let cr = env.ok(&["import", "cursor-rules", proj.to_str().unwrap()]);
    assert_eq!(cr["notes"], 2, "{cr}");
    assert_eq!(
        env.read("notes/imports/cursor/orbital/style.mdc"),
        "---\nglobs: *.rs\n---\nuse rustfmt\n"
    );
    assert!(
        env.path("notes/imports/cursor/orbital/cursorrules")
            .exists()
    );
    // Imported notes are searched like any other.
    let hit = env.ok(&["search", "vitest", "--kind", "note"]);
    assert_eq!(
        hit["results"][0]["path"],
        "imports/claude-code/-home-me-app/topics/testing.md"
    );
}

/// Seconds since the epoch of an RFC 3339 UTC time (`2026-12-03T15:30:40.596Z`).
fn chrono_like_secs(ts: &str) -> i64 {
    let (date, time) = ts.split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let t: Vec<f64> = time
        .trim_end_matches('Z')
        .split(':')
        .map(|x| x.parse().unwrap())
        .collect();
    // Days from civil (Howard Hinnant's algorithm).
    let (y, m, dd) = (if d[1] <= 2 { d[0] - 1 } else { d[0] }, d[1], d[2]);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + dd - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + t[0] as i64 * 3600 + t[1] as i64 * 60 + t[2] as i64
}

#[test]
fn an_export_never_overwrites_a_file_changed_since() {
    let env = TestEnv::new();
    env.ok(&["note", "write", "team/a.md", "--text", "a1\n"]);
    env.ok(&["note", "write", "team/b.md", "--text", "b1\n"]);
    env.ok(&["note", "write", "other.md", "--text", "o\n"]);
    let out = env.path("../client-memory");
    let dir = out.to_str().unwrap();
    let e = env.ok(&["notes", "export", dir, "--folder", "team"]);
    assert_eq!(e["written"], serde_json::json!(["team/a.md", "team/b.md"]));
    assert_eq!(std::fs::read_to_string(out.join("a.md")).unwrap(), "a1\n");
    assert!(!out.join("other.md").exists());
    // The client edits one file; the store changes both notes.
    std::fs::write(out.join("b.md"), "b edited by the client\n").unwrap();
    env.ok(&["note", "write", "team/a.md", "--text", "a2\n"]);
    env.ok(&["note", "write", "team/b.md", "--text", "b2\n"]);
    let dry = env.ok(&["notes", "export", dir, "--folder", "team", "--dry-run"]);
    assert_eq!(dry["written"], serde_json::json!(["team/a.md"]));
    assert_eq!(
        std::fs::read_to_string(out.join("a.md")).unwrap(),
        "a1\n",
        "a dry run wrote"
    );
    let e = env.ok(&["notes", "export", dir, "--folder", "team"]);
    assert_eq!(e["written"], serde_json::json!(["team/a.md"]));
    assert_eq!(e["conflicts"][0]["path"], "team/b.md");
    assert_eq!(std::fs::read_to_string(out.join("a.md")).unwrap(), "a2\n");
    assert_eq!(
        std::fs::read_to_string(out.join("b.md")).unwrap(),
        "b edited by the client\n"
    );
    // Again: nothing to do but the same conflict.
    let e = env.ok(&["notes", "export", dir, "--folder", "team"]);
    assert_eq!(e["unchanged"], 1);
    assert_eq!(e["conflicts"].as_array().unwrap().len(), 1);
    // A file no export wrote is not overwritten either; the store itself is refused.
    env.ok(&["note", "write", "team/c.md", "--text", "c\n"]);
    std::fs::write(out.join("c.md"), "the client's own c\n").unwrap();
    let e = env.ok(&["notes", "export", dir, "--folder", "team"]);
    assert!(
        e["conflicts"].to_string().contains("no export wrote"),
        "{e}"
    );
    env.fail(&["notes", "export", env.path("notes").to_str().unwrap()], 3);
}

#[test]
fn access_rules_name_notes_by_path_and_secrets_are_redacted() {
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_DEVICE", "laptop");
    env.ok(&[
        "note",
        "write",
        "team/plan.md",
        "--text",
        "# Plan\nship the aurora release\n",
    ]);
    env.ok(&[
        "note",
        "write",
        "private/diary.md",
        "--text",
        "# Diary\naurora thoughts\n",
    ]);
    let cfg = env.path("../acl.toml");
    std::fs::write(
        &cfg,
        "[acl]\nadmin_devices = [\"laptop\"]\n\n[[acl.rules]]\ndevice = \"phone\"\nread = [\"notes/team/*\"]\nwrite = [\"notes/team/*\"]\n",
    )
    .unwrap();
    env.set_env("MEMDIR_CONFIG", cfg.to_str().unwrap());
    env.set_env("MEMDIR_DEVICE", "phone");
    let before = env.snapshot();
    for args in [
        vec!["note", "read", "private/diary.md"],
        vec!["note", "write", "private/diary.md", "--text", "x"],
        vec!["note", "mv", "team/plan.md", "private/plan.md"],
        vec![
            "memory-tool",
            "view",
            "--path",
            "/memories/private/diary.md",
        ],
    ] {
        let e = env.fail(&args, 12);
        assert_eq!(e["code"], "forbidden", "{args:?}");
    }
    assert_eq!(env.snapshot(), before);
    env.ok(&[
        "note",
        "append",
        "team/plan.md",
        "--text",
        "- phone was here",
    ]);
    // A search shows the phone only the sections it may read.
    let hits = env.ok(&["search", "aurora", "--kind", "note"]);
    let paths: Vec<&str> = hits["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["team/plan.md"]);
    // Secrets never reach a note's file or history.
    env.set_env("MEMDIR_DEVICE", "laptop");
    env.ok(&[
        "note",
        "write",
        "team/keys.md",
        "--text",
        "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 <private>my pin 1234</private> end\n",
    ]);
    let stored = env.read("notes/team/keys.md");
    assert!(
        !stored.contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        "{stored}"
    );
    assert!(!stored.contains("1234"), "{stored}");
    for f in crate::util::truth_files(&env.path("")) {
        let b = String::from_utf8_lossy(&std::fs::read(env.path(&f)).unwrap()).into_owned();
        assert!(
            !b.contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
            "{f}"
        );
    }
}

/// How many note changes the ledger's feed holds (what the index is told to re-read).
fn note_changes(env: &TestEnv) -> i64 {
    env.ledger_ints("SELECT count(*) FROM change WHERE kind = 'note'")[0]
}

/// A copy or a restore of the store sets every file's status-change time and keeps its text
/// and modification time: the notes are not sent to the index again. A note whose file was
/// written after its recorded stamp (a write whose ledger update failed) still is, and so is
/// a hand edit.
#[test]
fn a_copied_stores_notes_are_not_indexed_again_but_a_missed_write_is() {
    use std::os::unix::fs::PermissionsExt;
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_SCAN_INTERVAL_MS", "0");
    for i in 0..5 {
        env.ok(&[
            "note",
            "write",
            &format!("n{i}.md"),
            "--text",
            &format!("# N\nwombat {i}\n"),
        ]);
    }
    env.ok(&["search", "wombat"]);
    let before = note_changes(&env);
    let stamp = |env: &TestEnv| env.ledger_ints("SELECT mtime_ns FROM note WHERE path = 'n0.md'");
    let stamped = stamp(&env);
    std::thread::sleep(std::time::Duration::from_millis(20));
    for i in 0..5 {
        let p = env.path(&format!("notes/n{i}.md"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    env.ok(&["status"]);
    assert_ne!(
        stamp(&env),
        stamped,
        "the scan saw the new status-change times"
    );
    assert_eq!(
        note_changes(&env),
        before,
        "touched notes were sent to the index"
    );
    // The ledger's stamp of n2 from before its last write: the write's ledger update was lost.
    let db = rusqlite::Connection::open(env.path(".memdir/ledger.db")).unwrap();
    db.execute(
        "UPDATE note SET mtime_ns = mtime_ns - 5000000000, hash = 'an older version' WHERE path = 'n2.md'",
        [],
    )
    .unwrap();
    drop(db);
    env.ok(&["status"]);
    assert_eq!(
        note_changes(&env),
        before + 1,
        "a missed write was not re-read"
    );
    // A note made unreadable by hand leaves the index; its text put back (even with its old
    // modification time, as a restore from a backup does) is indexed again.
    let p3 = env.path("notes/n3.md");
    let text3 = std::fs::read(&p3).unwrap();
    crate::util::write_keeping_mtime(&p3, b"\xff\xfe not text");
    let r = env.ok(&["search", "wombat", "--kind", "note", "--limit", "10"]);
    assert_eq!(r["results"].as_array().unwrap().len(), 4, "{r}");
    crate::util::write_keeping_mtime(&p3, &text3);
    let r = env.ok(&["search", "wombat", "--kind", "note", "--limit", "10"]);
    assert_eq!(r["results"].as_array().unwrap().len(), 5, "{r}");
    // A hand edit is adopted and indexed as ever.
    env.write_file("notes/n1.md", "# N\nnumbat\n");
    let r = env.ok(&["search", "numbat", "--kind", "note"]);
    assert_eq!(r["results"][0]["path"], "n1.md", "{r}");
    assert_eq!(ops_of(&env, "n1.md"), ["external", "write"]);
}
