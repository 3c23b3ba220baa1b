//! Regression tests for bugs found by an outside attack on the store, each named after the
//! bug it guards against.

use std::io::{BufRead, BufReader};

use serde_json::Value;

use crate::util::TestEnv;

/// Hits of `memdir search QUERY --mode exact` as their content strings.
fn exact_hits(env: &TestEnv, query: &str) -> Vec<String> {
    let v = env.ok(&["search", query, "--mode", "exact", "--context", "0"]);
    v["results"]
        .as_array()
        .unwrap_or_else(|| panic!("search answer without results: {v}"))
        .iter()
        .map(|h| h["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Bug: catch-up read the change feed, then took the feed's generation under the store lock
/// and recorded that generation as absorbed, so a write acknowledged in between counted as
/// indexed without being indexed: search never found it and status said `current`.
#[test]
fn a_write_acknowledged_while_catch_up_runs_is_indexed() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "first words"]);
    assert_eq!(exact_hits(&env, "first").len(), 1);
    // The index is now behind by one chunk; a searcher catches up and pauses inside catch-up.
    env.ok(&["ingest", "--session-id", "s", "--text", "second zebra"]);
    let mut searcher = env
        .command(&["search", "zebra", "--mode", "exact"])
        .env("MEMDIR_FAILPOINT", "catchup.before_snapshot=pause:1500")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn searcher");
    let mut err = BufReader::new(searcher.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        let n = err.read_line(&mut line).unwrap();
        assert!(n > 0, "the searcher ended before its pause");
        if line.contains("failpoint catchup.before_snapshot") {
            break;
        }
    }
    // Acknowledged while the searcher is inside catch-up, in a session the searcher has not
    // seen change, and a category too.
    env.ok(&["ingest", "--session-id", "t", "--text", "third quokka"]);
    env.ok(&["write", "notes", "--data", r#"{"animal": "wombat"}"#]);
    let out = searcher.wait_with_output().unwrap();
    assert!(out.status.success(), "the paused search failed");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["results"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(
        exact_hits(&env, "quokka"),
        vec!["third quokka".to_string()],
        "a chunk acknowledged during catch-up is missing from the index"
    );
    let v = env.ok(&["search", "wombat", "--kind", "category"]);
    assert_eq!(
        v["results"].as_array().map(Vec::len),
        Some(1),
        "a category version acknowledged during catch-up is missing from the index: {v}"
    );
    env.assert_clean();
}

/// The same promise under load: processes ingesting while others search; afterwards every
/// acknowledged chunk is found by an exact search for its unique word.
#[test]
fn concurrent_ingests_and_searches_index_every_acknowledged_chunk() {
    const WRITERS: usize = 4;
    const SEARCHERS: usize = 3;
    const ROUNDS: usize = 12;
    let mut env = TestEnv::new();
    env.set_env("MEMDIR_LOCK_TIMEOUT_MS", "30000");
    env.ok(&["init"]);
    let done = std::sync::atomic::AtomicBool::new(false);
    let acked = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|p| {
                let (env, acked) = (&env, &acked);
                s.spawn(move || {
                    for i in 0..ROUNDS {
                        let word = format!("uniq{p}x{i}");
                        let session = format!("s{}", i % 4);
                        let r = env.run(&["ingest", "--session-id", &session, "--text", &word]);
                        if r.code == 0 {
                            acked.lock().unwrap().push(word);
                        } else {
                            assert_eq!(r.code, 6, "ingest failed: {}", r.stderr);
                        }
                    }
                })
            })
            .collect();
        for q in 0..SEARCHERS {
            let (env, done) = (&env, &done);
            s.spawn(move || {
                // Bounded in count; stops once the writers are done.
                for _ in 0..1000 {
                    if done.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let r = env.run(&["search", &format!("uniq{q}x1"), "--limit", "1"]);
                    assert!(r.code == 0 || r.code == 6, "search failed: {}", r.stderr);
                }
            });
        }
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let acked = acked.into_inner().unwrap();
    assert!(!acked.is_empty());
    let missing: Vec<_> = acked
        .iter()
        .filter(|w| exact_hits(&env, w).is_empty())
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged but not indexed: {missing:?}"
    );
    env.assert_clean();
}

/// Bug: a chunk line carrying the largest stamp (a hand edit, another replica's segment) made
/// the next stamp overflow to one memdir could not parse: the next chunk was invisible to
/// fetch, and two category writes got the same version id, the second overwriting the first's
/// history file.
#[test]
fn a_far_future_stamp_neither_breaks_the_clock_nor_reuses_a_version_id() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "before"]);
    let seg = env.segment_of("s");
    let text = std::fs::read_to_string(&seg).unwrap();
    let line: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let mut forged = line.clone();
    forged["seq"] = 1.into();
    forged["hlc"] = "99991231T235959999Z-9999".into();
    forged["content"] = "from the far future".into();
    std::fs::write(&seg, format!("{text}{forged}\n")).unwrap();

    let v = env.ok(&["ingest", "--session-id", "s", "--text", "after"]);
    assert_eq!(v["position"], 2, "{v}");
    let page = env.ok(&["fetch", "s"]);
    let contents: Vec<_> = page["chunks"]
        .as_array()
        .unwrap_or_else(|| panic!("no chunks: {page}"))
        .iter()
        .map(|c| c["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(contents, ["before", "from the far future", "after"]);
    // The forged stamp moved only its own segment on: other sessions keep the wall clock.
    env.ok(&["ingest", "--session-id", "t", "--text", "elsewhere"]);
    let other = std::fs::read_to_string(env.segment_of("t")).unwrap();
    let line: Value = serde_json::from_str(other.lines().last().unwrap()).unwrap();
    assert!(
        !line["hlc"].as_str().unwrap().starts_with("9999"),
        "the clock followed the forged stamp: {line}"
    );

    env.ok(&["write", "c", "--data", r#"{"v": 1}"#]);
    env.ok(&["write", "c", "--data", r#"{"v": 2}"#]);
    let hist = env.ok(&["history", "c"]);
    assert_eq!(hist["total"], 2, "{hist}");
    let files = std::fs::read_dir(env.path("history/c")).unwrap().count();
    assert_eq!(files, 2, "two writes must leave two history files");
    let old = env.ok(&["read", "c", "--version", "1"]);
    assert_eq!(old["data"]["v"], 1, "{old}");

    // verify-store names the forged stamp.
    let r = env.run(&["verify-store"]);
    let report = r.json();
    let problems = report["problems"].as_array().unwrap();
    assert!(
        problems.iter().any(|p| p["kind"] == "future_stamp"),
        "{report:#}"
    );
}

/// Runs `memdir ARGS` and kills it after `secs`: a command that hangs fails the test instead
/// of stalling it.
fn run_bounded(env: &TestEnv, args: &[&str], secs: u64) -> crate::util::Run {
    let mut child = env
        .command(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn memdir");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`memdir {}` hung for {secs} s", args.join(" "));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    crate::util::Run {
        cmd: format!("memdir {}", args.join(" ")),
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn a_config_path_naming_a_fifo_hangs_neither_a_command_nor_the_hook() {
    let mut env = TestEnv::new();
    env.ok(&["init"]);
    let fifo = env.tmp.path().join("config.fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    env.set_env("MEMDIR_CONFIG", fifo.to_str().unwrap());
    let r = run_bounded(&env, &["status"], 30);
    assert_ne!(r.code, 0, "a FIFO is no config file: {}", r.stdout);
    assert!(
        r.stderr.contains("config.fifo") && r.stderr.contains("not a regular file"),
        "{}",
        r.stderr
    );
    // The hook never holds an agent up: it logs and exits 0.
    let r = run_bounded(&env, &["hook", "claude-code", "--timeout-ms", "2000"], 30);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

fn problem_kinds(env: &TestEnv) -> Vec<String> {
    let r = run_bounded(env, &["verify-store"], 60);
    let v = r.json();
    v["problems"]
        .as_array()
        .unwrap_or_else(|| panic!("verify-store without problems: {v}"))
        .iter()
        .map(|p| p["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Bug: torn-tail repair opened a segment for writing through a symbolic link, so a read-only
/// command cut the last line off a file outside the store (or appended a newline to it), and
/// linked directories were followed for writes.
#[test]
fn no_command_writes_through_a_link_inside_the_store() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "x", "--text", "hello links"]);
    env.ok(&["write", "c", "--data", r#"{"a": 1}"#]);
    let outside = env.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    // An outside file whose last line is unterminated garbage, and one whose last line is a
    // whole chunk without its newline.
    let line = std::fs::read_to_string(env.segment_of("x")).unwrap();
    let chunk = line
        .lines()
        .next()
        .unwrap()
        .replace("hello links", "outside chunk");
    let garbage = outside.join("garbage.txt");
    let unterminated = outside.join("chunk.txt");
    std::fs::write(&garbage, "keep me\nno newline at the end").unwrap();
    std::fs::write(&unterminated, &chunk).unwrap();
    let sx = env.path("sessions/x");
    std::os::unix::fs::symlink(&garbage, sx.join("other-aaaa.jsonl")).unwrap();
    std::os::unix::fs::symlink(&unterminated, sx.join("other-bbbb.jsonl")).unwrap();
    // A linked session directory and a linked history directory.
    std::os::unix::fs::symlink(&outside, env.path("sessions/y")).unwrap();
    let before = crate::util::truth_files(&outside);

    for args in [
        vec!["status"],
        vec!["list"],
        vec!["read", "c"],
        vec!["fetch", "x"],
        vec!["search", "hello"],
        vec!["search", "outside"],
        vec!["reindex"],
        vec!["verify-store"],
    ] {
        let r = run_bounded(&env, &args, 60);
        assert!(
            r.code == 0 || args == ["verify-store"],
            "{}: {}",
            r.cmd,
            r.stderr
        );
    }
    // Writes into the linked session directory are refused; nothing lands outside.
    let r = env.run(&["ingest", "--session-id", "y", "--text", "through the link"]);
    assert_ne!(
        r.code, 0,
        "an ingest wrote through a linked session directory"
    );
    assert!(r.stderr.contains("symbolic link"), "{}", r.stderr);
    assert_eq!(
        std::fs::read_to_string(&garbage).unwrap(),
        "keep me\nno newline at the end"
    );
    assert_eq!(std::fs::read_to_string(&unterminated).unwrap(), chunk);
    assert_eq!(crate::util::truth_files(&outside), before);
    // Search does not serve the linked segment's content.
    let v = env.ok(&["search", "outside", "--mode", "exact"]);
    assert_eq!(v["results"].as_array().map(Vec::len), Some(0), "{v}");
    let kinds = problem_kinds(&env);
    assert!(
        kinds.iter().filter(|k| *k == "link").count() >= 3,
        "{kinds:?}"
    );

    // A linked categories directory: writes are refused, nothing lands outside.
    let cats = env.path("categories");
    std::fs::rename(&cats, env.tmp.path().join("moved")).unwrap();
    std::os::unix::fs::symlink(&outside, &cats).unwrap();
    let r = env.run(&["write", "d", "--data", r#"{"b": 2}"#]);
    assert_ne!(
        r.code, 0,
        "a write went through a linked categories directory"
    );
    assert_eq!(crate::util::truth_files(&outside), before);
}

/// Bug: `init` wrote through a dangling `.gitignore` link.
#[test]
fn init_does_not_write_through_a_dangling_link() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.dir).unwrap();
    let target = env.tmp.path().join("elsewhere");
    std::os::unix::fs::symlink(&target, env.dir.join(".gitignore")).unwrap();
    env.ok(&["init"]);
    assert!(!target.exists(), "init created the link's target");
    assert!(env.path(".gitattributes").is_file());
}

/// Bug: one special file took the whole store down: a directory named `x.jsonl`, a FIFO
/// (every command hung, verify-store too), a link to `/dev/zero` (the process grew without
/// bound).
#[test]
fn special_files_break_only_themselves() {
    let env = TestEnv::new();
    env.ok(&[
        "ingest",
        "--session-id",
        "good",
        "--text",
        "still searchable",
    ]);
    env.ok(&["ingest", "--session-id", "bad", "--text", "bad session"]);
    env.ok(&["write", "c", "--data", r#"{"a": 1}"#]);
    let bad = env.path("sessions/bad");
    std::fs::create_dir(bad.join("dir.jsonl")).unwrap();
    let fifo = bad.join("fifo.jsonl");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    std::os::unix::fs::symlink("/dev/zero", bad.join("zero.jsonl")).unwrap();
    let cat_fifo = env.path("categories/pipe.json");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&cat_fifo)
            .status()
            .unwrap()
            .success()
    );
    for args in [
        vec!["status"],
        vec!["list"],
        vec!["read", "c"],
        vec!["fetch", "good"],
        vec!["fetch", "bad"],
        vec!["overview"],
        vec!["reindex"],
    ] {
        let r = run_bounded(&env, &args, 30);
        assert_eq!(r.code, 0, "{}: {}", r.cmd, r.stderr);
    }
    let v = run_bounded(&env, &["search", "searchable"], 30).json();
    assert_eq!(v["results"].as_array().map(Vec::len), Some(1), "{v}");
    let r = run_bounded(&env, &["read", "pipe"], 30);
    assert_ne!(r.code, 0, "a FIFO read as a category");
    env.ok(&[
        "ingest",
        "--session-id",
        "good",
        "--text",
        "writes still work",
    ]);
    let kinds = problem_kinds(&env);
    for want in ["special_file", "stray_directory", "link"] {
        assert!(
            kinds.iter().any(|k| k == want),
            "{want} missing from {kinds:?}"
        );
    }
}

fn nested(levels: usize) -> String {
    let mut s = String::from("1");
    for _ in 0..levels - 1 {
        s = format!("[{s}]");
    }
    format!("{{\"k\": {s}}}")
}

/// Bug: a document nested 127 levels deep was accepted, but its history entry (one level
/// deeper) could not be read back: it could never be restored, and verify-store was never
/// clean again.
#[test]
fn over_deep_documents_are_refused_and_every_stored_version_reads_back() {
    let env = TestEnv::new();
    let r = env.run(&["write", "deep", "--data", &nested(127)]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    let e = r.error();
    assert_eq!(e["code"], "invalid");
    assert!(e["message"].as_str().unwrap().contains("limit"), "{e}");
    assert!(!env.path("categories/deep.json").exists());
    // The deepest accepted document round-trips through history and restore.
    env.ok(&["write", "deep", "--data", &nested(96)]);
    env.ok(&["write", "deep", "--data", r#"{"k": 2}"#]);
    env.ok(&["restore", "deep", "--version", "1"]);
    let v = env.ok(&["read", "deep"]);
    assert!(v["data"]["k"].is_array(), "{v}");
    env.assert_clean();
    // A hand-placed over-deep file is reported, not adopted into unreadable history.
    env.write_file("categories/hand.json", &nested(120));
    let r = env.run(&["read", "hand"]);
    assert_eq!(r.error()["code"], "corrupt", "{}", r.stderr);
    assert!(!env.path("history/hand").exists());
    assert!(problem_kinds(&env).iter().any(|k| k == "malformed"));
}

/// Bug: with one `.term` file of the index truncated, search failed and named `memdir
/// reindex`, reindex failed with the same error, and verify-store failed instead of reporting.
#[test]
fn reindex_repairs_a_corrupt_index_and_verify_store_reports_it() {
    let env = TestEnv::new();
    for i in 0..20 {
        env.ok(&[
            "ingest",
            "--session-id",
            "s",
            "--text",
            &format!("alpha beta {i}"),
        ]);
    }
    env.ok(&["search", "alpha"]);
    let mut damaged = 0;
    for e in walkdir::WalkDir::new(env.path(".memdir/index"))
        .into_iter()
        .flatten()
    {
        if e.path().extension().is_some_and(|x| x == "term") {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(e.path())
                .unwrap();
            f.set_len(f.metadata().unwrap().len() / 2).unwrap();
            damaged += 1;
        }
    }
    assert!(damaged > 0, "no .term file to damage");
    let r = env.run(&["verify-store"]);
    let v = r.json();
    assert_eq!(v["ok"], false, "a damaged index must be reported: {v:#}");
    assert!(
        v["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["kind"] == "index"),
        "{v:#}"
    );
    let r = env.run(&["reindex"]);
    assert_eq!(
        r.code, 0,
        "reindex must rebuild a damaged index: {}",
        r.stderr
    );
    let v = env.ok(&["search", "alpha", "--limit", "50", "--context", "0"]);
    assert_eq!(v["results"].as_array().map(Vec::len), Some(20), "{v}");
    env.assert_clean();
}

/// Bug: a corrupt ledger was not rebuilt: every command failed with "file is not a database".
/// The ledger is derived, so it is set aside and rebuilt, and the user is told.
#[test]
fn a_corrupt_ledger_is_set_aside_and_rebuilt() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "kept in the files"]);
    env.ok(&["write", "c", "--data", r#"{"a": 1}"#]);
    let ledger = env.path(".memdir/ledger.db");
    for ext in ["db-wal", "db-shm"] {
        let _ = std::fs::remove_file(ledger.with_extension(ext));
    }
    std::fs::write(&ledger, vec![0x5a; 8192]).unwrap();
    let r = env.run(&["status"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("moved aside"),
        "the user must be told: {}",
        r.stderr
    );
    let v = r.json();
    assert_eq!(v["chunks"], 1, "{v}");
    assert_eq!(v["categories"], 1, "{v}");
    let aside: Vec<_> = std::fs::read_dir(env.path(".memdir"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("corrupt"))
        .collect();
    assert_eq!(aside.len(), 1, "the damaged ledger is kept aside");
    let v = env.ok(&["search", "files"]);
    assert_eq!(v["results"].as_array().map(Vec::len), Some(1), "{v}");
    env.ok(&["write", "c", "--merge", "--data", r#"{"b": 2}"#]);
    env.assert_clean();
}

/// Bug: on a full disk the segment append was fsynced, then the ledger transaction failed,
/// and the caller got an error for a chunk that was stored, so a retry duplicated it. The
/// ledger is derived: whether a write is acknowledged follows the files.
#[test]
fn a_write_whose_files_are_durable_is_acknowledged_even_if_the_ledger_fails() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "first"]);
    env.ok(&["write", "c", "--data", r#"{"a": 1}"#]);
    let full = [("MEMDIR_FAILPOINT", "ledger.update=enospc")];
    let r = env.run_env(
        &["ingest", "--session-id", "s", "--text", "second walrus"],
        &full,
        b"",
    );
    assert_eq!(
        r.run.code, 0,
        "a durable chunk must be acknowledged: {}",
        r.run.stderr
    );
    assert_eq!(r.run.json()["position"], 1);
    assert!(
        r.run.stderr.contains("ledger could not record"),
        "{}",
        r.run.stderr
    );
    let r = env.run_env(
        &["write", "c", "--merge", "--data", r#"{"b": 2}"#],
        &full,
        b"",
    );
    assert_eq!(
        r.run.code, 0,
        "a durable version must be acknowledged: {}",
        r.run.stderr
    );
    assert_eq!(r.run.json()["version"], 2);
    assert_eq!(env.session_contents("s"), ["first", "second walrus"]);
    let v = env.ok(&["search", "walrus", "--mode", "exact"]);
    assert_eq!(v["results"].as_array().map(Vec::len), Some(1), "{v}");
    let v = env.ok(&["read", "c"]);
    assert_eq!(v["data"], serde_json::json!({"a": 1, "b": 2}));
    assert_eq!(v["meta"]["version"], 2);
    let v = env.ok(&["search", "b", "--kind", "category"]);
    assert!(
        v["results"].as_array().is_some_and(|r| !r.is_empty()),
        "{v}"
    );
    let w = env.ok(&["write", "c", "--merge", "--data", r#"{"c": 3}"#]);
    assert_eq!(w["version"], 3);
    let i = env.ok(&["ingest", "--session-id", "s", "--text", "third"]);
    assert_eq!(i["position"], 2);
    env.assert_clean();
}

/// Other local users could read every memory: directories memdir creates are 0700 and files
/// 0600.
#[test]
fn new_directories_and_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "private"]);
    env.ok(&["write", "c", "--data", r#"{"a": 1}"#]);
    env.ok(&["append", "log", "--data", r#"{"e": 1}"#]);
    for e in walkdir::WalkDir::new(&env.dir)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".memdir" || e.depth() != 1)
        .flatten()
    {
        let mode = e.metadata().unwrap().permissions().mode() & 0o777;
        let want = if e.file_type().is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode, want, "{} has mode {mode:o}", e.path().display());
    }
    let meta = std::fs::metadata(env.path(".memdir")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
}

/// Runs `memdir ARGS` as a user who may only read the store: as root, the store is opened to
/// others for reading and the command runs as `nobody`; otherwise the store's write bits are
/// taken away for the duration of the command.
fn run_read_only(env: &TestEnv, args: &[&str]) -> crate::util::Run {
    let mut cmd = if unsafe_is_root() {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(crate::util::bin())
            .args(args);
        c.env_clear();
        for (k, v) in &env.envs {
            c.env(k, v);
        }
        c.env("HOME", "/nonexistent");
        c.current_dir("/");
        c
    } else {
        env.command(args)
    };
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run memdir read-only");
    crate::util::Run {
        cmd: format!("memdir {} (read-only)", args.join(" ")),
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn unsafe_is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Sets the mode of every entry of the store: `dir_mode` for directories, `file_mode` for
/// files; and opens the path down to the store for traversal.
fn chmod_store(env: &TestEnv, dir_mode: u32, file_mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    for e in walkdir::WalkDir::new(&env.dir).into_iter().flatten() {
        let mode = if e.file_type().is_dir() {
            dir_mode
        } else {
            file_mode
        };
        std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    std::fs::set_permissions(env.tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Bug: on a store the user may only read, `read`, `fetch`, `search`, `verify-store` and the
/// MCP read tools failed writing the ledger or a lock, and the hint said to delete the ledger.
#[test]
fn a_store_memdir_may_only_read_serves_every_read() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "readable platypus"]);
    env.ok(&["write", "c", "--data", r#"{"a": 1}"#]);
    env.ok(&["write", "c", "--merge", "--data", r#"{"b": 2}"#]);
    // A change made behind memdir's back, not yet adopted, and a stale index.
    env.ok(&["ingest", "--session-id", "s", "--text", "unindexed echidna"]);
    let before = env.snapshot();
    if unsafe_is_root() {
        chmod_store(&env, 0o755, 0o644);
    } else {
        chmod_store(&env, 0o555, 0o444);
    }
    let r = run_read_only(&env, &["read", "c"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["data"], serde_json::json!({"a": 1, "b": 2}));
    let r = run_read_only(&env, &["fetch", "s"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["chunks"].as_array().map(Vec::len), Some(2));
    for word in ["platypus", "echidna"] {
        let r = run_read_only(&env, &["search", word, "--mode", "exact"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(
            r.json()["results"].as_array().map(Vec::len),
            Some(1),
            "{}",
            r.stdout
        );
    }
    for args in [&["list"][..], &["status"], &["history", "c"], &["overview"]] {
        let r = run_read_only(&env, args);
        assert_eq!(r.code, 0, "{}: {}", r.cmd, r.stderr);
    }
    let r = run_read_only(&env, &["verify-store"]);
    assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
    r.json();
    // Writes are refused with a clear error that does not suggest deleting the ledger.
    let r = run_read_only(&env, &["write", "c", "--data", r#"{"x": 1}"#]);
    assert_eq!(r.code, 8, "{}", r.stderr);
    assert!(r.stderr.contains("read-only"), "{}", r.stderr);
    assert!(!r.stderr.contains("may be deleted"), "{}", r.stderr);
    // MCP read tools over stdio.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let call = |id: u32, name: &str, args: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{args}}}}}"#
        )
    };
    let input = format!(
        "{init}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}\n{}\n{}\n",
        call(2, "memory_search", r#"{"query":"platypus"}"#),
        call(3, "memory_read", r#"{"category":"c"}"#),
    );
    let mut cmd = if unsafe_is_root() {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(crate::util::bin());
        c
    } else {
        std::process::Command::new(crate::util::bin())
    };
    cmd.arg("serve").env_clear().current_dir("/");
    for (k, v) in &env.envs {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let answers: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for id in [2, 3] {
        let a = answers.iter().find(|a| a["id"] == id).unwrap_or_else(|| {
            panic!(
                "no answer {id}: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert_ne!(a["result"]["isError"], true, "{a}");
    }
    chmod_store(&env, 0o700, 0o600);
    assert_eq!(
        env.snapshot(),
        before,
        "a read-only session changed the files"
    );
}

/// Bug: on a full disk every read failed writing derived state (the ledger's refresh, the
/// index's commit). Reads go on from the files; writes still fail as a full disk says.
#[test]
fn a_full_disk_on_the_read_path_does_not_stop_reads() {
    let env = TestEnv::new();
    env.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--text",
        "before the disk filled",
    ]);
    env.ok(&["write", "c", "--data", r#"{"a": 1}"#]);
    env.ok(&["search", "before"]);
    env.ok(&["ingest", "--session-id", "s", "--text", "unindexed axolotl"]);
    for fp in ["index.commit=enospc", "ledger.scan=enospc"] {
        let full = [("MEMDIR_FAILPOINT", fp)];
        let r = env.run_env(&["search", "axolotl", "--mode", "exact"], &full, b"");
        assert_eq!(r.run.code, 0, "{fp}: {}", r.run.stderr);
        assert_eq!(
            r.run.json()["results"].as_array().map(Vec::len),
            Some(1),
            "{fp}"
        );
        assert!(
            r.run.stderr.contains("serving reads from the files"),
            "{fp}: {}",
            r.run.stderr
        );
        let r = env.run_env(&["read", "c"], &full, b"");
        assert_eq!(r.run.code, 0, "{fp}: {}", r.run.stderr);
        let r = env.run_env(&["fetch", "s"], &full, b"");
        assert_eq!(r.run.code, 0, "{fp}: {}", r.run.stderr);
    }
    // Once space is back, everything is as it was and the index catches up.
    let v = env.ok(&["search", "axolotl", "--mode", "exact"]);
    assert_eq!(v["results"].as_array().map(Vec::len), Some(1));
    env.assert_clean();
}

/// Bug: a segment or a category file without read permission made every command fail. Such a
/// file breaks only itself (here as a user who may read everything else).
#[test]
fn an_unreadable_file_breaks_only_itself() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "open", "--text", "readable tapir"]);
    env.ok(&["ingest", "--session-id", "closed", "--text", "hidden okapi"]);
    env.ok(&["write", "fine", "--data", r#"{"a": 1}"#]);
    env.ok(&["write", "locked", "--data", r#"{"b": 2}"#]);
    if unsafe_is_root() {
        chmod_store(&env, 0o755, 0o644);
    }
    let no_read = std::fs::Permissions::from_mode(0o000);
    std::fs::set_permissions(env.segment_of("closed"), no_read.clone()).unwrap();
    std::fs::set_permissions(env.path("categories/locked.json"), no_read).unwrap();
    for args in [
        &["status"][..],
        &["list"],
        &["overview", "--days", "0"],
        &["read", "fine"],
        &["fetch", "open"],
    ] {
        let r = run_read_only(&env, args);
        assert_eq!(r.code, 0, "{}: {}", r.cmd, r.stderr);
    }
    let r = run_read_only(&env, &["search", "tapir", "--mode", "exact"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["results"].as_array().map(Vec::len), Some(1));
    let r = run_read_only(&env, &["read", "locked"]);
    // stderr is one JSON error; what memdir repaired on its own rides in it.
    let err = r.error();
    assert_eq!(err["code"], "corrupt", "{}", r.stderr);
    assert!(
        err["notices"][0]
            .as_str()
            .unwrap()
            .contains("serving reads from the files"),
        "{}",
        r.stderr
    );
    let r = run_read_only(&env, &["verify-store"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let kinds: Vec<String> = r.json()["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap().to_string())
        .collect();
    assert!(kinds.iter().any(|k| k == "unreadable"), "{kinds:?}");
    chmod_store(&env, 0o700, 0o600);
}

/// Bug: a process opening a missing index while another was creating it took the half-made
/// index for a damaged one and removed it, so the other process failed with "meta.json does
/// not exist". Several processes now meet a missing index at once, many times over.
///
/// Bug: a search that held only the category index's writer and found a rebuild necessary
/// then waited for the chunk index's writer, held by another search waiting for the category
/// index's: both waited out the lock timeout and answered `busy` (about one run in twenty of
/// this test). Every process now takes the writers in one order.
#[test]
fn processes_meeting_a_missing_index_at_once_all_succeed() {
    let mut env = TestEnv::new();
    // A loaded machine may keep one of eight processes waiting a while; a deadlock waits out
    // any timeout.
    env.set_env("MEMDIR_LOCK_TIMEOUT_MS", "30000");
    env.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--text",
        "quokka on the island",
    ]);
    assert_eq!(exact_hits(&env, "quokka").len(), 1);
    for round in 0..12 {
        std::fs::remove_dir_all(env.path(".memdir/index")).unwrap();
        let children: Vec<_> = (0..8)
            .map(|i| {
                if i % 2 == 0 {
                    env.spawn(&["search", "quokka", "--context", "0"])
                } else {
                    let text = format!("round{round} writer{i}");
                    env.spawn(&["ingest", "--session-id", "t", "--text", &text])
                }
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert_eq!(exact_hits(&env, "quokka").len(), 1);
    }
    env.assert_clean();
}

/// A loopback HTTP server that answers every request with an empty sync manifest and keeps
/// the head of each request it was sent.
struct Catcher {
    url: String,
    heads: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Catcher {
    fn start() -> Catcher {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = heads.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    head.push_str(&line);
                    line.clear();
                }
                let len = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<u64>().ok())?
                    })
                    .unwrap_or(0);
                let _ = reader.by_ref().take(len).read_to_end(&mut Vec::new());
                kept.lock().unwrap().push(head);
                let body = format!(
                    r#"{{"format":"memdir-sync/1","root":"{}","buckets":{{}},"files":0}}"#,
                    "0".repeat(64)
                );
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Catcher { url, heads }
    }

    /// Whether any request it was sent carried `needle` in its head.
    fn saw(&self, needle: &str) -> bool {
        self.heads
            .lock()
            .unwrap()
            .iter()
            .any(|h| h.contains(needle))
    }
}

/// Risk: `POST /api/v1/sync` took `token_env` from the request, so a caller over the network
/// could make the server send any variable of its environment as a bearer token to any URL.
/// Over the network only the configured variable may be named, and the configured token goes
/// to the configured remote only; the command line keeps naming any variable.
#[test]
fn a_rest_sync_sends_no_secret_but_the_configured_token_and_only_to_the_configured_remote() {
    use crate::util::Served;
    let leaked = "do-not-send-0123456789abcdef";
    let configured = "configured-sync-token-0123456789";
    let (home, other) = (Catcher::start(), Catcher::start());
    let mut env = TestEnv::new();
    env.ok(&["init"]);
    let cfg = env.tmp.path().join("home/cfg.toml");
    std::fs::write(
        &cfg,
        format!(
            "[sync]\nremote = {:?}\ntoken_env = \"SYNC_TOKEN\"\n",
            home.url
        ),
    )
    .unwrap();
    env.set_env("MEMDIR_CONFIG", cfg.to_str().unwrap());
    env.set_env("SOME_SERVICE_PASSWORD", leaked);
    env.set_env("SYNC_TOKEN", configured);
    let server = Served::start(&env, &[]);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let sync = |body: Value| -> (u16, Value) {
        let mut resp = agent
            .post(&format!("{}/api/v1/sync", server.url))
            .send_json(&body)
            .unwrap();
        let text = resp.body_mut().read_to_string().unwrap();
        (resp.status().as_u16(), serde_json::from_str(&text).unwrap())
    };

    for (remote, catcher) in [(&home.url, &home), (&other.url, &other)] {
        let (status, body) =
            sync(serde_json::json!({"remote": remote, "token_env": "SOME_SERVICE_PASSWORD"}));
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["error"]["field"], "token_env", "{body}");
        assert!(!catcher.saw(leaked));
    }
    // The configured token goes to another remote neither by default nor when named.
    let (status, body) = sync(serde_json::json!({"remote": other.url, "token_env": "SYNC_TOKEN"}));
    assert_eq!(status, 400, "{body}");
    sync(serde_json::json!({"remote": other.url}));
    assert!(
        !other.heads.lock().unwrap().is_empty(),
        "the other remote was asked"
    );
    assert!(
        !other.saw(configured),
        "the configured token left for another remote"
    );
    // To the configured remote it goes, by default or by name.
    sync(serde_json::json!({}));
    assert!(home.saw(configured));
    assert!(!home.saw(leaked) && !other.saw(leaked));
    // The command line acts as the user who runs it: it may name any variable.
    env.run(&[
        "sync",
        "--remote",
        &other.url,
        "--token-env",
        "SOME_SERVICE_PASSWORD",
    ]);
    assert!(other.saw(leaked), "the command line may name any variable");
}
