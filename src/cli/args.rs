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
// The commands that run an operation are built from the operation table ([`command`]); the
// ones here are the binary's own (serving, configuration, reference output, hooks).
#[derive(Parser, Debug)]
#[command(name = "memdir", version, after_help = AFTER_HELP, subcommand_required = true)]
pub struct Cli {
    /// The memory directory [default: $MEMDIR_DIR, else `dir` in the config file, else
    /// $XDG_DATA_HOME/memdir]
    #[arg(long, global = true, display_order = 900, value_name = "PATH")]
    pub dir: Option<PathBuf>,
    /// This device's name, recorded as the actor of every write [default: $MEMDIR_DEVICE,
    /// else `device` in the config file, else the host name]
    #[arg(long, global = true, display_order = 900, value_name = "NAME")]
    pub device: Option<String>,
    /// Print JSON, as when stdout is not a terminal
    #[arg(long, global = true, display_order = 900, conflicts_with = "human")]
    pub json: bool,
    /// Print for people, as on a terminal, wherever stdout goes
    #[arg(long, global = true, display_order = 900)]
    pub human: bool,
    /// Colour in output for people: auto (on a terminal, unless NO_COLOR is set), always or
    /// never
    #[arg(long, global = true, display_order = 900, value_name = "WHEN", default_value = "auto", value_parser = ["auto", "always", "never"])]
    pub color: String,
    /// The binary's own commands; `None` for a command of the operation table.
    #[command(subcommand)]
    pub local: Option<Local>,
    /// A command of the operation table: its name as typed (`restore-snapshot`, the key of its
    /// operation, `Op::cli`) and what clap matched for it.
    #[arg(skip)]
    pub table: Option<(String, clap::ArgMatches)>,
}

/// The whole command line: the binary's own commands and, after them in the table's order
/// (shown first), one command per operation of the table that has one.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut root = Cli::command();
    for (i, sub) in super::commands::table_commands().into_iter().enumerate() {
        root = root.subcommand(sub.display_order(i));
    }
    root
}

/// The binary's own commands: those that run no operation of the table.
#[derive(Subcommand, Debug)]
pub enum Local {
    /// Capture an agent's session as it happens: run by the agent's hook with the hook's
    /// JSON event on stdin, it saves the turns of the transcript not saved yet (the chunks
    /// `import` would give). It always exits 0 and prints nothing: problems go to
    /// `.memdir/hook.log` in the memory directory, and whatever it could not do (a busy
    /// store, the deadline) the next event does. `memdir config --client claude --hooks`
    /// (or `--client codex`, `--client opencode`) installs it.
    #[command(
        display_order = 100,
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
    /// Print the OpenAPI document of the REST API (schema/openapi.json is this output).
    #[command(
        display_order = 101,
        after_help = "Examples:\n  memdir openapi > openapi.json"
    )]
    Openapi,
    /// Print the operation table: each operation's names on every surface, flags, CLI
    /// arguments and examples.
    #[command(display_order = 102, after_help = "Examples:\n  memdir ops")]
    Ops,
    /// Print a shell completion script: bash, zsh, fish, powershell or elvish.
    #[command(
        display_order = 103,
        after_help = "Examples:\n  memdir completions bash > ~/.local/share/bash-completion/completions/memdir\n  memdir completions zsh > \"${fpath[1]}/_memdir\"\n  memdir completions fish > ~/.config/fish/completions/memdir.fish"
    )]
    Completions {
        /// The shell
        #[arg(value_parser = ["bash", "zsh", "fish", "powershell", "elvish"])]
        shell: String,
    },
    /// Print the man page (roff), or write one page per command into a directory.
    #[command(
        display_order = 104,
        after_help = "Examples:\n  memdir man | man -l -\n  memdir man --out ~/.local/share/man/man1"
    )]
    Man {
        /// Write memdir.1 and memdir-COMMAND.1 into this directory instead of printing
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Serve memdir: MCP over stdio (what MCP clients launch), or REST or MCP over HTTP.
    #[command(
        display_order = 98,
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
        /// Tool profile: default (small), full (every compatibility tool name) or memory-tool (the memory tool protocol on notes)
        /// [default: $MEMDIR_TOOLS, else `mcp.tools` in the config file, else default]
        #[arg(long)]
        tools: Option<String>,
    },
    /// Open the web viewer: serve it on a free loopback port, print its URL and open the
    /// browser (`memdir ui --no-open` only prints the URL).
    #[command(
        display_order = 99,
        after_help = "Examples:\n  memdir ui\n  memdir ui --no-open --port 8799"
    )]
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
        display_order = 97,
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
    // Its id is the request field it fills, so the table's examples find it.
    #[arg(id = "content", long = "text", conflicts_with_all = ["file", "jsonl"])]
    pub(super) text: Option<String>,
    /// Read the text from this file ("-" for stdin)
    #[arg(long, conflicts_with = "jsonl")]
    pub(super) file: Option<PathBuf>,
    /// A JSONL file ("-" for stdin) of chunk objects {session_id, content, project, metadata,
    /// ts, source_id, supersedes}, saved in batches of up to 1,000 chunks, each all or nothing
    #[arg(long, value_name = "FILE")]
    pub(super) jsonl: Option<PathBuf>,
}

