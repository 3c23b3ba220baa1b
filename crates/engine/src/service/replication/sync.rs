//! Sync over git: commit local changes, fetch, merge with memdir's rules, push.
//!
//! memdir merges trees itself instead of calling `git merge`: it lists what the remote changed
//! since the merge base (`git diff-tree --raw`), hands every path to the gate
//! ([`crate::sync::gate`]), which takes an extension or a forget and reports anything else,
//! derives each touched category's file from its
//! merged history ([`merge::heads`], [`merge::resolve`]), writes all of it through the staged
//! commit protocol (`txn::commit`), and records the result with `commit-tree` and a
//! compare-and-swap `update-ref`. No `MERGE_HEAD`, no index stages, no conflict markers, and a
//! crash at any point leaves either the old commit or files that the next sync commits and
//! merges again to the same result. Nothing here rebases, amends, resets or force-pushes.
use crate::service::Replication;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::service::WriteTxn;
use crate::service::categories::adoption::Sync;
use crate::service::state::NewVersion;
use crate::sync::gate::{Body, Entry, Gate, Incoming, Place, SyncAccess, Verdict};
use crate::sync::git::{Blob, Change, EMPTY_TREE, Git, GitError};
use crate::sync::merge::{self, PathKind, Strategy};
use crate::sync::seal::{self, SealBook};
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::{
    LastSync, OpenConflict, Problem, ResolveRequest, ResolveResponse, SetAside, SyncRequest,
    SyncResponse,
};
use memdir_store::lock::WriteLock;
use memdir_store::model::{CategoryName, HistoryEntry, VersionOp, decode_component};
use memdir_store::note::NotePath;
use memdir_store::{self as store, Layout, codec, format, fsx, txn};

/// The file under `.memdir/` naming the categories a sync has yet to settle.
const SETTLE_NOTE: &str = "settle-pending.json";

/// What a sync needs to settle categories after a crash: the same inputs it had.
#[derive(serde::Serialize, serde::Deserialize)]
struct PendingSettle {
    categories: Vec<String>,
    /// Notes whose history the sync committed (their files are derived the same way).
    #[serde(default)]
    notes: Vec<String>,
    strategy: String,
    local_heads: Vec<String>,
    seed: String,
}

/// The top-level paths a sync commits; nothing else in the work tree is memdir's.
const TRACKED: [&str; 9] = [
    ".gitignore",
    "categories",
    "history",
    "sessions",
    "conflicts",
    "notes",
    "note-history",
    "memdir.json",
    ".gitattributes",
];

/// Rounds of fetch-merge-push before a sync gives up on a remote that keeps moving.
const MAX_ROUNDS: usize = 5;

/// The record of the last sync, under `.memdir/`.
const LAST_SYNC: &str = "last-sync.json";

fn git_err(e: GitError) -> Error {
    Error::new(ErrorKind::Unavailable, e.to_string())
        .detail("command", Value::from(format!("git {}", e.command)))
        .detail("stderr", Value::from(e.stderr))
}

fn problem(kind: &str, path: &str, message: impl Into<String>) -> Problem {
    Problem {
        kind: kind.to_string(),
        path: path.to_string(),
        message: message.into(),
    }
}

/// The conflict strategy named `name`.
fn parse_strategy(name: &str) -> Result<Strategy> {
    Strategy::parse(name).ok_or_else(|| {
        Error::invalid(
            "strategy",
            format!(
                "unknown conflict strategy {name:?}; one of: last_write_wins, merge, manual, local_wins, remote_wins"
            ),
        )
    })
}

/// Checks that `remote` is a git remote name and `init`, when given, a remote URL: neither
/// may pass for an option of the git command.
fn check_remote_args(remote: &str, init: Option<&str>) -> Result<()> {
    if remote.is_empty()
        || remote.starts_with('-')
        || !remote
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(Error::invalid(
            "remote",
            format!("{remote:?} is not a git remote name"),
        ));
    }
    if let Some(url) = init
        && (url.is_empty() || url.starts_with('-'))
    {
        return Err(Error::invalid(
            "init",
            format!("{url:?} is not a remote URL"),
        ));
    }
    Ok(())
}

/// The branch HEAD is on; `main` when git names none (a detached HEAD, a failed call).
fn current_branch(git: &Git) -> String {
    match git.raw(&["symbolic-ref", "--short", "-q", "HEAD"], None) {
        Ok(o) if o.status == Some(0) && !o.text().is_empty() => o.text(),
        _ => "main".to_string(),
    }
}

/// Fetches the remote's `branch` into `tracking`. `false` when the fetch failed (the remote
/// offline, say): `resp.offline` then says why, and whether this replica has commits to push.
fn fetch_branch(
    git: &Git,
    remote: &str,
    branch: &str,
    tracking: &str,
    resp: &mut SyncResponse,
) -> Result<bool> {
    let fetch = git
        .raw(
            &[
                "fetch",
                "--no-tags",
                "--quiet",
                remote,
                &format!("+refs/heads/{branch}:{tracking}"),
            ],
            None,
        )
        .map_err(git_err)?;
    if fetch.status != Some(0) {
        // A remote without the branch yet (an empty repository) is not offline.
        let empty = fetch.stderr.contains("couldn't find remote ref");
        if !empty {
            resp.offline = Some(fetch.stderr.trim().to_string());
            resp.push_pending = git.rev("HEAD").map_err(git_err)?.is_some();
            return Ok(false);
        }
    }
    Ok(true)
}

/// Reports a remote `branch` that no longer contains the commit `before` this replica
/// fetched earlier: someone rewrote it (a force-push).
fn note_rewritten(
    git: &Git,
    tracking: &str,
    branch: &str,
    before: Option<&str>,
    fetched: Option<&str>,
    reported: &mut Vec<Problem>,
) {
    if let (Some(old), Some(new)) = (before, fetched)
        && old != new
        && !git.is_ancestor(old, new).unwrap_or(false)
    {
        reported.push(problem(
            "remote_rewritten",
            tracking,
            format!(
                "the remote's {branch} no longer contains {old:.12}, which this replica fetched before (a force-push?); everything of it that this replica holds is merged back and pushed"
            ),
        ));
    }
}

/// Pushes `head` to the remote's `branch`. `true` when the sync is over: pushed, or failed
/// other than by a rejection (`resp.offline` says why); `false` when the remote moved and
/// rejected it, so another round fetches and merges again.
fn push_head(
    git: &Git,
    remote: &str,
    branch: &str,
    tracking: &str,
    head: &str,
    resp: &mut SyncResponse,
) -> Result<bool> {
    let push = git
        .raw(
            &[
                "push",
                "--quiet",
                remote,
                &format!("HEAD:refs/heads/{branch}"),
            ],
            None,
        )
        .map_err(git_err)?;
    if push.status == Some(0) {
        let _ = git.raw(&["update-ref", tracking, head], None);
        resp.pushed = true;
        return Ok(true);
    }
    let rejected = ["non-fast-forward", "fetch first", "rejected"]
        .iter()
        .any(|w| push.stderr.contains(w));
    if !rejected {
        resp.offline = Some(push.stderr.trim().to_string());
        resp.push_pending = true;
        return Ok(true);
    }
    Ok(false)
}

/// Paths under `dirs` that differ from HEAD in the work tree (untracked and ignored ones
/// included: memdir stages them whatever ignore rules say).
fn changed_paths(git: &Git, dirs: &[&str]) -> Result<Vec<String>> {
    let mut args = vec![
        "status",
        "--porcelain",
        "-z",
        "--untracked-files=all",
        "--ignored=matching",
        "--",
    ];
    args.extend(dirs);
    let out = git.run(&args).map_err(git_err)?;
    let mut paths = Vec::new();
    let mut tokens = crate::sync::git::split_z(&out.stdout).into_iter();
    while let Some(t) = tokens.next() {
        if t.len() < 4 {
            continue;
        }
        let (xy, path) = t.split_at(3);
        // A rename or copy names its source next; the source is not in the work tree.
        if xy.starts_with('R') || xy.starts_with('C') {
            tokens.next();
        }
        paths.push(path.to_string());
    }
    Ok(paths)
}

