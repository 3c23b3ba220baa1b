//! The user's `git` binary, driven with pinned options and parsed in machine formats.
//!
//! memdir runs `git` as a child process (never a library) so that the user's credential
//! helpers, ssh configuration and hooks apply exactly as in their shell. Every call pins what
//! would change the result (`core.autocrlf=false`, `LC_ALL=C`, no pager, no gpg for memdir's
//! own commits, a fallback identity); nothing here rebases, amends, resets or force-pushes.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The empty tree's id (the merge base of unrelated histories).
pub const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// A failed git call: the command and what git said.
#[derive(Debug, Clone)]
pub struct GitError {
    pub command: String,
    pub status: Option<i32>,
    pub stderr: String,
}

impl std::fmt::Display for GitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`git {}` failed ({}): {}",
            self.command,
            self.status
                .map_or("killed".to_string(), |s| format!("exit {s}")),
            self.stderr.trim()
        )
    }
}

/// One repository's work tree.
pub struct Git {
    pub root: PathBuf,
    /// `-c` options added to every call.
    config: Vec<String>,
}

/// The output of a call that succeeded (or whose status the caller judges).
pub struct Out {
    pub status: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Out {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim().to_string()
    }
}

impl Git {
    pub fn new(root: &Path) -> Git {
        Git {
            root: root.to_path_buf(),
            config: vec![
                "core.autocrlf=false".into(),
                "core.quotepath=false".into(),
                "commit.gpgSign=false".into(),
                "gc.auto=0".into(),
            ],
        }
    }

    /// Adds a `-c key=value` to every later call.
    pub fn add_config(&mut self, kv: String) {
        self.config.push(kv);
    }

    /// Whether `git` can be run at all.
    pub fn available() -> bool {
        Command::new("git")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("git");
        c.current_dir(&self.root)
            .env("LC_ALL", "C")
            .env("GIT_PAGER", "cat")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE");
        for kv in &self.config {
            c.arg("-c").arg(kv);
        }
        c.args(args);
        c
    }

    /// Runs git, feeding `input`, and returns its output whatever the exit status.
    pub fn raw(&self, args: &[&str], input: Option<&[u8]>) -> Result<Out, GitError> {
        let mut cmd = self.command(args);
        cmd.stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| GitError {
            command: args.join(" "),
            status: None,
            stderr: format!("cannot run git: {e}"),
        })?;
        let writer = input.map(|bytes| {
            let mut stdin = child.stdin.take().expect("invariant: piped stdin");
            let bytes = bytes.to_vec();
            std::thread::spawn(move || {
                let _ = stdin.write_all(&bytes);
            })
        });
        let mut stderr = child.stderr.take().expect("invariant: piped stderr");
        let err_reader = std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = stderr.read_to_end(&mut s);
            s
        });
        let mut stdout = Vec::new();
        if let Some(mut o) = child.stdout.take() {
            let _ = o.read_to_end(&mut stdout);
        }
        let status = child.wait().map_err(|e| GitError {
            command: args.join(" "),
            status: None,
            stderr: e.to_string(),
        })?;
        if let Some(w) = writer {
            let _ = w.join();
        }
        let stderr = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
        Ok(Out {
            status: status.code(),
            stdout,
            stderr,
        })
    }

    /// Runs git and fails unless it exits 0.
    pub fn run(&self, args: &[&str]) -> Result<Out, GitError> {
        self.run_with(args, None)
    }

    pub fn run_with(&self, args: &[&str], input: Option<&[u8]>) -> Result<Out, GitError> {
        let out = self.raw(args, input)?;
        if out.status == Some(0) {
            Ok(out)
        } else {
            Err(GitError {
                command: args.join(" "),
                status: out.status,
                stderr: out.stderr,
            })
        }
    }

    /// `git rev-parse --verify -q REV^{commit}`, `None` when it names no commit.
    pub fn rev(&self, rev: &str) -> Result<Option<String>, GitError> {
        let spec = format!("{rev}^{{commit}}");
        let out = self.raw(&["rev-parse", "--verify", "-q", &spec], None)?;
        Ok((out.status == Some(0)).then(|| out.text()))
    }

    /// Whether `a` is an ancestor of `b`.
    pub fn is_ancestor(&self, a: &str, b: &str) -> Result<bool, GitError> {
        let out = self.raw(&["merge-base", "--is-ancestor", a, b], None)?;
        match out.status {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            s => Err(GitError {
                command: format!("merge-base --is-ancestor {a} {b}"),
                status: s,
                stderr: out.stderr,
            }),
        }
    }

    /// Paths that differ between two trees or commits, with `A`/`M`/`D`, without renames.
    pub fn changed(&self, from: &str, to: &str) -> Result<Vec<String>, GitError> {
        let out = self.run(&[
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--name-only",
            from,
            to,
        ])?;
        Ok(split_z(&out.stdout))
    }

    /// The contents of `rev:path` for each path (`None` where it does not exist), read
    /// through one `git cat-file --batch`.
    pub fn blobs(&self, rev: &str, paths: &[String]) -> Result<Vec<Option<Vec<u8>>>, GitError> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let mut input = Vec::new();
        for p in paths {
            input.extend_from_slice(format!("{rev}:{p}\n").as_bytes());
        }
        let out = self.run_with(&["cat-file", "--batch"], Some(&input))?;
        let mut res = Vec::with_capacity(paths.len());
        let mut rest = &out.stdout[..];
        for p in paths {
            let nl = rest
                .iter()
                .position(|b| *b == b'\n')
                .ok_or_else(|| GitError {
                    command: "cat-file --batch".into(),
                    status: Some(0),
                    stderr: format!("short output at {p}"),
                })?;
            let header = String::from_utf8_lossy(&rest[..nl]).into_owned();
            rest = &rest[nl + 1..];
            if header.ends_with(" missing") {
                res.push(None);
                continue;
            }
            let size: usize = header
                .rsplit(' ')
                .next()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| GitError {
                    command: "cat-file --batch".into(),
                    status: Some(0),
                    stderr: format!("unexpected header {header:?}"),
                })?;
            if !header.contains(" blob ") || rest.len() < size + 1 {
                return Err(GitError {
                    command: "cat-file --batch".into(),
                    status: Some(0),
                    stderr: format!("{p}: unexpected object {header:?}"),
                });
            }
            res.push(Some(rest[..size].to_vec()));
            rest = &rest[size + 1..];
        }
        Ok(res)
    }

    /// The git directory (`.git`).
    pub fn git_dir(&self) -> PathBuf {
        self.root.join(".git")
    }
}

/// Splits NUL-terminated output.
pub fn split_z(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}
