//! Sync over git: replicas of one memory directory over a bare repository in a temp dir.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::util::{Rng, TestEnv, truth_files};

pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Several replicas and one bare remote.
pub(crate) struct Fleet {
    _root: tempfile::TempDir,
    pub(crate) remote: PathBuf,
    pub(crate) replicas: Vec<TestEnv>,
}

impl Fleet {
    pub(crate) fn new(n: usize) -> Fleet {
        let root = tempfile::Builder::new()
            .prefix("memdir-sync-")
            .tempdir()
            .unwrap();
        let remote = root.path().join("remote.git");
        std::fs::create_dir_all(&remote).unwrap();
        git(&remote, &["init", "-q", "--bare"]);
        let replicas = (0..n)
            .map(|i| {
                let mut e = TestEnv::new();
                e.set_env("MEMDIR_DEVICE", &format!("device{i}"));
                e.set_env("MEMDIR_SEED", &format!("seed{i}"));
                e.set_env("GIT_CONFIG_NOSYSTEM", "1");
                e
            })
            .collect();
        Fleet {
            _root: root,
            remote,
            replicas,
        }
    }

    pub(crate) fn url(&self) -> String {
        self.remote.display().to_string()
    }

    /// Syncs replica `i` (the first time with `--init`) and returns the report.
    pub(crate) fn sync(&self, i: usize, extra: &[&str]) -> Value {
        let r = &self.replicas[i];
        let url = self.url();
        let mut args = vec!["sync"];
        if !r.dir.join(".git").exists() {
            args.extend(["--init", url.as_str()]);
        }
        args.extend(extra);
        let v = r.ok(&args);
        assert_eq!(v["pushed"], json!(true), "sync of replica {i}: {v:#}");
        v
    }

    /// Syncs every replica in turn, twice: afterwards all hold the remote's tree.
    pub(crate) fn converge(&self) {
        for _ in 0..2 {
            for i in 0..self.replicas.len() {
                self.sync(i, &[]);
            }
        }
    }

    pub(crate) fn assert_identical(&self) {
        assert_identical(&self.replicas);
    }
}

/// Every replica holds the same files, byte for byte (git's own excepted), and verify-store
/// is clean on each.
pub(crate) fn assert_identical(replicas: &[TestEnv]) {
    let snap = |e: &TestEnv| -> BTreeMap<String, Vec<u8>> {
        truth_files(&e.dir)
            .into_iter()
            .filter(|p| !p.starts_with(".git/"))
            .map(|p| {
                let b = std::fs::read(e.dir.join(&p)).unwrap();
                (p, b)
            })
            .collect()
    };
    let first = snap(&replicas[0]);
    for (i, r) in replicas.iter().enumerate().skip(1) {
        let other = snap(r);
        let a: BTreeSet<&String> = first.keys().collect();
        let b: BTreeSet<&String> = other.keys().collect();
        assert_eq!(a, b, "replica {i} holds other files than replica 0");
        for (p, bytes) in &first {
            assert_eq!(
                bytes,
                &other[p],
                "replica {i} differs in {p}:\n{}\n---\n{}",
                String::from_utf8_lossy(bytes),
                String::from_utf8_lossy(&other[p])
            );
        }
    }
    for r in replicas {
        r.assert_clean();
    }
}

/// Every hash a category's history holds, and every value of its conflict records.
fn all_hashes(e: &TestEnv) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for p in truth_files(&e.dir) {
        if p.starts_with("history/") {
            let v: Value = serde_json::from_slice(&std::fs::read(e.dir.join(&p)).unwrap()).unwrap();
            if let Some(h) = v["hash"].as_str() {
                out.insert(h.to_string());
            }
        }
    }
    out
}

/// What a random workload acknowledged.
#[derive(Default)]
pub(crate) struct Acked {
    /// Content hashes of acknowledged category versions.
    pub hashes: Vec<String>,
    /// Texts of acknowledged chunks (each starts with a unique token).
    pub texts: Vec<String>,
    /// Ids of acknowledged log entries.
    pub log: Vec<String>,
}