impl Replication<'_> {
    /// The lock that admits one sync of the store at a time, without waiting.
    fn sync_lock(&self) -> Result<WriteLock> {
        self.lock_now(
            "sync.lock",
            "another sync of this memory directory is running",
        )
        .map_err(|e| e.hint("retry when it has finished"))
    }

    /// The lock a server's periodic syncer holds for as long as it runs: one syncer per
    /// memory directory. `busy` while another server holds it.
    pub fn syncer_lock(&self) -> Result<WriteLock> {
        self.lock_now(
            "syncer.lock",
            "another server syncs this memory directory periodically",
        )
    }

    /// `.memdir/<file>` locked without waiting, or `busy` saying `held`.
    fn lock_now(&self, file: &str, held: &str) -> Result<WriteLock> {
        WriteLock::acquire(
            &self.layout().meta_dir().join(file),
            std::time::Duration::from_millis(0),
        )
        .map_err(|_| Error::new(ErrorKind::Busy, held))
    }

    /// `memdir sync`: see the module documentation.
    pub fn sync(&self, req: &SyncRequest) -> Result<SyncResponse> {
        self.sync_with(req, None, None)
    }

    /// `memdir sync` with the bearer token of an HTTP remote (read by the caller from the
    /// variable `token_env` names), reporting `(done, total)` steps to `progress`: an HTTP
    /// sync counts the files and tails it moves, a git sync its stages (commit, fetch, merge,
    /// push) per round.
    pub fn sync_with(
        &self,
        req: &SyncRequest,
        token: Option<String>,
        progress: Option<&dyn Fn(u64, u64)>,
    ) -> Result<SyncResponse> {
        self.sync_recorded(req, token, progress, "command")
    }

    /// A sync whose outcome is kept in `.memdir/last-sync.json` for `status` (`by`: what ran
    /// it). A sync refused before it started (another one running, a bad request) is not an
    /// outcome and leaves the record as it was.
    pub fn sync_recorded(
        &self,
        req: &SyncRequest,
        token: Option<String>,
        progress: Option<&dyn Fn(u64, u64)>,
        by: &str,
    ) -> Result<SyncResponse> {
        let mut req = req.clone();
        if req.remote.is_none() && !self.settings().sync_remote.is_empty() {
            req.remote = Some(self.settings().sync_remote.clone());
        }
        // A sync that brought a forget and crashed before its purge: that purge first.
        crate::service::upkeep::forget::purge_if_pending(self)?;
        let mut result = self.sync_run(&req, token, progress.unwrap_or(&|_, _| {}));
        if let Ok(r) = &mut result {
            // What is still open, with what each pick set aside: a conflict is acted on where
            // it is reported. Advisory: a failure to list leaves the list empty.
            r.open_conflicts = self.open_conflicts().unwrap_or_default();
        }
        let record = match &result {
            Ok(r) => Some(LastSync {
                at: memdir_store::clock::rfc3339(memdir_store::clock::now_ms()),
                remote: r.remote.clone(),
                pushed: r.pushed,
                push_pending: r.push_pending,
                error: r.offline.clone(),
                reported: r.reported.len(),
                by: by.to_string(),
            }),
            Err(e) if !matches!(e.kind, ErrorKind::Busy | ErrorKind::Invalid) => Some(LastSync {
                at: memdir_store::clock::rfc3339(memdir_store::clock::now_ms()),
                remote: req.remote.clone().unwrap_or_else(|| "origin".into()),
                pushed: false,
                push_pending: true,
                error: Some(e.message.clone()),
                reported: 0,
                by: by.to_string(),
            }),
            Err(_) => None,
        };
        if let Some(rec) = record
            && self.layout().exists()
        {
            // Derived and advisory: a failure to record never fails the sync.
            let path = self.layout().meta_dir().join(LAST_SYNC);
            let tmp = path.with_extension(format!("json.{}", std::process::id()));
            if let Ok(bytes) = serde_json::to_vec(&rec)
                && fsx::write_synced(&tmp, &bytes).is_ok()
                && std::fs::rename(&tmp, &path).is_err()
            {
                let _ = std::fs::remove_file(&tmp);
            }
        }
        result
    }

    /// How the last sync ended, if one is recorded.
    pub fn last_sync(&self) -> Option<LastSync> {
        let path = self.layout().meta_dir().join(LAST_SYNC);
        let bytes = fsx::read(&path, 64 * 1024).ok().flatten()?;
        serde_json::from_slice(&bytes).ok()
    }

    fn sync_run(
        &self,
        req: &SyncRequest,
        token: Option<String>,
        progress: &dyn Fn(u64, u64),
    ) -> Result<SyncResponse> {
        if let Some(url) = req
            .remote
            .as_deref()
            .filter(|r| crate::sync::http::is_url(r))
        {
            let strategy = self.peers().sync_strategy(req.strategy.as_deref())?;
            drop(self.inner_for_write()?);
            let _sync_lock = self.sync_lock()?;
            return self.peers().sync_http(url, token, strategy, progress);
        }
        if !Git::available() {
            return Err(Error::new(
                ErrorKind::Unavailable,
                "git was not found on PATH; sync drives the git command-line program",
            )
            .hint("install git, then retry"));
        }
        let strategy_name = req
            .strategy
            .clone()
            .unwrap_or_else(|| self.settings().conflict_strategy.clone());
        let strategy = parse_strategy(&strategy_name)?;
        let remote = req.remote.clone().unwrap_or_else(|| "origin".to_string());
        check_remote_args(&remote, req.init.as_deref())?;
        // The skeleton (format file, .gitignore, .gitattributes) before git sees the directory.
        drop(self.inner_for_write()?);
        let layout = self.layout().clone();
        let git = Git::new(&layout.root);
        let _sync_lock = self.sync_lock()?;
        let mut resp = SyncResponse {
            remote: remote.clone(),
            strategy: strategy.as_str().to_string(),
            ..Default::default()
        };
        self.prepare_repo(&git, req.init.as_deref(), &remote, &mut resp)?;
        let branch = current_branch(&git);
        resp.branch = branch.clone();
        let tracking = format!("refs/remotes/{remote}/{branch}");
        // A marker for the span in which memdir's own git calls may hold git's index lock.
        let running = layout.meta_dir().join("sync-running");
        fsx::write_synced(&running, std::process::id().to_string().as_bytes())?;
        let mut purge = false;
        let result = (|| -> Result<()> {
            for round in 1..=MAX_ROUNDS {
                resp.rounds = round;
                let stage = |k: u64| progress(4 * (round as u64 - 1) + k, 4 * round as u64);
                stage(0);
                resp.committed +=
                    self.with_write(|tx| self.commit_local(tx, &git, &mut resp.reported))? as usize;
                stage(1);
                let before = git.rev(&tracking).map_err(git_err)?;
                if !fetch_branch(&git, &remote, &branch, &tracking, &mut resp)? {
                    return Ok(());
                }
                stage(2);
                let fetched = git.rev(&tracking).map_err(git_err)?;
                // Nothing is lost to a rewritten remote: this replica's commits hold everything
                // it had, and the merge below brings them back to the remote.
                note_rewritten(
                    &git,
                    &tracking,
                    &branch,
                    before.as_deref(),
                    fetched.as_deref(),
                    &mut resp.reported,
                );
                let current = git.rev("HEAD").map_err(git_err)?;
                if let Some(theirs) = fetched
                    && !current.as_ref().is_some_and(|h| {
                        h == &theirs || git.is_ancestor(&theirs, h).unwrap_or(false)
                    })
                {
                    let merged = self.with_write(|tx| {
                        resp.committed += self.commit_local(tx, &git, &mut resp.reported)? as usize;
                        self.merge_remote(tx, &git, &theirs, strategy, &mut resp)
                    })?;
                    resp.merged |= merged.merged;
                    purge |= merged.forgotten;
                }
                stage(3);
                let Some(head) = git.rev("HEAD").map_err(git_err)? else {
                    return Ok(());
                };
                if git.rev(&tracking).map_err(git_err)?.as_deref() == Some(head.as_str()) {
                    resp.pushed = true;
                    return Ok(());
                }
                if push_head(&git, &remote, &branch, &tracking, &head, &mut resp)? {
                    return Ok(());
                }
                std::thread::sleep(std::time::Duration::from_millis(
                    20 * round as u64 + (std::process::id() as u64 % 50),
                ));
            }
            resp.push_pending = true;
            resp.offline = Some(format!(
                "the remote moved during each of {MAX_ROUNDS} rounds; sync again"
            ));
            Ok(())
        })();
        let _ = std::fs::remove_file(&running);
        result?;
        if purge {
            self.upkeep().purge_derived()?;
        }
        resp.head = git.rev("HEAD").map_err(git_err)?;
        Ok(resp)
    }

    /// Makes the directory a git work tree when asked, and checks what every run needs.
    fn prepare_repo(
        &self,
        git: &Git,
        init: Option<&str>,
        remote: &str,
        resp: &mut SyncResponse,
    ) -> Result<()> {
        let root = &self.layout().root;
        let dot_git = root.join(".git");
        if let Some(url) = init {
            if std::fs::symlink_metadata(&dot_git).is_err() {
                git.run(&["init", "--quiet", "--initial-branch=main"])
                    .map_err(git_err)?;
            }
            match git
                .raw(&["remote", "get-url", remote], None)
                .map_err(git_err)?
            {
                o if o.status == Some(0) => {
                    if o.text() != url {
                        return Err(Error::new(
                            ErrorKind::Conflict,
                            format!(
                                "remote {remote:?} already points at {}; not changing it",
                                o.text()
                            ),
                        )
                        .field("init"));
                    }
                }
                _ => {
                    git.run(&["remote", "add", remote, url]).map_err(git_err)?;
                }
            }
        }
        if !dot_git.is_dir() {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("{} is not a git work tree", root.display()),
            )
            .hint("sync once with {arg:init} set to the remote's URL (a bare repository path, ssh or https)"));
        }
        // The store must be the repository's top level: memdir never commits a project's files.
        let top = git
            .run(&["rev-parse", "--show-toplevel"])
            .map_err(git_err)?
            .text();
        let same = std::fs::canonicalize(&top).ok() == std::fs::canonicalize(root).ok();
        if !same {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "the memory directory is inside the git work tree {top}, not its top level"
                ),
            ));
        }
        if git.git_dir().join("MERGE_HEAD").exists() {
            return Err(Error::new(
                ErrorKind::Conflict,
                "a git merge is in progress in the memory directory (memdir never starts one)",
            )
            .hint("finish or abort it with git (git merge --abort), then sync again"));
        }
        // git's index lock: one left by an interrupted sync (its marker is still there, and
        // no other sync runs, since this one holds the sync lock) is stale once it stops
        // changing; any other is someone's running git.
        let index_lock = git.git_dir().join("index.lock");
        let marker = self.layout().meta_dir().join("sync-running");
        for _ in 0..40 {
            if !index_lock.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        if index_lock.exists() {
            let age = std::fs::metadata(&index_lock)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .unwrap_or_default();
            if marker.exists() && age >= std::time::Duration::from_secs(1) {
                std::fs::remove_file(&index_lock).map_err(|e| {
                    Error::new(
                        ErrorKind::Unavailable,
                        format!("cannot remove the stale {}: {e}", index_lock.display()),
                    )
                })?;
                resp.reported.push(problem(
                    "stale_lock",
                    ".git/index.lock",
                    "removed: left by a sync that was interrupted",
                ));
            } else {
                return Err(Error::new(
                    ErrorKind::Busy,
                    format!(
                        "{} exists: another git process is working in the memory directory",
                        index_lock.display()
                    ),
                )
                .hint("retry when it has finished; if no git process runs, remove the file"));
            }
        }
        if git
            .raw(&["remote", "get-url", remote], None)
            .map_err(git_err)?
            .status
            != Some(0)
        {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("the memory directory's repository has no remote {remote:?}"),
            )
            .field("remote")
            .hint("sync with {arg:init} set to the remote's URL"));
        }
        Ok(())
    }

    /// Adopts hand edits and stages every memdir path, leaving out files that do not parse;
    /// commits when anything changed. Caller holds the lock. Returns whether it committed.
    fn commit_local(
        &self,
        tx: &WriteTxn<'_>,
        git: &Git,
        reported: &mut Vec<Problem>,
    ) -> Result<bool> {
        // Adoption makes a hand edit a version of its own before it is committed.
        self.categories().adopt_hand_edits(tx)?;
        self.notes().adopt_hand_edits(tx)?;
        // Only what git sees changed can need leaving out: check those files parse.
        let excluded = self.left_out(git, &["categories", "history"], reported)?;
        self.sessions().sync_sessions(tx.inner, Some(tx.lock))?;
        // Its own segments sealed before they leave (the seals go in the same commit).
        crate::service::replication::seals::seal_own(self, tx.lock)?;
        if !self.stage(git, &excluded)? {
            return Ok(false);
        }
        let tree = git.run(&["write-tree"]).map_err(git_err)?.text();
        let head = git.rev("HEAD").map_err(git_err)?;
        let head_tree = match &head {
            Some(h) => git
                .run(&["rev-parse", &format!("{h}^{{tree}}")])
                .map_err(git_err)?
                .text(),
            None => EMPTY_TREE.to_string(),
        };
        if tree == head_tree {
            return Ok(false);
        }
        let replica = self.replica(tx.lock)?;
        let msg = format!(
            "memdir: {replica}\n\nMemdir-Replica: {replica}\nMemdir-Actor: {}\n",
            self.actor()
        );
        let parents: Vec<String> = head.iter().cloned().collect();
        self.record_commit(git, &tree, &parents, &msg, head.as_deref())?;
        Ok(true)
    }

    /// `commit-tree` and a compare-and-swap `update-ref` of HEAD.
    fn record_commit(
        &self,
        git: &Git,
        tree: &str,
        parents: &[String],
        msg: &str,
        old: Option<&str>,
    ) -> Result<String> {
        let mut args = vec!["commit-tree".to_string(), tree.to_string()];
        for p in parents {
            args.push("-p".into());
            args.push(p.clone());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ident = self.identity(git);
        let mut env_git = Git::new(&git.root);
        for kv in ident {
            env_git.add_config(kv);
        }
        let commit = env_git
            .run_with(&args, Some(msg.as_bytes()))
            .map_err(git_err)?
            .text();
        self.move_head(git, &commit, old)?;
        Ok(commit)
    }

    fn move_head(&self, git: &Git, new: &str, old: Option<&str>) -> Result<()> {
        let zero = "0000000000000000000000000000000000000000";
        git.run(&[
            "update-ref",
            "-m",
            "memdir sync",
            "HEAD",
            new,
            old.unwrap_or(zero),
        ])
        .map_err(git_err)?;
        Ok(())
    }

    /// A fallback identity for memdir's commits when git has none configured.
    fn identity(&self, git: &Git) -> Vec<String> {
        let has = |k: &str| {
            git.raw(&["config", "--get", k], None)
                .is_ok_and(|o| o.status == Some(0) && !o.text().is_empty())
        };
        let mut out = Vec::new();
        if !has("user.name") {
            out.push(format!("user.name=memdir ({})", self.actor()));
        }
        if !has("user.email") {
            out.push("user.email=memdir@localhost".to_string());
        }
        out
    }

    /// Merges the remote commit `theirs` into HEAD by memdir's rules. Caller holds the lock
    /// and has just committed local changes. Returns whether anything was merged.
    fn merge_remote(
        &self,
        tx: &WriteTxn<'_>,
        git: &Git,
        theirs: &str,
        strategy: Strategy,
        resp: &mut SyncResponse,
    ) -> Result<Merge> {
        let layout = self.layout().clone();
        let head = git.rev("HEAD").map_err(git_err)?;
        if let Some(h) = &head
            && (h == theirs || git.is_ancestor(theirs, h).map_err(git_err)?)
        {
            return Ok(Merge::default());
        }
        let base = match &head {
            None => EMPTY_TREE.to_string(),
            Some(h) => match git.raw(&["merge-base", h, theirs], None).map_err(git_err)? {
                o if o.status == Some(0) => o.text(),
                _ => EMPTY_TREE.to_string(),
            },
        };
        let Taken {
            mut writes,
            touched,
            touched_notes,
            their_files,
            forgotten,
        } = self.take_remote(git, tx.lock, &base, head.as_deref(), theirs, resp)?;
        // The heads this replica had before the merge (for local_wins and remote_wins).
        let mut local_heads = self.head_ids(&touched)?;
        local_heads.extend(self.note_head_ids(&touched_notes)?);
        resp.files_received += writes
            .iter()
            .filter(|w| w.rel != Path::new(format::FILE))
            .count();
        // A version forgotten on the other side: the versions here written as patches of it
        // are written whole in the same transaction.
        store::history::keep_chains(&layout.root, &mut writes)?;
        if !writes.is_empty() {
            let txid = format!(
                "sync-{}",
                &memdir_store::model::content_hash(theirs.as_bytes())[..12]
            );
            if !touched.is_empty() || !touched_notes.is_empty() {
                writes.push(self.settle_note(
                    &touched,
                    &touched_notes,
                    strategy,
                    &local_heads,
                    theirs,
                ));
            }
            if forgotten {
                crate::service::upkeep::forget::mark_purge_pending(self.layout())?;
            }
            txn::commit(&layout.root, &layout.staging(), &txid, &writes)?;
            store::failpoint::hit("sync.before_settle");
            self.whole_unresolvable_patches(git, theirs, &writes)?;
        }
        for path in &touched_notes {
            self.settle_note_file(tx, path, &their_files, strategy, &local_heads, theirs, resp)?;
        }
        self.notes().record_settled(tx, &touched_notes)?;
        let index_only =
            self.settle_remote(&touched, &their_files, strategy, &local_heads, theirs, resp)?;
        // The ledger and the change feed (the index catches up from it).
        for name in &touched {
            let _ = self
                .categories()
                .sync_category(tx.inner, name, Some(tx.lock), Sync::Full)?;
        }
        self.sessions().sync_sessions(tx.inner, Some(tx.lock))?;
        self.record_merge(git, tx.lock, head.as_deref(), theirs, &index_only, resp)?;
        Ok(Merge {
            merged: true,
            forgotten,
        })
    }

    /// Everything the remote changed since `base`, through the gate: what this replica
    /// writes, which categories it touches, and the category files only the remote changed.
    /// Refusals are reported; a remote format this memdir cannot read stops the merge here,
    /// before anything is written.
    fn take_remote(
        &self,
        git: &Git,
        lock: &WriteLock,
        base: &str,
        head: Option<&str>,
        theirs: &str,
        resp: &mut SyncResponse,
    ) -> Result<Taken> {
        let layout = self.layout();
        let changes = git.diff(base, theirs).map_err(git_err)?;
        let ours_changed: BTreeSet<String> = match head {
            Some(h) => git.changed(base, h).map_err(git_err)?.into_iter().collect(),
            None => BTreeSet::new(),
        };
        let remote_format = self.remote_format(git, &changes, resp)?;
        let replica = self.replica(lock)?;
        let access = SyncAccess::all();
        let book = SealBook::new(&layout.root);
        let gate = Gate::new(&replica, &access, &self.settings.redaction).with_seals(&book);
        let mut taken = Taken::default();
        let wanted = wanted_changes(&changes, &ours_changed, &mut taken, resp);
        // Streamed; a blob over memdir's bound for its place is passed over unread.
        let objects: Vec<(String, u64)> = wanted
            .iter()
            .filter(|(c, _, e)| !c.removed && *e == Entry::File)
            .map(|(c, p, _)| (c.sha.clone(), p.max_bytes()))
            .collect();
        let mut blobs = git.objects(&objects).map_err(git_err)?.into_iter();
        let mut patched = false;
        for (c, place, entry) in wanted {
            let blob = (!c.removed && entry == Entry::File).then(|| {
                blobs
                    .next()
                    .expect("invariant: one blob for each object asked for")
            });
            let bytes = match blob {
                None => None,
                Some(Blob::Bytes(b)) => Some(b),
                Some(Blob::TooLarge(n)) => {
                    resp.reported.push(problem(
                        "over_limit",
                        &c.path,
                        format!(
                            "{n} bytes, over the {} memdir reads at this place; not taken",
                            place.max_bytes()
                        ),
                    ));
                    continue;
                }
                Some(Blob::Missing | Blob::NotAFile) => {
                    resp.reported.push(problem(
                        "outside_layout",
                        &c.path,
                        "not a file in the remote's tree; not taken",
                    ));
                    continue;
                }
            };
            let body = match &bytes {
                Some(b) => Body::Whole(b),
                None if c.removed => Body::Removed,
                None => Body::Whole(&[]),
            };
            let incoming = Incoming {
                path: &c.path,
                entry,
                body,
            };
            let local = match fsx::read(&layout.root.join(&c.path), place.max_bytes()) {
                Ok(l) => l,
                Err(e) => {
                    resp.reported.push(problem(
                        "unreadable",
                        &c.path,
                        format!("{}; this replica's copy stays as it is", e.source),
                    ));
                    continue;
                }
            };
            let verdict = gate.admit(&incoming, local.as_deref())?;
            let withdrawn = matches!(verdict, Verdict::Withdraw(_));
            match verdict {
                Verdict::Same => {}
                Verdict::Refuse(p) => resp.reported.push(p),
                v => {
                    let bytes = v.into_bytes().expect("invariant: a verdict that writes");
                    if let Place::Category(_) | Place::Note(_) = place {
                        taken.their_files.push((c.path.clone(), bytes));
                        continue;
                    }
                    taken.forgotten |= withdrawn && matches!(place, Place::Segment(_));
                    patched |= matches!(place, Place::History { .. })
                        && store::read_history_bytes(&bytes).is_ok_and(|e| e.patch.is_some());
                    taken.writes.push(txn::FileWrite {
                        rel: c.path.clone().into(),
                        bytes: Some(bytes),
                        hash: None,
                    });
                }
            }
        }
        seal::settle(&layout.root, Some(&book), &mut taken.writes);
        if let Some(w) = format_raise(layout, remote_format, patched && !taken.writes.is_empty()) {
            taken.writes.push(w);
        }
        Ok(taken)
    }

    /// The remote's `memdir.json`, read and never taken: the format it names, when it names
    /// one this memdir reads; a newer one stops the sync before anything is merged.
    fn remote_format(
        &self,
        git: &Git,
        changes: &[Change],
        resp: &mut SyncResponse,
    ) -> Result<Option<u64>> {
        let Some(c) = changes
            .iter()
            .find(|c| c.path == format::FILE && !c.removed)
        else {
            return Ok(None);
        };
        let blob = git
            .objects(&[(c.sha.clone(), 64 * 1024)])
            .map_err(git_err)?
            .pop()
            .and_then(Blob::bytes);
        let n = blob
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| v.get("format").and_then(Value::as_u64));
        match n {
            Some(n) if n > format::FORMAT => Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "the remote's {} says format {n}; this memdir ({}) reads format {} and older, so nothing of the remote was merged and this replica's {} stays as it is",
                    format::FILE,
                    env!("CARGO_PKG_VERSION"),
                    format::FORMAT,
                    format::FILE
                ),
            )
            .hint("upgrade memdir to sync with this remote")
            .detail("path", Value::from(format::FILE))
            .detail("format", Value::from(n))),
            Some(n) => Ok(Some(n)),
            None => {
                resp.reported.push(problem(
                    "outside_layout",
                    format::FILE,
                    "the remote's copy does not name a format; this replica keeps its own",
                ));
                Ok(None)
            }
        }
    }

    /// Derives the file of every category the remote touched from the merged history, after
    /// adopting the category files only the remote changed (a plain git commit) as external
    /// versions. Returns the files to commit in place of malformed hand edits.
    fn settle_remote(
        &self,
        touched: &BTreeSet<CategoryName>,
        their_files: &[(String, Vec<u8>)],
        strategy: Strategy,
        local_heads: &BTreeSet<String>,
        theirs: &str,
        resp: &mut SyncResponse,
    ) -> Result<Vec<(String, Option<Vec<u8>>)>> {
        let layout = self.layout();
        let mut index_only: Vec<(String, Option<Vec<u8>>)> = Vec::new();
        for name in touched {
            let entries = self.categories().history_entries(name)?;
            let rel = Layout::category_rel(name);
            let rel_s = rel.to_string_lossy().into_owned();
            if let Some((_, bytes)) = their_files.iter().find(|(p, _)| *p == rel_s) {
                let hash = memdir_store::model::content_hash(bytes);
                if !entries
                    .iter()
                    .any(|e| e.hash.as_deref() == Some(hash.as_str()))
                {
                    let current = store::read_category(layout, name)?;
                    if current.as_ref().is_none_or(|f| f.content.is_ok()) {
                        txn::commit(
                            &layout.root,
                            &layout.staging(),
                            &format!("sync-edit-{}", &hash[..12]),
                            &[txn::FileWrite {
                                rel: rel.clone(),
                                bytes: Some(bytes.clone()),
                                hash: None,
                            }],
                        )?;
                        resp.categories.push(name.to_string());
                        resp.reported.push(problem(
                            "adopted",
                            &rel_s,
                            "changed on the remote without a version (a plain git commit); adopted as an external version",
                        ));
                        continue;
                    }
                }
            }
            if let Some(io) =
                self.settle_category(name, &entries, strategy, local_heads, theirs, resp)?
            {
                index_only.push(io);
            }
        }
        self.settled()?;
        Ok(index_only)
    }

    /// Records the merged tree: memdir's files as they now are (files that do not parse
    /// excepted, `index_only` in their place), committed with both parents, or HEAD moved to
    /// `theirs` when that is a fast-forward to the same tree.
    fn record_merge(
        &self,
        git: &Git,
        lock: &WriteLock,
        head: Option<&str>,
        theirs: &str,
        index_only: &[(String, Option<Vec<u8>>)],
        resp: &mut SyncResponse,
    ) -> Result<()> {
        let mut reported = Vec::new();
        self.commit_stage(lock, git, &mut reported)?;
        for (rel, bytes) in index_only {
            match bytes {
                Some(b) => {
                    let sha = git
                        .run_with(&["hash-object", "-w", "--stdin"], Some(b))
                        .map_err(git_err)?
                        .text();
                    git.run(&[
                        "update-index",
                        "--add",
                        "--cacheinfo",
                        &format!("100644,{sha},{rel}"),
                    ])
                    .map_err(git_err)?;
                }
                None => {
                    git.run(&["update-index", "--force-remove", "--", rel])
                        .map_err(git_err)?;
                }
            }
        }
        let tree = git.run(&["write-tree"]).map_err(git_err)?.text();
        let their_tree = git
            .run(&["rev-parse", &format!("{theirs}^{{tree}}")])
            .map_err(git_err)?
            .text();
        let ff = match head {
            None => true,
            Some(h) => git.is_ancestor(h, theirs).map_err(git_err)?,
        };
        if ff && tree == their_tree {
            self.move_head(git, theirs, head)?;
        } else {
            let mut parents: Vec<String> = Vec::new();
            if !ff && let Some(h) = head {
                parents.push(h.to_string());
            }
            parents.push(theirs.to_string());
            let replica = self.replica(lock)?;
            let msg = format!(
                "memdir: merge into {replica} ({} conflicts recorded)\n\nMemdir-Replica: {replica}\n",
                resp.conflicts.len()
            );
            self.record_commit(git, &tree, &parents, &msg, head)?;
        }
        Ok(())
    }

    /// Derives one category's file from its merged history (after a transport brought new
    /// versions): one head is served as it is; several are resolved by [`merge::resolve`],
    /// whose version and conflict record are written too. Caller holds the lock. Returns the
    /// path and bytes to commit in place of a malformed hand edit left in the work tree.
    pub(in crate::service) fn settle_category(
        &self,
        name: &CategoryName,
        entries: &[HistoryEntry],
        strategy: Strategy,
        local_heads: &BTreeSet<String>,
        seed: &str,
        resp: &mut SyncResponse,
    ) -> Result<Option<(String, Option<Vec<u8>>)>> {
        let layout = self.layout().clone();
        let rel = Layout::category_rel(name);
        let rel_s = rel.to_string_lossy().into_owned();
        let mut index_only = None;
        let mut files = Vec::new();
        let served: Option<Value> =
            match merge::resolve(name.as_str(), entries, strategy, local_heads) {
                None => match merge::heads(entries).first() {
                    Some(h) => (!h.is_tombstone()).then(|| h.content.clone()),
                    None => return Ok(None),
                },
                Some(r) => {
                    let hist_rel = Layout::history_rel(name).join(format!("{}.json", r.entry.id));
                    if !layout.root.join(&hist_rel).exists() {
                        files.push(txn::FileWrite {
                            rel: hist_rel,
                            bytes: Some(codec::to_pretty(
                                &serde_json::to_value(&r.entry)
                                    .expect("invariant: history entries serialize"),
                            )),
                            hash: None,
                        });
                    }
                    if let Some(c) = &r.conflict {
                        let crel = Path::new("conflicts")
                            .join(name.file_stem())
                            .join(c.file_name());
                        resp.conflicts.push(crel.to_string_lossy().into_owned());
                        if !layout.root.join(&crel).exists() {
                            files.push(txn::FileWrite {
                                rel: crel,
                                bytes: Some(c.to_bytes()),
                                hash: None,
                            });
                        }
                    }
                    (!r.entry.content.is_null()).then(|| r.entry.content.clone())
                }
            };
        let bytes = served.as_ref().map(codec::to_pretty);
        let current = store::read_category(&layout, name)?;
        let malformed = current.as_ref().is_some_and(|f| f.content.is_err());
        if malformed {
            // A hand edit that does not parse stays in the work tree, untouched; the
            // commit gets the merged file.
            resp.reported.push(problem(
                "not_committed",
                &rel_s,
                "malformed; the merged version is committed, the file is left as it is",
            ));
            index_only = Some((rel_s.clone(), bytes));
        } else if current.as_ref().map(|f| &f.bytes) != bytes.as_ref() {
            files.push(txn::FileWrite {
                rel,
                bytes,
                hash: None,
            });
            resp.categories.push(name.to_string());
        }
        if !files.is_empty() {
            let txid = format!(
                "sync-{}",
                &memdir_store::model::content_hash(format!("{seed}{name}").as_bytes())[..12]
            );
            txn::commit(&layout.root, &layout.staging(), &txid, &files)?;
        }
        Ok(index_only)
    }

    /// Stages memdir's paths as they are (no commit), leaving out files that do not parse,
    /// links and special files.
    fn commit_stage(
        &self,
        _lock: &WriteLock,
        git: &Git,
        reported: &mut Vec<Problem>,
    ) -> Result<()> {
        let excluded = self.left_out(git, &["categories"], reported)?;
        self.stage(git, &excluded)?;
        Ok(())
    }

    /// What must stay out of a commit: every link and special file under memdir's paths
    /// (never committed, copied or sent), and the files under `check` that git sees changed
    /// and that do not parse. Each is reported once.
    fn left_out(
        &self,
        git: &Git,
        check: &[&str],
        reported: &mut Vec<Problem>,
    ) -> Result<Vec<String>> {
        let layout = self.layout();
        let mut out = Vec::new();
        let mut report = |p: Problem| {
            if !reported.iter().any(|r| r.path == p.path) {
                reported.push(p);
            }
        };
        for (rel, link) in not_regular(&layout.root)? {
            report(if link {
                problem(
                    "link",
                    &rel,
                    "a symbolic link: memdir never follows, commits, copies or sends one",
                )
            } else {
                problem(
                    "not_committed",
                    &rel,
                    "not a regular file: memdir never commits, copies or sends one",
                )
            });
            out.push(rel);
        }
        for rel in changed_paths(git, check)? {
            if out.contains(&rel) {
                continue;
            }
            let why = match PathKind::of(&rel) {
                kind @ (PathKind::Category | PathKind::History) => {
                    match fsx::read(&layout.root.join(&rel), fsx::MAX_JSON_FILE) {
                        Ok(Some(b)) if kind == PathKind::Category => {
                            store::parse_category(b).content.err()
                        }
                        Ok(Some(b)) => store::read_history_bytes(&b).err(),
                        Ok(None) => None,
                        Err(e) => Some(e.source.to_string()),
                    }
                }
                _ => None,
            };
            if let Some(why) = why {
                report(problem(
                    "not_committed",
                    &rel,
                    format!("does not parse ({why}); left out of the commit until it is fixed"),
                ));
                out.push(rel);
            }
        }
        Ok(out)
    }

    /// Stages memdir's files as the work tree holds them, but `excluded`: whatever ignore
    /// rules say (a `.gitignore` or a global excludes file never hides a memory), and a link
    /// an older memdir committed leaves the index. Returns whether there was anything to stage.
    fn stage(&self, git: &Git, excluded: &[String]) -> Result<bool> {
        let root = &self.layout().root;
        let mut args: Vec<String> = vec!["add".into(), "-A".into(), "--force".into(), "--".into()];
        args.extend(
            TRACKED
                .iter()
                .filter(|p| std::fs::symlink_metadata(root.join(p)).is_ok())
                .filter(|p| !excluded.iter().any(|e| e == *p))
                .map(|p| p.to_string()),
        );
        if args.len() == 4 {
            return Ok(false);
        }
        args.extend(excluded.iter().map(|p| format!(":(exclude,literal){p}")));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        git.run(&args).map_err(git_err)?;
        if !excluded.is_empty() {
            let mut rm = vec!["update-index", "--force-remove", "--"];
            let links: Vec<&str> = excluded
                .iter()
                .filter(|p| std::fs::symlink_metadata(root.join(p)).is_ok_and(|m| !m.is_file()))
                .map(String::as_str)
                .collect();
            if !links.is_empty() {
                rm.extend(links);
                git.run(&rm).map_err(git_err)?;
            }
        }
        Ok(true)
    }

    /// The durable note that history a sync brought is committed and the category files that
    /// follow from it are not yet: `.memdir/settle-pending.json`. It is committed with the
    /// history (same transaction) and removed once every category is settled; a sync killed
    /// in between leaves it, and the next process that takes the lock settles those categories
    /// first ([`Replication::finish_pending_settle`]), before anything could adopt their missing or
    /// older files as changes made by hand.
    pub(in crate::service) fn settle_note(
        &self,
        touched: &BTreeSet<CategoryName>,
        notes: &BTreeSet<NotePath>,
        strategy: Strategy,
        local_heads: &BTreeSet<String>,
        seed: &str,
    ) -> txn::FileWrite {
        let note = PendingSettle {
            categories: touched.iter().map(|n| n.to_string()).collect(),
            notes: notes.iter().map(|n| n.to_string()).collect(),
            strategy: strategy.as_str().to_string(),
            local_heads: local_heads.iter().cloned().collect(),
            seed: seed.to_string(),
        };
        txn::FileWrite {
            rel: Path::new(".memdir").join(SETTLE_NOTE),
            bytes: Some(codec::to_pretty(
                &serde_json::to_value(&note).expect("invariant: the note serializes"),
            )),
            hash: None,
        }
    }

    /// Removes the settle note once every category it names is settled.
    pub(in crate::service) fn settled(&self) -> Result<()> {
        let path = self.layout().meta_dir().join(SETTLE_NOTE);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(fsx::sync_dir(&self.layout().meta_dir())?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(memdir_api::error::IoError {
                op: "remove",
                path,
                source: e,
            }
            .into()),
        }
    }

    /// Whether a sync left categories to settle (see [`Replication::settle_note`]).
    pub(crate) fn settle_pending(&self) -> bool {
        self.layout().meta_dir().join(SETTLE_NOTE).exists()
    }

    /// Settles the categories a killed sync left (see [`Replication::settle_note`]): each category
    /// file is derived from its merged history as that sync would have, then the note goes.
    /// Caller holds the lock.
    pub(crate) fn finish_pending_settle(&self) -> Result<()> {
        let path = self.layout().meta_dir().join(SETTLE_NOTE);
        let Some(bytes) = fsx::read(&path, fsx::MAX_JSON_FILE)? else {
            return Ok(());
        };
        self.check_format()?;
        match serde_json::from_slice::<PendingSettle>(&bytes) {
            Ok(note) => {
                let strategy = Strategy::parse(&note.strategy).unwrap_or(Strategy::LastWriteWins);
                let heads: BTreeSet<String> = note.local_heads.into_iter().collect();
                let mut resp = SyncResponse::default();
                for name in note.categories {
                    let Ok(name) = CategoryName::new(&name) else {
                        continue;
                    };
                    let entries = self.categories().history_entries(&name)?;
                    self.settle_category(&name, &entries, strategy, &heads, &note.seed, &mut resp)?;
                }
                for path in note.notes {
                    let Ok(path) = NotePath::new(&path) else {
                        continue;
                    };
                    self.settle_note_text(&path, strategy, &heads, &note.seed, &mut resp)?;
                }
            }
            // Not memdir's note (it writes it whole, in a transaction): nothing to settle.
            Err(e) => {
                if let Ok(mut n) = self.notices.lock() {
                    n.push(format!("{} does not parse ({e}); removed", path.display()));
                }
            }
        }
        self.settled()
    }

    /// Patches just taken from the remote that do not resolve here (their base was forgotten
    /// or compacted away on this replica, after the remote wrote them on it): each is written
    /// whole, resolved from the remote's own tree, where its chain is intact. Otherwise the
    /// version would be unreadable here and its change lost from this replica's file.
    fn whole_unresolvable_patches(
        &self,
        git: &Git,
        theirs: &str,
        writes: &[txn::FileWrite],
    ) -> Result<()> {
        let root = &self.layout().root;
        let mut whole = Vec::new();
        for w in writes {
            let rel = w.rel.to_string_lossy();
            let (Some(bytes), PathKind::History) = (&w.bytes, PathKind::of(&rel)) else {
                continue;
            };
            let Ok(e) = store::read_history_bytes(bytes) else {
                continue;
            };
            let Some(dir_rel) = w.rel.parent() else {
                continue;
            };
            if e.patch.is_none() || store::history::chain_intact(&root.join(dir_rel), &e.id) {
                continue;
            }
            // Resolved along the chain as the remote has it.
            let remote = |id: &str| -> std::result::Result<HistoryEntry, String> {
                let path = dir_rel.join(format!("{id}.json"));
                let blob = git
                    .blobs(
                        theirs,
                        &[path.to_string_lossy().into_owned()],
                        crate::sync::gate::MAX_RECORD_FILE,
                    )
                    .map_err(|e| e.to_string())?
                    .pop()
                    .and_then(Blob::bytes)
                    .ok_or("not in the remote's tree")?;
                store::read_history_bytes(&blob)
            };
            if let Ok(e) = store::history::resolve_with(e, remote) {
                whole.push(txn::FileWrite {
                    rel: w.rel.clone(),
                    bytes: Some(store::history::whole_bytes(&e)),
                    hash: None,
                });
            }
        }
        if !whole.is_empty() {
            let txid = format!(
                "sync-whole-{}",
                &memdir_store::model::content_hash(theirs.as_bytes())[..12]
            );
            txn::commit(root, &self.layout().staging(), &txid, &whole)?;
        }
        Ok(())
    }

    /// The ids of the heads of notes' histories.
    pub(in crate::service) fn note_head_ids(
        &self,
        paths: &BTreeSet<NotePath>,
    ) -> Result<BTreeSet<String>> {
        let mut ids = BTreeSet::new();
        for p in paths {
            let entries = self.notes().history_entries(p)?;
            ids.extend(merge::heads(&entries).iter().map(|h| h.id.clone()));
        }
        Ok(ids)
    }

    /// Derives one note's file after a git remote brought its versions (or its file changed
    /// by a plain commit, which is taken and adopted as a hand edit). Caller holds the lock.
    #[allow(clippy::too_many_arguments)]
    fn settle_note_file(
        &self,
        tx: &WriteTxn<'_>,
        path: &NotePath,
        their_files: &[(String, Vec<u8>)],
        strategy: Strategy,
        local_heads: &BTreeSet<String>,
        seed: &str,
        resp: &mut SyncResponse,
    ) -> Result<()> {
        let layout = self.layout();
        let rel = path.rel();
        let rel_s = rel.to_string_lossy().into_owned();
        if let Some((_, bytes)) = their_files.iter().find(|(p, _)| *p == rel_s) {
            let hash = memdir_store::model::content_hash(bytes);
            let known = self
                .notes()
                .history_entries(path)?
                .iter()
                .any(|e| e.hash.as_deref() == Some(hash.as_str()));
            if !known {
                txn::commit(
                    &layout.root,
                    &layout.staging(),
                    &format!("sync-edit-{}", &hash[..12]),
                    &[txn::FileWrite {
                        rel: rel.clone(),
                        bytes: Some(bytes.clone()),
                        hash: None,
                    }],
                )?;
                self.notes().adopt_hand_edits_of(tx, path)?;
                resp.reported.push(problem(
                    "adopted",
                    &rel_s,
                    "changed on the remote without a version (a plain git commit); adopted as an external version",
                ));
                return Ok(());
            }
        }
        self.settle_note_text(path, strategy, local_heads, seed, resp)?;
        Ok(())
    }

    /// Writes a note's file as its merged history says: one head is served as it is; several
    /// are resolved (the last writer's text by default, `local_wins`/`remote_wins` as asked)
    /// by a version whose parents are every head, so no head leaves the note's history.
    pub(in crate::service) fn settle_note_text(
        &self,
        path: &NotePath,
        strategy: Strategy,
        local_heads: &BTreeSet<String>,
        seed: &str,
        resp: &mut SyncResponse,
    ) -> Result<()> {
        let layout = self.layout().clone();
        let entries = self.notes().history_entries(path)?;
        let mut files = Vec::new();
        // A note has no keys: a merge by key keeps the last writer's text.
        let strategy = if strategy == Strategy::Merge {
            Strategy::LastWriteWins
        } else {
            strategy
        };
        let served: Option<String> = match merge::resolve(
            path.as_str(),
            &entries,
            strategy,
            local_heads,
        ) {
            None => match merge::heads(&entries).first() {
                Some(h) => h.content.as_str().map(str::to_string),
                None => return Ok(()),
            },
            Some(mut r) => {
                let text = r.entry.content.as_str().map(str::to_string);
                // The hash of a note's version is its text's.
                r.entry.hash = text
                    .as_deref()
                    .map(|t| memdir_store::model::content_hash(t.as_bytes()));
                let hist_rel = path.history_rel().join(format!("{}.json", r.entry.id));
                if !layout.root.join(&hist_rel).exists() {
                    files.push(txn::FileWrite {
                        rel: hist_rel,
                        bytes: Some(codec::to_pretty(
                            &serde_json::to_value(&r.entry)
                                .expect("invariant: history entries serialize"),
                        )),
                        hash: None,
                    });
                }
                if r.conflict.is_some() {
                    resp.reported.push(problem(
                            "note_conflict",
                            &path.rel().to_string_lossy(),
                            format!(
                                "concurrent versions resolved by {}; every one stays in the note's history",
                                strategy.as_str()
                            ),
                        ));
                }
                text
            }
        };
        let current = memdir_store::note::read(&layout, path)?;
        let unreadable = current.as_ref().is_some_and(|f| f.text.is_err());
        let bytes = served.map(String::into_bytes);
        if !unreadable && current.as_ref().map(|f| &f.bytes) != bytes.as_ref() {
            files.push(txn::FileWrite {
                rel: path.rel(),
                bytes,
                hash: None,
            });
        }
        if !files.is_empty() {
            let txid = format!(
                "sync-{}",
                &memdir_store::model::content_hash(format!("{seed}note:{path}").as_bytes())[..12]
            );
            txn::commit(&layout.root, &layout.staging(), &txid, &files)?;
        }
        Ok(())
    }

    /// The ids of the heads of `names`' histories, from the entries as written (heads follow
    /// from ids, parents and version vectors; no content is resolved).
    pub(in crate::service) fn head_ids(
        &self,
        names: &BTreeSet<CategoryName>,
    ) -> Result<BTreeSet<String>> {
        let mut ids = BTreeSet::new();
        for name in names {
            let entries = store::history::unresolved_entries(self.layout(), name)?;
            ids.extend(merge::heads(&entries).iter().map(|h| h.id.clone()));
        }
        Ok(ids)
    }

    /// The conflicts a sync decided that no later version has settled: the category is still
    /// served by a sync's pick, reached from its current head through sync versions only.
    pub fn open_conflicts(&self) -> Result<Vec<OpenConflict>> {
        let layout = self.layout();
        let dir = layout.root.join("conflicts");
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return Ok(out);
        };
        let mut dirs: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        dirs.sort();
        for stem in dirs {
            let Some(name) = decode_component(&stem).and_then(|n| CategoryName::new(&n).ok())
            else {
                continue;
            };
            let entries = self.categories().history_entries(&name)?;
            let by_id: BTreeMap<&str, &HistoryEntry> =
                entries.iter().map(|e| (e.id.as_str(), e)).collect();
            // Sync versions reachable from the head without passing a writer's version.
            let mut reach = BTreeSet::new();
            let mut stack: Vec<&str> = merge::heads(&entries)
                .iter()
                .map(|h| h.id.as_str())
                .collect();
            while let Some(id) = stack.pop() {
                if !merge::is_sync_version(id) || !reach.insert(id.to_string()) {
                    continue;
                }
                if let Some(e) = by_id.get(id) {
                    stack.extend(e.parents.iter().map(String::as_str));
                }
            }
            let mut files: Vec<_> = std::fs::read_dir(dir.join(&stem))
                .map(|rd| rd.flatten().map(|e| e.path()).collect())
                .unwrap_or_default();
            files.sort();
            for path in files {
                let Ok(Some(bytes)) = fsx::read(&path, fsx::MAX_JSON_FILE) else {
                    continue;
                };
                let Ok(v) = serde_json::from_slice::<Value>(&bytes) else {
                    continue;
                };
                let merged = v["merged"].as_str().unwrap_or_default().to_string();
                if !reach.contains(&merged) {
                    continue;
                }
                let strs = |k: &str, f: &dyn Fn(&Value) -> Option<String>| -> Vec<String> {
                    v[k].as_array()
                        .map(|a| a.iter().filter_map(f).collect())
                        .unwrap_or_default()
                };
                // Compared with what is served now: a later sync version may hold more.
                let heads_now = merge::heads(&entries);
                let served = match heads_now.as_slice() {
                    [h] => Some(&h.content),
                    _ => by_id.get(merged.as_str()).map(|e| &e.content),
                };
                let base = v["base"]
                    .as_str()
                    .and_then(|b| by_id.get(b))
                    .map(|e| &e.content);
                let set_aside = v["heads"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|h| {
                        let keys = merge::set_aside(base, &h["content"], served?)?;
                        Some(SetAside {
                            head: h["id"].as_str()?.to_string(),
                            actor: h["actor"].as_str().unwrap_or_default().to_string(),
                            keys,
                        })
                    })
                    .collect();
                out.push(OpenConflict {
                    set_aside,
                    category: name.to_string(),
                    kind: v["kind"].as_str().unwrap_or_default().to_string(),
                    strategy: v["strategy"].as_str().unwrap_or_default().to_string(),
                    record: path
                        .strip_prefix(&layout.root)
                        .unwrap_or(&path)
                        .to_string_lossy()
                        .into_owned(),
                    merged,
                    heads: strs("heads", &|h| h["id"].as_str().map(String::from)),
                    keys: strs("keys", &|k| k.as_str().map(String::from)),
                });
            }
        }
        Ok(out)
    }

    /// `memdir resolve`: writes the chosen content of a conflicted category as a version of
    /// its own (op `resolve`), which closes its open conflicts.
    pub fn resolve(&self, req: &ResolveRequest) -> Result<ResolveResponse> {
        let name = CategoryName::new(&req.category)?;
        let reason = crate::service::check_reason(req.reason.as_deref())?;
        match (&req.pick, &req.data) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(Error::invalid(
                    "pick",
                    "give exactly one of pick (a version) and data (the resolved content)",
                ));
            }
            (None, Some(d)) => {
                if !d.is_object() {
                    return Err(Error::invalid("data", "data must be a JSON object"));
                }
                crate::service::check_depth("data", d)?;
            }
            _ => {}
        }
        let open: Vec<OpenConflict> = self
            .open_conflicts()?
            .into_iter()
            .filter(|c| c.category == name.as_str())
            .collect();
        if open.is_empty() {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("category {:?} has no open conflict", name.as_str()),
            )
            .detail("category", Value::from(name.as_str()))
            .hint("{op:status} lists open conflicts"));
        }
        self.with_write(|tx| {
            let st = self
                .categories()
                .sync_category(tx.inner, &name, Some(tx.lock), Sync::Full)?;
            let content = match (&req.pick, &req.data) {
                (Some(v), _) => self.categories().find_version(tx.inner, &name, v)?.content,
                (None, Some(d)) => d.clone(),
                (None, None) => Value::Null,
            };
            let (op, content) = if content.is_null() {
                (VersionOp::Delete, None)
            } else {
                (VersionOp::Resolve, Some(content))
            };
            let c = self.categories().commit_version(
                tx,
                NewVersion {
                    reason: reason
                        .clone()
                        .or_else(|| Some("conflict resolved".to_string())),
                    ..NewVersion::new(&name, &st, op, self.actor(), content)
                },
            )?;
            Ok(ResolveResponse {
                category: name.to_string(),
                resolved: open.iter().map(|c| c.record.clone()).collect(),
                version_id: c.id,
                version: c.version,
                hash: c.hash,
            })
        })
    }
}

