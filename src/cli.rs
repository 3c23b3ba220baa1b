//! The command-line interface: parses arguments, calls the service, prints JSON.
//!
//! Architecture Invariant: this is the only module that prints. Results go to stdout as JSON;
//! errors go to stderr as `{"error": {code, message, hints, ...}}` with the exit code of their
//! kind.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};

use crate::config::{self, Config};
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::{self as api, AppendRequest, IngestRequest, NewChunk, WriteRequest};
use memdir_engine::ops;
use memdir_engine::service::{self, Memdir};

/// Largest input read from a file or stdin, in bytes.
const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

const AFTER_HELP: &str = "\
Examples:
  memdir init
  memdir ingest --session-id demo --project web --text \"the pool timed out under load\"
  memdir ingest --jsonl chunks.jsonl
  memdir import claude-code --dry-run && memdir import claude-code
  memdir fetch demo --position 0 --limit 20
  memdir overview --days 7
  memdir write base --data '{\"name\": \"Ada\"}' --reason \"first notes\"
  memdir write base --merge --data '{\"editor\": \"helix\"}' --expected-hash <hash>
  memdir append journal --data '{\"event\": \"deployed\"}' --max-entries 500
  memdir read base --fields name,editor
  memdir history base && memdir diff base --from 1 --to 2 && memdir restore base --version 1
  memdir search \"connection pool timeout\" --project web --context 2
  memdir search 'ECONNREFUSED 127.0.0.1:5432' --mode exact
  memdir reindex

The memory directory is --dir, else $MEMDIR_DIR, else `dir` in the config file, else
$XDG_DATA_HOME/memdir (~/.local/share/memdir). The config file is $MEMDIR_CONFIG, else
$XDG_CONFIG_HOME/memdir/config.toml (~/.config/memdir/config.toml); flags win over the
environment, which wins over the file (`memdir config show`). Results are JSON on stdout;
errors are JSON on stderr.

Exit codes:
  0  success            5  conflict (expected_hash, kind)   9   too large
  1  verify-store found problems                          10  internal error
  2  usage error        6  store busy: retry              11  denied
  3  invalid input      7  a file on disk is malformed    12  forbidden by the access-control
  4  not found          8  unavailable (I/O, disk full)       list ([acl]); nothing changed";

/// memdir: local-first long-term memory for AI agents, in plain files you own.
#[derive(Parser, Debug)]
#[command(name = "memdir", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// The memory directory [default: $MEMDIR_DIR, else `dir` in the config file, else
    /// $XDG_DATA_HOME/memdir]
    #[arg(long, global = true, value_name = "PATH")]
    pub dir: Option<PathBuf>,
    /// This device's name, recorded as the actor of every write [default: $MEMDIR_DEVICE,
    /// else `device` in the config file, else the host name]
    #[arg(long, global = true, value_name = "NAME")]
    pub device: Option<String>,
    /// Print JSON, as when stdout is not a terminal
    #[arg(long, global = true, conflicts_with = "human")]
    pub json: bool,
    /// Print for people, as on a terminal, wherever stdout goes
    #[arg(long, global = true)]
    pub human: bool,
    /// Colour in output for people: auto (on a terminal, unless NO_COLOR is set), always or
    /// never
    #[arg(long, global = true, value_name = "WHEN", default_value = "auto", value_parser = ["auto", "always", "never"])]
    pub color: String,
    #[command(subcommand)]
    pub command: Command,
}

/// How results and errors are printed: chosen once from `--format`, `--json`, `--color`,
/// `NO_COLOR` and whether the streams are terminals.
#[derive(Clone, Copy, Debug)]
pub struct Printing {
    /// Results for people (else JSON).
    pub human: bool,
    /// Errors for people (else JSON on stderr).
    pub human_errors: bool,
    pub color_out: bool,
    pub color_err: bool,
}

impl Printing {
    /// The choice for `cli` in this process's environment.
    pub fn of(cli: &Cli) -> Printing {
        Printing::decide(
            if cli.json {
                "json"
            } else if cli.human {
                "human"
            } else {
                "auto"
            },
            &cli.color,
            std::io::stdout().is_terminal(),
            std::io::stderr().is_terminal(),
            config::process_env("NO_COLOR").is_some(),
            config::process_env("TERM").as_deref() == Some("dumb"),
        )
    }

