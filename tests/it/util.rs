//! A hermetic test environment: a temp root, a cleared environment, a fixed seed, and helpers
//! that run the built binary and, on failure, print the command, the tree, stdout and stderr.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Path of the binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_memdir"))
}

/// One test's world.
pub struct TestEnv {
    pub tmp: tempfile::TempDir,
    pub dir: PathBuf,
    pub envs: Vec<(String, String)>,
}

/// What one run of the binary gave.
pub struct Run {
    pub cmd: String,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout of `{}` is not JSON ({e}):\n{}\nstderr:\n{}",
                self.cmd, self.stdout, self.stderr
            )
        })
    }
    /// The `error` object printed on stderr.
    pub fn error(&self) -> Value {
        let v: Value = serde_json::from_str(&self.stderr).unwrap_or_else(|e| {
            panic!(
                "stderr of `{}` is not JSON ({e}):\n{}",
                self.cmd, self.stderr
            )
        });
        v["error"].clone()
    }
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let tmp = tempfile::Builder::new()
            .prefix("memdir-test-")
            .tempdir()
            .expect("temp dir");
        let dir = tmp.path().join("store");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let envs = vec![
            (
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_default(),
            ),
            ("HOME".to_string(), home.display().to_string()),
            ("MEMDIR_DIR".to_string(), dir.display().to_string()),
            ("MEMDIR_DEVICE".to_string(), "test-device".to_string()),
            ("MEMDIR_MACHINE_ID".to_string(), "test-machine".to_string()),
            ("MEMDIR_SEED".to_string(), "test-seed".to_string()),
        ];
        TestEnv { tmp, dir, envs }
    }

    /// Sets an environment variable for every later run.
    pub fn set_env(&mut self, k: &str, v: &str) {
        self.envs.retain(|(key, _)| key != k);
        self.envs.push((k.to_string(), v.to_string()));
    }

    /// A command for the binary with this environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.env_clear();
        for (k, v) in &self.envs {
            c.env(k, v);
        }
        c.args(args).current_dir(self.tmp.path());
        c
    }

    fn finish(&self, args: &[&str], out: Output) -> Run {
        Run {
            cmd: format!("memdir {}", args.join(" ")),
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs with empty stdin.
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_stdin(args, b"")
    }

    /// Runs with `input` on stdin.
    pub fn run_stdin(&self, args: &[&str], input: &[u8]) -> Run {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn memdir");
        let mut stdin = child.stdin.take().unwrap();
        let input = input.to_vec();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let out = child.wait_with_output().expect("wait memdir");
        writer.join().unwrap();
        self.finish(args, out)
    }

    /// A category's data as `memdir read` shows it, `None` when it does not exist.
    pub fn category_data(&self, name: &str) -> Option<Value> {
        let r = self.run(&["read", name]);
        match r.code {
            0 => Some(r.json()["data"].clone()),
            4 => None,
            _ => {
                self.dump(&r);
                panic!("`{}` exited {}", r.cmd, r.code);
            }
        }
    }

    /// Runs and requires exit 0; returns stdout as JSON.
    pub fn ok(&self, args: &[&str]) -> Value {
        let r = self.run(args);
        if r.code != 0 {
            self.dump(&r);
            panic!("`{}` exited {}", r.cmd, r.code);
        }
        r.json()
    }

    /// Runs with stdin and requires exit 0.
    pub fn ok_stdin(&self, args: &[&str], input: &[u8]) -> Value {
        let r = self.run_stdin(args, input);
        if r.code != 0 {
            self.dump(&r);
            panic!("`{}` exited {}", r.cmd, r.code);
        }
        r.json()
    }

    /// Runs and requires exit `code`; returns the error object from stderr.
    pub fn fail(&self, args: &[&str], code: i32) -> Value {
        let r = self.run(args);
        if r.code != code {
            self.dump(&r);
            panic!("`{}` exited {}, expected {code}", r.cmd, r.code);
        }
        r.error()
    }

    /// Prints everything needed to understand a failure.
    pub fn dump(&self, r: &Run) {
        eprintln!(
            "--- command: {}\n--- cwd: {}\n--- exit: {}",
            r.cmd,
            self.tmp.path().display(),
            r.code
        );
        eprintln!("--- tree:");
        for e in walkdir::WalkDir::new(&self.dir)
            .sort_by_file_name()
            .into_iter()
            .flatten()
        {
            eprintln!(
                "  {}",
                e.path()
                    .strip_prefix(&self.dir)
                    .unwrap_or(e.path())
                    .display()
            );
        }
        eprintln!("--- stdout:\n{}\n--- stderr:\n{}", r.stdout, r.stderr);
    }

    /// A path inside the store.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// The integers a query of the store's ledger answers, read-only (what the index is told,
    /// the stamps the ledger keeps).
    pub fn ledger_ints(&self, sql: &str) -> Vec<i64> {
        let db = rusqlite::Connection::open_with_flags(
            self.path(".memdir/ledger.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let mut q = db.prepare(sql).unwrap();
        q.query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    }

    /// Reads a file inside the store as text.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    /// Writes a file inside the store, as a user's editor would.
    pub fn write_file(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// Spawns a long-running child with piped stdio.
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn memdir")
    }

    /// The only segment file of a session (panics unless exactly one).
    pub fn segment_of(&self, session_dir: &str) -> PathBuf {
        let dir = self.path(&format!("sessions/{session_dir}"));
        let files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        assert_eq!(files.len(), 1, "segments in {}: {files:?}", dir.display());
        files[0].clone()
    }

    /// verify-store must report a clean store.
    pub fn assert_clean(&self) {
        let r = self.run(&["verify-store"]);
        if r.code != 0 {
            self.dump(&r);
            panic!("verify-store is not clean");
        }
    }
}

/// Polls `f` until it returns true or `timeout` passes.
/// Closes a server's stdin and waits (bounded) for it to exit; returns its exit code.
pub fn close_and_wait(child: &mut Child, stdin: Option<std::process::ChildStdin>) -> i32 {
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("memdir serve did not exit after stdin closed");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Writes `bytes` to `path` and puts its modification time back to what it was (an edit a
/// tool disguised, or a restore from a backup): only the status-change time shows it.
pub fn write_keeping_mtime(path: &Path, bytes: impl AsRef<[u8]>) {
    let mtime = std::fs::metadata(path).unwrap().modified().unwrap();
    std::fs::write(path, bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    f()
}

/// Relative paths of every file below `root`, excluding `.memdir/`.
pub fn truth_files(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".memdir")
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(root).unwrap().display().to_string())
        .collect();
    v.sort();
    v
}

// ---------------------------------------------------------------------------------------------
// Helpers for the concurrency and crash tests.

/// What one run of the binary gave, including the signal that killed it (if any).
pub struct RawRun {
    pub run: Run,
    /// The signal that ended the process (`Some(6)` for an abort, `Some(9)` for SIGKILL).
    pub signal: Option<i32>,
}

/// Turns a finished child's output into a [`RawRun`].
pub fn raw_run(cmd: String, out: Output) -> RawRun {
    use std::os::unix::process::ExitStatusExt;
    RawRun {
        signal: out.status.signal(),
        run: Run {
            cmd,
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        },
    }
}

impl TestEnv {
    /// Runs with extra environment variables (for this run only) and `input` on stdin; reports
    /// the exit code and the signal.
    pub fn run_env(&self, args: &[&str], extra: &[(&str, &str)], input: &[u8]) -> RawRun {
        let mut c = self.command(args);
        for (k, v) in extra {
            c.env(k, v);
        }
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn memdir");
        let mut stdin = child.stdin.take().unwrap();
        let input = input.to_vec();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let out = child.wait_with_output().expect("wait memdir");
        writer.join().unwrap();
        let cmd = format!(
            "{} memdir {}",
            extra
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
            args.join(" ")
        );
        raw_run(cmd, out)
    }

    /// Runs `args` with the failpoint `point` armed to abort, and requires that it stopped
    /// there.
    pub fn stopped_at(&self, point: &str, args: &[&str]) {
        let r = self.run_env(args, &[("MEMDIR_FAILPOINT", point)], b"");
        assert!(
            r.run.code != 0 && r.run.stderr.contains(&format!("failpoint {point}")),
            "`{}` did not stop at {point}: exit {}, {}",
            r.run.cmd,
            r.run.code,
            r.run.stderr
        );
    }

    /// Entries of `.memdir/staging/` (empty when the directory is missing).
    pub fn staging_entries(&self) -> Vec<String> {
        self.meta_entries("staging")
    }

    /// The names in `.memdir/<dir>`, sorted (none when it does not exist).
    pub fn meta_entries(&self, dir: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.path(&format!(".memdir/{dir}")))
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// Every truth file (outside `.memdir/`) with its bytes.
    pub fn snapshot(&self) -> std::collections::BTreeMap<String, Vec<u8>> {
        truth_files(&self.dir)
            .into_iter()
            .map(|rel| {
                let bytes = std::fs::read(self.dir.join(&rel)).unwrap();
                (rel, bytes)
            })
            .collect()
    }

    /// Contents of a session, in position order, checking that positions are exactly
    /// 0..n-1; an empty list when the session does not exist.
    pub fn session_contents(&self, session: &str) -> Vec<String> {
        let r = self.run(&["fetch", session, "--limit", "1000"]);
        if r.code == 4 {
            return Vec::new();
        }
        if r.code != 0 {
            self.dump(&r);
            panic!("`{}` exited {}", r.cmd, r.code);
        }
        let v = r.json();
        let chunks = v["chunks"].as_array().expect("chunks array");
        assert_eq!(
            v["total"].as_u64(),
            Some(chunks.len() as u64),
            "fetch {session}: more than one page"
        );
        chunks
            .iter()
            .enumerate()
            .map(|(i, c)| {
                assert_eq!(
                    c["position"].as_u64(),
                    Some(i as u64),
                    "fetch {session}: positions are not gap-free: {v:#}"
                );
                c["content"].as_str().expect("content").to_string()
            })
            .collect()
    }
}

/// A small deterministic PRNG (splitmix64) for reproducible random schedules.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The JSON answer of an MCP tool call (`result` of a `tools/call` response): its text content,
/// which a success also sends as `structuredContent` (the same value) and an error does not.
pub fn tool_json(r: &Value) -> Value {
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a tool result carries its JSON as text: {r}"));
    let v: Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("tool text is JSON ({e}): {text}"));
    let structured = r["result"].get("structuredContent");
    if r["result"]["isError"] == Value::Bool(true) {
        assert!(structured.is_none(), "a tool error is its text only: {r}");
    } else {
        assert_eq!(
            structured,
            Some(&v),
            "structuredContent is the text's JSON: {r}"
        );
    }
    v
}

/// `memdir serve --transport http --port 0`, running until dropped (killed) or stopped.
pub struct Served {
    pub child: Child,
    pub url: String,
}

impl Served {
    pub fn start(env: &TestEnv, extra: &[&str]) -> Served {
        let mut args = vec!["serve", "--transport", "http", "--port", "0"];
        args.extend(extra);
        let mut child = env.spawn(&args);
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                // Keep draining after the address so the server never blocks on stderr.
                let _ = tx.send(line.unwrap_or_default());
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = Vec::new();
        while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            if let Some(i) = line.find("listening on ") {
                let url = line[i + "listening on ".len()..].trim().to_string();
                // The server runs until the test drops it (which kills and waits).
                #[allow(clippy::zombie_processes)]
                return Served { child, url };
            }
            seen.push(line);
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the server did not say where it listens: {seen:?}");
    }
}

impl Served {
    /// Stops the server as a service manager does (SIGTERM) and waits for it to exit.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        self.child.wait().unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Names passed to `failpoint::hit("...")` and `failpoint::io("...")` in the sources of every
/// crate (`src/` and `crates/*/src/`).
pub fn failpoints_in_source() -> std::collections::BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut names = std::collections::BTreeSet::new();
    for dir in [root.join("src"), root.join("crates")] {
        for e in walkdir::WalkDir::new(&dir).into_iter().flatten() {
            if e.path().extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(e.path()).unwrap();
            for pat in ["failpoint::hit(\"", "failpoint::io(\""] {
                for (i, _) in text.match_indices(pat) {
                    let rest = &text[i + pat.len()..];
                    let end = rest.find('"').expect("closing quote");
                    names.insert(rest[..end].to_string());
                }
            }
        }
    }
    names
}
