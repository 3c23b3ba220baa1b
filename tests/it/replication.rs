//! Replication against a model: three replicas and a hub. Random local operations (ingest,
//! write, merge, append, delete, forget) are interleaved with random syncs over both transports
//! (git through a bare repository, HTTP through `memdir serve --transport http` on loopback),
//! crashes (failpoints and SIGKILL, of a replica's command or of the hub), and, in the hostile
//! run, a peer that forges what it sends: commits on the git remote made with plumbing
//! (rewritten, truncated and reordered segments, removed or rewritten history files, a
//! `.gitignore`, a `..` entry, a `memdir.json` of a newer format) and pages pushed to the hub
//! (rewritten, truncated and reordered segments, rewritten and forged history entries).
//!
//! The model knows which acknowledged writes each node (replica, remote, hub) must hold: a
//! write is known where it was acknowledged, and a finished sync makes both sides know the
//! union. After every step the node it touched must hold all it knows; at the end, after a
//! final round of syncs, every replica and the hub hold every acknowledged write, no file of
//! any of them holds a forgotten text, the files memdir owns are byte-identical everywhere, and
//! `verify-store` is clean everywhere. These are the invariants of
//! `docs/design/replication.md`, which must hold whatever the hostile peer sends.
//!
//! A failure names the seed, the step and the invariant; `MEMDIR_REPLICATION_SEED=<n>` replays
//! one seed (with `MEMDIR_REPLICATION_STEPS=<n>` and `MEMDIR_REPLICATION_HOSTILE=0|1`);
//! `bench/replication.sh` runs fresh seeds for minutes; `MEMDIR_REPLICATION_VERBOSE=1` prints
//! every step as it runs.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{RawRun, Rng, Served, TestEnv, raw_run, truth_files};

const TOKEN: &str = "replication-test-token-0123456789abcdef0123";
const REPLICAS: usize = 3;
const CATEGORIES: &[&str] = &["shared", "notes", "prefs"];
const LOG: &str = "events";
const SESSIONS: &[&str] = &["s0", "s1", "s2"];
/// The suite's seeds and their steps: each run takes a few seconds in a debug build. The
/// third honest seed is one `bench/replication.sh` found: an HTTP sync that brought a forget's
/// tombstones crashed before its purge, and the index kept the forgotten text.
const HONEST_SEEDS: &[(u64, u64)] = &[
    (0x7265_706c_0001, DEFAULT_STEPS),
    (0x7265_706c_0002, DEFAULT_STEPS),
    (255_954_222, 80),
];
/// The third hostile seed is one `bench/replication.sh` found before seals: a remote rewrote a
/// segment a replica had never held, the replica took the rewrite first and then refused the
/// genuine copy.
const HOSTILE_SEEDS: &[(u64, u64)] = &[
    (0x686f_7374_0001, DEFAULT_STEPS),
    (0x686f_7374_0002, DEFAULT_STEPS),
    (2_007_736_552, 80),
];
const DEFAULT_STEPS: u64 = 45;
/// The top-level entries memdir owns, compared byte for byte at the end.
const OWNED: &[&str] = &["categories/", "history/", "sessions/", "memdir.json"];

/// An acknowledged write, as it can be found in a store's files.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Item {
    /// A chunk's text (unique), in a session.
    Chunk { text: String, session: String },
    /// A category version's content hash.
    Version(String),
    /// A log entry's id.
    Log(String),
}

/// Where a node's acknowledged writes must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    Replica(usize),
    Git,
    Hub,
}

/// What one store's owned files hold, read straight from the disk.
struct Contents {
    segments: String,
    hashes: BTreeSet<String>,
    log_text: String,
}

impl Contents {
    fn read(dir: &Path) -> Contents {
        let mut c = Contents {
            segments: String::new(),
            hashes: BTreeSet::new(),
            log_text: String::new(),
        };
        for rel in owned_files(dir) {
            let text = String::from_utf8_lossy(&std::fs::read(dir.join(&rel)).unwrap_or_default())
                .into_owned();
            if rel.starts_with("sessions/") {
                c.segments.push_str(&text);
            } else if rel.starts_with("history/") {
                if let Ok(v) = serde_json::from_str::<Value>(&text)
                    && let Some(h) = v["hash"].as_str()
                {
                    c.hashes.insert(h.to_string());
                }
                if rel.starts_with(&format!("history/{LOG}/")) {
                    c.log_text.push_str(&text);
                }
            } else if rel == format!("categories/{LOG}.json") {
                c.log_text.push_str(&text);
            }
        }
        c
    }

    fn holds(&self, item: &Item) -> bool {
        match item {
            Item::Chunk { text, .. } => self.segments.contains(&format!("\"{text}\"")),
            Item::Version(h) => self.hashes.contains(h),
            Item::Log(id) => self.log_text.contains(id),
        }
    }
}

/// The files memdir owns below `dir` (git's and `.memdir/` left out), sorted.
fn owned_files(dir: &Path) -> Vec<String> {
    truth_files(dir)
        .into_iter()
        .filter(|p| OWNED.iter().any(|o| p.starts_with(o)))
        .collect()
}