    /// The choice for a format, a colour setting and the streams' kinds.
    pub fn decide(
        format: &str,
        color: &str,
        out_tty: bool,
        err_tty: bool,
        no_color: bool,
        dumb: bool,
    ) -> Printing {
        let human = format == "human" || (format == "auto" && out_tty);
        let human_errors = format == "human" || (format == "auto" && err_tty);
        let colour = |tty: bool| match color {
            "always" => true,
            "never" => false,
            _ => tty && !no_color && !dumb,
        };
        Printing {
            human,
            human_errors,
            color_out: human && colour(out_tty),
            color_err: human_errors && colour(err_tty),
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create the memory directory (with .gitignore and .gitattributes).
    #[command(after_help = "Examples:\n  memdir init
  memdir --dir ~/work-memory init")]
    Init,
    /// Counts, sizes and health of the store.
    #[command(after_help = "Examples:\n  memdir status
  memdir status --json | jq .chunks")]
    Status,
    /// Add chunks to a session: one from --text, --file or stdin, or many with --jsonl.
    #[command(
        after_help = "Examples:\n  memdir ingest --session-id demo --project web --text \"the pool timed out under load\"
  git log -1 --format=%B | memdir ingest --session-id demo --file -
  memdir ingest --jsonl chunks.jsonl"
    )]
    Ingest(IngestArgs),
    /// Import another tool's history: jsonl (memdir chunk lines), claude-code, codex,
    /// opencode, local-memory (sessions), mcp-memory-rs, mcp-memory-jsonl (categories). A
    /// second run adds only what is new.
    #[command(
        after_help = "Examples:\n  memdir import claude-code --dry-run\n  memdir import claude-code\n  memdir import codex ~/.codex/sessions\n  memdir import opencode ~/.local/share/opencode\n  memdir import local-memory ~/.local/share/local-memory/memory.db\n  memdir import mcp-memory-rs ~/.memory\n  memdir import mcp-memory-jsonl ./memory.jsonl --dry-run\n  memdir export > all.jsonl && memdir --dir ~/other import jsonl all.jsonl"
    )]
    Import(api::ImportRequest),
    /// Capture an agent's session as it happens: run by the agent's hook with the hook's
    /// JSON event on stdin, it saves the turns of the transcript not saved yet (the chunks
    /// `import` would give). It always exits 0 and prints nothing: problems go to
    /// `.memdir/hook.log` in the memory directory, and whatever it could not do (a busy
    /// store, the deadline) the next event does. `memdir config --client claude --hooks`
    /// (or `--client codex`, `--client opencode`) installs it.
    #[command(
        after_help = "Examples:\n  memdir config --client claude --hooks      # install it into ~/.claude/settings.json\n  memdir config --client codex --hooks       # Codex's notify program in ~/.codex/config.toml\n  memdir hook codex '{\"type\":\"agent-turn-complete\",\"thread-id\":\"019c8a2e-5f10-7b3d-a8c4-1e2f3a4b5c6d\"}'\n  echo '{\"hook_event_name\":\"Stop\",\"transcript_path\":\"/home/me/.claude/projects/-home-me-app/5b2f.jsonl\"}' | memdir hook claude-code"
    )]
    Hook {
        /// The agent whose hook runs it: claude-code (event on stdin), codex (Codex's
        /// `notify` program: the notification is the last argument) or opencode (memdir's
        /// opencode plugin: the event is the last argument)
        #[arg(value_parser = ["claude-code", "codex", "opencode"])]
        agent: String,
        /// The event as an argument instead of stdin (how Codex's `notify` passes it)
        #[arg(value_name = "JSON")]
        event: Option<String>,
        /// Time budget in milliseconds: reading stops after half of it, the store lock is
        /// waited for a tenth of it, and the next event goes on from there
        #[arg(long, default_value_t = 5000, value_name = "MS")]
        timeout_ms: u64,
    },
    /// Read a session's chunks, page by page.
    #[command(after_help = "Examples:\n  memdir fetch demo
  memdir fetch demo --position 20 --limit 20")]
    Fetch(api::FetchRequest),
    /// The session catalog: sessions active within --days (0: all), newest first.
    #[command(after_help = "Examples:\n  memdir overview
  memdir overview --days 0 --project web")]
    Overview(api::OverviewRequest),
    /// Read a category (or an old version of it).
    #[command(after_help = "Examples:\n  memdir read base
  memdir read base --fields name,editor
  memdir read base --version 1")]
    Read(api::ReadRequest),
    /// Replace a category, or merge top-level keys into it (null deletes a key).
    #[command(
        after_help = "Examples:\n  memdir write base --data '{\"name\": \"Ada\"}' --reason \"first notes\"\n  memdir write base --merge --data '{\"editor\": \"helix\", \"shell\": null}' --expected-hash <hash>\n  memdir write projects --file projects.json"
    )]
    Write {
        /// The category to write (created if it does not exist)
        category: String,
        #[command(flatten)]
        input: DataArgs,
        /// Merge the object's top-level keys into the category (null deletes a key) instead
        /// of replacing it
        #[arg(long)]
        merge: bool,
        /// Write only if the category has this hash ("absent": only if it does not exist)
        #[arg(long)]
        expected_hash: Option<String>,
        /// Why, kept in the version's history entry
        #[arg(long)]
        reason: Option<String>,
    },
    /// Append an entry to a log category (created on first append).
    #[command(
        after_help = "Examples:\n  memdir append journal --data '{\"event\": \"deployed v2\"}'\n  memdir append journal --data '{\"event\": \"x\"}' --max-entries 500 --max-age-days 30"
    )]
    Append {
        /// The log to append to (created on first append)
        category: String,
        #[command(flatten)]
        input: DataArgs,
        /// Entries to keep (default 200, or the log's own setting)
        #[arg(long, value_parser = api::num::parse_u64, allow_negative_numbers = true)]
        max_entries: Option<u64>,
        /// Drop entries older than this many days, counted from the newest entry
        #[arg(long, value_parser = api::num::parse_u64, allow_negative_numbers = true)]
        max_age_days: Option<u64>,
        /// Why, kept in the version's history entry
        #[arg(long)]
        reason: Option<String>,
    },
    /// Every category with hash, version, size and last writer.
    #[command(after_help = "Examples:\n  memdir list")]
    List,
    /// Delete a category's current file; history and a tombstone stay.
    #[command(after_help = "Examples:\n  memdir delete scratch
  memdir delete scratch --expected-hash <hash>")]
    Delete(api::DeleteRequest),
    /// Versions of a category, newest first (with --diff-from/--diff-to, also a diff).
    #[command(after_help = "Examples:\n  memdir history base
  memdir history base --limit 5 --diff-from 1 --diff-to 2")]
    History(api::HistoryRequest),
    /// Unified diff between two versions (default: the newest and its parent).
    #[command(after_help = "Examples:\n  memdir diff base
  memdir diff base --from 1 --to 3")]
    Diff(api::DiffRequest),
    /// Restore an old version as a new version.
    #[command(after_help = "Examples:\n  memdir restore base --version 1
  memdir restore base --version 1 --expected-hash <current hash>")]
    Restore(api::RestoreRequest),
    /// Trim history to the newest N versions per category (heads and tombstones stay).
    #[command(
        after_help = "Examples:\n  memdir compact journal --keep 20\n  memdir compact --keep 5 --yes      # every category; without --yes it asks on a terminal"
    )]
    Compact(CompactArgs),
    /// Read several categories at once (missing ones are listed, not errors).
    #[command(after_help = "Examples:\n  memdir context base projects
  memdir context base projects --fields name")]
    Context(api::ContextRequest),
    /// Whether a category changed since a hash: unchanged, changed (with data) or deleted.
    #[command(after_help = "Examples:\n  memdir delta base --since-hash <hash you last saw>")]
    Delta(api::DeltaRequest),
    /// Forget chunks (by --session-id with --chunk-id, a whole --session-id, or the hits of
    /// --query) or an old category version (--category with --version): each is replaced by a
    /// tombstone that keeps its place. On a terminal it shows what goes and asks first;
    /// otherwise it needs --yes.
    #[command(
        after_help = "Examples:\n  memdir forget --session-id demo --chunk-id <replica>:<seq> --yes\n  memdir forget --session-id demo --dry-run\n  memdir forget --query \"api key\" --project web      # shows the hits, asks first\n  memdir forget --category base --version 3 --yes"
    )]
    Forget {
        #[command(flatten)]
        req: api::ForgetRequest,
        /// Forget without asking
        #[arg(long)]
        yes: bool,
    },
    /// Write a verified copy of the store to DEST (a new or empty directory), with a manifest
    /// of blake3 hashes; the ledger and index are not copied (they are rebuilt).
    #[command(after_help = "Examples:\n  memdir snapshot /backups/memdir-2026-11-30")]
    Snapshot(api::SnapshotRequest),
    /// Check the snapshot SRC against its manifest, then make it the store; the previous store
    /// is moved aside to `<dir>.before-restore-<time>` (the result names it).
    #[command(after_help = "Examples:\n  memdir restore-snapshot /backups/memdir-2026-11-30")]
    RestoreSnapshot(api::RestoreSnapshotRequest),
    /// Export sessions as jsonl (loadable by `ingest --jsonl`) or sessions and categories as
    /// markdown, to stdout or --output FILE.
    #[command(
        after_help = "Examples:\n  memdir export > memory.jsonl\n  memdir export --format markdown --project web --since 2026-11-01 --output web.md"
    )]
    Export(api::ExportRequest),
    /// Check that files, history, ledger and index agree (read-only); exit 1 when not.
    #[command(after_help = "Examples:\n  memdir verify-store
  memdir verify-store --json > report.json")]
    VerifyStore,
    /// Sync with the git remote: commit, fetch, merge with memdir's rules, push
    /// (--init URL makes the memory directory a git work tree first).
    #[command(
        after_help = "Examples:\n  memdir sync --init git@example.com:me/memory.git   # first time, on each machine\n  memdir sync\n  memdir sync --strategy merge"
    )]
    Sync(api::SyncRequest),
    /// Resolve a category a sync left in conflict: --pick VERSION or --data JSON.
    #[command(
        after_help = "Examples:\n  memdir status      # lists open conflicts\n  memdir resolve base --pick 7\n  memdir resolve base --data '{\"editor\": \"helix\"}'"
    )]
    Resolve(api::ResolveRequest),
    /// Search session chunks and categories (BM25, exact, or auto).
    #[command(after_help = "Examples:\n  memdir search \"connection pool timeout\"
  memdir search 'ECONNREFUSED 127.0.0.1:5432' --mode exact
  memdir search deploy --project web --since 2026-11-01 --context 2")]
    Search(api::SearchRequest),
    /// Print the OpenAPI document of the REST API (schema/openapi.json is this output).
    #[command(after_help = "Examples:\n  memdir openapi > openapi.json")]
    Openapi,
    /// Print the operation table: each operation's names on every surface, flags, CLI
    /// arguments and examples.
    #[command(after_help = "Examples:\n  memdir ops")]
    Ops,
    /// Print a shell completion script: bash, zsh, fish, powershell or elvish.
    #[command(
        after_help = "Examples:\n  memdir completions bash > ~/.local/share/bash-completion/completions/memdir\n  memdir completions zsh > \"${fpath[1]}/_memdir\"\n  memdir completions fish > ~/.config/fish/completions/memdir.fish"
    )]
    Completions {
        /// The shell
        #[arg(value_parser = ["bash", "zsh", "fish", "powershell", "elvish"])]
        shell: String,
    },
    /// Print the man page (roff), or write one page per command into a directory.
    #[command(
        after_help = "Examples:\n  memdir man | man -l -\n  memdir man --out ~/.local/share/man/man1"
    )]
    Man {
        /// Write memdir.1 and memdir-COMMAND.1 into this directory instead of printing
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Embed every indexed text that has no vector yet ([embeddings] in the config file).
    #[command(after_help = "Examples:\n  memdir embed")]
    Embed,
    /// List the configured embeddings model and the model cache, or fetch a model.
    #[command(
        after_help = "Examples:\n  memdir models\n  memdir models --fetch sentence-transformers/all-MiniLM-L6-v2"
    )]
    Models(api::ModelsRequest),
    /// Rebuild the search index from the files; prints the index fingerprint.
    #[command(after_help = "Examples:\n  memdir reindex")]
    Reindex,
    /// Serve MCP over stdio (what MCP clients launch).
    #[command(
        after_help = "Examples:\n  memdir serve                                   # MCP over stdio, for MCP clients\n  memdir serve --transport http --port 8787      # REST on loopback\n  MEMDIR_HTTP_TOKEN=$(head -c 24 /dev/urandom | base64) memdir serve --transport mcp-http --host 0.0.0.0"
    )]
    Serve {
        /// stdio (default), http (REST) or mcp-http (MCP streamable HTTP at /mcp)
        #[arg(long, default_value = "stdio")]
        transport: String,
        /// Address to listen on (http transports); other than loopback needs --token
        /// [default: `http.host` in the config file, else 127.0.0.1]
        #[arg(long)]
        host: Option<String>,
        /// Port [default: `http.port` in the config file, else 8787 for http, 8000 for
        /// mcp-http; 0 picks a free one]
        #[arg(long)]
        port: Option<u16>,
        /// Bearer token every request must carry (http transports)
        #[arg(long, env = "MEMDIR_HTTP_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Largest request body in bytes (http transports) [default: `http.body_limit` in
        /// the config file, else 16777216]
        #[arg(long)]
        body_limit: Option<usize>,
        /// Tool profile: default (small) or full (every compatibility tool name)
        /// [default: $MEMDIR_TOOLS, else `mcp.tools` in the config file, else default]
        #[arg(long)]
        tools: Option<String>,
    },
    /// Open the web viewer: serve it on a free loopback port, print its URL and open the
    /// browser (`memdir ui --no-open` only prints the URL).
    #[command(after_help = "Examples:\n  memdir ui\n  memdir ui --no-open --port 8799")]
    Ui {
        /// Print the URL without opening a browser
        #[arg(long)]
        no_open: bool,
        /// Port on 127.0.0.1 [default: a free one]
        #[arg(long)]
        port: Option<u16>,
        /// Token the page must send (it asks for it once per tab)
        #[arg(long, env = "MEMDIR_HTTP_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
    /// The configuration: `config show` prints it with the source of every value, `config
    /// init` writes a commented example file, `config --client NAME` prints the snippet or
    /// command that registers memdir with an MCP client.
    #[command(
        after_help = "Examples:\n  memdir config show\n  memdir config init\n  memdir config --client claude --setup --dry-run\n  memdir config --client claude --hooks --dry-run\n  memdir config --client codex --hooks\n  memdir config --client cursor --dir ~/work-memory"
    )]
    Config(ConfigArgs),
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ConfigArgs {
    #[command(subcommand)]
    action: Option<ConfigAction>,
    /// Register with this MCP client: claude, codex, cursor, opencode or generic (with
    /// --dir PATH, the server command gets `--dir PATH`)
    #[arg(long)]
    client: Option<String>,
    /// The memdir binary the client should launch
    #[arg(long, default_value = "memdir")]
    command: String,
    /// Run the registration command (claude, codex)
    #[arg(long)]
    setup: bool,
    /// With --client claude: install `memdir hook claude-code` as Claude Code's Stop,
    /// PreCompact and SessionEnd hooks in its settings.json ($CLAUDE_CONFIG_DIR, else
    /// ~/.claude). With --client codex: set `memdir hook codex` as the `notify` program in
    /// Codex's config.toml ($CODEX_HOME, else ~/.codex). With --client opencode: write memdir's
    /// capture plugin into opencode's plugin directory ($XDG_CONFIG_HOME/opencode, else
    /// ~/.config/opencode). Every other setting is kept; running it again changes nothing
    #[arg(long)]
    hooks: bool,
    /// With --setup: print the command instead of running it; with --hooks: print the new
    /// settings file and write nothing
    #[arg(long)]
    dry_run: bool,
}

