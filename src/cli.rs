//! The command-line interface: parses arguments, calls the service, prints JSON.
//!
//! Architecture Invariant: this is the only module that prints. Results go to stdout as JSON;
//! errors go to stderr as `{"error": {code, message, hints, ...}}` with the exit code of their
//! kind.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};

use crate::api::{self, AppendRequest, IngestRequest, NewChunk, WriteRequest};
use crate::config::{self, Config};
use crate::error::{Error, ErrorKind, Result};
use crate::ops;
use crate::service::{self, Memdir};

/// Largest input read from a file or stdin, in bytes.
const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

const AFTER_HELP: &str = "\
Examples:
  memdir init
  memdir ingest --session-id demo --project web --text \"the pool timed out under load\"
  memdir ingest --jsonl chunks.jsonl
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
  3  invalid input      7  a file on disk is malformed
  4  not found          8  unavailable (I/O, disk full)";

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
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create the memory directory (with .gitignore and .gitattributes).
    Init,
    /// Counts, sizes and health of the store.
    Status,
    /// Add chunks to a session: one from --text, --file or stdin, or many with --jsonl.
    Ingest(IngestArgs),
    /// Read a session's chunks, page by page.
    Fetch(api::FetchRequest),
    /// The session catalog: sessions active within --days (0: all), newest first.
    Overview(api::OverviewRequest),
    /// Read a category (or an old version of it).
    Read(api::ReadRequest),
    /// Replace a category, or merge top-level keys into it (null deletes a key).
    Write {
        category: String,
        #[command(flatten)]
        input: DataArgs,
        #[arg(long)]
        merge: bool,
        /// Write only if the category has this hash ("absent": only if it does not exist)
        #[arg(long)]
        expected_hash: Option<String>,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Append an entry to a log category (created on first append).
    Append {
        category: String,
        #[command(flatten)]
        input: DataArgs,
        /// Entries to keep (default 200, or the log's own setting)
        #[arg(long, value_parser = api::num::parse_u64, allow_negative_numbers = true)]
        max_entries: Option<u64>,
        /// Drop entries older than this many days, counted from the newest entry
        #[arg(long, value_parser = api::num::parse_u64, allow_negative_numbers = true)]
        max_age_days: Option<u64>,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Every category with hash, version, size and last writer.
    List,
    /// Delete a category's current file; history and a tombstone stay.
    Delete(api::DeleteRequest),
    /// Versions of a category, newest first (with --diff-from/--diff-to, also a diff).
    History(api::HistoryRequest),
    /// Unified diff between two versions (default: the newest and its parent).
    Diff(api::DiffRequest),
    /// Restore an old version as a new version.
    Restore(api::RestoreRequest),
    /// Trim history to the newest N versions per category (heads and tombstones stay).
    Compact(api::CompactRequest),
    /// Read several categories at once (missing ones are listed, not errors).
    Context(api::ContextRequest),
    /// Whether a category changed since a hash: unchanged, changed (with data) or deleted.
    Delta(api::DeltaRequest),
    /// Forget chunks (by --session-id with --chunk-id, a whole --session-id, or the hits of
    /// --query) or an old category version (--category with --version): each is replaced by a
    /// tombstone that keeps its place. On a terminal it shows what goes and asks first;
    /// otherwise it needs --yes.
    Forget {
        #[command(flatten)]
        req: api::ForgetRequest,
        /// Forget without asking
        #[arg(long)]
        yes: bool,
    },
    /// Write a verified copy of the store to DEST (a new or empty directory), with a manifest
    /// of blake3 hashes; the ledger and index are not copied (they are rebuilt).
    Snapshot(api::SnapshotRequest),
    /// Check the snapshot SRC against its manifest, then make it the store; the previous store
    /// is moved aside to `<dir>.before-restore-<time>` (the result names it).
    RestoreSnapshot(api::RestoreSnapshotRequest),
    /// Export sessions as jsonl (loadable by `ingest --jsonl`) or sessions and categories as
    /// markdown, to stdout or --output FILE.
    Export(api::ExportRequest),
    /// Check that files, history, ledger and index agree (read-only); exit 1 when not.
    VerifyStore,
    /// Search session chunks and categories (BM25, exact, or auto).
    Search(api::SearchRequest),
    /// Print the OpenAPI document of the REST API (schema/openapi.json is this output).
    Openapi,
    /// Print the operation table: each operation's names on every surface, flags, CLI
    /// arguments and examples.
    Ops,
    /// Rebuild the search index from the files; prints the index fingerprint.
    Reindex,
    /// Serve MCP over stdio (what MCP clients launch).
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
    /// The configuration: `config show` prints it with the source of every value, `config
    /// init` writes a commented example file, `config --client NAME` prints the snippet or
    /// command that registers memdir with an MCP client.
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
    /// With --setup: print the command instead of running it
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
    /// The text to remember
    #[arg(long, conflicts_with_all = ["file", "jsonl"])]
    text: Option<String>,
    /// Read the text from this file ("-" for stdin)
    #[arg(long, conflicts_with = "jsonl")]
    file: Option<PathBuf>,
    /// A JSONL file ("-" for stdin) of chunk objects {session_id, content, project, metadata, ts}
    #[arg(long, value_name = "FILE")]
    jsonl: Option<PathBuf>,
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

/// The ingest request of the CLI's arguments: one chunk from --text, --file or stdin, or a
/// batch from --jsonl (its line numbers kept to name a bad line).
fn ingest_request(a: &IngestArgs) -> Result<(IngestRequest, Vec<usize>)> {
    let metadata = a
        .metadata
        .as_deref()
        .map(|s| parse_json(s, "metadata"))
        .transpose()?;
    if let Some(path) = &a.jsonl {
        let text = read_source(Some(path), "jsonl")?;
        let mut chunks = Vec::new();
        let mut lines = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let mut v =
                parse_json(line, "jsonl").map_err(|e| e.detail("line", Value::from(i + 1)))?;
            if let Some(obj) = v.as_object_mut() {
                if let Some(s) = &a.session_id {
                    obj.entry("session_id").or_insert(Value::from(s.clone()));
                }
                if let Some(p) = &a.project {
                    obj.entry("project").or_insert(Value::from(p.clone()));
                }
            }
            let chunk: NewChunk = service::from_args(v).map_err(|e| {
                let msg = format!("line {}: {}", i + 1, e.message);
                Error { message: msg, ..e }.detail("line", Value::from(i + 1))
            })?;
            chunks.push(chunk);
            lines.push(i + 1);
        }
        return Ok((
            IngestRequest {
                chunks: Some(chunks),
                ..IngestRequest::default()
            },
            lines,
        ));
    }
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
    Ok((
        IngestRequest {
            session_id: Some(session_id),
            content: Some(content),
            project: a.project.clone(),
            metadata,
            ts: a.ts.clone(),
            chunks: None,
        },
        Vec::new(),
    ))
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

/// Runs an operation of the table with a typed request, as every surface does.
fn call<T: serde::Serialize>(m: &Memdir, name: &str, req: &T) -> Result<Value> {
    let op = ops::find(name).ok_or_else(|| Error::internal(format!("no operation {name}")))?;
    let args = serde_json::to_value(req)
        .map_err(|e| Error::internal(format!("the {name} request did not serialize: {e}")))?;
    ops::call(m, op, args)
}

/// What a command prints on stdout.
pub enum Output {
    Json(Value),
    Text(String),
    Nothing,
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
            profile,
            body_limit: h.body_limit.value,
            max_concurrency: 64,
            timeout: std::time::Duration::from_secs(30),
            limits: Limits::from_config(h),
        },
        |url| {
            eprintln!("{}", serving_line(dir));
            eprintln!("memdir: listening on {url}");
        },
    )
}

