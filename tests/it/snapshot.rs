//! Snapshot, restore and export: a verified copy taken under the lock (also while other
//! processes write), a restore that checks before it swaps and parks the previous store, bad
//! input refused without a change, and exports that people read and `ingest --jsonl` loads.

use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::util::{TestEnv, truth_files};

fn seed(env: &TestEnv) {
    env.ok(&[
        "write",
        "base",
        "--data",
        "{\"name\": \"Ada\", \"editor\": \"helix\"}",
    ]);
    env.ok(&[
        "write",
        "base",
        "--merge",
        "--data",
        "{\"editor\": \"vim\"}",
    ]);
    env.ok(&["append", "journal", "--data", "{\"event\": \"deployed\"}"]);
    env.ok(&[
        "ingest",
        "--session-id",
        "s1",
        "--project",
        "web",
        "--ts",
        "2026-01-02T10:00:00Z",
        "--metadata",
        "{\"role\": \"user\"}",
        "--text",
        "the pool timed out",
    ]);
    env.ok(&[
        "ingest",
        "--session-id",
        "s1",
        "--project",
        "web",
        "--ts",
        "2026-01-02T10:01:00Z",
        "--metadata",
        "{\"role\": \"assistant\"}",
        "--text",
        "raise it to 60 seconds",
    ]);
    env.ok(&[
        "ingest",
        "--session-id",
        "s2",
        "--project",
        "cli",
        "--ts",
        "2025-06-01T00:00:00Z",
        "--text",
        "an older note",
    ]);
}

/// The same store as another environment sees it, by `--dir`.
fn at(env: &TestEnv, dir: &Path, args: &[&str]) -> Value {
    let mut full = vec!["--dir", dir.to_str().unwrap()];
    full.extend_from_slice(args);
    env.ok(&full)
}

fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    truth_files(dir)
        .into_iter()
        .map(|r| {
            let b = std::fs::read(dir.join(&r)).unwrap();
            (r, b)
        })
        .collect()
}

#[test]
fn a_snapshot_restores_to_the_same_store_and_the_previous_one_is_parked() {
    let env = TestEnv::new();
    seed(&env);
    let snap = env.tmp.path().join("snap");
    let out = env.ok(&["snapshot", snap.to_str().unwrap()]);
    assert_eq!(out["verified"], true);
    assert!(out["files"].as_u64().unwrap() >= 6, "{out}");
    assert!(snap.join("memdir-snapshot.json").is_file());
    assert!(
        !snap.join(".memdir").exists(),
        "derived state is not copied"
    );
    let original = tree(&env.dir);

    // Into a new place: no store is parked.
    let other = env.tmp.path().join("other");
    let r = at(&env, &other, &["restore-snapshot", snap.to_str().unwrap()]);
    assert_eq!(r["parked"], Value::Null);
    assert_eq!(tree(&other), original);
    assert_eq!(at(&env, &other, &["fetch", "s1"])["total"], 2);
    assert_eq!(at(&env, &other, &["read", "base"])["data"]["editor"], "vim");
    assert_ne!(at(&env, &other, &["search", "pool"])["count"], 0);
    let v = at(&env, &other, &["verify-store"]);
    assert_eq!(v["ok"], true, "{v:#}");

    // Over the store that changed since: it comes back, the changed one is parked.
    env.ok(&["write", "base", "--data", "{\"name\": \"changed\"}"]);
    env.ok(&[
        "ingest",
        "--session-id",
        "s3",
        "--text",
        "after the snapshot",
    ]);
    let changed = tree(&env.dir);
    let r = env.ok(&["restore-snapshot", snap.to_str().unwrap()]);
    let parked = Path::new(r["parked"].as_str().unwrap()).to_path_buf();
    assert!(
        parked
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("store.before-restore-")
    );
    assert_eq!(tree(&parked), changed);
    assert_eq!(tree(&env.dir), original);
    assert_eq!(env.category_data("base").unwrap()["name"], "Ada");
    assert!(env.session_contents("s3").is_empty());
    env.assert_clean();
    // Writes go on in the restored store.
    env.ok(&[
        "ingest",
        "--session-id",
        "s1",
        "--text",
        "after the restore",
    ]);
    assert_eq!(env.session_contents("s1").len(), 3);
    env.assert_clean();
}