#[derive(Subcommand, Debug)]
pub enum ConfigAction {
    /// Print the effective configuration: every setting, its value and where it came from
    /// (flag, environment, config file or default).
    Show,
    /// Write a commented example config file to the config path (it sets nothing until you
    /// uncomment a key).
    Init {
        /// Replace an existing file
        #[arg(long)]
        force: bool,
    },
}

#[derive(Args, Debug)]
pub struct IngestArgs {
    /// The session to append to (with --jsonl: the default for lines without one)
    #[arg(long)]
    session_id: Option<String>,
    /// A project name, for filtering (with --jsonl: the default for lines without one)
    #[arg(long)]
    project: Option<String>,
    /// Metadata as a JSON object
    #[arg(long)]
    metadata: Option<String>,
    /// When it was first said (RFC 3339, a date or epoch ms), kept as its time; default now
    #[arg(long, conflicts_with = "jsonl")]
    ts: Option<String>,
    /// An idempotency key: if a chunk of the session already has it, nothing is saved
    #[arg(long, conflicts_with = "jsonl")]
    source_id: Option<String>,
    /// The text to remember
    #[arg(long, conflicts_with_all = ["file", "jsonl"])]
    text: Option<String>,
    /// Read the text from this file ("-" for stdin)
    #[arg(long, conflicts_with = "jsonl")]
    file: Option<PathBuf>,
    /// A JSONL file ("-" for stdin) of chunk objects {session_id, content, project, metadata,
    /// ts, source_id}, saved in batches of up to 1,000 chunks, each all or nothing
    #[arg(long, value_name = "FILE")]
    jsonl: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct CompactArgs {
    #[command(flatten)]
    req: api::CompactRequest,
    /// Compact every category without asking (needed without a category when stdin is not
    /// a terminal)
    #[arg(long, short = 'y')]
    yes: bool,
}

#[derive(Args, Debug)]
pub struct DataArgs {
    /// The JSON object, inline
    #[arg(long, conflicts_with = "file")]
    data: Option<String>,
    /// Read the JSON object from this file ("-" for stdin)
    #[arg(long)]
    file: Option<PathBuf>,
}

fn read_limited(mut r: impl Read, what: &str) -> Result<String> {
    let mut buf = Vec::new();
    r.by_ref()
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Error::new(ErrorKind::Unavailable, format!("reading {what}: {e}")))?;
    if buf.len() as u64 > MAX_INPUT_BYTES {
        return Err(Error::too_large(
            what,
            buf.len(),
            MAX_INPUT_BYTES as usize,
            "bytes",
        ));
    }
    String::from_utf8(buf).map_err(|_| Error::invalid(what, format!("{what} is not valid UTF-8")))
}

fn read_source(path: Option<&PathBuf>, what: &str) -> Result<String> {
    match path {
        Some(p) if p.as_os_str() != "-" => {
            let f = std::fs::File::open(p)
                .map_err(|e| Error::invalid(what, format!("cannot open {}: {e}", p.display())))?;
            read_limited(f, what)
        }
        _ => {
            if std::io::stdin().is_terminal() {
                return Err(Error::invalid(
                    what,
                    format!(
                        "no {what} given: pass it as an argument or a file, or pipe it to stdin"
                    ),
                ));
            }
            read_limited(std::io::stdin(), what)
        }
    }
}

fn parse_json(text: &str, field: &str) -> Result<Value> {
    let v = serde_json::from_str(text)
        .map_err(|e| Error::invalid(field, format!("{field} is not valid JSON: {e}")))?;
    if let Some(n) = oversized_integer(text) {
        return Err(Error::invalid(
            field,
            format!("{field} holds the integer {n}, which does not fit in 64 bits and would lose precision"),
        )
        .hint("store it as a string"));
    }
    Ok(v)
}

/// The first integer literal outside the 64-bit range in valid JSON text, if any (such numbers
/// would silently become floating point).
fn oversized_integer(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let lit = &text[start..i];
                let integral = !lit.contains(['.', 'e', 'E']);
                if integral && lit.parse::<i64>().is_err() && lit.parse::<u64>().is_err() {
                    return Some(lit.to_string());
                }
            }
            _ => i += 1,
        }
    }
    None
}

impl DataArgs {
    fn value(&self) -> Result<Value> {
        match (&self.data, &self.file) {
            (Some(d), _) => parse_json(d, "data"),
            (None, f) => parse_json(&read_source(f.as_ref(), "data")?, "data"),
        }
    }
}

/// The ingest request of the CLI's arguments: one chunk from --text, --file or stdin.
fn ingest_request(a: &IngestArgs) -> Result<IngestRequest> {
    let metadata = a
        .metadata
        .as_deref()
        .map(|s| parse_json(s, "metadata"))
        .transpose()?;
    let Some(session_id) = a.session_id.clone() else {
        return Err(Error::invalid(
            "session_id",
            "--session-id is required (or use --jsonl with session_id in each line)",
        ));
    };
    let content = match (&a.text, &a.file) {
        (Some(t), _) => t.clone(),
        (None, f) => read_source(f.as_ref(), "content")?,
    };
    Ok(IngestRequest {
        session_id: Some(session_id),
        content: Some(content),
        project: a.project.clone(),
        metadata,
        ts: a.ts.clone(),
        source_id: a.source_id.clone(),
        chunks: None,
    })
}

/// Chunks per batch of a streamed `ingest --jsonl` (each batch is all or nothing): the most a
/// batch may hold. A batch waits once for the disk per segment it touches, so a file whose
/// lines interleave many sessions pays that wait once per batch, not once per 1,000 chunks.
const JSONL_BATCH_CHUNKS: usize = service::limits::MAX_BATCH_CHUNKS;
/// Content bytes after which a batch of a streamed `ingest --jsonl` is sent early.
const JSONL_BATCH_BYTES: usize = 8 * 1024 * 1024;
/// Skipped chunks listed by name in a streamed ingest's result (all are counted).
const LIST_SKIPPED_MAX: usize = 1_000;

/// One line of a JSONL input as a chunk: defaults from the flags, errors naming the line.
fn jsonl_chunk(a: &IngestArgs, line: &[u8], n: usize) -> Result<NewChunk> {
    let at = |e: Error| {
        let msg = format!("line {n}: {}", e.message);
        Error { message: msg, ..e }.detail("line", Value::from(n))
    };
    let text = std::str::from_utf8(line)
        .map_err(|_| at(Error::invalid("jsonl", "jsonl is not valid UTF-8")))?;
    let mut v = parse_json(text, "jsonl").map_err(at)?;
    if let Some(obj) = v.as_object_mut() {
        if let Some(s) = &a.session_id {
            obj.entry("session_id").or_insert(Value::from(s.clone()));
        }
        if let Some(p) = &a.project {
            obj.entry("project").or_insert(Value::from(p.clone()));
        }
    }
    let chunk: NewChunk = service::from_args(v).map_err(at)?;
    service::check_chunk(&chunk).map_err(at)?;
    Ok(chunk)
}

/// Reads a JSONL input line by line (bounded: one line at most 64 MiB), calling `f` with each
/// non-blank line, its 1-based number and the bytes read so far.
fn each_line(r: impl Read, mut f: impl FnMut(&[u8], usize, u64) -> Result<()>) -> Result<()> {
    use std::io::BufRead;
    let mut r = std::io::BufReader::with_capacity(1 << 16, r);
    let mut buf = Vec::new();
    let mut n = 0usize;
    let mut read = 0u64;
    loop {
        buf.clear();
        let got = r
            .by_ref()
            .take(MAX_INPUT_BYTES + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::new(ErrorKind::Unavailable, format!("reading jsonl: {e}")))?;
        if got == 0 {
            return Ok(());
        }
        n += 1;
        read += got as u64;
        if got as u64 > MAX_INPUT_BYTES {
            return Err(
                Error::too_large("jsonl", got, MAX_INPUT_BYTES as usize, "bytes")
                    .detail("line", Value::from(n)),
            );
        }
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        f(line, n, read)?;
    }
}

