//! The user's `git` binary, driven with pinned options and parsed in machine formats.
//!
//! memdir runs `git` as a child process (never a library) so that the user's credential
//! helpers, ssh configuration and hooks apply exactly as in their shell. Every call pins what
//! would change the result (`core.autocrlf=false`, `LC_ALL=C`, no pager, no gpg for memdir's
//! own commits, a fallback identity); nothing here rebases, amends, resets or force-pushes.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The empty tree's id (the merge base of unrelated histories).
pub const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// One path that differs between two trees: the second side's mode and blob id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    /// `100644` for a file, `120000` a link, `160000` a submodule, `000000` when removed.
    pub mode: String,
    pub sha: String,
    pub removed: bool,
}

/// One object read by [`Git::objects`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blob {
    Bytes(Vec<u8>),
    /// Not in the repository.
    Missing,
    /// A blob over the bound it was read with, of this many bytes: passed over unread.
    TooLarge(u64),
    /// Not a blob (a tree, a commit).
    NotAFile,
}

impl Blob {
    /// The bytes, when the object was read.
    pub fn bytes(self) -> Option<Vec<u8>> {
        match self {
            Blob::Bytes(b) => Some(b),
            _ => None,
        }
    }
}

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
        let (stdout, status, stderr) = self.stream(args, input, |o| {
            let mut stdout = Vec::new();
            let _ = o.read_to_end(&mut stdout);
            Ok(stdout)
        })?;
        Ok(Out {
            status,
            stdout,
            stderr,
        })
    }

    /// Runs git, feeding `input`, and hands its standard output to `read` as it streams.
    /// Returns what `read` returned, the exit status and the standard error; an error of
    /// `read` ends the process.
    fn stream<T>(
        &self,
        args: &[&str],
        input: Option<&[u8]>,
        read: impl FnOnce(&mut dyn BufRead) -> Result<T, GitError>,
    ) -> Result<(T, Option<i32>, String), GitError> {
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
        let stdout = child.stdout.take().expect("invariant: piped stdout");
        let read = read(&mut BufReader::with_capacity(64 * 1024, stdout));
        if read.is_err() {
            let _ = child.kill();
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
        Ok((read?, status.code(), stderr))
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

    /// Paths that differ between two trees or commits, without renames.
    pub fn changed(&self, from: &str, to: &str) -> Result<Vec<String>, GitError> {
        Ok(self.diff(from, to)?.into_iter().map(|c| c.path).collect())
    }

    /// What differs between two trees or commits, path by path, with the modes and blob ids
    /// of the second side (`diff-tree -r --raw`, without renames).
    pub fn diff(&self, from: &str, to: &str) -> Result<Vec<Change>, GitError> {
        let out = self.run(&["diff-tree", "-r", "-z", "--no-renames", "--raw", from, to])?;
        let mut fields = out.stdout.split(|b| *b == 0).filter(|s| !s.is_empty());
        let mut changes = Vec::new();
        while let Some(meta) = fields.next() {
            let meta = String::from_utf8_lossy(meta);
            let bad = || GitError {
                command: format!("diff-tree --raw {from} {to}"),
                status: Some(0),
                stderr: format!("unexpected output {meta:?}"),
            };
            let m: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
            let (Some(path), &[_, mode, _, sha, status]) = (fields.next(), &m[..]) else {
                return Err(bad());
            };
            changes.push(Change {
                path: String::from_utf8_lossy(path).into_owned(),
                mode: mode.to_string(),
                sha: sha.to_string(),
                removed: status.starts_with('D'),
            });
        }
        Ok(changes)
    }

    /// The contents of `rev:path` for each path, read through one `git cat-file --batch`.
    pub fn blobs(&self, rev: &str, paths: &[String], limit: u64) -> Result<Vec<Blob>, GitError> {
        let objects: Vec<(String, u64)> = paths
            .iter()
            .map(|p| (format!("{rev}:{p}"), limit))
            .collect();
        self.objects(&objects)
    }

    /// The blobs named by `objects` (object names, each with the most bytes to keep of it),
    /// through one `git cat-file --batch` read as it streams: an object over its bound is
    /// passed over as it arrives, never held.
    pub fn objects(&self, objects: &[(String, u64)]) -> Result<Vec<Blob>, GitError> {
        if objects.is_empty() {
            return Ok(Vec::new());
        }
        let mut input = Vec::new();
        for (name, _) in objects {
            input.extend_from_slice(name.as_bytes());
            input.push(b'\n');
        }
        let bad = |what: String| GitError {
            command: "cat-file --batch".into(),
            status: Some(0),
            stderr: what,
        };
        let (blobs, status, stderr) = self.stream(&["cat-file", "--batch"], Some(&input), |o| {
            let mut out = Vec::with_capacity(objects.len());
            for (name, limit) in objects {
                let mut header = String::new();
                o.read_line(&mut header)
                    .map_err(|e| bad(format!("reading {name}: {e}")))?;
                let header = header.trim_end();
                if header.is_empty() {
                    return Err(bad(format!("short output at {name}")));
                }
                if header.ends_with(" missing") {
                    out.push(Blob::Missing);
                    continue;
                }
                let mut h = header.rsplit(' ');
                let size: u64 = h
                    .next()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| bad(format!("unexpected header {header:?}")))?;
                let kind = h.next().unwrap_or_default().to_string();
                if size > *limit || kind != "blob" {
                    std::io::copy(&mut o.take(size + 1), &mut std::io::sink())
                        .map_err(|e| bad(format!("reading {name}: {e}")))?;
                    out.push(if kind == "blob" {
                        Blob::TooLarge(size)
                    } else {
                        Blob::NotAFile
                    });
                    continue;
                }
                let mut bytes = Vec::with_capacity(size as usize);
                o.take(size)
                    .read_to_end(&mut bytes)
                    .map_err(|e| bad(format!("reading {name}: {e}")))?;
                let mut nl = [0u8; 1];
                if bytes.len() as u64 != size || o.read_exact(&mut nl).is_err() {
                    return Err(bad(format!("short object {name}")));
                }
                out.push(Blob::Bytes(bytes));
            }
            Ok(out)
        })?;
        if status != Some(0) {
            return Err(GitError {
                command: "cat-file --batch".into(),
                status,
                stderr,
            });
        }
        Ok(blobs)
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