/// Every link and special file under memdir's paths, relative, with whether it is a link:
/// never followed (a linked directory is one entry), never committed.
fn not_regular(root: &Path) -> Result<Vec<(String, bool)>> {
    let mut out = Vec::new();
    for top in TRACKED {
        for e in walkdir::WalkDir::new(root.join(top)).follow_links(false) {
            let e = match e {
                Ok(e) => e,
                Err(err)
                    if err.io_error().map(std::io::Error::kind)
                        == Some(std::io::ErrorKind::NotFound) =>
                {
                    continue;
                }
                Err(err) => {
                    let path = err.path().unwrap_or(root).to_path_buf();
                    return Err(memdir_api::error::IoError {
                        op: "list",
                        path,
                        source: err
                            .into_io_error()
                            .unwrap_or_else(|| std::io::Error::other("a loop of links")),
                    }
                    .into());
                }
            };
            let t = e.file_type();
            if t.is_file() || t.is_dir() {
                continue;
            }
            if let Ok(rel) = e.path().strip_prefix(root) {
                out.push((rel.to_string_lossy().into_owned(), t.is_symlink()));
            }
        }
    }
    Ok(out)
}

/// What a git mode says an entry is.
fn entry_of(mode: &str) -> Entry {
    match mode {
        "100644" | "100755" | "000000" => Entry::File,
        "120000" => Entry::Link,
        _ => Entry::Other,
    }
}