/// `ingest --jsonl`: streams the file in batches of bounded size, each saved all or nothing.
/// A regular file is read twice: first every line is checked, so a bad line anywhere changes
/// nothing; stdin is checked batch by batch, and an error names the lines already saved.
fn ingest_jsonl(m: &Ctx, a: &IngestArgs, path: &std::path::Path) -> Result<Value> {
    let stdin = path.as_os_str() == "-";
    let open = || -> Result<Box<dyn Read>> {
        if stdin {
            if std::io::stdin().is_terminal() {
                return Err(Error::invalid(
                    "jsonl",
                    "no jsonl given: pass a file, or pipe it to stdin",
                ));
            }
            return Ok(Box::new(std::io::stdin()));
        }
        let f = std::fs::File::open(path)
            .map_err(|e| Error::invalid("jsonl", format!("cannot open {}: {e}", path.display())))?;
        Ok(Box::new(f))
    };
    let total = if stdin {
        0
    } else {
        std::fs::metadata(path).map(|md| md.len()).unwrap_or(0)
    };
    if !stdin {
        let check = crate::progress::Progress::new("checking");
        each_line(open()?, |line, n, read| {
            check.update(read, total);
            jsonl_chunk(a, line, n).map(|_| ())
        })?;
        check.finish();
    }
    let bar = crate::progress::Progress::new("ingest");
    let mut batch: Vec<NewChunk> = Vec::new();
    let mut lines: Vec<usize> = Vec::new();
    let mut bytes = 0usize;
    let mut saved_lines = 0usize;
    let mut batches = 0usize;
    let mut count = 0usize;
    let mut skipped = 0usize;
    let mut skipped_list: Vec<Value> = Vec::new();
    let mut first: Option<Value> = None;
    let mut flush = |batch: &mut Vec<NewChunk>, lines: &mut Vec<usize>| -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let req = IngestRequest {
            chunks: Some(std::mem::take(batch)),
            ..IngestRequest::default()
        };
        let out = call(m, "ingest", &req).map_err(|e| {
            let e = match e.details.get("index").and_then(Value::as_u64) {
                Some(idx) => {
                    let line = lines.get(idx as usize).copied().unwrap_or(0);
                    let msg = format!("line {line}: {}", e.message);
                    Error { message: msg, ..e }.detail("line", Value::from(line))
                }
                None => e,
            };
            if batches > 0 {
                e.detail("saved_batches", Value::from(batches))
                    .detail("saved_through_line", Value::from(saved_lines))
                    .hint("the batches before it are saved; with a source_id on each line, running the same input again adds only what is missing")
            } else {
                e
            }
        })?;
        batches += 1;
        count += out["count"].as_u64().unwrap_or(0) as usize;
        skipped += out["skipped"].as_u64().unwrap_or(0) as usize;
        if let Some(list) = out["skipped_chunks"].as_array() {
            for s in list {
                if skipped_list.len() < LIST_SKIPPED_MAX {
                    let mut s = s.clone();
                    let idx = s["index"].as_u64().unwrap_or(0) as usize;
                    s["line"] = Value::from(lines.get(idx).copied().unwrap_or(0));
                    if let Some(o) = s.as_object_mut() {
                        o.remove("index");
                    }
                    skipped_list.push(s);
                }
            }
        }
        saved_lines = lines.last().copied().unwrap_or(saved_lines);
        lines.clear();
        if batches == 1 {
            first = Some(out);
        }
        Ok(())
    };
    each_line(open()?, |line, n, read| {
        let chunk = jsonl_chunk(a, line, n)?;
        bytes += chunk.content.len();
        batch.push(chunk);
        lines.push(n);
        if batch.len() >= JSONL_BATCH_CHUNKS || bytes >= JSONL_BATCH_BYTES {
            flush(&mut batch, &mut lines)?;
            bytes = 0;
        }
        bar.update(read, total);
        Ok(())
    })?;
    flush(&mut batch, &mut lines)?;
    bar.finish();
    if batches == 0 {
        return Err(Error::invalid(
            "chunks",
            "nothing to ingest: the jsonl input has no chunks",
        ));
    }
    if batches == 1 {
        // One batch: the engine's own answer, with every chunk.
        let mut out = first.unwrap_or(Value::Null);
        out["skipped_chunks"] = Value::from(skipped_list);
        return Ok(out);
    }
    Ok(json!({
        "ok": true,
        "count": count,
        "skipped": skipped,
        "skipped_chunks": skipped_list,
        "batches": batches,
        "lines": saved_lines,
    }))
}

/// The operation table as JSON, with each CLI command's arguments as clap parses them (the
/// field each fills, as a flag or by position).
fn ops_table() -> Value {
    use clap::CommandFactory;
    let root = Cli::command();
    let list: Vec<Value> = ops::table()
        .iter()
        .map(|op| {
            let cli_args: Option<Value> = op.cli.and_then(|c| root.find_subcommand(c)).map(|sub| {
                let mut positional = Vec::new();
                let mut flags = serde_json::Map::new();
                for a in sub.get_arguments() {
                    let id = a.get_id().as_str().to_string();
                    if id == "dir" || id == "device" || id == "help" {
                        continue;
                    }
                    match a.get_long() {
                        Some(l) => {
                            flags.insert(id, json!(format!("--{l}")));
                        }
                        None if a.is_positional() => positional.push(json!(id)),
                        None => {}
                    }
                }
                json!({"command": sub.get_name(), "positional": positional, "flags": flags})
            });
            json!({
                "name": op.name,
                "summary": op.summary,
                "cli": cli_args,
                "mcp": op.mcp.map(|t| json!({"tool": t.name, "profile": format!("{:?}", t.profile).to_lowercase()})),
                "rest": op.rest.map(|r| json!({"method": format!("{:?}", r.method).to_uppercase(), "path": r.path})),
                "read_only": op.read_only,
                "destructive": op.destructive,
                "idempotent": op.idempotent,
                "examples": (op.examples)().into_iter().map(|(n, v)| json!({"name": n, "args": v})).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "operations": list })
}

/// The store and the device a command acts as (the configured one, under the config file's
/// access-control list).
struct Ctx<'a> {
    memdir: &'a Memdir,
    caller: memdir_engine::acl::Caller,
}

impl std::ops::Deref for Ctx<'_> {
    type Target = Memdir;
    fn deref(&self) -> &Memdir {
        self.memdir
    }
}

/// Runs an operation of the table with a typed request, as every surface does.
fn call<T: serde::Serialize>(m: &Ctx, name: &str, req: &T) -> Result<Value> {
    let op = ops::find(name).ok_or_else(|| Error::internal(format!("no operation {name}")))?;
    let args = serde_json::to_value(req)
        .map_err(|e| Error::internal(format!("the {name} request did not serialize: {e}")))?;
    ops::call(m.memdir, &m.caller, op, args)
}

/// What a command prints on stdout.
pub enum Output {
    Json(Value),
    /// The result of an operation of the table (by name): JSON, or text for people.
    Op(&'static str, Value),
    Text(String),
    Nothing,
}

impl Output {
    /// The text to print on stdout.
    pub fn text(self, p: Printing) -> String {
        let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default() + "\n";
        match self {
            Output::Op(op, v) if p.human => {
                crate::human::render(op, &v, crate::human::Style { color: p.color_out })
            }
            Output::Op(_, v) | Output::Json(v) => pretty(&v),
            Output::Text(t) => t,
            Output::Nothing => String::new(),
        }
    }
}

/// The completion script for `shell`, from the same definitions as the parser.
fn completions(shell: &str) -> Result<String> {
    use clap::CommandFactory;
    use clap_complete::Shell;
    let sh = match shell {
        "bash" => Shell::Bash,
        "zsh" => Shell::Zsh,
        "fish" => Shell::Fish,
        "powershell" => Shell::PowerShell,
        "elvish" => Shell::Elvish,
        other => {
            return Err(Error::invalid(
                "shell",
                format!("no completions for {other:?}"),
            ));
        }
    };
    let mut buf = Vec::new();
    clap_complete::generate(sh, &mut Cli::command(), "memdir", &mut buf);
    String::from_utf8(buf).map_err(|e| Error::internal(format!("completions: {e}")))
}

/// The man page of `cmd` in roff.
fn man_page(cmd: clap::Command) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd)
        .source(format!("memdir {}", env!("CARGO_PKG_VERSION")))
        .render(&mut buf)
        .map_err(|e| Error::internal(format!("man page: {e}")))?;
    Ok(buf)
}

