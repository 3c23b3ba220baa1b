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

The memory directory is --dir, else $MEMDIR_DIR, else $XDG_DATA_HOME/memdir
(~/.local/share/memdir). Results are JSON on stdout; errors are JSON on stderr.

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
    /// The memory directory [default: $MEMDIR_DIR, else $XDG_DATA_HOME/memdir]
    #[arg(long, global = true, value_name = "PATH")]
    pub dir: Option<PathBuf>,
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
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// Port [default: 8787 for http, 8000 for mcp-http; 0 picks a free one]
        #[arg(long)]
        port: Option<u16>,
        /// Bearer token every request must carry (http transports)
        #[arg(long, env = "MEMDIR_HTTP_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Largest request body in bytes (http transports)
        #[arg(long, default_value_t = 16 * 1024 * 1024)]
        body_limit: usize,
        /// Tool profile: default (small) or full (every compatibility tool name)
        #[arg(long, env = "MEMDIR_TOOLS", default_value = "default")]
        tools: String,
    },
    /// Print the snippet or command that registers memdir with an MCP client.
    Config {
        /// claude, codex, cursor, opencode or generic
        #[arg(long)]
        client: String,
        /// The memdir binary the client should launch [default: memdir]
        #[arg(long, default_value = "memdir")]
        command: String,
        /// Run the registration command (claude, codex)
        #[arg(long)]
        setup: bool,
        /// With --setup: print the command instead of running it
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Args, Debug)]
pub struct IngestArgs {
    #[arg(long)]
    session_id: Option<String>,
    #[arg(long)]
    project: Option<String>,
    /// Metadata as a JSON object
    #[arg(long)]
    metadata: Option<String>,
    #[arg(long, conflicts_with_all = ["file", "jsonl"])]
    text: Option<String>,
    #[arg(long, conflicts_with = "jsonl")]
    file: Option<PathBuf>,
    /// A JSONL file ("-" for stdin) of chunk objects {session_id, content, project, metadata}
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
                    if id == "dir" || id == "help" {
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

fn config(
    client: &str,
    command: &str,
    dir: Option<&std::path::Path>,
    setup: bool,
    dry_run: bool,
) -> Result<(Output, i32)> {
    let reg = crate::client::registration(client, command, dir)?;
    if !setup {
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
    if dry_run {
        return Ok((Output::Text(reg.snippet), 0));
    }
    let status = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .status()
        .map_err(|e| {
            Error::new(
                ErrorKind::Unavailable,
                format!("could not run {}: {e}", cmd[0]),
            )
            .hint(format!("run it by hand: {}", reg.snippet.trim()))
        })?;
    Ok((Output::Nothing, status.code().unwrap_or(1)))
}

#[cfg(feature = "http")]
fn serve_http(
    dir: PathBuf,
    transport: &str,
    profile: crate::mcp::Profile,
    host: &str,
    port: Option<u16>,
    token: Option<String>,
    body_limit: usize,
) -> Result<()> {
    use crate::http::{Options, Transport, parse_transport, serve};
    let Some(t) = parse_transport(transport)? else {
        return Err(Error::internal("invariant: stdio is served by the caller"));
    };
    serve(
        Memdir::open_lazy(dir),
        Options {
            transport: t,
            host: host.to_string(),
            port: port.unwrap_or(if t == Transport::Rest { 8787 } else { 8000 }),
            token,
            profile,
            body_limit,
            max_concurrency: 64,
            timeout: std::time::Duration::from_secs(30),
        },
        |url| eprintln!("memdir: listening on {url}"),
    )
}

#[cfg(not(feature = "http"))]
fn serve_http(
    _: PathBuf,
    transport: &str,
    _: crate::mcp::Profile,
    _: &str,
    _: Option<u16>,
    _: Option<String>,
    _: usize,
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
pub fn run(cli: Cli) -> Result<(Output, i32)> {
    if let Command::Config {
        client,
        command,
        setup,
        dry_run,
    } = &cli.command
    {
        return config(client, command, cli.dir.as_deref(), *setup, *dry_run);
    }
    let dir = match &cli.dir {
        Some(d) => d.clone(),
        None => service::default_dir()?,
    };
    if let Command::Serve {
        transport,
        tools,
        host,
        port,
        token,
        body_limit,
    } = &cli.command
    {
        let profile = crate::mcp::Profile::parse(tools)?;
        if transport == "stdio" {
            crate::mcp::serve_stdio(Memdir::open_lazy(dir), profile)?;
        } else {
            serve_http(
                dir,
                transport,
                profile,
                host,
                *port,
                token.clone(),
                *body_limit,
            )?;
        }
        return Ok((Output::Nothing, 0));
    }
    if let Command::Openapi = cli.command {
        return Ok((Output::Json(crate::openapi::document()), 0));
    }
    if let Command::Ops = cli.command {
        return Ok((Output::Json(ops_table()), 0));
    }
    if let Command::VerifyStore = cli.command {
        // Read-only: no recovery, no adoption; report the store exactly as found.
        let report = call(&Memdir::open_lazy(dir), "verify_store", &api::Empty {})?;
        let code = if report["ok"] == json!(true) { 0 } else { 1 };
        return Ok((Output::Json(report), code));
    }
    let m = Memdir::open(dir)?;
    let out = run_command(&m, cli.command);
    for n in m.notices() {
        eprintln!("memdir: {n}");
    }
    Ok((Output::Json(out?), 0))
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
        Command::VerifyStore
        | Command::Openapi
        | Command::Ops
        | Command::Serve { .. }
        | Command::Config { .. } => {
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
