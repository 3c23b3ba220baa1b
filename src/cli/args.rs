//! The command line as clap parses it: the global flags, every subcommand and its arguments
//! (most are the api request types themselves, so a default lives in one place).

use super::*;

pub(super) const AFTER_HELP: &str = "\
Examples:
  memdir init
  memdir ingest --session-id demo --project web --text \"the pool timed out under load\"
  memdir ingest --jsonl chunks.jsonl
  memdir import claude-code --dry-run && memdir import claude-code
  memdir fetch demo --position 0 --limit 20
  memdir overview --days 7
  memdir write base --data '{\"name\": \"Ada\"}' --reason \"first notes\"
  memdir write base --merge --data '{\"editor\": \"helix\"}' --expected-hash 1a2b3c4d5e6f
  memdir append journal --data '{\"event\": \"deployed\"}' --max-entries 500
  memdir read base --fields name,editor
  memdir history base && memdir diff base --from 1 --to 2 && memdir restore base --version 1
  memdir search \"connection pool timeout\" --project web --context 2
  memdir search 'ECONNREFUSED 127.0.0.1:5432' --mode exact
  memdir reindex

The memory directory is --dir, else $MEMDIR_DIR, else `dir` in the config file, else
$XDG_DATA_HOME/memdir (~/.local/share/memdir). The config file is $MEMDIR_CONFIG, else
$XDG_CONFIG_HOME/memdir/config.toml (~/.config/memdir/config.toml); flags win over the
environment, which wins over the file (`memdir config show`). On a terminal results and
errors are printed for people; otherwise, or with --json, results are JSON on stdout and
errors JSON on stderr. A hash (--expected-hash) may be given whole or by its first 12 digits.