/// `memdir man`: the page on stdout, or every command's page written into a directory.
fn man(out: Option<&std::path::Path>) -> Result<(Output, i32)> {
    use clap::CommandFactory;
    let root = Cli::command();
    let Some(dir) = out else {
        let page = String::from_utf8(man_page(root)?)
            .map_err(|e| Error::internal(format!("man page: {e}")))?;
        return Ok((Output::Text(page), 0));
    };
    std::fs::create_dir_all(dir).map_err(|e| {
        Error::new(
            ErrorKind::Unavailable,
            format!("cannot create {}: {e}", dir.display()),
        )
    })?;
    let mut written = Vec::new();
    let mut pages = vec![("memdir.1".to_string(), root.clone())];
    for sub in root.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("memdir-{}", sub.get_name());
        pages.push((format!("{name}.1"), sub.clone().name(name.clone())));
    }
    for (file, cmd) in pages {
        let path = dir.join(&file);
        std::fs::write(&path, man_page(cmd)?).map_err(|e| {
            Error::new(
                ErrorKind::Unavailable,
                format!("cannot write {}: {e}", path.display()),
            )
        })?;
        written.push(path.display().to_string());
    }
    Ok((Output::Json(json!({ "written": written })), 0))
}

/// Asks a person on a terminal to confirm `question` (y/N); without a terminal, refuses with
/// the hint to pass --yes. `what` says what would happen.
fn confirm(question: &str, what: &str) -> Result<()> {
    let refuse = |why: &str| {
        Error::invalid("yes", format!("{what}; {why}, so nothing was done"))
            .hint("pass --yes to do it anyway, or name one target")
    };
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Err(refuse(
            "it needs --yes when no one is at a terminal to confirm",
        ));
    }
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| Error::new(ErrorKind::Unavailable, format!("reading the answer: {e}")))?;
    match answer.trim().to_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(refuse("it was not confirmed")),
    }
}

/// The operation of the table a command runs, if it runs one.
fn op_of(c: &Command) -> Option<&'static str> {
    Some(match c {
        Command::Init => "init",
        Command::Status => "status",
        Command::Ingest(_) => "ingest",
        Command::Fetch(_) => "fetch",
        Command::Overview(_) => "overview",
        Command::Read(_) => "read",
        Command::Write { .. } => "write",
        Command::Append { .. } => "append",
        Command::List => "list",
        Command::Delete(_) => "delete",
        Command::History(_) => "history",
        Command::Diff(_) => "diff",
        Command::Restore(_) => "restore",
        Command::Compact(_) => "compact",
        Command::Context(_) => "context",
        Command::Delta(_) => "delta",
        Command::VerifyStore => "verify_store",
        Command::Search(_) => "search",
        Command::Reindex => "reindex",
        Command::Import(_) => "import",
        Command::Forget { .. } => "forget",
        Command::Snapshot(_) => "snapshot",
        Command::RestoreSnapshot(_) => "restore_snapshot",
        Command::Sync(_) => "sync",
        Command::Resolve(_) => "resolve",
        Command::Embed => "embed",
        Command::Models(_) => "models",
        _ => return None,
    })
}

/// `config --client`: the registration snippet, or its command run or printed.
fn register(
    args: &ConfigArgs,
    client: &str,
    dir: Option<&std::path::Path>,
) -> Result<(Output, i32)> {
    // The client launches memdir from a directory of its own: pin the store by its full path.
    let dir = dir
        .map(|d| {
            std::path::absolute(d).map_err(|e| {
                Error::invalid("dir", format!("cannot make {} absolute: {e}", d.display()))
            })
        })
        .transpose()?;
    let reg = crate::client::registration(client, &args.command, dir.as_deref())?;
    if !args.setup {
        return Ok((Output::Text(reg.snippet), 0));
    }
    let Some(cmd) = reg.command else {
        return Err(Error::invalid(
            "setup",
            format!(
                "{client} has no registration command: add this to {}:\n{}",
                reg.file.unwrap_or("its configuration"),
                reg.snippet
            ),
        ));
    };
    if args.dry_run {
        return Ok((Output::Text(crate::client::shell_line(&cmd) + "\n"), 0));
    }
    let status = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .status()
        .map_err(|e| {
            Error::new(
                ErrorKind::Unavailable,
                format!("could not run {}: {e}", cmd[0]),
            )
            .hint(format!(
                "run it by hand: {}",
                crate::client::shell_line(&cmd)
            ))
        })?;
    Ok((Output::Nothing, status.code().unwrap_or(1)))
}

/// Largest `hook.log` before it is rotated to `hook.log.1` (one old file is kept).
const HOOK_LOG_BYTES: u64 = 256 * 1024;

/// Appends a line to the hook log, `<dir>/.memdir/hook.log` (rotated at
/// [`HOOK_LOG_BYTES`]); without a memory directory, the line goes to stderr. Never fails.
fn hook_log(dir: Option<&std::path::Path>, line: &str) {
    let line = format!(
        "{} {}\n",
        memdir_store::clock::rfc3339(memdir_store::clock::now_ms()),
        line.replace('\n', " ")
    );
    let Some(dir) = dir else {
        eprint!("memdir hook: {line}");
        return;
    };
    let meta = dir.join(".memdir");
    let path = meta.join("hook.log");
    let written = std::fs::create_dir_all(&meta).and_then(|_| {
        if std::fs::metadata(&path).is_ok_and(|m| m.len() > HOOK_LOG_BYTES) {
            std::fs::rename(&path, meta.join("hook.log.1"))?;
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        f.write_all(line.as_bytes())
    });
    if written.is_err() {
        eprint!("memdir hook: {line}");
    }
}

/// Reads the hook event from stdin, waiting at most `wait` for it to end.
fn hook_input(wait: std::time::Duration) -> Result<Vec<u8>> {
    if std::io::stdin().is_terminal() {
        return Err(Error::invalid(
            "event",
            "the hook reads its event (JSON) from stdin; none was piped",
        ));
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let r = std::io::stdin()
            .take(memdir_engine::import::hook::MAX_EVENT_BYTES as u64 + 1)
            .read_to_end(&mut buf)
            .map(|_| buf);
        let _ = tx.send(r);
    });
    match rx.recv_timeout(wait) {
        Ok(Ok(buf)) if buf.len() > memdir_engine::import::hook::MAX_EVENT_BYTES => {
            Err(Error::too_large(
                "event",
                buf.len(),
                memdir_engine::import::hook::MAX_EVENT_BYTES,
                "bytes",
            ))
        }
        Ok(Ok(buf)) => Ok(buf),
        Ok(Err(e)) => Err(Error::new(
            ErrorKind::Unavailable,
            format!("reading the hook event from stdin: {e}"),
        )),
        Err(_) => Err(Error::invalid(
            "event",
            format!(
                "no complete hook event on stdin within {} ms",
                wait.as_millis()
            ),
        )),
    }
}

/// `memdir hook AGENT`: captures what the agent's transcript holds beyond the saved cursor.
/// It must never fail or hold up the agent: every problem is a line in the hook log, the exit
/// code is always 0, and the time is bounded by `timeout_ms`.
fn hook(cli: &Cli, agent: &str, arg: Option<&str>, timeout_ms: u64) {
    let start = std::time::Instant::now();
    let budget = std::time::Duration::from_millis(timeout_ms);
    let cfg = match Config::load(&flags(cli), &config::process_env) {
        Ok(c) => c,
        Err(e) => {
            hook_log(
                cli.dir.as_deref(),
                &format!("{agent}: configuration: {}", e.message),
            );
            return;
        }
    };
    let dir = cfg.dir().ok().map(|d| d.value.clone());
    let log = |what: &str| hook_log(dir.as_deref(), &format!("{agent}: {what}"));
    let result = (|| -> Result<memdir_engine::import::hook::Capture> {
        // The agent writes the event at once; a little time is allowed even on a tiny budget.
        let input = match arg {
            Some(a) => a.as_bytes().to_vec(),
            None => hook_input((budget / 2).max(std::time::Duration::from_millis(500)))?,
        };
        let Some(dir) = &dir else {
            return Err(Error::invalid("dir", "no memory directory is configured"));
        };
        let mut settings = cfg.settings()?;
        // A busy store is given up on quickly: the next event resumes from the saved cursor.
        settings.lock_timeout = settings.lock_timeout.min(budget / 10);
        let m = Memdir::open_lazy_with(dir.clone(), settings);
        // Access as for `import` (the same chunks, the same writes).
        let caller = cfg.caller();
        let req = api::ImportRequest {
            format: agent.to_string(),
            path: None,
            dry_run: false,
        };
        caller.admit(&memdir_engine::acl::Guarded::need(&req), &|| Ok(Vec::new()))?;
        // Codex and opencode: the event names a session in the agent's own directory.
        let agent_dir = |what: &str, var: &str| {
            memdir_engine::import::default_path(agent, &config::process_env).ok_or_else(|| {
                Error::invalid("event", format!("no {what} directory: set {var} or HOME"))
            })
        };
        let run = |name: String, f: &dyn Fn() -> Result<memdir_engine::import::hook::Capture>| {
            service::as_actor(&caller.device, f).map_err(|e| e.detail("event", Value::from(name)))
        };
        if agent == "opencode" {
            let event = memdir_engine::import::hook::parse_opencode_event(&input)?;
            let root = agent_dir("opencode data", "XDG_DATA_HOME")?;
            return run(event.name.clone(), &|| {
                memdir_engine::import::hook::opencode(&m, &root, &event)
            });
        }
        if agent == "codex" {
            let event = memdir_engine::import::hook::parse_codex_event(&input)?;
            let home = agent_dir("Codex", "CODEX_HOME")?;
            return run(event.name.clone(), &|| {
                memdir_engine::import::hook::codex(&m, &home, &event)
            });
        }
        let event = memdir_engine::import::hook::parse_event(&input)?;
        let deadline = start + budget / 2;
        run(event.name.clone(), &|| {
            memdir_engine::import::hook::claude_code(&m, &event, deadline)
        })
    })();
    match result {
        Ok(c) if c.stopped_early => log(&format!(
            "{} {}: stopped at its deadline after byte {} of the transcript ({} chunks saved); the next event goes on",
            c.event, c.transcript, c.to, c.chunks
        )),
        Ok(_) => {}
        Err(e) => {
            let event = e
                .details
                .get("event")
                .and_then(Value::as_str)
                .map(|n| format!("{n}: "))
                .unwrap_or_default();
            log(&format!("{event}{} ({})", e.message, e.kind.code()))
        }
    }
}