#[cfg(not(feature = "http"))]
fn serve_http(
    _: &Config,
    _: Memdir,
    transport: &str,
    _: crate::mcp::Profile,
    _: Option<String>,
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
            Err(report_error(&Error::invalid(
                &field,
                format!("invalid value {value:?} for {arg}: {why}"),
            )))
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
    let dir = cfg.dir()?;
    let settings = cfg.settings()?;
    if let Command::Serve {
        transport, token, ..
    } = &cli.command
    {
        let profile = crate::mcp::Profile::parse(&cfg.tools.value)?;
        let memdir = Memdir::open_lazy_with(dir.value.clone(), settings);
        if transport == "stdio" {
            eprintln!("{}", serving_line(dir));
            crate::mcp::serve_stdio(memdir, profile)?;
        } else {
            serve_http(&cfg, memdir, transport, profile, token.clone())?;
        }
        return Ok((Output::Nothing, 0));
    }
    if let Command::VerifyStore = cli.command {
        // Read-only: no recovery, no adoption; report the store exactly as found.
        let m = Memdir::open_lazy_with(dir.value.clone(), settings);
        let report = call(&m, "verify_store", &api::Empty {})?;
        let code = if report["ok"] == json!(true) { 0 } else { 1 };
        return Ok((Output::Json(report), code));
    }
    let m = Memdir::open_with(dir.value.clone(), settings)?;
    if let Command::Export(r) = &cli.command {
        // Without --output, the export is its text, printed as it is.
        let mut v = call(&m, "export", r)?;
        return Ok(match v.get_mut("text").map(Value::take) {
            Some(Value::String(t)) => (Output::Text(t), 0),
            _ => (Output::Json(v), 0),
        });
    }
    let out = run_command(&m, cli.command);
    let notices = m.notices();
    match out {
        // Beside a result, what memdir repaired on its own is a line on stderr; with an error,
        // it goes into the error's JSON, so stderr stays one JSON document.
        Ok(out) => {
            for n in &notices {
                eprintln!("memdir: {n}");
            }
            Ok((Output::Json(out), 0))
        }
        Err(e) if !notices.is_empty() => Err(e.detail("notices", json!(notices))),
        Err(e) => Err(e),
    }
}