Exit codes:
   0  success
   1  verify-store found problems
   2  usage error
   3  invalid input
   4  not found
   5  conflict (expected_hash, kind)
   6  store busy: retry
   7  a file on disk is malformed
   8  unavailable (I/O, disk full)
   9  too large
  10  internal error
  11  denied
  12  forbidden by the access-control list ([acl]); nothing changed";

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
    /// The subcommand's name as typed (`restore-snapshot`): the key of its operation in the
    /// table (`Op::cli`).
    #[arg(skip)]
    pub subcommand: String,
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
        after_help = "Examples:\n  memdir write base --data '{\"name\": \"Ada\"}' --reason \"first notes\"\n  memdir write base --merge --data '{\"editor\": \"helix\", \"shell\": null}' --expected-hash 1a2b3c4d5e6f   # the hash `memdir read` shows\n  memdir write projects --file projects.json"
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
  memdir delete scratch --expected-hash 1a2b3c4d5e6f")]
    Delete(api::DeleteRequest),
    /// Versions of a category, newest first (with --diff-from/--diff-to, also a diff).
    #[command(after_help = "Examples:\n  memdir history base
  memdir history base --limit 5 --diff-from 1 --diff-to 2")]
    History(api::HistoryRequest),
    /// Who set each key of a category: the version, actor, time and reason behind its current
    /// value.
    #[command(after_help = "Examples:\n  memdir blame base
  memdir blame settings --path /editor")]
    Blame(api::BlameRequest),
    /// Unified diff between two versions (default: the newest and its parent).
    #[command(after_help = "Examples:\n  memdir diff base
  memdir diff base --from 1 --to 3")]
    Diff(api::DiffRequest),
    /// Restore an old version as a new version.
    #[command(after_help = "Examples:\n  memdir restore base --version 1
  memdir restore base --version 1 --expected-hash 1a2b3c4d5e6f")]
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
    /// Where the store is and why, who writes, the version, counts and sizes, and the full
    /// check of verify-store in one report (read-only); exit 1 when the check finds problems.
    #[command(after_help = "Examples:\n  memdir doctor\n  memdir doctor --json | jq .checks.ok")]
    Doctor,
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
  memdir search deploy --project web --since 2026-11-01 --context 2
  memdir search redis eviction policy     # the words after search are the query")]
    Search(SearchArgs),
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
    /// Serve memdir: MCP over stdio (what MCP clients launch), or REST or MCP over HTTP.
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
#[command(
    args_conflicts_with_subcommands = true,
    group = clap::ArgGroup::new("acts").args(["setup", "hooks"]).multiple(true)
)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub(super) action: Option<ConfigAction>,
    /// Register with this MCP client: claude, claude-desktop, codex, cursor, gemini, opencode,
    /// vscode, windsurf, zed or generic (with --dir PATH, the server command gets `--dir PATH`)
    #[arg(long)]
    pub(super) client: Option<String>,
    /// The memdir binary the client should launch [default: `memdir`; for the desktop apps
    /// (claude-desktop, cursor, vscode, windsurf, zed, generic) the full path of this binary]
    #[arg(long)]
    pub(super) command: Option<String>,
    /// Run the registration command (claude, codex); memdir registered already is no error
    #[arg(long)]
    pub(super) setup: bool,
    /// With --client claude: install `memdir hook claude-code` as Claude Code's Stop,
    /// PreCompact and SessionEnd hooks in its settings.json ($CLAUDE_CONFIG_DIR, else
    /// ~/.claude). With --client codex: set `memdir hook codex` as the `notify` program in
    /// Codex's config.toml ($CODEX_HOME, else ~/.codex). With --client opencode: write memdir's
    /// capture plugin into opencode's plugin directory ($XDG_CONFIG_HOME/opencode, else
    /// ~/.config/opencode). Every other setting is kept; running it again changes nothing
    #[arg(long)]
    pub(super) hooks: bool,
    /// With --setup: print the command instead of running it; with --hooks: print the new
    /// settings file and write nothing (it needs one of them)
    #[arg(long, requires = "acts")]
    pub(super) dry_run: bool,
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
    pub(super) session_id: Option<String>,
    /// A project name, for filtering (with --jsonl: the default for lines without one)
    #[arg(long)]
    pub(super) project: Option<String>,
    /// Metadata as a JSON object
    #[arg(long)]
    pub(super) metadata: Option<String>,
    /// When it was first said (RFC 3339, a date or epoch ms), kept as its time; default now
    #[arg(long, conflicts_with = "jsonl")]
    pub(super) ts: Option<String>,
    /// An idempotency key: if a chunk of the session already has it, nothing is saved
    #[arg(long, conflicts_with = "jsonl")]
    pub(super) source_id: Option<String>,
    /// A chunk this one corrects (its chunk id, or a source_id; repeat for several): search
    /// ranks it below this one and marks it superseded_by
    #[arg(long, value_name = "ID", conflicts_with = "jsonl")]
    pub(super) supersedes: Vec<String>,
    /// The text to remember
    #[arg(long, conflicts_with_all = ["file", "jsonl"])]
    pub(super) text: Option<String>,
    /// Read the text from this file ("-" for stdin)
    #[arg(long, conflicts_with = "jsonl")]
    pub(super) file: Option<PathBuf>,
    /// A JSONL file ("-" for stdin) of chunk objects {session_id, content, project, metadata,
    /// ts, source_id, supersedes}, saved in batches of up to 1,000 chunks, each all or nothing
    #[arg(long, value_name = "FILE")]
    pub(super) jsonl: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct CompactArgs {
    #[command(flatten)]
    pub(super) req: api::CompactRequest,
    /// Compact every category without asking (needed without a category when stdin is not
    /// a terminal)
    #[arg(long, short = 'y')]
    pub(super) yes: bool,
}

#[derive(Args, Debug)]
pub struct DataArgs {
    /// The JSON object, inline
    #[arg(long, conflicts_with = "file")]
    pub(super) data: Option<String>,
    /// Read the JSON object from this file ("-" for stdin)
    #[arg(long)]
    pub(super) file: Option<PathBuf>,
}

impl DataArgs {
    pub(super) fn value(&self) -> Result<Value> {
        match (&self.data, &self.file) {
            (Some(d), _) => parse_json(d, "data"),
            (None, f) => parse_json(&read_source(f.as_ref(), "data")?, "data"),
        }
    }
}

/// The flags of `cli` that take part in the configuration's precedence.
pub(super) fn flags(cli: &Cli) -> config::Flags {
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

/// `memdir search`: the words after it are the query, quoted or not (`memdir search redis
/// eviction` searches for both words); a phrase in double quotes inside single ones is exact.
#[derive(Debug, clap::Args)]
pub struct SearchArgs {
    /// Words to look for, or an exact identifier, error message or path; wrap a phrase in
    /// double quotes (inside single ones for the shell) for an exact phrase
    #[arg(id = "query", required = true, num_args = 1.., value_name = "QUERY")]
    pub words: Vec<String>,
    #[command(flatten)]
    pub req: api::SearchRequest,
}

impl SearchArgs {
    /// The search request: the words, joined by spaces, are its query.
    pub fn request(self) -> api::SearchRequest {
        api::SearchRequest {
            query: self.words.join(" "),
            ..self.req
        }
    }
}