/// `[sync] interval_ms` under `memdir serve`: a thread that syncs with the configured remote
/// every interval, in one server per memory directory (the one holding the syncer lock; the
/// others try again each interval, so one takes over when it stops). Each outcome is recorded
/// for `status`; a problem is also a line on stderr. Nothing is synced at start.
fn spawn_syncer(cfg: &Config, dir: std::path::PathBuf, settings: service::Settings) {
    let every = settings.sync_interval;
    if every.is_zero() {
        return;
    }
    let caller = cfg.caller();
    std::thread::spawn(move || {
        let m = Memdir::open_lazy_with(dir, settings);
        let mut holder = None;
        loop {
            std::thread::sleep(every);
            if holder.is_none() {
                holder = m.syncer_lock().ok();
                if holder.is_none() {
                    continue;
                }
            }
            let req = api::SyncRequest::default();
            let outcome = service::as_actor(&caller.device, || {
                let token = memdir_engine::ops::sync_token(&m, &caller, &req)?;
                m.sync_recorded(&req, token, None, "periodic")
            });
            match outcome {
                Ok(r) if r.push_pending => eprintln!(
                    "memdir: periodic sync with {}: push pending: {}",
                    r.remote,
                    r.offline.unwrap_or_default()
                ),
                Ok(r) if !r.reported.is_empty() => eprintln!(
                    "memdir: periodic sync with {}: {} problems reported (memdir status)",
                    r.remote,
                    r.reported.len()
                ),
                Ok(_) => {}
                Err(e) => eprintln!("memdir: periodic sync: {}", e.message),
            }
        }
    });
}

/// `config --client claude|codex --hooks`: the agent's settings with memdir's capture hook
/// (Claude Code's settings.json hooks, Codex's config.toml `notify`), written in place (or,
/// with --dry-run, printed).
fn install_hooks(
    args: &ConfigArgs,
    client: &str,
    dir: Option<&std::path::Path>,
) -> Result<(Output, i32)> {
    let (agent, file) = match client {
        "claude" => ("claude-code", "settings.json"),
        "codex" => ("codex", "config.toml"),
        "opencode" => ("opencode", "plugins/memdir-capture.js"),
        _ => {
            return Err(Error::invalid(
                "hooks",
                format!(
                    "--hooks installs capture hooks for claude, codex and opencode; {client} has no hook memdir can install"
                ),
            ));
        }
    };
    let dir = dir
        .map(|d| {
            std::path::absolute(d).map_err(|e| {
                Error::invalid("dir", format!("cannot make {} absolute: {e}", d.display()))
            })
        })
        .transpose()?;
    let env = config::process_env;
    // opencode reads plugins from its config directory, not its data directory.
    let root = if agent == "opencode" {
        config::config_home(&env).map(|c| c.join("opencode"))
    } else {
        memdir_engine::import::default_path(agent, &env)
    };
    let Some(root) = root else {
        let var = match agent {
            "codex" => "CODEX_HOME",
            "opencode" => "XDG_CONFIG_HOME",
            _ => "CLAUDE_CONFIG_DIR",
        };
        return Err(Error::invalid(
            "hooks",
            format!("no {agent} directory: set {var} or HOME"),
        ));
    };
    let path = root.join(file);
    let io = |op: &str, p: &std::path::Path, e: std::io::Error| {
        Error::new(
            ErrorKind::Unavailable,
            format!("cannot {op} {}: {e}", p.display()),
        )
    };
    let existing = match std::fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io("read", &path, e)),
    };
    let (merged, command, events) = if agent == "opencode" {
        let argv = crate::client::hook_argv("opencode", &args.command, dir.as_deref());
        let merged = crate::client::opencode_plugin(existing.as_deref(), &argv);
        (merged, json!(argv), json!(["session.idle"]))
    } else if agent == "codex" {
        let argv = crate::client::hook_argv("codex", &args.command, dir.as_deref());
        let merged = crate::client::codex_notify(existing.as_deref(), &argv);
        (merged, json!(argv), json!(["agent-turn-complete"]))
    } else {
        let command = crate::client::hook_command(&args.command, dir.as_deref());
        let merged = crate::client::claude_hooks(existing.as_deref(), &command);
        (merged, json!(command), json!(crate::client::HOOK_EVENTS))
    };
    let merged = merged.map_err(|e| e.detail("file", Value::from(path.display().to_string())))?;
    if args.dry_run {
        return Ok((Output::Text(merged.text), 0));
    }
    if !merged.changed {
        return Ok((
            Output::Json(
                json!({"path": path.display().to_string(), "changed": false, "command": command}),
            ),
            0,
        ));
    }
    let parent = path.parent().unwrap_or(&root).to_path_buf();
    std::fs::create_dir_all(&parent).map_err(|e| io("create", &parent, e))?;
    // The settings appear whole or not at all: written beside the file, then renamed over it.
    let tmp = root.join(format!("{file}.memdir-tmp"));
    std::fs::write(&tmp, &merged.text).map_err(|e| io("write", &tmp, e))?;
    if let Err(e) = std::fs::rename(&tmp, &path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("write", &path, e));
    }
    Ok((
        Output::Json(json!({
            "path": path.display().to_string(),
            "changed": true,
            "command": command,
            "events": events,
        })),
        0,
    ))
}

/// `config init`: writes the commented example to the config file's location.
fn config_init(force: bool) -> Result<(Output, i32)> {
    let location = config::file_location(&config::process_env);
    let Some(path) = location.path else {
        return Err(Error::invalid(
            "config",
            "no location for the config file: set MEMDIR_CONFIG or HOME",
        ));
    };
    let existed = std::fs::symlink_metadata(&path).is_ok();
    if existed && !force {
        return Err(Error::new(
            ErrorKind::Conflict,
            format!("{} exists; it was left as it is", path.display()),
        )
        .detail("file", Value::from(path.display().to_string()))
        .hint("pass --force to replace it with the example"));
    }
    let io = |op: &str, p: &std::path::Path, e: std::io::Error| {
        Error::new(
            ErrorKind::Unavailable,
            format!("cannot {op} {}: {e}", p.display()),
        )
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| io("create", parent, e))?;
    }
    // The file appears whole or not at all: written beside it, then renamed over it.
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, config::EXAMPLE).map_err(|e| io("write", &tmp, e))?;
    let placed = if force {
        std::fs::rename(&tmp, &path)
    } else {
        // Without --force a file created meanwhile is not replaced either.
        std::fs::hard_link(&tmp, &path).and_then(|_| std::fs::remove_file(&tmp))
    };
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("write", &path, e));
    }
    Ok((
        Output::Json(json!({
            "path": path.display().to_string(),
            "source": location.source.label(),
            "replaced": existed,
        })),
        0,
    ))
}

/// The flags of `cli` that take part in the configuration's precedence.
fn flags(cli: &Cli) -> config::Flags {
    let mut f = config::Flags {
        dir: cli.dir.clone(),
        device: cli.device.clone(),
        ..config::Flags::default()
    };
    if let Command::Serve {
        host,
        port,
        body_limit,
        tools,
        ..
    } = &cli.command
    {
        f.host = host.clone();
        f.port = *port;
        f.body_limit = *body_limit;
        f.tools = tools.clone();
    }
    if let Command::Ui { port, .. } = &cli.command {
        // Always loopback: the viewer is for the person at this machine.
        f.host = Some("127.0.0.1".to_string());
        f.port = Some(port.unwrap_or(0));
    }
    f
}

/// The line `serve` writes at start: which memory directory it serves, and why that one.
fn serving_line(dir: &config::Setting<PathBuf>) -> String {
    format!(
        "memdir: memory directory {} ({})",
        dir.value.display(),
        dir.source.describe()
    )
}

#[cfg(feature = "http")]
fn serve_http(
    cfg: &Config,
    memdir: Memdir,
    transport: &str,
    profile: crate::mcp::Profile,
    token: Option<String>,
    on_listening: impl FnOnce(&str),
) -> Result<()> {
    use crate::http::{Limits, Options, Transport, parse_transport, serve};
    let Some(t) = parse_transport(transport)? else {
        return Err(Error::internal("invariant: stdio is served by the caller"));
    };
    let dir = cfg.dir()?;
    let h = &cfg.http;
    serve(
        memdir,
        Options {
            transport: t,
            host: h.host.value.clone(),
            port: h
                .port
                .value
                .unwrap_or(if t == Transport::Rest { 8787 } else { 8000 }),
            token,
            device_tokens: cfg.http_tokens(&config::process_env)?,
            device: cfg.device.value.clone(),
            acl: cfg.acl.clone(),
            profile,
            body_limit: h.body_limit.value,
            max_concurrency: 64,
            timeout: std::time::Duration::from_secs(30),
            limits: Limits::from_config(h),
        },
        |url| {
            eprintln!("{}", serving_line(dir));
            eprintln!("memdir: listening on {url}");
            on_listening(url);
        },
    )
}