#[test]
fn bad_snapshot_input_is_refused_and_changes_nothing() {
    let env = TestEnv::new();
    seed(&env);
    let busy = env.tmp.path().join("busy");
    std::fs::create_dir_all(&busy).unwrap();
    std::fs::write(busy.join("keep.txt"), "mine").unwrap();
    env.fail(&["snapshot", busy.to_str().unwrap()], 5);
    assert_eq!(std::fs::read_dir(&busy).unwrap().count(), 1);
    env.fail(&["snapshot", env.dir.join("inside").to_str().unwrap()], 3);
    let empty = TestEnv::new();
    empty.fail(&["snapshot", env.tmp.path().join("x").to_str().unwrap()], 4);

    let snap = env.tmp.path().join("snap");
    env.ok(&["snapshot", snap.to_str().unwrap()]);
    env.ok(&["write", "base", "--data", "{\"name\": \"current\"}"]);
    let before = tree(&env.dir);
    let listing = || -> Vec<_> {
        std::fs::read_dir(env.tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect()
    };
    let try_restore = |src: &Path, code: i32| {
        let parent_before = listing();
        let e = env.fail(&["restore-snapshot", src.to_str().unwrap()], code);
        assert_eq!(
            tree(&env.dir),
            before,
            "a refused restore changed the store: {e}"
        );
        let now = listing();
        assert_eq!(
            now.len(),
            parent_before.len(),
            "a refused restore left something beside the store: {now:?}"
        );
        e
    };
    let copy = |name: &str| {
        let d = env.tmp.path().join(name);
        for (rel, bytes) in tree(&snap).into_iter().chain([(
            "memdir-snapshot.json".to_string(),
            std::fs::read(snap.join("memdir-snapshot.json")).unwrap(),
        )]) {
            std::fs::create_dir_all(d.join(&rel).parent().unwrap()).unwrap();
            std::fs::write(d.join(&rel), bytes).unwrap();
        }
        d
    };
    // A tampered file.
    let tampered = copy("tampered");
    let seg = truth_files(&tampered)
        .into_iter()
        .find(|r| r.starts_with("sessions/"))
        .unwrap();
    let text = std::fs::read_to_string(tampered.join(&seg))
        .unwrap()
        .replace("pool", "POOL");
    std::fs::write(tampered.join(&seg), text).unwrap();
    let e = try_restore(&tampered, 7);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("differs from the manifest"),
        "{e}"
    );
    // A corrupt manifest.
    let corrupt = copy("corrupt");
    std::fs::write(
        corrupt.join("memdir-snapshot.json"),
        "{\"snapshot_format\": 1, \"files\": [",
    )
    .unwrap();
    try_restore(&corrupt, 7);
    // A manifest naming a place outside a store.
    let escape = copy("escape");
    let mut m: Value =
        serde_json::from_slice(&std::fs::read(escape.join("memdir-snapshot.json")).unwrap())
            .unwrap();
    m["files"][0]["path"] = json!("../outside");
    std::fs::write(escape.join("memdir-snapshot.json"), m.to_string()).unwrap();
    try_restore(&escape, 7);
    // A file the manifest does not list, and a missing one.
    let extra = copy("extra");
    std::fs::write(extra.join("categories/planted.json"), "{}\n").unwrap();
    try_restore(&extra, 7);
    // Anything else the manifest does not list, outside memdir's places too: a script at the
    // top, a planted `.memdir/`, a link, an empty directory. Each is named.
    let outside = copy("outside");
    std::fs::write(outside.join("run-me.sh"), "#!/bin/sh\n").unwrap();
    let e = try_restore(&outside, 7);
    assert!(e["message"].as_str().unwrap().contains("run-me.sh"), "{e}");
    let meta = copy("meta");
    std::fs::create_dir(meta.join(".memdir")).unwrap();
    std::fs::write(meta.join(".memdir/replica"), "{\"id\": \"x-0000\"}").unwrap();
    let e = try_restore(&meta, 7);
    assert_eq!(e["unlisted"], json!([".memdir", ".memdir/replica"]), "{e}");
    let linked = copy("linked");
    std::os::unix::fs::symlink(linked.join(&seg), linked.join("sessions/s1/zz.jsonl")).unwrap();
    try_restore(&linked, 7);
    let hollow = copy("hollow");
    std::fs::create_dir(hollow.join("sessions/empty")).unwrap();
    try_restore(&hollow, 7);
    let missing = copy("missing");
    std::fs::remove_file(missing.join(&seg)).unwrap();
    try_restore(&missing, 7);
    try_restore(&env.tmp.path().join("nothing-here"), 4);
    // Refused input left the snapshot itself usable.
    env.ok(&["restore-snapshot", snap.to_str().unwrap()]);
    assert_eq!(env.category_data("base").unwrap()["name"], "Ada");
}