fn run_command(m: &Memdir, command: Command) -> Result<Value> {
    let out = match command {
        Command::Init => call(m, "init", &api::Empty {})?,
        Command::Status => call(m, "status", &api::Empty {})?,
        Command::Ingest(a) => {
            let (req, lines) = ingest_request(&a)?;
            // Errors found after parsing name the chunk's index in the batch; say the line.
            call(m, "ingest", &req).map_err(|e| {
                match e.details.get("index").and_then(Value::as_u64) {
                    Some(idx) if !lines.is_empty() => {
                        let line = lines.get(idx as usize).copied().unwrap_or(0);
                        let msg = format!("line {line}: {}", e.message);
                        Error { message: msg, ..e }.detail("line", Value::from(line))
                    }
                    _ => e,
                }
            })?
        }
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
        Command::Compact(r) => call(m, "compact", &r)?,
        Command::Context(r) => call(m, "context", &r)?,
        Command::Delta(r) => call(m, "delta", &r)?,
        Command::Search(r) => call(m, "search", &r)?,
        Command::Forget { req, yes } => forget(m, req, yes)?,
        Command::Snapshot(r) => call(m, "snapshot", &r)?,
        Command::RestoreSnapshot(r) => call(m, "restore_snapshot", &r)?,
        Command::VerifyStore
        | Command::Export(_)
        | Command::Openapi
        | Command::Ops
        | Command::Serve { .. }
        | Command::Config(_) => {
            return Err(Error::internal(
                "invariant: run handles this command itself",
            ));
        }
        Command::Reindex => {
            let tty = std::io::stderr().is_terminal();
            let bar = |done: u64, total: u64| {
                if tty && total > 0 {
                    let pct = (done * 100 / total).min(100);
                    let filled = (pct / 4) as usize;
                    eprint!(
                        "\rreindex [{}{}] {pct:3}%",
                        "#".repeat(filled),
                        " ".repeat(25 - filled)
                    );
                }
            };
            // The one direct engine call of a surface: the progress bar needs a callback.
            let out = m.reindex(Some(&bar));
            if tty {
                eprintln!();
            }
            serde_json::to_value(out?)
                .map_err(|e| Error::internal(format!("reindex result: {e}")))?
        }
    };
    Ok(out)
}

/// `forget`: with --yes or --dry-run as asked; on a terminal, after showing what would go and
/// a yes; otherwise refused. What was shown is what goes: a query's hits are forgotten by
/// their chunk ids, not by running the query again.
fn forget(m: &Memdir, req: api::ForgetRequest, yes: bool) -> Result<Value> {
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

/// Prints an error as JSON on stderr and returns its exit code.
pub fn report_error(e: &Error) -> i32 {
    let e = &crate::ops::for_surface(e.clone(), crate::ops::Surface::Cli);
    eprintln!(
        "{}",
        serde_json::to_string_pretty(&json!({"error": e.to_json()}))
            .unwrap_or_else(|_| e.message.clone())
    );
    e.kind.exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;

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