/// What `memdir ui` does once its server listens: prints the viewer's URL on stdout and, unless
/// told not to, hands it to the desktop's opener (`open` on macOS, `xdg-open` elsewhere). A
/// missing opener is a note on stderr, not an error: the URL is printed either way.
fn open_viewer(url: &str, open: bool) {
    let url = format!("{url}/");
    println!("{url}");
    let _ = std::io::Write::flush(&mut std::io::stdout());
    if !open {
        return;
    }
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    match std::process::Command::new(opener)
        .arg(&url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        // Reaped on its own thread, so the server never waits for the browser.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(e) => eprintln!("memdir: could not run {opener} ({e}); open {url} yourself"),
    }
}

#[cfg(not(feature = "http"))]
fn serve_http(
    _: &Config,
    _: Memdir,
    transport: &str,
    _: crate::mcp::Profile,
    _: Option<String>,
    _: impl FnOnce(&str),
) -> Result<()> {
    Err(Error::invalid(
        "transport",
        format!("transport {transport:?} needs a build with the `http` feature"),
    ))
}

/// Parses the command line. A value that is not what its flag takes (`--limit five`,
/// `--limit -1`, `--limit 5.5`) is an `invalid` error naming the field (exit 3, JSON), as on
/// every other surface; other usage errors (an unknown flag, a missing argument) and `--help`
/// stay clap's. Returns the exit code to leave with when there is nothing to run.
pub fn parse() -> std::result::Result<Cli, i32> {
    match Cli::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::ValueValidation | clap::error::ErrorKind::InvalidValue
            ) =>
        {
            let arg = e
                .get(clap::error::ContextKind::InvalidArg)
                .map(|a| a.to_string())
                .unwrap_or_default();
            let field = arg
                .trim_start_matches('-')
                .split([' ', '='])
                .next()
                .unwrap_or("")
                .replace('-', "_");
            let value = e
                .get(clap::error::ContextKind::InvalidValue)
                .map(|v| v.to_string())
                .unwrap_or_default();
            let field = if field.is_empty() {
                "argument".to_string()
            } else {
                field
            };
            let why = std::error::Error::source(&e)
                .map(|s| s.to_string())
                .unwrap_or_else(|| e.kind().to_string());
            // The command line did not parse: its own --json is read from the words.
            let json = std::env::args().any(|w| w == "--json");
            let printing = Printing::decide(
                if json { "json" } else { "auto" },
                "auto",
                false,
                std::io::stderr().is_terminal(),
                config::process_env("NO_COLOR").is_some(),
                config::process_env("TERM").as_deref() == Some("dumb"),
            );
            Err(report_error(
                &Error::invalid(&field, format!("invalid value {value:?} for {arg}: {why}")),
                printing,
            ))
        }
        Err(e) => e.exit(),
    }
}

/// Runs one command; returns what to print and the exit code.
///
/// The configuration is resolved first, once, for every command: a bad config file or
/// variable, or a missing file that `MEMDIR_REQUIRE_CONFIG=1` requires, stops every command
/// before it changes anything.
pub fn run(cli: Cli) -> Result<(Output, i32)> {
    let env = config::process_env;
    if let Command::Hook {
        agent,
        event,
        timeout_ms,
    } = &cli.command
    {
        hook(&cli, agent, event.as_deref(), *timeout_ms);
        return Ok((Output::Nothing, 0));
    }
    if let Command::Config(ConfigArgs {
        action: Some(ConfigAction::Init { force }),
        ..
    }) = &cli.command
    {
        // `init --force` may replace a broken file, so it reads none, unless a deployment
        // requires one: then it fails closed like every command.
        if config::required(&env)? {
            Config::load(&flags(&cli), &env)?;
        }
        return config_init(*force);
    }
    let cfg = Config::load(&flags(&cli), &env)?;
    if let Command::Config(args) = &cli.command {
        return match (&args.action, &args.client) {
            (Some(ConfigAction::Show), _) => Ok((Output::Json(cfg.show()), 0)),
            (Some(ConfigAction::Init { .. }), _) => Err(Error::internal(
                "invariant: config init is handled before the configuration is loaded",
            )),
            (None, Some(client)) if args.hooks => {
                install_hooks(args, client, cli.dir.as_deref().or(Some(&cfg.dir()?.value)))
            }
            (None, Some(client)) => register(args, client, cli.dir.as_deref()),
            (None, None) => Err(Error::invalid(
                "client",
                "config needs `show`, `init` or --client NAME",
            )),
        };
    }
    if let Command::Openapi = cli.command {
        return Ok((Output::Json(crate::openapi::document()), 0));
    }
    if let Command::Ops = cli.command {
        return Ok((Output::Json(ops_table()), 0));
    }
    if let Command::Completions { shell } = &cli.command {
        return Ok((Output::Text(completions(shell)?), 0));
    }
    if let Command::Man { out } = &cli.command {
        return man(out.as_deref());
    }
    let dir = cfg.dir()?;
    let settings = cfg.settings()?;
    if let Command::Serve {
        transport, token, ..
    } = &cli.command
    {
        let profile = crate::mcp::Profile::parse(&cfg.tools.value)?;
        // A server embeds what searches have not, in the background, and keeps the index's
        // commits between durable ones in its memory.
        let settings = memdir_engine::service::Settings {
            background_embedding: true,
            index_tail_in_memory: true,
            ..settings
        };
        // The syncer's own store handle catches up on disk: only the server's keeps memory.
        spawn_syncer(
            &cfg,
            dir.value.clone(),
            memdir_engine::service::Settings {
                index_tail_in_memory: false,
                ..settings.clone()
            },
        );
        let memdir = Memdir::open_lazy_with(dir.value.clone(), settings);
        if transport == "stdio" {
            eprintln!("{}", serving_line(dir));
            crate::mcp::serve_stdio(memdir, profile, cfg.caller())?;
        } else {
            serve_http(&cfg, memdir, transport, profile, token.clone(), |_| {})?;
        }
        return Ok((Output::Nothing, 0));
    }
    if let Command::Ui { no_open, token, .. } = &cli.command {
        let profile = crate::mcp::Profile::parse(&cfg.tools.value)?;
        let settings = memdir_engine::service::Settings {
            index_tail_in_memory: true,
            ..settings
        };
        let memdir = Memdir::open_lazy_with(dir.value.clone(), settings);
        let open = !*no_open;
        serve_http(&cfg, memdir, "http", profile, token.clone(), |url| {
            open_viewer(url, open)
        })?;
        return Ok((Output::Nothing, 0));
    }
    if let Command::VerifyStore = cli.command {
        // Read-only: no recovery, no adoption; report the store exactly as found.
        let m = Memdir::open_lazy_with(dir.value.clone(), settings);
        let ctx = Ctx {
            memdir: &m,
            caller: cfg.caller(),
        };
        let report = call(&ctx, "verify_store", &api::Empty {})?;
        let code = if report["ok"] == json!(true) { 0 } else { 1 };
        return Ok((Output::Op("verify_store", report), code));
    }
    let m = Memdir::open_with(dir.value.clone(), settings)?;
    let ctx = Ctx {
        memdir: &m,
        caller: cfg.caller(),
    };
    if let Command::Export(r) = &cli.command {
        // Without --output, the export is its text, printed as it is.
        let mut v = call(&ctx, "export", r)?;
        return Ok(match v.get_mut("text").map(Value::take) {
            Some(Value::String(t)) => (Output::Text(t), 0),
            _ => (Output::Json(v), 0),
        });
    }
    let op = op_of(&cli.command);
    let out = run_command(&ctx, cli.command);
    let notices = m.notices();
    match out {
        // Beside a result, what memdir repaired on its own is a line on stderr; with an error,
        // it goes into the error's JSON, so stderr stays one JSON document.
        Ok(out) => {
            for n in &notices {
                eprintln!("memdir: {n}");
            }
            Ok((
                match op {
                    Some(op) => Output::Op(op, out),
                    None => Output::Json(out),
                },
                0,
            ))
        }
        Err(e) if !notices.is_empty() => Err(e.detail("notices", json!(notices))),
        Err(e) => Err(e),
    }
}