/// `memdir write`: a category and a JSON object (inline, from a file or stdin).
#[derive(Args, Debug)]
pub struct WriteArgs {
    /// The category to write (created if it does not exist)
    pub(super) category: String,
    #[command(flatten)]
    pub(super) input: DataArgs,
    /// Merge the object's top-level keys into the category (null deletes a key) instead
    /// of replacing it
    #[arg(long)]
    pub(super) merge: bool,
    /// Write only if the category has this hash ("absent": only if it does not exist)
    #[arg(long)]
    pub(super) expected_hash: Option<String>,
    /// Why, kept in the version's history entry
    #[arg(long)]
    pub(super) reason: Option<String>,
}

/// `memdir append`: a log and a JSON entry (inline, from a file or stdin).
#[derive(Args, Debug)]
pub struct AppendArgs {
    /// The log to append to (created on first append)
    pub(super) category: String,
    #[command(flatten)]
    pub(super) input: DataArgs,
    /// Entries to keep (default 200, or the log's own setting)
    #[arg(long, value_parser = api::num::parse_u64, allow_negative_numbers = true)]
    pub(super) max_entries: Option<u64>,
    /// Drop entries older than this many days, counted from the newest entry
    #[arg(long, value_parser = api::num::parse_u64, allow_negative_numbers = true)]
    pub(super) max_age_days: Option<u64>,
    /// Why, kept in the version's history entry
    #[arg(long)]
    pub(super) reason: Option<String>,
}

/// `memdir note write` and `memdir note append`: a note and its text (inline, from a file or
/// stdin).
#[derive(Args, Debug)]
pub struct NoteTextArgs {
    /// The note's path below notes/ (projects/orbital.md)
    pub(super) path: String,
    /// The text, inline
    #[arg(long, conflicts_with = "file", allow_hyphen_values = true)]
    pub(super) text: Option<String>,
    /// Read the text from this file ("-" for stdin; the default when no --text)
    #[arg(long)]
    pub(super) file: Option<PathBuf>,
    /// Change only if the note has this hash ("absent": only create it)
    #[arg(long)]
    pub(super) expected_hash: Option<String>,
    /// Why, kept in the version's history entry
    #[arg(long)]
    pub(super) reason: Option<String>,
}

impl NoteTextArgs {
    /// The text given inline, or read from the file or stdin.
    pub(super) fn text(&self) -> Result<String> {
        match &self.text {
            Some(t) => Ok(t.clone()),
            None => super::input::read_source(self.file.as_ref(), "text"),
        }
    }
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
    if let Some(Local::Serve {
        host,
        port,
        body_limit,
        tools,
        ..
    }) = &cli.local
    {
        f.host = host.clone();
        f.port = *port;
        f.body_limit = *body_limit;
        f.tools = tools.clone();
    }
    if let Some(Local::Ui { port, .. }) = &cli.local {
        // Always loopback: the viewer is for the person at this machine.
        f.host = Some("127.0.0.1".to_string());
        f.port = Some(port.unwrap_or(0));
    }
    f
}
