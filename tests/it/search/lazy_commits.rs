//! Index commits without fsync (`index::LazyDir`): a search right after a write commits the
//! index lazily, and neither a killed process nor a crash of the machine (simulated by a marker
//! naming another boot) loses a search result.

use crate::util::{Served, TestEnv};

/// The content of the hits of an exact search for `word`.
fn found(env: &TestEnv, word: &str) -> Vec<String> {
    let v = env.ok(&["search", word, "--mode", "exact", "--context", "0"]);
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["content"].as_str().unwrap().to_string())
        .collect()
}

const MARKER: &str = ".memdir/index/chunks.lazy";

/// Writes `n` chunks `{prefix}{i} words`, each followed by a search from a process that is
/// killed (SIGABRT) right after its lazy index commit.
fn write_and_crash_after_lazy_commits(env: &TestEnv, prefix: &str, n: usize) {
    for i in 0..n {
        let text = format!("{prefix}{i} words");
        env.ok(&["ingest", "--session-id", "s", "--text", &text]);
        let out = env
            .command(&["search", &format!("{prefix}{i}")])
            .env("MEMDIR_FAILPOINT", "index.after_lazy_commit")
            .output()
            .unwrap();
        assert!(
            !out.status.success(),
            "the search was to die after a lazy commit: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("failpoint index.after_lazy_commit"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()
}

#[test]
fn a_process_killed_after_lazy_index_commits_loses_no_search_result() {
    if boot_id().is_none() {
        return; // every commit is durable where the boot cannot be told
    }
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "opening words"]);
    assert_eq!(found(&env, "opening").len(), 1);
    write_and_crash_after_lazy_commits(&env, "killed", 5);
    // The commits were lazy: the window's marker names this boot.
    assert_eq!(
        std::fs::read_to_string(env.path(MARKER))
            .ok()
            .map(|s| s.trim().to_string()),
        boot_id().map(|s| s.trim().to_string())
    );
    for i in 0..5 {
        assert_eq!(
            found(&env, &format!("killed{i}")),
            [format!("killed{i} words")]
        );
    }
    env.assert_clean();
}

#[test]
fn after_a_machine_crash_a_torn_index_is_rebuilt_and_finds_every_write() {
    if boot_id().is_none() {
        return;
    }
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "opening words"]);
    found(&env, "opening");
    write_and_crash_after_lazy_commits(&env, "torn", 4);
    // The machine went down inside the lazy window: the marker names another boot, and what
    // was not fsynced is torn.
    env.write_file(MARKER, "00000000-0000-0000-0000-000000000000");
    let mut torn = 0;
    for e in walkdir::WalkDir::new(env.path(".memdir/index/chunks"))
        .into_iter()
        .flatten()
    {
        if e.path()
            .extension()
            .is_some_and(|x| x == "term" || x == "idx")
        {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(e.path())
                .unwrap();
            f.set_len(f.metadata().unwrap().len() / 2).unwrap();
            torn += 1;
        }
    }
    assert!(torn > 0);
    for i in 0..4 {
        assert_eq!(found(&env, &format!("torn{i}")), [format!("torn{i} words")]);
    }
    assert_eq!(found(&env, "opening"), ["opening words"]);
    assert!(!env.path(MARKER).exists(), "the crash was dealt with");
    let v = env.ok(&["verify-store"]);
    assert_eq!(v["index"]["state"], "current", "{v:#}");
}

/// The change feed keeps what only lazy commits absorbed: an index that comes back from a
/// crash of the machine as of its last durable commit catches up from the feed.
#[test]
fn an_index_back_at_its_last_durable_commit_catches_up_from_the_feed() {
    if boot_id().is_none() {
        return;
    }
    let env = TestEnv::new();
    for i in 0..3 {
        env.ok(&[
            "ingest",
            "--session-id",
            "s",
            "--text",
            &format!("early{i} words"),
        ]);
    }
    env.ok(&["reindex"]); // a durable commit
    let tmp = tempfile::tempdir().unwrap();
    let saved = tmp.path().join("chunks");
    copy_dir(&env.path(".memdir/index/chunks"), &saved);
    write_and_crash_after_lazy_commits(&env, "later", 4);
    for i in 0..4 {
        // A category write makes the category index commit too, and one more search each
        // gives the feed every chance to be pruned.
        env.ok(&["write", "notes", "--data", &format!(r#"{{"n": {i}}}"#)]);
        assert_eq!(found(&env, &format!("later{i}")).len(), 1);
    }
    // The crash: the index is back at the durable commit.
    std::fs::remove_dir_all(env.path(".memdir/index/chunks")).unwrap();
    copy_dir(&saved, &env.path(".memdir/index/chunks"));
    std::fs::remove_dir_all(&saved).unwrap();
    env.write_file(MARKER, "00000000-0000-0000-0000-000000000000");
    for i in 0..4 {
        assert_eq!(
            found(&env, &format!("later{i}")),
            [format!("later{i} words")],
            "a write absorbed only by lazy commits is lost to search"
        );
    }
    for i in 0..3 {
        assert_eq!(found(&env, &format!("early{i}")).len(), 1);
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// A REST call to a served store.
fn post(server: &Served, path: &str, body: serde_json::Value) -> serde_json::Value {
    let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
    let mut resp = agent
        .post(&format!("{}{path}", server.url))
        .send_json(&body)
        .unwrap();
    serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap()
}

#[test]
fn an_http_server_stopped_by_sigterm_lands_the_catch_ups_it_kept_in_memory() {
    let env = TestEnv::new();
    env.ok(&["ingest", "--session-id", "s", "--text", "opening words"]);
    env.ok(&["search", "opening"]);
    let server = Served::start(&env, &[]);
    post(
        &server,
        "/ingest",
        serde_json::json!({"session_id": "s", "content": "served words"}),
    );
    let v = post(
        &server,
        "/search",
        serde_json::json!({"query": "served", "context": 0}),
    );
    assert_eq!(v["results"][0]["content"], "served words", "{v}");
    // The search's catch-up is in the server's memory only.
    let behind = "behind (caught up by the next search)";
    assert_eq!(env.ok(&["status"])["index"]["state"], behind);
    assert!(server.terminate().success());
    assert_eq!(env.ok(&["status"])["index"]["state"], "current");
    assert_eq!(found(&env, "served"), ["served words"]);
    env.assert_clean();
}