fn run_command(m: &Ctx, command: Command) -> Result<Value> {
    let out = match command {
        Command::Init => call(m, "init", &api::Empty {})?,
        Command::Status => call(m, "status", &api::Empty {})?,
        Command::Ingest(a) => match &a.jsonl {
            Some(path) => ingest_jsonl(m, &a, path)?,
            None => call(m, "ingest", &ingest_request(&a)?)?,
        },
        Command::Import(r) => with_progress(m, "import", &r, |show| {
            memdir_engine::import::run(m, &r, &config::process_env, Some(show))
        })?,
        Command::Fetch(r) => call(m, "fetch", &r)?,
        Command::Overview(r) => call(m, "overview", &r)?,
        Command::Read(r) => call(m, "read", &r)?,
        Command::Write {
            category,
            input,
            merge,
            expected_hash,
            reason,
        } => call(
            m,
            "write",
            &WriteRequest {
                category,
                data: input.value()?,
                reason,
                expected_hash,
                merge,
            },
        )?,
        Command::Append {
            category,
            input,
            max_entries,
            max_age_days,
            reason,
        } => call(
            m,
            "append",
            &AppendRequest {
                category,
                data: input.value()?,
                max_entries,
                max_age_days,
                reason,
            },
        )?,
        Command::List => call(m, "list", &api::Empty {})?,
        Command::Delete(r) => call(m, "delete", &r)?,
        Command::History(r) => call(m, "history", &r)?,
        Command::Diff(r) => call(m, "diff", &r)?,
        Command::Restore(r) => call(m, "restore", &r)?,
        Command::Compact(CompactArgs { req, yes }) => {
            if req.category.is_none() && !yes {
                confirm(
                    &format!(
                        "Trim the history of every category to its newest {} versions?",
                        req.keep_versions
                    ),
                    "compact with no category trims every category's history",
                )?;
            }
            call(m, "compact", &req)?
        }
        Command::Context(r) => call(m, "context", &r)?,
        Command::Delta(r) => call(m, "delta", &r)?,
        Command::Search(r) => call(m, "search", &r)?,
        Command::Sync(r) => with_progress(m, "sync", &r, |show| {
            m.sync_with(
                &r,
                memdir_engine::ops::sync_token(m, &m.caller, &r)?,
                Some(show),
            )
        })?,
        Command::Resolve(r) => call(m, "resolve", &r)?,
        Command::Forget { req, yes } => forget(m, req, yes)?,
        Command::Snapshot(r) => with_progress(m, "snapshot", &r, |show| {
            m.take_snapshot_with(&r, Some(show))
        })?,
        Command::RestoreSnapshot(r) => call(m, "restore_snapshot", &r)?,
        Command::Embed => {
            with_progress(m, "embed", &api::Empty {}, |show| m.embed_with(Some(show)))?
        }
        Command::Models(r) => call(m, "models", &r)?,
        Command::VerifyStore
        | Command::Export(_)
        | Command::Openapi
        | Command::Ops
        | Command::Completions { .. }
        | Command::Man { .. }
        | Command::Serve { .. }
        | Command::Ui { .. }
        | Command::Config(_)
        | Command::Hook { .. } => {
            return Err(Error::internal(
                "invariant: run handles this command itself",
            ));
        }
        Command::Reindex => {
            let progress = crate::progress::Progress::new("reindex");
            let bar = |done: u64, total: u64| progress.update(done, total);
            // The one direct engine call of a surface: the progress bar needs a callback.
            let out = m.reindex(Some(&bar));
            progress.finish();
            serde_json::to_value(out?)
                .map_err(|e| Error::internal(format!("reindex result: {e}")))?
        }
    };
    Ok(out)
}

/// A long job with a progress bar on a terminal: a direct engine call (the bar needs a
/// callback) with access control and the caller's device as the actor, as `ops::call` applies
/// them. Only for operations whose responses hide nothing.
fn with_progress<R: memdir_engine::acl::Guarded, T: serde::Serialize>(
    m: &Ctx,
    label: &str,
    req: &R,
    job: impl FnOnce(&dyn Fn(u64, u64)) -> Result<T>,
) -> Result<Value> {
    m.caller.admit(&req.need(), &|| Ok(Vec::new()))?;
    let bar = crate::progress::Progress::new(label);
    let show = |done: u64, total: u64| bar.update(done, total);
    let out = service::as_actor(&m.caller.device, || job(&show));
    bar.finish();
    serde_json::to_value(out?).map_err(|e| Error::internal(format!("{label} result: {e}")))
}

/// `forget`: with --yes or --dry-run as asked; on a terminal, after showing what would go and
/// a yes; otherwise refused. What was shown is what goes: a query's hits are forgotten by
/// their chunk ids, not by running the query again.
fn forget(m: &Ctx, req: api::ForgetRequest, yes: bool) -> Result<Value> {
    if req.dry_run || yes {
        return call(m, "forget", &req);
    }
    let tty = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !tty {
        return Err(Error::invalid(
            "yes",
            "forget removes memories for good and there is no terminal to ask on: pass --yes (or --dry-run to see what would go); nothing was forgotten",
        ));
    }
    let plan = call(
        m,
        "forget",
        &api::ForgetRequest {
            dry_run: true,
            ..req.clone()
        },
    )?;
    let plan: api::ForgetResponse = service::from_args(plan)?;
    if plan.count == 0 {
        return serde_json::to_value(&plan)
            .map_err(|e| Error::internal(format!("forget result: {e}")));
    }
    for c in &plan.chunks {
        eprintln!(
            "  {} #{} ({}): {}",
            c.session_id,
            c.position,
            c.chunk_id,
            c.preview.as_deref().unwrap_or("")
        );
    }
    for v in &plan.versions {
        eprintln!("  {} version {} ({})", v.category, v.version, v.id);
    }
    eprint!("Forget these {}? This cannot be undone [y/N] ", plan.count);
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| Error::new(ErrorKind::Unavailable, format!("reading the answer: {e}")))?;
    if !matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
        return Err(Error::invalid(
            "yes",
            "not confirmed: nothing was forgotten",
        ));
    }
    if !plan.versions.is_empty() {
        return call(m, "forget", &req);
    }
    let mut by_session: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for c in &plan.chunks {
        by_session
            .entry(c.session_id.clone())
            .or_default()
            .push(c.chunk_id.clone());
    }
    let mut done = api::ForgetResponse {
        dry_run: false,
        count: 0,
        chunks: Vec::new(),
        versions: Vec::new(),
    };
    for (session_id, chunk_ids) in by_session {
        let r = call(
            m,
            "forget",
            &api::ForgetRequest {
                session_id: Some(session_id),
                chunk_ids: Some(chunk_ids),
                ..api::ForgetRequest::default()
            },
        )?;
        let r: api::ForgetResponse = service::from_args(r)?;
        done.count += r.count;
        done.chunks.extend(r.chunks);
    }
    serde_json::to_value(&done).map_err(|e| Error::internal(format!("forget result: {e}")))
}

/// Prints an error on stderr (JSON, or one line and its hints for people) and returns its
/// exit code.
pub fn report_error(e: &Error, p: Printing) -> i32 {
    let e = &memdir_engine::ops::for_surface(e.clone(), memdir_engine::ops::Surface::Cli);
    if p.human_errors {
        let notices: Vec<String> = e
            .details
            .get("notices")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|n| n.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let mut hints = e.hints.clone();
        hints.extend(notices.into_iter().map(|n| format!("repaired: {n}")));
        eprint!(
            "{}",
            crate::human::error(
                e.kind.code(),
                &e.message,
                &hints,
                crate::human::Style { color: p.color_err }
            )
        );
    } else {
        eprintln!(
            "{}",
            serde_json::to_string_pretty(&json!({"error": e.to_json()}))
                .unwrap_or_else(|_| e.message.clone())
        );
    }
    e.kind.exit_code()
}

/// The whole command line: parse, run, print. Returns the exit code.
pub fn main() -> i32 {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let printing = Printing::of(&cli);
    let code = match run(cli) {
        Ok((out, code)) => {
            let text = out.text(printing);
            // A reader that went away (`| head`) is not an error worth a panic.
            let mut stdout = std::io::stdout().lock();
            let _ = stdout
                .write_all(text.as_bytes())
                .and_then(|_| stdout.flush());
            code
        }
        Err(e) => report_error(&e, printing),
    };
    // The answer is out; the files replaced meanwhile are freed before the process goes (the
    // reaper's thread would die with it, leaving them to the next startup).
    memdir_store::txn::finish_reaping(std::time::Duration::from_secs(5));
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every option and argument of every command, with no help text.
    fn undocumented(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            let id = a.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            if a.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                out.push(format!("{path} {id}"));
            }
        }
        for sub in cmd.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            let p = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() {
                out.push(format!("{p}: no description"));
            }
            undocumented(sub, &p, out);
        }
    }

    #[test]
    fn every_option_has_help_and_every_command_an_example() {
        use clap::CommandFactory;
        let root = Cli::command();
        let mut missing = Vec::new();
        undocumented(&root, "memdir", &mut missing);
        assert!(
            missing.is_empty(),
            "without help text:\n{}",
            missing.join("\n")
        );
        let mut no_example = Vec::new();
        for sub in root.get_subcommands() {
            let name = sub.get_name();
            if name == "help" {
                continue;
            }
            let after = sub
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            if !after.contains(&format!("memdir {name}")) {
                no_example.push(name.to_string());
            }
        }
        assert!(
            no_example.is_empty(),
            "commands without an example: {no_example:?}"
        );
    }

    #[test]
    fn oversized_integers_are_found_outside_strings() {
        assert_eq!(
            oversized_integer(r#"{"a": 18446744073709551616}"#).as_deref(),
            Some("18446744073709551616")
        );
        assert_eq!(
            oversized_integer(r#"{"a": -9223372036854775809}"#).as_deref(),
            Some("-9223372036854775809")
        );
        assert_eq!(
            oversized_integer(r#"{"a": 18446744073709551615, "b": 1.5e300}"#),
            None
        );
        assert_eq!(
            oversized_integer(r#"{"a": "99999999999999999999\" 1"}"#),
            None
        );
    }
}