/// The format file to write with a merge: raised to the remote's format (one this memdir
/// reads) or to the patches' format when patch entries arrive, canonical, never the
/// remote's bytes. `None` when the local format already reads everything.
fn format_raise(layout: &Layout, remote: Option<u64>, patched: bool) -> Option<txn::FileWrite> {
    let local = match format::read(layout) {
        format::Found::Format(n) => n,
        format::Found::Missing => format::CREATED,
        format::Found::Unreadable(_) => return None,
    };
    let want = remote
        .unwrap_or(0)
        .max(if patched { format::PATCHES } else { 0 });
    (want > local).then(|| txn::FileWrite {
        rel: format::FILE.into(),
        bytes: Some(format::bytes_of(want)),
        hash: None,
    })
}

/// What the gate let in from a remote commit.
#[derive(Default)]
struct Taken {
    writes: Vec<txn::FileWrite>,
    touched: BTreeSet<CategoryName>,
    touched_notes: BTreeSet<NotePath>,
    /// Category files only the remote changed, checked, as it holds them (a plain commit).
    their_files: Vec<(String, Vec<u8>)>,
    /// Whether tombstones of chunks forgotten on another replica arrived.
    forgotten: bool,
}

/// What merging a fetched commit did.
#[derive(Default)]
struct Merge {
    /// Whether anything was merged (else the local commit already held the remote's).
    merged: bool,
    /// Whether tombstones of chunks forgotten on another replica arrived.
    forgotten: bool,
}

/// The remote's changes memdir may take, each with its place in the layout: a path outside
/// the layout is reported and passed over, and a category file both sides changed is left to
/// the merged history. Every category the remote touched is noted in `taken`.
fn wanted_changes<'a>(
    changes: &'a [Change],
    ours_changed: &BTreeSet<String>,
    taken: &mut Taken,
    resp: &mut SyncResponse,
) -> Vec<(&'a Change, Place, Entry)> {
    let mut wanted = Vec::new();
    for c in changes.iter().filter(|c| c.path != format::FILE) {
        let place = match Place::of(&c.path) {
            Ok(p) => p,
            Err(why) => {
                resp.reported.push(problem(
                    "outside_layout",
                    &c.path,
                    format!("the remote holds a file outside memdir's layout ({why}); not taken"),
                ));
                continue;
            }
        };
        if let Some(n) = place.category() {
            taken.touched.insert(n.clone());
        }
        if let Some(n) = place.note() {
            taken.touched_notes.insert(n.clone());
        }
        // A category or note file both sides changed follows from the merged history.
        if matches!(place, Place::Category(_) | Place::Note(_)) && ours_changed.contains(&c.path) {
            continue;
        }
        wanted.push((c, place, entry_of(&c.mode)));
    }
    wanted
}