/// Files below `dir` (`.git/` left out: a git remote keeps what was pushed before a forget)
/// whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".git")
        .flatten()
        .filter(|e| e.file_type().is_file())
        .filter(|e| {
            let bytes = std::fs::read(e.path()).unwrap_or_default();
            bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
        })
        .map(|e| e.path().strip_prefix(dir).unwrap().display().to_string())
        .collect()
}

fn git(dir: &Path, args: &[&str], input: Option<&[u8]>, index: Option<&Path>) -> String {
    let mut c = Command::new("git");
    c.args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "hostile")
        .env("GIT_AUTHOR_EMAIL", "hostile@example.invalid")
        .env("GIT_COMMITTER_NAME", "hostile")
        .env("GIT_COMMITTER_EMAIL", "hostile@example.invalid")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(i) = index {
        c.env("GIT_INDEX_FILE", i);
    }
    let mut child = c.spawn().expect("git runs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        if let Some(b) = input {
            stdin.write_all(b).unwrap();
        }
    }
    let out = child.wait_with_output().expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether the hostile peer takes part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Honest,
    Hostile,
}

/// A crash of one command.
#[derive(Clone, Debug)]
enum Crash {
    Failpoint(&'static str),
    Kill(u64),
}

const OP_FAILPOINTS: &[&str] = &[
    "txn.after_stage",
    "txn.after_manifest",
    "txn.after_publish",
    "ledger.before_update",
    "append.after_intent",
    "append.torn",
    "append.after_write",
    "append.sync",
];
const GIT_SYNC_FAILPOINTS: &[&str] = &["sync.before_settle", "txn.after_manifest"];
const HTTP_SYNC_FAILPOINTS: &[&str] = &[
    "sync.before_settle",
    "sync.http.after_pull_page",
    "sync.http.after_push_page",
];

/// The whole world of one run.
struct World {
    seed: u64,
    mode: Mode,
    rng: Rng,
    root: tempfile::TempDir,
    remote: PathBuf,
    replicas: Vec<TestEnv>,
    hub: TestEnv,
    server: Option<Served>,
    /// Acknowledged writes each node must hold.
    known: BTreeMap<Node, BTreeSet<Item>>,
    /// Where and when each acknowledged write was made.
    origin: BTreeMap<Item, String>,
    /// Texts forgotten by an acknowledged forget.
    forgotten: BTreeSet<String>,
    step: u64,
    n: u64,
    /// The steps so far, newest last.
    trail: Vec<String>,
    /// The hostile remote's memdir.json names a format no replica reads.
    forged_format: bool,
}

impl World {
    fn new(seed: u64, mode: Mode) -> World {
        let root = tempfile::Builder::new()
            .prefix("memdir-replication-")
            .tempdir()
            .unwrap();
        let remote = root.path().join("remote.git");
        std::fs::create_dir_all(&remote).unwrap();
        git(&remote, &["init", "-q", "--bare"], None, None);
        let node = |name: &str| {
            let mut e = TestEnv::new();
            e.set_env("MEMDIR_DEVICE", name);
            e.set_env("MEMDIR_SEED", &format!("{name}-{seed}"));
            e.set_env("GIT_CONFIG_NOSYSTEM", "1");
            e.set_env("SYNC_TOKEN", TOKEN);
            e.set_env("MEMDIR_LOCK_TIMEOUT_MS", "30000");
            e
        };
        let replicas: Vec<TestEnv> = (0..REPLICAS).map(|i| node(&format!("device{i}"))).collect();
        let hub = node("hub");
        hub.ok(&["write", "hub-origin", "--data", r#"{"hub":true}"#]);
        let server = Served::start(&hub, &["--token", TOKEN]);
        let mut known = BTreeMap::new();
        for i in 0..REPLICAS {
            known.insert(Node::Replica(i), BTreeSet::new());
        }
        known.insert(Node::Git, BTreeSet::new());
        known.insert(Node::Hub, BTreeSet::new());
        let mut w = World {
            seed,
            mode,
            rng: Rng(seed),
            root,
            remote,
            replicas,
            hub,
            server: Some(server),
            known,
            origin: BTreeMap::new(),
            forgotten: BTreeSet::new(),
            step: 0,
            n: 0,
            trail: Vec::new(),
            forged_format: false,
        };
        // Every replica joins both remotes before anything can crash.
        for i in 0..REPLICAS {
            w.replicas[i].ok(&["write", "shared", "--data", &format!(r#"{{"a":{i}}}"#)]);
            w.sync_git(i, None);
            w.sync_http(i, None);
        }
        w
    }

    /// Fails the run: names the seed, the step, the invariant and the recent steps.
    fn violated(&self, invariant: &str, detail: &str) -> ! {
        let mut trail = String::new();
        for t in self.trail.iter().rev().take(12).rev() {
            let _ = writeln!(trail, "  {t}");
        }
        panic!(
            "replication model, seed {} ({:?}), step {}: invariant violated: {invariant}\n{detail}\n\
             recent steps:\n{trail}replay: MEMDIR_REPLICATION_SEED={} MEMDIR_REPLICATION_HOSTILE={}",
            self.seed,
            self.mode,
            self.step,
            self.seed,
            u8::from(self.mode == Mode::Hostile)
        );
    }

    fn url(&self) -> String {
        self.server.as_ref().expect("the hub runs").url.clone()
    }

    fn dir_of(&self, node: Node) -> &Path {
        match node {
            Node::Replica(i) => &self.replicas[i].dir,
            Node::Hub => &self.hub.dir,
            Node::Git => unreachable!("the git remote is checked through the replicas"),
        }
    }

    /// Every acknowledged write `node` must hold is in its files.
    fn check_holds(&self, node: Node, after: &str) {
        let contents = Contents::read(self.dir_of(node));
        for item in &self.known[&node] {
            if let Item::Chunk { text, .. } = item
                && self.forgotten.contains(text)
            {
                continue;
            }
            if !contents.holds(item) {
                self.violated(
                    "every acknowledged write is present on every node that synced after it",
                    &format!(
                        "{node:?} lacks {item:?} (acknowledged {}) after {after}",
                        self.origin[item]
                    ),
                );
            }
        }
    }

    fn ack(&mut self, i: usize, item: Item) {
        self.origin.insert(
            item.clone(),
            format!("at step {} on replica {i}", self.step),
        );
        self.known.get_mut(&Node::Replica(i)).unwrap().insert(item);
    }

    /// Both sides of a finished sync know what either knew.
    fn exchange(&mut self, a: Node, b: Node) {
        let union: BTreeSet<Item> = self.known[&a].union(&self.known[&b]).cloned().collect();
        self.known.insert(a, union.clone());
        self.known.insert(b, union);
    }

    /// Runs a command on replica `i`, crashed as `crash` says.
    fn run(&self, i: usize, args: &[&str], crash: Option<&Crash>) -> RawRun {
        let env = &self.replicas[i];
        match crash {
            None => env.run_env(args, &[], b""),
            Some(Crash::Failpoint(fp)) => env.run_env(args, &[("MEMDIR_FAILPOINT", fp)], b""),
            Some(Crash::Kill(ms)) => {
                let mut child = env
                    .command(args)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn memdir");
                // The crash's instant, not a wait for anything: SIGKILL lands wherever the
                // command is by then.
                std::thread::sleep(Duration::from_millis(*ms));
                let _ = child.kill();
                let out = child.wait_with_output().expect("wait memdir");
                raw_run(format!("memdir {}", args.join(" ")), out)
            }
        }
    }

    /// A run that was not crashed must succeed; a crashed one may end either way.
    fn finished(&self, r: &RawRun, crash: Option<&Crash>, what: &str) -> Option<Value> {
        if r.signal.is_none() && r.run.code == 0 {
            return serde_json::from_str(&r.run.stdout).ok();
        }
        if crash.is_none() {
            self.violated(
                "a command that was not crashed succeeds",
                &format!(
                    "{what}: `{}` exited {} (signal {:?})\nstdout: {}\nstderr: {}",
                    r.run.cmd, r.run.code, r.signal, r.run.stdout, r.run.stderr
                ),
            );
        }
        None
    }

    fn sync_git(&mut self, i: usize, crash: Option<&Crash>) {
        let url = self.remote.display().to_string();
        let mut args = vec!["sync"];
        if !self.replicas[i].dir.join(".git").exists() {
            args.extend(["--init", url.as_str()]);
        }
        let r = self.run(i, &args, crash);
        if self.forged_format && r.signal.is_none() && r.run.code != 0 {
            // A remote that says format 99: the sync refuses by name and merges nothing, the
            // replica keeps working, and its user puts the remote's file back.
            if !r.run.stderr.contains("memdir.json") {
                self.violated(
                    "a sync refuses a remote's newer format by name",
                    &format!("replica {i}: {}", r.run.stderr),
                );
            }
            if self.run(i, &["status"], None).run.code != 0 {
                self.violated(
                    "a replica keeps working after a sync refused a remote's format",
                    &format!("replica {i}"),
                );
            }
            let ours = std::fs::read(self.replicas[i].dir.join("memdir.json")).unwrap();
            self.remote_put("memdir.json", &ours);
            self.forged_format = false;
            return;
        }
        let Some(v) = self.finished(&r, crash, "git sync") else {
            return;
        };
        if v["pushed"] != json!(true) {
            self.violated(
                "a sync that was not crashed pushes",
                &format!("git sync of replica {i}: {v:#}"),
            );
        }
        self.exchange(Node::Replica(i), Node::Git);
        self.check_holds(Node::Replica(i), "its git sync");
    }

    fn sync_http(&mut self, i: usize, crash: Option<&Crash>) {
        let url = self.url();
        let r = self.run(
            i,
            &["sync", "--remote", &url, "--token-env", "SYNC_TOKEN"],
            crash,
        );
        let Some(v) = self.finished(&r, crash, "http sync") else {
            return;
        };
        if v["pushed"] != json!(true) {
            self.violated(
                "a sync that was not crashed pushes",
                &format!("http sync of replica {i}: {v:#}"),
            );
        }
        self.exchange(Node::Replica(i), Node::Hub);
        self.check_holds(Node::Replica(i), "its http sync");
        self.check_holds(Node::Hub, &format!("replica {i}'s http sync"));
    }

    fn random_crash(&mut self, failpoints: &[&'static str], kill_ms: u64) -> Crash {
        if self.rng.below(3) == 0 {
            Crash::Kill(self.rng.below(kill_ms) + 1)
        } else {
            Crash::Failpoint(failpoints[self.rng.below(failpoints.len() as u64) as usize])
        }
    }

    /// One local operation on replica `i`, crashed or not.
    fn local_op(&mut self, i: usize, crash: Option<&Crash>) -> String {
        self.n += 1;
        let n = self.n;
        let cat = CATEGORIES[self.rng.below(CATEGORIES.len() as u64) as usize];
        let kind = self.rng.below(10);
        let (name, args): (&str, Vec<String>) = match kind {
            0..=2 => {
                let session = SESSIONS[self.rng.below(SESSIONS.len() as u64) as usize];
                let text = format!("chunk-{n:05}-r{i}-{session}");
                let args = vec![
                    "ingest".into(),
                    "--session-id".into(),
                    session.into(),
                    "--text".into(),
                    text,
                ];
                ("ingest", args)
            }
            3 => (
                "write",
                vec![
                    "write".into(),
                    cat.into(),
                    "--data".into(),
                    format!(r#"{{"k{n}":"v{n}"}}"#),
                ],
            ),
            4 | 5 => {
                let key = ["a", "b", "c"][self.rng.below(3) as usize];
                (
                    "merge",
                    vec![
                        "write".into(),
                        cat.into(),
                        "--merge".into(),
                        "--data".into(),
                        format!(r#"{{"{key}":{n}}}"#),
                    ],
                )
            }
            6 | 7 => (
                "append",
                vec![
                    "append".into(),
                    LOG.into(),
                    "--data".into(),
                    format!(r#"{{"n":{n}}}"#),
                ],
            ),
            8 => ("delete", vec!["delete".into(), cat.into()]),
            _ => return self.forget(i),
        };
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = self.run(i, &argv, crash);
        // A delete of a missing category is refused (exit 4), as the CLI documents.
        if name == "delete" && r.signal.is_none() && r.run.code == 4 {
            return format!("replica {i}: delete {cat} (absent)");
        }
        let Some(v) = self.finished(&r, crash, name) else {
            return format!("replica {i}: {name} crashed by {crash:?}");
        };
        match name {
            "ingest" => {
                let item = Item::Chunk {
                    text: args[4].clone(),
                    session: args[2].clone(),
                };
                self.ack(i, item);
            }
            "write" | "merge" => {
                if let Some(h) = v["new_hash"].as_str() {
                    self.ack(i, Item::Version(h.to_string()));
                }
            }
            "append" => {
                if let Some(id) = v["id"].as_str() {
                    self.ack(i, Item::Log(id.to_string()));
                }
            }
            _ => {}
        }
        self.check_holds(Node::Replica(i), name);
        format!(
            "replica {i}: {name} {}{}",
            args[1..].join(" "),
            crash
                .map(|c| format!(" (crash {c:?} did not stop it)"))
                .unwrap_or_default()
        )
    }

    /// Forgets one chunk replica `i` holds that was acknowledged and not yet forgotten.
    fn forget(&mut self, i: usize) -> String {
        let candidates: Vec<(String, String)> = self.known[&Node::Replica(i)]
            .iter()
            .filter_map(|it| match it {
                Item::Chunk { text, session } if !self.forgotten.contains(text) => {
                    Some((text.clone(), session.clone()))
                }
                _ => None,
            })
            .collect();
        if candidates.is_empty() {
            return format!("replica {i}: nothing to forget");
        }
        let (text, session) = candidates[self.rng.below(candidates.len() as u64) as usize].clone();
        let fetched = self.replicas[i].ok(&["fetch", &session, "--limit", "1000"]);
        let id = fetched["chunks"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["content"] == json!(text)))
            .and_then(|c| c["chunk_id"].as_str())
            .map(str::to_string)
            .unwrap_or_else(|| {
                self.violated(
                    "every acknowledged write is present on every node that synced after it",
                    &format!("replica {i} does not show chunk {text:?} in {session}: {fetched:#}"),
                )
            });
        let r = self.run(
            i,
            &[
                "forget",
                "--session-id",
                &session,
                "--chunk-id",
                &id,
                "--yes",
            ],
            None,
        );
        self.finished(&r, None, "forget");
        self.forgotten.insert(text.clone());
        let left = files_holding(&self.replicas[i].dir, &text);
        if !left.is_empty() {
            self.violated(
                "forgotten text is in no file",
                &format!("replica {i} still holds {text:?} in {left:?} after forgetting it"),
            );
        }
        format!("replica {i}: forget {text}")
    }

    /// Kills the hub's server with SIGKILL and starts it again on the same store.
    fn crash_hub(&mut self) -> String {
        drop(self.server.take());
        self.server = Some(Served::start(&self.hub, &["--token", TOKEN]));
        self.check_holds(Node::Hub, "a SIGKILL of the hub");
        "hub: SIGKILL and restart".into()
    }

    fn random_step(&mut self) -> String {
        let i = self.rng.below(REPLICAS as u64) as usize;
        let hostile = if self.mode == Mode::Hostile { 12 } else { 0 };
        let roll = self.rng.below(100 + hostile);
        match roll {
            0..50 => self.local_op(i, None),
            50..62 => {
                self.sync_git(i, None);
                format!("replica {i}: git sync")
            }
            62..76 => {
                self.sync_http(i, None);
                format!("replica {i}: http sync")
            }
            76..86 => {
                let crash = self.random_crash(OP_FAILPOINTS, 60);
                self.local_op(i, Some(&crash))
            }
            86..92 => {
                let crash = self.random_crash(GIT_SYNC_FAILPOINTS, 400);
                self.sync_git(i, Some(&crash));
                format!("replica {i}: git sync, crash {crash:?}")
            }
            92..98 => {
                let crash = self.random_crash(HTTP_SYNC_FAILPOINTS, 300);
                self.sync_http(i, Some(&crash));
                format!("replica {i}: http sync, crash {crash:?}")
            }
            98..100 => self.crash_hub(),
            _ => {
                if self.rng.below(2) == 0 {
                    self.hostile_commit()
                } else {
                    self.hostile_push()
                }
            }
        }
    }

    /// A final round: every replica syncs over both transports until nothing moves, then
    /// every invariant is checked on every node.
    fn finish(&mut self) {
        for round in 0..3 {
            for i in 0..REPLICAS {
                self.step += 1;
                self.trail.push(format!("final round {round}: replica {i}"));
                self.sync_git(i, None);
                self.sync_http(i, None);
            }
        }
        let all: BTreeSet<Item> = self.known.values().flatten().cloned().collect();
        let nodes: Vec<Node> = (0..REPLICAS)
            .map(Node::Replica)
            .chain([Node::Hub])
            .collect();
        for &node in &nodes {
            self.known.insert(node, all.clone());
            self.check_holds(node, "the final round of syncs");
        }
        for text in &self.forgotten {
            for &node in &nodes {
                let left = files_holding(self.dir_of(node), text);
                if !left.is_empty() {
                    self.violated(
                        "forgotten text is in no file of any replica or of the hub",
                        &format!("{node:?} holds {text:?} in {left:?}"),
                    );
                }
            }
        }
        let snap = |dir: &Path| -> BTreeMap<String, Vec<u8>> {
            owned_files(dir)
                .into_iter()
                .map(|p| {
                    let b = std::fs::read(dir.join(&p)).unwrap();
                    (p, b)
                })
                .collect()
        };
        let first = snap(self.dir_of(nodes[0]));
        for &node in &nodes[1..] {
            let other = snap(self.dir_of(node));
            if other != first {
                let a: BTreeSet<&String> = first.keys().collect();
                let b: BTreeSet<&String> = other.keys().collect();
                let differ: Vec<&String> = a
                    .intersection(&b)
                    .filter(|p| first[**p] != other[**p])
                    .copied()
                    .collect();
                self.violated(
                    "all replicas converge to byte-identical trees",
                    &format!(
                        "{node:?} differs from replica 0: only in replica 0: {:?}; only in \
                         {node:?}: {:?}; different bytes: {differ:?}",
                        a.difference(&b).collect::<Vec<_>>(),
                        b.difference(&a).collect::<Vec<_>>()
                    ),
                );
            }
        }
        for &node in &nodes {
            let env = match node {
                Node::Replica(i) => &self.replicas[i],
                _ => &self.hub,
            };
            let r = env.run(&["verify-store"]);
            if r.code != 0 {
                self.violated(
                    "verify-store is clean everywhere",
                    &format!("{node:?}: exit {}\n{}\n{}", r.code, r.stdout, r.stderr),
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The hostile peer.

impl World {
    /// A scratch repository the hostile peer builds its commits in.
    fn scratch(&self) -> PathBuf {
        let dir = self.root.path().join("hostile");
        if !dir.exists() {
            std::fs::create_dir_all(&dir).unwrap();
            git(&dir, &["init", "-q"], None, None);
        }
        dir
    }

    /// Forges one commit on the remote's `main` with git plumbing, on top of what is there.
    fn hostile_commit(&mut self) -> String {
        let dir = self.scratch();
        let remote = self.remote.display().to_string();
        git(
            &dir,
            &["fetch", "-q", &remote, "+refs/heads/main:refs/heads/main"],
            None,
            None,
        );
        // A tree an earlier forgery gave a `..` entry cannot be read into an index (git
        // refuses the path): the peer forges nothing until a replica's push replaces it.
        if has_dotdot(&dir) {
            return "hostile git: the remote's tree still holds `..`".into();
        }
        let index = dir.join(".git/forged-index");
        let _ = std::fs::remove_file(&index);
        git(&dir, &["read-tree", "main"], None, Some(&index));
        let listing = git(&dir, &["ls-files"], None, Some(&index));
        let files: Vec<&str> = listing.lines().collect();
        let pick = |rng: &mut Rng, prefix: &str| -> Option<String> {
            let of: Vec<&&str> = files.iter().filter(|f| f.starts_with(prefix)).collect();
            (!of.is_empty()).then(|| of[rng.below(of.len() as u64) as usize].to_string())
        };
        let blob = |path: &str| git(&dir, &["show", &format!("main:{path}")], None, None);
        let put = |path: &str, bytes: &[u8]| {
            let sha = git(&dir, &["hash-object", "-w", "--stdin"], Some(bytes), None);
            git(
                &dir,
                &[
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    &format!("100644,{},{path}", sha.trim()),
                ],
                None,
                Some(&index),
            );
        };
        // What the remote held in a file this commit rewrites or removes is no longer the
        // remote's: a replica that never had it cannot get it there until a replica that
        // holds it syncs again (and puts it back).
        let mut touched = String::new();
        // A damaged seal denies its segment's lines to a replica that has none of them yet,
        // until their replica syncs the seal back: they are no longer the remote's either.
        let lines_of = |p: &str| match p.strip_suffix(".head") {
            Some(stem) => blob(&format!("{stem}.jsonl")),
            None => blob(p),
        };
        let what = match self.rng.below(9) {
            0 => match pick(&mut self.rng, "sessions/") {
                Some(p) => {
                    touched = lines_of(&p);
                    put(&p, rewrite_lines(&blob(&p), self.n).as_bytes());
                    format!("rewrites every line of {p}")
                }
                None => return "hostile git: no segment yet".into(),
            },
            1 => match pick(&mut self.rng, "sessions/") {
                Some(p) => {
                    let text = blob(&p);
                    touched = lines_of(&p);
                    let keep: Vec<&str> = text.lines().collect();
                    let cut = keep[..keep.len().saturating_sub(1)].join("\n");
                    let cut = if cut.is_empty() { cut } else { cut + "\n" };
                    put(&p, cut.as_bytes());
                    format!("truncates {p}")
                }
                None => return "hostile git: no segment yet".into(),
            },
            2 => match pick(&mut self.rng, "sessions/") {
                Some(p) => {
                    let text = blob(&p);
                    touched = lines_of(&p);
                    let mut lines: Vec<&str> = text.lines().collect();
                    lines.reverse();
                    put(&p, (lines.join("\n") + "\n").as_bytes());
                    format!("reorders {p}")
                }
                None => return "hostile git: no segment yet".into(),
            },
            3 => match pick(&mut self.rng, "history/") {
                Some(p) => {
                    touched = blob(&p);
                    git(
                        &dir,
                        &["update-index", "--force-remove", &p],
                        None,
                        Some(&index),
                    );
                    format!("removes {p}")
                }
                None => return "hostile git: no history yet".into(),
            },
            4 => match pick(&mut self.rng, "history/") {
                Some(p) => {
                    touched = blob(&p);
                    let mut v: Value = serde_json::from_str(&blob(&p)).unwrap_or(json!({}));
                    v["content"] = json!({"forged": self.n});
                    v["actor"] = json!("device0");
                    put(&p, format!("{v}\n").as_bytes());
                    format!("rewrites {p}")
                }
                None => return "hostile git: no history yet".into(),
            },
            5 => {
                put(".gitignore", b"*.jsonl\nhistory/*\n");
                "adds a .gitignore".into()
            }
            6 => {
                self.forged_format = true;
                put("memdir.json", b"{\"format\": 99}\n");
                "writes memdir.json with format 99".into()
            }
            7 => match pick(&mut self.rng, "sessions/").filter(|p| p.ends_with(".head")) {
                Some(p) => {
                    let mut v: Value = serde_json::from_str(&blob(&p)).unwrap_or(json!({}));
                    let hexes = |k: &str| v[k].as_str().unwrap_or("").to_string();
                    touched = lines_of(&p);
                    match self.rng.below(3) {
                        // Leaves that vouch for other lines: the signature no longer holds.
                        0 => {
                            let leaves = hexes("leaves");
                            v["leaves"] = json!(match leaves.chars().next() {
                                Some('0') => format!("1{}", &leaves[1..]),
                                Some(_) => format!("0{}", &leaves[1..]),
                                None => "00".into(),
                            });
                            put(&p, format!("{v}\n").as_bytes());
                            format!("forges the seal {p}")
                        }
                        // Proofs withdrawn and made up: the signature holds, the proofs prove
                        // nothing.
                        1 => {
                            let (salts, inners) = (hexes("salts").len(), hexes("inners").len());
                            v["salts"] = json!("0".repeat(salts));
                            v["inners"] = json!("7".repeat(inners));
                            put(&p, format!("{v}\n").as_bytes());
                            format!("withdraws every proof of the seal {p}")
                        }
                        // A forget of a line its replica has not written yet.
                        _ => {
                            let seg = format!("{}.jsonl", p.trim_end_matches(".head"));
                            let text = blob(&seg);
                            let Some(mut last) = text
                                .lines()
                                .last()
                                .and_then(|l| serde_json::from_str::<Value>(l).ok())
                            else {
                                return "hostile git: no segment beside the seal".into();
                            };
                            touched = text.clone();
                            last["seq"] = json!(last["seq"].as_u64().unwrap_or(0) + 1);
                            last["hlc"] = json!("29991231T235959999Z-0000");
                            last["ts"] = json!("2999-12-31T23:59:59.999Z");
                            last["project"] = json!("");
                            last["content"] = json!("");
                            last["metadata"] = json!({"forgotten": "2999-12-31T23:59:59.999Z"});
                            put(&seg, format!("{text}{last}\n").as_bytes());
                            format!("appends a forged forget of the next line to {seg}")
                        }
                    }
                }
                None => return "hostile git: no seal picked".into(),
            },
            _ => "adds a `..` tree entry".into(),
        };
        let mut tree = git(&dir, &["write-tree"], None, Some(&index))
            .trim()
            .to_string();
        if what.contains("`..`") {
            let sha = git(
                &dir,
                &["hash-object", "-w", "--stdin"],
                Some(b"escaped\n"),
                None,
            );
            let mut listing = git(&dir, &["ls-tree", &tree], None, None);
            listing.push_str(&format!("100644 blob {}\t..\n", sha.trim()));
            tree = git(&dir, &["mktree"], Some(listing.as_bytes()), None)
                .trim()
                .to_string();
        }
        commit_and_push(&dir, &tree, "forged", &remote);
        if !touched.is_empty() {
            let named = |i: &Item| match i {
                Item::Chunk { text, .. } => touched.contains(text.as_str()),
                Item::Version(h) | Item::Log(h) => touched.contains(h.as_str()),
            };
            self.known
                .get_mut(&Node::Git)
                .expect("the git node")
                .retain(|i| !named(i));
        }
        format!("hostile git commit: {what}")
    }

    /// Commits `bytes` as `path` on the remote's main branch (a user's repair by hand).
    fn remote_put(&self, path: &str, bytes: &[u8]) {
        let dir = self.scratch();
        let remote = self.remote.display().to_string();
        git(
            &dir,
            &["fetch", "-q", &remote, "+refs/heads/main:refs/heads/main"],
            None,
            None,
        );
        let index = dir.join(".git/repair-index");
        let _ = std::fs::remove_file(&index);
        if has_dotdot(&dir) {
            // The user's repair starts from the tree without the entry git refuses.
            git(&dir, &["read-tree", "--empty"], None, Some(&index));
            let listing = git(&dir, &["ls-tree", "-r", "main"], None, None);
            for line in listing.lines().filter(|l| !l.ends_with("\t..")) {
                let (meta, path) = line.split_once('\t').unwrap();
                let f: Vec<&str> = meta.split_whitespace().collect();
                git(
                    &dir,
                    &[
                        "update-index",
                        "--add",
                        "--cacheinfo",
                        &format!("{},{},{path}", f[0], f[2]),
                    ],
                    None,
                    Some(&index),
                );
            }
        } else {
            git(&dir, &["read-tree", "main"], None, Some(&index));
        }
        let sha = git(&dir, &["hash-object", "-w", "--stdin"], Some(bytes), None);
        git(
            &dir,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("100644,{},{path}", sha.trim()),
            ],
            None,
            Some(&index),
        );
        let tree = git(&dir, &["write-tree"], None, Some(&index));
        commit_and_push(&dir, tree.trim(), "repair", &remote);
    }

    /// Pushes one forged page to the hub as a device with the hub's token.
    fn hostile_push(&mut self) -> String {
        let hub = self.hub.dir.clone();
        let files = owned_files(&hub);
        let pick = |rng: &mut Rng, prefix: &str| -> Option<String> {
            let of: Vec<&String> = files.iter().filter(|f| f.starts_with(prefix)).collect();
            (!of.is_empty()).then(|| of[rng.below(of.len() as u64) as usize].clone())
        };
        let read = |p: &str| std::fs::read_to_string(hub.join(p)).unwrap_or_default();
        let n = self.n;
        let (what, path, data) = match self.rng.below(7) {
            0 => match pick(&mut self.rng, "sessions/") {
                Some(p) => {
                    let text = rewrite_lines(&read(&p), n);
                    let extra = text.lines().last().unwrap_or("{}").to_string();
                    (format!("rewritten and longer {p}"), p, text + &extra + "\n")
                }
                None => return "hostile push: no segment yet".into(),
            },
            1 => match pick(&mut self.rng, "sessions/") {
                Some(p) => {
                    let text = read(&p);
                    let first = text.lines().next().unwrap_or("").to_string() + "\n";
                    (format!("truncated {p}"), p, first)
                }
                None => return "hostile push: no segment yet".into(),
            },
            2 => match pick(&mut self.rng, "sessions/") {
                Some(p) => {
                    let text = read(&p);
                    let mut lines: Vec<&str> = text.lines().collect();
                    lines.reverse();
                    (format!("reordered {p}"), p.clone(), lines.join("\n") + "\n")
                }
                None => return "hostile push: no segment yet".into(),
            },
            3 => match pick(&mut self.rng, "history/") {
                Some(p) => {
                    let mut v: Value = serde_json::from_str(&read(&p)).unwrap_or(json!({}));
                    v["content"] = json!({"forged": n});
                    (format!("rewritten {p}"), p, format!("{v}\n"))
                }
                None => return "hostile push: no history yet".into(),
            },
            4 => {
                let p = format!("history/shared/20200101T000000000Z-{n:04}_device1-forged.json");
                let v = json!({"id": "forged", "content": {"forged": n}, "hash": "0".repeat(64),
                    "actor": "device0", "op": "write"});
                (format!("forged history entry {p}"), p, format!("{v}\n"))
            }
            5 => match pick(&mut self.rng, "sessions/").filter(|p| p.ends_with(".head")) {
                // A seal that vouches for other lines, and its segment rewritten to match what
                // a forger would want vouched for: the signature holds for neither.
                Some(p) => {
                    let mut v: Value = serde_json::from_str(&read(&p)).unwrap_or(json!({}));
                    let hexes = |k: &str| v[k].as_str().unwrap_or("").to_string();
                    if self.rng.below(2) == 0 {
                        v["leaves"] = json!(hexes("leaves").chars().rev().collect::<String>());
                    } else {
                        // The signature holds; the proofs prove nothing.
                        let (salts, inners) = (hexes("salts").len(), hexes("inners").len());
                        v["salts"] = json!("0".repeat(salts));
                        v["inners"] = json!("7".repeat(inners));
                    }
                    (format!("forged seal {p}"), p, format!("{v}\n"))
                }
                None => return "hostile push: no seal picked".into(),
            },
            _ => {
                let p = format!("sessions/forged{n}/device2-forged.jsonl");
                (
                    format!("forged segment {p}"),
                    p,
                    format!("{{\"seq\":7,\"content\":\"forged {n}\",\"x\":1}}\n"),
                )
            }
        };
        let body = json!({"items": [{
            "path": path,
            "from": 0,
            "hash": blake3::hash(data.as_bytes()).to_hex().to_string(),
            "data": data,
        }]});
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let status = agent
            .post(&format!("{}/api/v1/sync/push", self.url()))
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .send_json(&body)
            .map(|r| r.status().as_u16())
            .unwrap_or(0);
        self.check_holds(Node::Hub, &format!("a forged push ({what})"));
        format!("hostile push: {what} -> {status}")
    }
}

/// Every line of a segment with its text replaced: what a peer that rewrites history sends.
/// Commits `tree` on top of `main` in the scratch repository `dir` and pushes it as the
/// remote's `main`.
fn commit_and_push(dir: &Path, tree: &str, message: &str, remote: &str) {
    let commit = git(
        dir,
        &["commit-tree", tree, "-p", "main", "-m", message],
        None,
        None,
    );
    git(
        dir,
        &[
            "push",
            "-q",
            remote,
            &format!("{}:refs/heads/main", commit.trim()),
        ],
        None,
        None,
    );
}

/// Whether the top of `main` in the scratch repository `dir` holds an entry named `..`.
fn has_dotdot(dir: &Path) -> bool {
    git(dir, &["ls-tree", "main"], None, None)
        .lines()
        .any(|l| l.ends_with("\t.."))
}

fn rewrite_lines(text: &str, n: u64) -> String {
    text.lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap_or(json!({}));
            v["content"] = json!(format!("rewritten by a peer {n}"));
            v["project"] = json!("elsewhere");
            format!("{v}\n")
        })
        .collect()
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
    })
}

/// One run: `steps` random steps, then the final round and every end invariant.
fn run(seed: u64, mode: Mode, steps: u64) -> Duration {
    let began = Instant::now();
    let mut w = World::new(seed, mode);
    for _ in 0..steps {
        w.step += 1;
        let said = w.random_step();
        if std::env::var_os("MEMDIR_REPLICATION_VERBOSE").is_some() {
            eprintln!("step {}: {said}", w.step);
        }
        w.trail.push(format!("step {}: {said}", w.step));
    }
    w.finish();
    let took = began.elapsed();
    eprintln!(
        "replication: seed {seed} ({mode:?}), {steps} steps, {} writes acknowledged, {} \
         forgotten, in {took:?}",
        w.origin.len(),
        w.forgotten.len()
    );
    took
}

/// The seeds to run and their steps: one from the environment, or the suite's.
fn seeds(mode: Mode, suite: &[(u64, u64)]) -> Vec<(u64, u64)> {
    match env_u64("MEMDIR_REPLICATION_SEED") {
        Some(s) => {
            let hostile = env_u64("MEMDIR_REPLICATION_HOSTILE").unwrap_or(0) == 1;
            let steps = env_u64("MEMDIR_REPLICATION_STEPS").unwrap_or(DEFAULT_STEPS);
            if hostile == (mode == Mode::Hostile) {
                vec![(s, steps)]
            } else {
                vec![]
            }
        }
        None => suite.to_vec(),
    }
}

#[test]
fn replicas_syncing_over_git_and_http_through_crashes_keep_every_write_and_converge() {
    for (seed, steps) in seeds(Mode::Honest, HONEST_SEEDS) {
        run(seed, Mode::Honest, steps);
    }
}

#[test]
fn a_hostile_peer_on_the_git_remote_and_the_hub_cannot_rewrite_or_erase_acknowledged_writes() {
    for (seed, steps) in seeds(Mode::Hostile, HOSTILE_SEEDS) {
        run(seed, Mode::Hostile, steps);
    }
}