#[test]
fn a_snapshot_taken_while_other_processes_write_restores_to_a_state_that_verifies() {
    let env = TestEnv::new();
    env.ok(&["init"]);
    let batch: String = (0..20)
        .map(|i| {
            format!(
                "{}\n",
                json!({"session_id": "busy", "content": format!("line {i}")})
            )
        })
        .collect();
    let mut writers = Vec::new();
    for _ in 0..3 {
        let mut child = env
            .command(&["ingest", "--jsonl", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let b = batch.clone();
        writers.push((
            child,
            std::thread::spawn(move || {
                use std::io::Write;
                let _ = stdin.write_all(b.as_bytes());
            }),
        ));
    }
    let mut snaps = Vec::new();
    for i in 0..3 {
        let snap = env.tmp.path().join(format!("snap{i}"));
        env.ok(&["snapshot", snap.to_str().unwrap()]);
        snaps.push(snap);
    }
    for (mut c, t) in writers {
        t.join().unwrap();
        assert!(c.wait().unwrap().success());
    }
    for (i, snap) in snaps.iter().enumerate() {
        let dir = env.tmp.path().join(format!("restored{i}"));
        at(&env, &dir, &["restore-snapshot", snap.to_str().unwrap()]);
        let v = at(&env, &dir, &["verify-store"]);
        assert_eq!(v["ok"], true, "{v:#}");
        // Batches are all or nothing: the snapshot holds whole batches only.
        let n = v["checked"]["chunks"].as_u64().unwrap();
        assert_eq!(n % 20, 0, "snapshot {i} holds {n} chunks");
    }
}

#[test]
fn export_writes_jsonl_that_ingest_loads_and_markdown_that_people_read() {
    let env = TestEnv::new();
    seed(&env);
    let first = env.ok(&["fetch", "s2"])["chunks"][0]["chunk_id"]
        .as_str()
        .unwrap()
        .to_string();
    env.ok(&[
        "ingest",
        "--session-id",
        "s2",
        "--text",
        "a secret to forget",
    ]);
    let id = env.ok(&["fetch", "s2"])["chunks"][1]["chunk_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(first, id);
    env.ok(&["forget", "--session-id", "s2", "--chunk-id", &id, "--yes"]);

    let r = env.run(&["export"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines.len(),
        3,
        "forgotten chunks are left out: {}",
        r.stdout
    );
    let s1 = env.ok(&["fetch", "s1"])["chunks"][0]["chunk_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        lines[0],
        json!({"session_id": "s1", "content": "the pool timed out", "project": "web", "metadata": {"role": "user"}, "ts": "2026-01-02T10:00:00.000Z", "source_id": format!("memdir:{s1}")})
    );
    // Another store loads it, with the original times; loading it again adds nothing.
    let copy = TestEnv::new();
    copy.ok_stdin(&["ingest", "--jsonl", "-"], r.stdout.as_bytes());
    assert_eq!(copy.session_contents("s1"), env.session_contents("s1"));
    let again = copy.ok_stdin(&["ingest", "--jsonl", "-"], r.stdout.as_bytes());
    assert_eq!(again["skipped"], 3, "{again}");
    assert_eq!(copy.session_contents("s1"), env.session_contents("s1"));
    assert_eq!(
        copy.ok(&["fetch", "s2"])["chunks"][0]["ts"],
        "2025-06-01T00:00:00.000Z"
    );

    let r = env.run(&[
        "export",
        "--project",
        "web",
        "--since",
        "2026-01-02T10:00:30Z",
    ]);
    assert_eq!(r.stdout.lines().count(), 1, "{}", r.stdout);
    assert!(r.stdout.contains("raise it to 60 seconds"));

    let md = env.run(&["export", "--format", "markdown"]).stdout;
    for want in [
        "# memdir export",
        "### Session `s1`",
        "Project: web",
        "**user** · 2026-01-02T10:00:00.000Z · #0",
        "the pool timed out",
        "### base",
        "\"editor\": \"vim\"",
        "### journal",
    ] {
        assert!(md.contains(want), "{want:?} missing from:\n{md}");
    }
    assert!(!md.contains("a secret to forget"));

    let file = env.tmp.path().join("out.jsonl");
    let out = env.ok(&["export", "--output", file.to_str().unwrap()]);
    assert_eq!(out["chunks"], 3);
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 3);
    // An existing file is not overwritten; a bad format or time is refused.
    env.fail(&["export", "--output", file.to_str().unwrap()], 5);
    env.fail(&["export", "--format", "csv"], 3);
    env.fail(&["export", "--since", "yesterday-ish"], 3);
}

/// A store that syncs over git, holds a conflict record and has a file of the user's beside the
/// memory: the snapshot copies the memory (the conflict record included), leaves `.git/` and the
/// stray file out, verifies, and restores to a store that verifies and still lists the conflict.
#[test]
fn a_snapshot_of_a_synced_store_with_a_conflict_copies_the_memory_only() {
    let env = TestEnv::new();
    seed(&env);
    // A conflict record as sync writes one, and the user's own notes file.
    let conflicts = env.dir.join("conflicts/base");
    std::fs::create_dir_all(&conflicts).unwrap();
    let record =
        serde_json::json!({"category": "base", "kind": "concurrent", "heads": []}).to_string();
    let name = format!("{}.json", &blake3::hash(record.as_bytes()).to_hex()[..16]);
    std::fs::write(conflicts.join(&name), &record).unwrap();
    std::fs::write(env.dir.join("NOTES.txt"), b"my own file").unwrap();
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&env.dir)
        .status()
        .unwrap();
    assert!(git.success());
    let snap = env.tmp.path().join("snap");
    let out = env.ok(&["snapshot", snap.to_str().unwrap()]);
    assert_eq!(out["verified"], true, "{out:#}");
    assert!(snap.join("conflicts/base").join(&name).is_file());
    assert!(!snap.join(".git").exists());
    assert!(!snap.join("NOTES.txt").exists());
    let other = env.tmp.path().join("other");
    at(&env, &other, &["restore-snapshot", snap.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_to_string(other.join("conflicts/base").join(&name)).unwrap(),
        record
    );
    assert_eq!(at(&env, &other, &["read", "base"])["data"]["editor"], "vim");
}

/// Risk: one link in the store made every snapshot fail. A link or special file in memdir's
/// places is neither followed nor copied: the snapshot takes every other file, names what it
/// skipped, and restores.
#[test]
fn a_link_or_a_fifo_in_the_store_is_skipped_and_named_by_a_snapshot() {
    let env = TestEnv::new();
    seed(&env);
    let outside = env.tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("diary.json"), "{\"secret\": 1}\n").unwrap();
    std::os::unix::fs::symlink(
        outside.join("diary.json"),
        env.path("categories/diary.json"),
    )
    .unwrap();
    std::os::unix::fs::symlink(&outside, env.path("sessions/linked")).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(env.path("history/base/pipe.json"))
            .status()
            .unwrap()
            .success()
    );
    let snap = env.tmp.path().join("snap");
    let r = env.ok(&["snapshot", snap.to_str().unwrap()]);
    assert_eq!(
        r["skipped"],
        json!([
            "categories/diary.json",
            "history/base/pipe.json",
            "sessions/linked"
        ]),
        "{r}"
    );
    for rel in [
        "categories/diary.json",
        "history/base/pipe.json",
        "sessions/linked",
    ] {
        assert!(
            std::fs::symlink_metadata(snap.join(rel)).is_err(),
            "{rel} was copied"
        );
    }
    assert!(snap.join("sessions/s2").is_dir());
    let other = TestEnv::new();
    other.ok(&["restore-snapshot", snap.to_str().unwrap()]);
    assert_eq!(other.category_data("base").unwrap()["editor"], "vim");
}