/// One random offline operation on a random replica: ingest, write, merge, log append,
/// delete, restore or a hand edit. `n` numbers the operation (unique tokens and keys).
pub(crate) fn random_op(
    replicas: &[TestEnv],
    rng: &mut Rng,
    n: usize,
    round: usize,
    acked: &mut Acked,
) {
    let i = rng.below(replicas.len() as u64) as usize;
    let r = &replicas[i];
    let cat = ["shared", "notes", "prefs"][rng.below(3) as usize];
    match rng.below(8) {
        0 | 1 => {
            let text = format!("token{n} replica{i} round{round}");
            let session = format!("s{}", rng.below(3));
            r.ok(&["ingest", "--session-id", &session, "--text", &text]);
            acked.texts.push(text);
        }
        2 => {
            let v = r.ok(&["write", cat, "--data", &format!(r#"{{"k{n}":{n}}}"#)]);
            acked
                .hashes
                .push(v["new_hash"].as_str().unwrap().to_string());
        }
        3 => {
            let key = ["a", "b", "c"][rng.below(3) as usize];
            let v = r.ok(&[
                "write",
                cat,
                "--merge",
                "--data",
                &format!(r#"{{"{key}":{n}}}"#),
            ]);
            acked
                .hashes
                .push(v["new_hash"].as_str().unwrap().to_string());
        }
        4 => {
            let v = r.ok(&["append", "events", "--data", &format!(r#"{{"n":{n}}}"#)]);
            acked.log.push(v["id"].as_str().unwrap().to_string());
        }
        5 => {
            let _ = r.run(&["delete", cat]);
        }
        6 => {
            let _ = r.run(&["restore", cat, "--version", "1"]);
        }
        _ => {
            // A hand edit of a category file.
            let p = r.dir.join("categories").join(format!("{cat}.json"));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, format!("{{\n  \"hand\": {n}\n}}\n")).unwrap();
        }
    }
}

/// Every acknowledged write is present on every replica (category versions in history, log
/// entries in the log's history or file), and search gives the same hits everywhere.
pub(crate) fn assert_acked(replicas: &[TestEnv], acked: &Acked, seed: u64) {
    let hashes = all_hashes(&replicas[0]);
    for h in &acked.hashes {
        assert!(hashes.contains(h), "seed {seed}: version {h} was lost");
    }
    let history_text: String = truth_files(&replicas[0].dir)
        .into_iter()
        .filter(|p| p.starts_with("history/events") || p == "categories/events.json")
        .map(|p| std::fs::read_to_string(replicas[0].dir.join(p)).unwrap())
        .collect();
    for id in &acked.log {
        assert!(
            history_text.contains(id),
            "seed {seed}: log entry {id} was lost"
        );
    }
    // Search returns the same hits everywhere, and every ingested chunk is found.
    let hits = |e: &TestEnv, q: &str| {
        let v = e.ok(&["search", q, "--limit", "50"]);
        v["results"].clone()
    };
    for text in &acked.texts {
        let token = text.split(' ').next().unwrap();
        let first = hits(&replicas[0], token);
        assert!(
            first
                .as_array()
                .unwrap()
                .iter()
                .any(|h| h["content"] == json!(text)),
            "seed {seed}: chunk {text:?} not found: {first:#}"
        );
        for r in &replicas[1..] {
            assert_eq!(
                hits(r, token),
                first,
                "seed {seed}: search differs for {token}"
            );
        }
    }
}

#[test]
fn three_replicas_converge_after_random_offline_work() {
    for seed in [1u64, 7] {
        let fleet = Fleet::new(3);
        let mut rng = Rng(seed);
        // A common starting point, so that categories exist on every replica.
        fleet.replicas[0].ok(&["write", "shared", "--data", r#"{"a":1,"b":1}"#]);
        for i in 0..3 {
            fleet.sync(i, &[]);
        }
        let mut acked = Acked::default();
        let mut n = 0;
        for round in 0..4 {
            for _ in 0..12 {
                n += 1;
                random_op(&fleet.replicas, &mut rng, n, round, &mut acked);
            }
            // Syncs in a random order and with random pairs.
            for _ in 0..3 {
                fleet.sync(rng.below(3) as usize, &[]);
            }
        }
        fleet.converge();
        fleet.assert_identical();
        assert_acked(&fleet.replicas, &acked, seed);
    }
}

/// Two replicas that start from one category, each changes it offline, then both sync.
fn conflict_case(strategy: &str, a_change: &[&str], b_change: &[&str]) -> (Fleet, Value) {
    let fleet = Fleet::new(2);
    for r in &fleet.replicas {
        std::fs::write(
            r.tmp.path().join("home/cfg.toml"),
            format!("[sync]\nconflict_strategy = \"{strategy}\"\n"),
        )
        .unwrap();
    }
    let mut fleet = fleet;
    for r in fleet.replicas.iter_mut() {
        let cfg = r.tmp.path().join("home/cfg.toml").display().to_string();
        r.set_env("MEMDIR_CONFIG", &cfg);
    }
    fleet.replicas[0].ok(&["write", "doc", "--data", r#"{"a":1,"b":1,"c":1}"#]);
    fleet.sync(0, &[]);
    fleet.sync(1, &[]);
    fleet.replicas[0].ok(a_change);
    fleet.replicas[1].ok(b_change);
    fleet.sync(0, &[]);
    let report = fleet.sync(1, &[]);
    fleet.converge();
    fleet.assert_identical();
    (fleet, report)
}

fn data(e: &TestEnv) -> Option<Value> {
    e.category_data("doc")
}

fn open_conflicts(e: &TestEnv) -> Vec<Value> {
    e.ok(&["status"])["conflicts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A conflict a person can act on: status and the sync's answer name what the pick set
/// aside, key by key and head by head; the version number both devices wrote is ambiguous
/// and refused by name, and a head is picked by its hash as history shows it.
#[test]
fn a_conflict_names_what_it_set_aside_and_an_ambiguous_version_is_refused() {
    let edit_a: &[&str] = &["write", "doc", "--merge", "--data", r#"{"a":2,"b":2}"#];
    let edit_b: &[&str] = &["write", "doc", "--merge", "--data", r#"{"a":3,"c":3}"#];
    let (f, rep) = conflict_case("last_write_wins", edit_a, edit_b);
    // Replica 1 wrote last: its version is served; replica 0's a and b were set aside (its
    // unchanged c was not).
    let open = rep["open_conflicts"].as_array().unwrap();
    assert_eq!(open.len(), 1, "{rep:#}");
    let aside = open[0]["set_aside"].as_array().unwrap();
    assert_eq!(aside.len(), 1, "{rep:#}");
    assert_eq!(aside[0]["keys"], json!(["a", "b"]), "{rep:#}");
    assert_eq!(
        open_conflicts(&f.replicas[0])[0]["set_aside"],
        open[0]["set_aside"]
    );
    let human = f.replicas[0].run(&["status", "--human"]);
    assert!(
        human.stdout.contains("open conflict in doc")
            && human.stdout.contains("change to \"a\", \"b\""),
        "{}",
        human.stdout
    );
    // Version 2 was written on both devices: marked in history, refused by number.
    let human = f.replicas[0].run(&["history", "doc", "--human"]);
    assert!(
        human.stdout.matches("\n2* ").count() == 2 && human.stdout.contains("by its hash"),
        "{}",
        human.stdout
    );
    let e = f.replicas[0].fail(&["resolve", "doc", "--pick", "2"], 3);
    assert_eq!(e["field"], "version", "{e}");
    assert_eq!(e["candidates"].as_array().unwrap().len(), 2, "{e}");
    f.replicas[0].fail(&["read", "doc", "--version", "2"], 3);
    // The set-aside head, by the hash history shows.
    let head = aside[0]["head"].as_str().unwrap();
    let h = f.replicas[0].ok(&["history", "doc"]);
    let hash = h["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == head)
        .unwrap()["hash"]
        .as_str()
        .unwrap()[..12]
        .to_string();
    f.replicas[0].ok(&["resolve", "doc", "--pick", &hash]);
    assert_eq!(data(&f.replicas[0]), Some(json!({"a":2,"b":2,"c":1})));
    assert!(open_conflicts(&f.replicas[0]).is_empty());
}

#[test]
fn each_strategy_on_each_conflict_kind() {
    let edit_a: &[&str] = &["write", "doc", "--merge", "--data", r#"{"a":2,"b":2}"#];
    let edit_b: &[&str] = &["write", "doc", "--merge", "--data", r#"{"a":3,"c":3}"#];
    let delete: &[&str] = &["delete", "doc"];
    // Replica 1 writes second: its HLC is newer.
    let (f, rep) = conflict_case("last_write_wins", edit_a, edit_b);
    assert_eq!(data(&f.replicas[0]), Some(json!({"a":3,"b":1,"c":3})));
    assert_eq!(rep["conflicts"].as_array().unwrap().len(), 1, "{rep:#}");
    let open = open_conflicts(&f.replicas[0]);
    assert_eq!(open.len(), 1);
    assert_eq!(open[0]["kind"], "edit-edit");
    assert_eq!(open[0]["heads"].as_array().unwrap().len(), 2);
    // The losing value is in the record and in history.
    let rec = f.replicas[0].read(open[0]["record"].as_str().unwrap());
    assert!(rec.contains("\"b\": 2"), "{rec}");
    // verify-store reports it (and stays ok: nothing is broken).
    assert_eq!(
        f.replicas[1].ok(&["verify-store"])["conflicts"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let (f, _) = conflict_case("merge", edit_a, edit_b);
    assert_eq!(data(&f.replicas[1]), Some(json!({"a":3,"b":2,"c":3})));
    let open = open_conflicts(&f.replicas[1]);
    assert_eq!(open.len(), 1);
    assert_eq!(open[0]["keys"], json!(["a"]));
    // Disjoint keys: merged, nothing lost, no conflict.
    let (f, _) = conflict_case(
        "merge",
        &["write", "doc", "--merge", "--data", r#"{"a":2}"#],
        &["write", "doc", "--merge", "--data", r#"{"b":2}"#],
    );
    assert_eq!(data(&f.replicas[0]), Some(json!({"a":2,"b":2,"c":1})));
    assert!(open_conflicts(&f.replicas[0]).is_empty());

    // Manual: last-write-wins served, conflict open until resolved.
    let (f, _) = conflict_case("manual", edit_a, edit_b);
    assert_eq!(data(&f.replicas[0]), Some(json!({"a":3,"b":1,"c":3})));
    let open = open_conflicts(&f.replicas[0]);
    assert_eq!(open[0]["strategy"], "manual");
    let loser = open[0]["heads"][0].as_str().unwrap().to_string();
    let v = f.replicas[0].ok(&["resolve", "doc", "--pick", &loser]);
    assert_eq!(v["resolved"].as_array().unwrap().len(), 1);
    assert_eq!(data(&f.replicas[0]), Some(json!({"a":2,"b":2,"c":1})));
    assert!(open_conflicts(&f.replicas[0]).is_empty());
    f.converge();
    f.assert_identical();
    assert!(open_conflicts(&f.replicas[1]).is_empty());
    assert_eq!(data(&f.replicas[1]), Some(json!({"a":2,"b":2,"c":1})));
    // Resolve with data; bad input changes nothing.
    let (f, _) = conflict_case("manual", edit_a, edit_b);
    let e = f.replicas[1].fail(&["resolve", "doc", "--data", "[1]"], 3);
    assert_eq!(e["code"], "invalid");
    f.replicas[1].fail(&["resolve", "nothing-here", "--data", "{}"], 4);
    f.replicas[1].ok(&["resolve", "doc", "--data", r#"{"final":true}"#]);
    assert_eq!(data(&f.replicas[1]), Some(json!({"final": true})));
    assert!(open_conflicts(&f.replicas[1]).is_empty());

    // Delete against a concurrent edit: the newer one wins under every strategy.
    for s in ["last_write_wins", "merge", "manual"] {
        let (f, _) = conflict_case(s, delete, edit_b);
        assert_eq!(
            data(&f.replicas[0]),
            Some(json!({"a":3,"b":1,"c":3})),
            "{s}"
        );
        assert_eq!(open_conflicts(&f.replicas[0])[0]["kind"], "delete-edit");
        let (f, _) = conflict_case(s, edit_a, delete);
        assert_eq!(data(&f.replicas[0]), None, "{s}");
        // The edit that lost is still in history.
        let kept = truth_files(&f.replicas[0].dir)
            .into_iter()
            .any(|p| p.starts_with("history/doc/") && f.replicas[0].read(&p).contains("\"b\": 2"));
        assert!(kept, "{s}: the losing edit is gone from history");
    }

    // local_wins / remote_wins, for one run.
    let fleet = Fleet::new(2);
    fleet.replicas[0].ok(&["write", "doc", "--data", r#"{"a":1}"#]);
    fleet.sync(0, &[]);
    fleet.sync(1, &[]);
    fleet.replicas[0].ok(&["write", "doc", "--data", r#"{"a":"zero"}"#]);
    fleet.replicas[1].ok(&["write", "doc", "--data", r#"{"a":"one"}"#]);
    fleet.sync(1, &[]);
    let rep = fleet.sync(0, &["--strategy", "local_wins"]);
    assert_eq!(rep["strategy"], "local_wins");
    assert_eq!(data(&fleet.replicas[0]), Some(json!({"a":"zero"})));
    fleet.converge();
    fleet.assert_identical();
    assert_eq!(data(&fleet.replicas[1]), Some(json!({"a":"zero"})));
    let e = fleet.replicas[0].fail(&["sync", "--strategy", "newest"], 3);
    assert_eq!(e["field"], "strategy");

    // Logs: a union by id whatever the strategy, never a conflict.
    let fleet = Fleet::new(2);
    fleet.replicas[0].ok(&["append", "log", "--data", r#"{"n":0}"#]);
    fleet.sync(0, &[]);
    fleet.sync(1, &[]);
    let a = fleet.replicas[0].ok(&["append", "log", "--data", r#"{"n":1}"#]);
    let b = fleet.replicas[1].ok(&["append", "log", "--data", r#"{"n":2}"#]);
    fleet.sync(0, &[]);
    fleet.sync(1, &[]);
    fleet.converge();
    fleet.assert_identical();
    let log = fleet.replicas[0].category_data("log").unwrap();
    let ids: Vec<&str> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.contains(&a["id"].as_str().unwrap()) && ids.contains(&b["id"].as_str().unwrap()));
    assert!(open_conflicts(&fleet.replicas[0]).is_empty());
}

#[test]
fn a_malformed_hand_edit_is_never_pushed() {
    let fleet = Fleet::new(2);
    let a = &fleet.replicas[0];
    a.ok(&["write", "doc", "--data", r#"{"a":1}"#]);
    fleet.sync(0, &[]);
    a.write_file("categories/doc.json", "{\"a\": <<<<<<< ours\n");
    a.write_file("categories/new.json", "not json");
    let rep = fleet.sync(0, &[]);
    let reported: Vec<&str> = rep["reported"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["path"].as_str().unwrap())
        .collect();
    assert!(reported.contains(&"categories/doc.json"), "{rep:#}");
    assert!(reported.contains(&"categories/new.json"), "{rep:#}");
    let shown = git(&fleet.remote, &["show", "main:categories/doc.json"]);
    assert!(serde_json::from_str::<Value>(&shown).is_ok(), "{shown}");
    let tree = git(&fleet.remote, &["ls-tree", "-r", "--name-only", "main"]);
    assert!(!tree.contains("categories/new.json"));
    assert!(!tree.contains(".memdir"));
    // The other replica still reads the last good version, and merges go on.
    fleet.sync(1, &[]);
    assert_eq!(fleet.replicas[1].category_data("doc"), Some(json!({"a":1})));
    fleet.replicas[1].ok(&["write", "doc", "--data", r#"{"a":2}"#]);
    fleet.sync(1, &[]);
    fleet.sync(0, &[]);
    // The hand edit is left as it was; the commit got the merged version.
    assert!(a.read("categories/doc.json").contains("<<<<<<<"));
    let shown = git(&fleet.remote, &["show", "main:categories/doc.json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&shown).unwrap(),
        json!({"a":2})
    );
}

#[test]
fn offline_sync_commits_locally_and_says_the_push_is_pending() {
    let fleet = Fleet::new(1);
    let a = &fleet.replicas[0];
    a.ok(&["write", "doc", "--data", r#"{"a":1}"#]);
    fleet.sync(0, &[]);
    a.ok(&["write", "doc", "--data", r#"{"a":2}"#]);
    std::fs::rename(&fleet.remote, fleet.remote.with_extension("away")).unwrap();
    let v = a.ok(&["sync"]);
    assert_eq!(v["pushed"], json!(false));
    assert_eq!(v["push_pending"], json!(true));
    assert_eq!(v["committed"], json!(1));
    assert!(v["offline"].is_string());
    std::fs::rename(fleet.remote.with_extension("away"), &fleet.remote).unwrap();
    let v = fleet.sync(0, &[]);
    assert_eq!(v["committed"], json!(0));
    let shown = git(&fleet.remote, &["show", "main:categories/doc.json"]);
    assert!(shown.contains("\"a\": 2"));
    // Not a git work tree, no remote: clear errors.
    let other = TestEnv::new();
    other.ok(&["write", "x", "--data", "{}"]);
    let e = other.fail(&["sync"], 4);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("not a git work tree"),
        "{e}"
    );
}

#[test]
fn kill_9_during_sync_then_sync_again_converges() {
    let fleet = Fleet::new(2);
    let mut rng = Rng(3);
    fleet.replicas[0].ok(&["write", "doc", "--data", r#"{"a":0}"#]);
    fleet.sync(0, &[]);
    fleet.sync(1, &[]);
    for n in 0..12 {
        for (i, r) in fleet.replicas.iter().enumerate() {
            r.ok(&[
                "write",
                &format!("doc{i}"),
                "--merge",
                "--data",
                &format!(r#"{{"k":{n}}}"#),
            ]);
            r.ok(&[
                "ingest",
                "--session-id",
                "s",
                "--text",
                &format!("chunk {n} of {i}"),
            ]);
        }
        let i = rng.below(2) as usize;
        let mut child = fleet.replicas[i].spawn(&["sync"]);
        std::thread::sleep(std::time::Duration::from_millis(rng.below(120)));
        let _ = child.kill();
        let _ = child.wait();
    }
    fleet.converge();
    fleet.assert_identical();
    for i in 0..2 {
        let doc = fleet.replicas[1 - i]
            .category_data(&format!("doc{i}"))
            .unwrap();
        assert_eq!(doc["k"], json!(11));
    }
    assert_eq!(fleet.replicas[1].session_contents("s").len(), 24);
}

#[test]
fn a_bad_conflict_strategy_in_the_config_names_the_key() {
    let mut e = TestEnv::new();
    let cfg = e.tmp.path().join("cfg.toml");
    std::fs::write(&cfg, "[sync]\nconflict_strategy = \"local_wins\"\n").unwrap();
    e.set_env("MEMDIR_CONFIG", cfg.to_str().unwrap());
    let err = e.fail(&["status"], 3);
    let msg = err["message"].as_str().unwrap();
    assert!(msg.contains("sync.conflict_strategy"), "{msg}");
    std::fs::write(&cfg, "[sync]\nconflict_strategy = \"merge\"\n").unwrap();
    let shown = e.ok(&["config", "show"]);
    assert_eq!(
        shown["settings"]["sync.conflict_strategy"]["value"], "merge",
        "{shown:#}"
    );
}

#[test]
fn access_control_applies_to_sync_and_resolve() {
    let mut e = TestEnv::new();
    let cfg = e.tmp.path().join("cfg.toml");
    std::fs::write(
        &cfg,
        "[acl]\nadmin_devices = [\"laptop\"]\n\n[[acl.rules]]\ndevice = \"phone\"\nwrite = [\"notes_*\"]\ndelete = true\n",
    )
    .unwrap();
    e.set_env("MEMDIR_CONFIG", cfg.to_str().unwrap());
    e.set_env("MEMDIR_DEVICE", "phone");
    e.ok(&["write", "notes_a", "--data", "{}"]);
    // A sync moves every category both ways: only an admin device may run it.
    let err = e.fail(&["sync", "--init", "/nonexistent/remote.git"], 12);
    assert!(err.to_string().contains("acl.admin_devices"), "{err}");
    assert!(
        !e.dir.join(".git").exists(),
        "a refused sync changed nothing"
    );
    let err = e.fail(&["resolve", "base", "--data", "{}"], 12);
    assert!(err.to_string().contains("acl."), "{err}");
}

#[test]
fn a_stale_git_index_lock_of_an_interrupted_sync_is_removed() {
    let fleet = Fleet::new(1);
    let a = &fleet.replicas[0];
    a.ok(&["write", "doc", "--data", r#"{"a":1}"#]);
    fleet.sync(0, &[]);
    a.ok(&["write", "doc", "--data", r#"{"a":2}"#]);
    // Someone else's git holds the index: sync waits, then says so and changes nothing.
    std::fs::write(a.dir.join(".git/index.lock"), b"").unwrap();
    let e = a.fail(&["sync"], 6);
    assert!(e["message"].as_str().unwrap().contains("index.lock"), "{e}");
    // A sync killed while its git held the lock leaves its marker: the lock is stale.
    std::fs::write(a.dir.join(".memdir/sync-running"), b"1").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let v = fleet.sync(0, &[]);
    assert!(v["reported"].to_string().contains("stale_lock"), "{v:#}");
    assert!(!a.dir.join(".git/index.lock").exists());
    assert!(!a.dir.join(".memdir/sync-running").exists());
    let shown = git(&fleet.remote, &["show", "main:categories/doc.json"]);
    assert!(shown.contains("\"a\": 2"));
}

#[test]
fn an_edit_pushed_with_plain_git_is_adopted_not_lost() {
    let fleet = Fleet::new(2);
    let a = &fleet.replicas[0];
    a.ok(&["write", "doc", "--data", r#"{"a":1}"#]);
    fleet.sync(0, &[]);
    fleet.sync(1, &[]);
    fleet.sync(0, &[]);
    // On replica 0, someone edits the file and pushes with git alone.
    a.write_file("categories/doc.json", "{\n  \"a\": \"by hand\"\n}\n");
    let d = a.dir.clone();
    git(
        &d,
        &[
            "-c",
            "user.name=x",
            "-c",
            "user.email=x@y",
            "commit",
            "-qam",
            "hand",
        ],
    );
    git(&d, &["push", "-q", "origin", "HEAD:main"]);
    let v = fleet.sync(1, &[]);
    assert!(v["reported"].to_string().contains("adopted"), "{v:#}");
    assert_eq!(
        fleet.replicas[1].category_data("doc"),
        Some(json!({"a": "by hand"}))
    );
    fleet.converge();
    fleet.assert_identical();
    assert_eq!(a.category_data("doc"), Some(json!({"a": "by hand"})));
}

/// Files of a replica (outside `.git/`) whose bytes hold `word`.
fn holding(e: &TestEnv, word: &str) -> Vec<String> {
    let git_dir = e.dir.join(".git");
    crate::redaction::files_containing(&e.dir, word)
        .into_iter()
        .filter(|p| !Path::new(p).starts_with(&git_dir))
        .collect()
}

/// A chunk forgotten on one replica is forgotten on every replica after a sync, also when the
/// segment's own writer appended to it meanwhile: the tombstone wins over the line it replaces,
/// the appended lines stay, every replica ends with the same bytes, and the text leaves the
/// other replica's index and ledger as after a local forget.
#[test]
fn a_forget_on_one_replica_travels_to_the_others() {
    let fleet = Fleet::new(2);
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    for text in [
        "first note about the pool",
        "the quokkasecret token was pasted here",
        "third note about deploys",
    ] {
        a.ok(&["ingest", "--session-id", "s", "--text", text]);
    }
    // A's index holds the chunk before the forget travels.
    assert_eq!(
        a.ok(&["search", "quokkasecret"])["results"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    fleet.sync(0, &[]);
    fleet.sync(1, &[]);
    let id = b.ok(&["fetch", "s"])["chunks"][1]["chunk_id"]
        .as_str()
        .unwrap()
        .to_string();
    b.ok(&["forget", "--session-id", "s", "--chunk-id", &id, "--yes"]);
    // A appends to its own segment meanwhile: both sides changed it.
    a.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--text",
        "fourth note after the forget",
    ]);
    fleet.sync(1, &[]);
    let report = fleet.sync(0, &[]);
    assert_eq!(
        report["reported"],
        json!([]),
        "a forget merges cleanly: {report:#}"
    );
    fleet.converge();
    fleet.assert_identical();
    for (name, e) in [("A", a), ("B", b)] {
        let seg = std::fs::read_to_string(e.segment_of("s")).unwrap();
        assert_eq!(seg.lines().count(), 4, "{name}: {seg}");
        let lines: Vec<Value> = seg
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[1]["content"], "", "{name}: {seg}");
        assert!(lines[1]["metadata"]["forgotten"].is_string(), "{name}");
        assert_eq!(lines[3]["content"], "fourth note after the forget");
        assert_eq!(
            e.ok(&["search", "quokkasecret"])["results"],
            json!([]),
            "{name} still finds the forgotten chunk"
        );
        assert_eq!(
            e.ok(&["search", "fourth"])["results"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(holding(e, "quokkasecret"), Vec::<String>::new(), "{name}");
        e.assert_clean();
    }

    // The plain case: A did not touch the segment; B's forget is taken as it is.
    assert_eq!(
        a.ok(&["search", "pool"])["results"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let first = b.ok(&["fetch", "s"])["chunks"][0]["chunk_id"]
        .as_str()
        .unwrap()
        .to_string();
    b.ok(&["forget", "--session-id", "s", "--chunk-id", &first, "--yes"]);
    fleet.sync(1, &[]);
    fleet.sync(0, &[]);
    fleet.assert_identical();
    assert_eq!(a.ok(&["search", "pool"])["results"], json!([]));
    assert_eq!(holding(a, "first note about"), Vec::<String>::new());
}

/// A remote whose branch was rewritten (a force-push that dropped commits) is reported, and
/// nothing is lost: the replica that still holds the dropped commits merges them back and
/// pushes them, and every replica converges on the full memory.
#[test]
fn a_rewritten_remote_is_reported_and_what_it_dropped_comes_back() {
    let fleet = Fleet::new(2);
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    a.ok(&["write", "first", "--data", r#"{"n":1}"#]);
    fleet.sync(0, &[]);
    a.ok(&["write", "second", "--data", r#"{"n":2}"#]);
    a.ok(&[
        "ingest",
        "--session-id",
        "s",
        "--text",
        "a note the rewrite drops",
    ]);
    let v = fleet.sync(0, &[]);
    let branch = v["branch"].as_str().unwrap().to_string();
    fleet.sync(1, &[]);
    assert_eq!(b.ok(&["read", "second"])["data"], json!({"n": 2}));
    // Someone moves the remote's branch back a commit, as a force-push would.
    let older = git(&fleet.remote, &["rev-parse", &format!("{branch}~1")]);
    git(
        &fleet.remote,
        &["update-ref", &format!("refs/heads/{branch}"), older.trim()],
    );
    let v = fleet.sync(1, &[]);
    let kinds: Vec<&str> = v["reported"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["remote_rewritten"], "{v:#}");
    // The remote holds the dropped commit's files again.
    git(
        &fleet.remote,
        &[
            "cat-file",
            "-e",
            &format!("{branch}:categories/second.json"),
        ],
    );
    // A, whose own tracking ref is also ahead of the rewritten branch, sees it come back.
    fleet.converge();
    fleet.assert_identical();
    for e in [a, b] {
        assert_eq!(e.ok(&["read", "second"])["data"], json!({"n": 2}));
        assert_eq!(
            e.ok(&["search", "rewrite"])["results"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }
    // Once healed, a sync reports nothing.
    assert_eq!(fleet.sync(1, &[])["reported"], json!([]));
}

/// `[sync] interval_ms` makes `memdir serve` sync on its own: a write made meanwhile reaches
/// the remote without anyone running `memdir sync`, `status` records the last sync as
/// `periodic`, and of two servers on one store one holds the syncer lock.
#[test]
fn a_server_with_an_interval_syncs_on_its_own() {
    let mut fleet = Fleet::new(2);
    let branch = fleet.sync(0, &[])["branch"].as_str().unwrap().to_string();
    let cfg = fleet.replicas[0].tmp.path().join("periodic.toml");
    std::fs::write(&cfg, "[sync]\ninterval_ms = 200\n").unwrap();
    fleet.replicas[0].set_env("MEMDIR_CONFIG", cfg.to_str().unwrap());
    let a = &fleet.replicas[0];
    let mut servers = [a.spawn(&["serve"]), a.spawn(&["serve"])];
    a.ok(&["write", "auto", "--data", r#"{"synced": true}"#]);
    let on_remote = || {
        Command::new("git")
            .args(["cat-file", "-e", &format!("{branch}:categories/auto.json")])
            .current_dir(&fleet.remote)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .is_ok_and(|s| s.success())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !on_remote() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(on_remote(), "the server did not push the write within 60 s");
    // The outcome is recorded once the sync that pushed has finished, a moment after the push.
    let mut last = a.ok(&["status"])["last_sync"].clone();
    while last["by"] != "periodic" && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        last = a.ok(&["status"])["last_sync"].clone();
    }
    assert_eq!(last["by"], "periodic", "{last:#}");
    assert_eq!(last["remote"], "origin", "{last:#}");
    // One of the two servers holds the syncer lock.
    let lock = std::fs::File::open(a.path(".memdir/syncer.lock")).unwrap();
    assert!(lock.try_lock().is_err(), "no server holds the syncer lock");
    for s in &mut servers {
        let _ = s.kill();
        let _ = s.wait();
    }
    assert!(lock.try_lock().is_ok());
    fleet.sync(1, &[]);
    assert_eq!(
        fleet.replicas[1].ok(&["read", "auto"])["data"],
        json!({"synced": true})
    );
}

/// Two replicas in sync holding a category of 200 keys at version 2, a patch of version 1.
fn large_category_on_two_replicas() -> Fleet {
    let fleet = Fleet::new(2);
    let a = &fleet.replicas[0];
    let data = Value::Object(crate::patches::big(200)).to_string();
    a.ok(&["write", "big", "--data", &data]);
    a.ok(&["write", "big", "--merge", "--data", r#"{"shared": 1}"#]);
    fleet.sync(0, &[]);
    fleet.sync(1, &[]);
    fleet
}

/// Merges into a large category travel as patches; a version forgotten on one replica while
/// another replica holds a patch on it: the patch is written whole there before the forget
/// lands, so that replica's change is not lost.
#[test]
fn patches_travel_and_a_forgotten_base_does_not_lose_a_patch_on_another_replica() {
    let fleet = large_category_on_two_replicas();
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    assert_eq!(b.read("memdir.json"), "{\n  \"format\": 2\n}\n");
    assert_eq!(b.category_data("big").unwrap()["shared"], json!(1));
    // Both write a patch on version 2; B then forgets version 2.
    a.ok(&["write", "big", "--merge", "--data", r#"{"from_a": 1}"#]);
    b.ok(&["write", "big", "--merge", "--data", r#"{"from_b": 1}"#]);
    b.ok(&["forget", "--category", "big", "--version", "2", "--yes"]);
    fleet.sync(1, &[]);
    // Merged per key: A's patch must be readable here for its key to survive.
    fleet.sync(0, &["--strategy", "merge"]);
    fleet.converge();
    fleet.assert_identical();
    for e in [a, b] {
        let now = e.category_data("big").unwrap();
        assert_eq!(now["from_a"], json!(1), "{now:#}");
        assert_eq!(now["from_b"], json!(1));
        assert_eq!(now["shared"], json!(1));
        let h = e.ok(&["history", "big"]);
        for v in h["versions"].as_array().unwrap() {
            // By id: the two concurrent version 3s share their number.
            let n = v["version"].as_u64().unwrap().to_string();
            let read = e.ok(&["read", "big", "--version", v["id"].as_str().unwrap()]);
            assert_eq!(
                read["data"].is_null(),
                n == "2",
                "version {n} reads back, the forgotten one without content"
            );
        }
    }
}

/// A sync killed after it committed the history it brought and before it derived the category
/// files from it: the next process settles those files from the history instead of adopting
/// their absence (or their older content) as a change made by hand, which would delete or undo
/// the other replica's writes everywhere at the next sync.
#[test]
fn a_sync_killed_between_the_history_and_the_files_it_derives_loses_nothing() {
    let fleet = Fleet::new(2);
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    a.ok(&["write", "doc", "--data", r#"{"k": 1}"#]);
    a.ok(&["write", "notes", "--data", r#"{"n": 1}"#]);
    fleet.sync(0, &[]);
    fleet.sync(1, &[]);
    // B has both at version 1; A writes version 2 of one and a new category.
    a.ok(&["write", "doc", "--merge", "--data", r#"{"k": 2}"#]);
    a.ok(&["write", "fresh", "--data", r#"{"f": 1}"#]);
    fleet.sync(0, &[]);
    b.stopped_at("sync.before_settle", &["sync"]);
    assert!(b.path(".memdir/settle-pending.json").exists());
    // The next command settles before anything else looks at the files.
    assert_eq!(b.category_data("fresh"), Some(json!({"f": 1})));
    assert_eq!(b.category_data("doc"), Some(json!({"k": 2})));
    assert!(!b.path(".memdir/settle-pending.json").exists());
    let ops: Vec<String> = b.ok(&["history", "doc"])["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["op"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !ops.iter().any(|op| op == "external" || op == "delete"),
        "nothing adopted as a hand edit: {ops:?}"
    );
    fleet.converge();
    fleet.assert_identical();
    for e in [a, b] {
        assert_eq!(e.category_data("doc"), Some(json!({"k": 2})));
        assert_eq!(e.category_data("fresh"), Some(json!({"f": 1})));
        assert_eq!(e.category_data("notes"), Some(json!({"n": 1})));
    }
}

/// A patch taken from the remote whose base this replica has forgotten meanwhile: it is
/// written whole from the remote's tree, so the version reads back here and its change is in
/// this replica's file at once (not only after the other replica settles it).
#[test]
fn a_patch_on_a_version_forgotten_here_arrives_whole() {
    let fleet = large_category_on_two_replicas();
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    // A writes a patch on version 2 and pushes it; B writes its own and forgets version 2.
    a.ok(&["write", "big", "--merge", "--data", r#"{"from_a": 1}"#]);
    fleet.sync(0, &[]);
    b.ok(&["write", "big", "--merge", "--data", r#"{"from_b": 1}"#]);
    b.ok(&["forget", "--category", "big", "--version", "2", "--yes"]);
    fleet.sync(1, &["--strategy", "merge"]);
    let now = b.category_data("big").unwrap();
    assert_eq!(
        now["from_a"],
        json!(1),
        "A's change is in B's file: {now:#}"
    );
    assert_eq!(now["from_b"], json!(1));
    b.assert_clean();
    fleet.converge();
    fleet.assert_identical();
    for e in [a, b] {
        let now = e.category_data("big").unwrap();
        assert_eq!(
            (now["from_a"].clone(), now["from_b"].clone()),
            (json!(1), json!(1))
        );
    }
}
