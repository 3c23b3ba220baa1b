//! The command-line interface: parses arguments, calls the service, prints JSON.
//!
//! Architecture Invariant: this is the only module that prints. Results go to stdout as JSON;
//! errors go to stderr as `{"error": {code, message, hints, ...}}` with the exit code of their
//! kind.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;

use clap::{Args, FromArgMatches, Parser, Subcommand};
use serde_json::{Value, json};

use crate::config::{self, Config};
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::{self as api, AppendRequest, IngestRequest, NewChunk, WriteRequest};
use memdir_engine::ops;
use memdir_engine::service::{self, Memdir};

mod args;
mod commands;
mod hook;
mod ingest;
mod input;
mod output;
mod reference;
mod serve;
mod setup;
use args::*;
use commands::*;
use hook::*;
use ingest::*;
use input::*;
use output::*;
use reference::*;
use serve::*;
use setup::*;

/// The store and the device a command acts as (the configured one, under the config file's
/// access-control list).
struct Ctx<'a> {
    memdir: &'a Memdir,
    caller: memdir_engine::acl::Caller,
    /// The operation of the table this command runs: found by the subcommand's name in the
    /// table (`Op::cli`), so the CLI keeps no list of its own.
    op: &'static ops::Op,
}

impl std::ops::Deref for Ctx<'_> {
    type Target = Memdir;
    fn deref(&self) -> &Memdir {
        self.memdir
    }
}

/// Runs the command's operation with a typed request, as every surface does, through the
/// table. A long job's progress (reindex, import, sync, snapshot, embed) is a bar on a
/// terminal; the bar appears only once the job reports progress.
fn call<T: serde::Serialize>(m: &Ctx, req: &T) -> Result<Value> {
    let name = m.op.name;
    let args = serde_json::to_value(req)
        .map_err(|e| Error::internal(format!("the {name} request did not serialize: {e}")))?;
    let bar = crate::progress::Progress::new(m.op.cli.map_or(name, |c| c.name));
    let show = |done: u64, total: u64| bar.update(done, total);
    let out = ops::call_with(m.memdir, &m.caller, m.op, args, Some(&show));
    bar.finish();
    out
}

/// The operation of the table that subcommand `name` runs, if it runs one.
fn op_of(name: &str) -> Option<&'static ops::Op> {
    ops::table()
        .iter()
        .find(|o| o.cli.is_some_and(|c| c.name == name))
}

/// What a command answers when the person at the terminal said no: not an error (exit 0),
/// and nothing was done.
fn declined(what: &str) -> Value {
    json!({"declined": true, "message": format!("not confirmed: {what}")})
}

/// Asks a person on a terminal to confirm `question` (y/N): `Ok(false)` when they decline.
/// Without a terminal, refuses with the hint to pass --yes. `what` says what would happen.
fn confirm(question: &str, what: &str) -> Result<bool> {
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
    Ok(matches!(answer.trim().to_lowercase().as_str(), "y" | "yes"))
}

/// Parses the command line. A value that is not what its flag takes (`--limit five`,
/// `--limit -1`, `--limit 5.5`) is an `invalid` error naming the field (exit 3, JSON), as on
/// every other surface; other usage errors (an unknown flag, a missing argument) and `--help`
/// stay clap's. Returns the exit code to leave with when there is nothing to run.
pub fn parse() -> std::result::Result<Cli, i32> {
    // `memdir --version` alone answers before any command is built (what scripts and clients
    // run to check an install; clap's own answer needs the whole command tree).
    let words: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let [w] = words.as_slice()
        && (w == "--version" || w == "-V")
    {
        println!("memdir {}", env!("CARGO_PKG_VERSION"));
        return Err(0);
    }
    let parsed = args::command().try_get_matches().and_then(|matches| {
        let mut cli = Cli::from_arg_matches(&matches)?;
        if cli.local.is_none()
            && let Some((name, sub)) = matches.subcommand()
        {
            // A group's command (`note read`) is named by both words.
            cli.table = Some(match sub.subcommand() {
                Some((inner, m)) if op_of(name).is_none() => (format!("{name} {inner}"), m.clone()),
                _ => (name.to_string(), sub.clone()),
            });
        }
        Ok(cli)
    });
    match parsed {
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
        Err(e) => usage_error(e),
    }
}

/// A usage error clap found (an unknown command or flag, a missing argument): clap's text
/// for a person at a terminal, else one JSON document on stderr as every other error, exit 2.
/// Help and version requests are printed by clap as they are.
fn usage_error(e: clap::Error) -> std::result::Result<Cli, i32> {
    use clap::error::ErrorKind as K;
    let json = std::env::args().any(|w| w == "--json");
    let human = std::env::args().any(|w| w == "--human");
    let shown = matches!(
        e.kind(),
        K::DisplayHelp | K::DisplayVersion | K::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if shown || human || (!json && std::io::stderr().is_terminal()) {
        e.exit()
    }
    let text = e.render().to_string();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let message = lines
        .next()
        .unwrap_or("usage error")
        .trim_start_matches("error: ")
        .to_string();
    let hints: Vec<String> = lines
        .map(|l| l.trim().trim_start_matches("tip: ").to_string())
        .filter(|l| !l.starts_with("For more information"))
        .chain(["memdir --help lists the commands and flags".to_string()])
        .collect();
    eprintln!(
        "{}",
        serde_json::to_string_pretty(
            &json!({"error": {"code": "usage", "message": message, "hints": hints}})
        )
        .unwrap_or(message)
    );
    Err(2)
}

/// `config`: show the resolved configuration, register memdir with a client, or install its
/// capture hooks.
fn config_command(cli: &Cli, args: &ConfigArgs, cfg: &Config) -> Result<(Output, i32)> {
    match (&args.action, &args.client) {
        (Some(ConfigAction::Show), _) => Ok((Output::Op("config_show", cfg.show()), 0)),
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
    }
}

/// `serve` and `ui`: a server on this store until it is stopped.
fn serve_command(
    cli: &Cli,
    cfg: &Config,
    dir: &crate::config::Setting<PathBuf>,
    settings: memdir_engine::service::Settings,
) -> Result<()> {
    if let Some(Local::Serve {
        transport, token, ..
    }) = &cli.local
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
            cfg,
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
            serve_http(cfg, memdir, transport, profile, token.clone(), |_| {})?;
        }
        return Ok(());
    }
    if let Some(Local::Ui { no_open, token, .. }) = &cli.local {
        let profile = crate::mcp::Profile::parse(&cfg.tools.value)?;
        let settings = memdir_engine::service::Settings {
            index_tail_in_memory: true,
            ..settings
        };
        let memdir = Memdir::open_lazy_with(dir.value.clone(), settings);
        let open = !*no_open;
        serve_http(cfg, memdir, "http", profile, token.clone(), |url| {
            open_viewer(url, open)
        })?;
    }
    Ok(())
}

/// Runs one command; returns what to print and the exit code.
///
/// The configuration is resolved first, once, for every command: a bad config file or
/// variable, or a missing file that `MEMDIR_REQUIRE_CONFIG=1` requires, stops every command
/// before it changes anything.
pub fn run(cli: Cli) -> Result<(Output, i32)> {
    let env = config::process_env;
    if let Some(Local::Hook {
        agent,
        event,
        timeout_ms,
    }) = &cli.local
    {
        hook(&cli, agent, event.as_deref(), *timeout_ms);
        return Ok((Output::Nothing, 0));
    }
    if let Some(Local::Config(ConfigArgs {
        action: Some(ConfigAction::Init { force }),
        ..
    })) = &cli.local
    {
        // `init --force` may replace a broken file, so it reads none, unless a deployment
        // requires one: then it fails closed like every command.
        if config::required(&env)? {
            Config::load(&flags(&cli), &env)?;
        }
        return config_init(*force);
    }
    let cfg = Config::load(&flags(&cli), &env)?;
    match &cli.local {
        Some(Local::Config(args)) => return config_command(&cli, args, &cfg),
        Some(Local::Openapi) => return Ok((Output::Json(crate::openapi::document()), 0)),
        Some(Local::Ops) => return Ok((Output::Json(ops_table()), 0)),
        Some(Local::Completions { shell }) => return Ok((Output::Text(completions(shell)?), 0)),
        Some(Local::Man { out }) => return man(out.as_deref()),
        _ => {}
    }
    let dir = memory_dir(&cfg)?;
    let settings = cfg.settings()?;
    if cli.local.is_some() {
        serve_command(&cli, &cfg, dir, settings)?;
        return Ok((Output::Nothing, 0));
    }
    // Every other command runs the operation of the table its subcommand names.
    let (name, sub) = cli.table.as_ref().ok_or_else(|| {
        Error::internal("invariant: a command is the binary's own or one of the table")
    })?;
    let op = op_of(name).ok_or_else(|| {
        Error::internal(format!(
            "invariant: the command {name:?} runs an operation of the table"
        ))
    })?;
    let extra = extra(name);
    let m = if extra.is_some_and(|e| e.as_found) {
        Memdir::open_lazy_with(dir.value.clone(), settings)
    } else {
        Memdir::open_with(dir.value.clone(), settings)?
    };
    let ctx = Ctx {
        memdir: &m,
        caller: cfg.caller(),
        op,
    };
    let request = match op.cli.and_then(|c| c.args) {
        Some(a) => Some((a.parse)(sub).map_err(clap_error)?),
        None => None,
    };
    let out = match extra {
        Some(e) => (e.run)(&ctx, sub, request),
        None => call(&ctx, &request.unwrap_or_default()).map(|v| (Output::Op(op.name, v), 0)),
    };
    if extra.is_some_and(|e| e.as_found) {
        return out;
    }
    let notices = m.notices();
    match out {
        // Beside a result, what memdir repaired on its own is a line on stderr; with an error,
        // it goes into the error's JSON, so stderr stays one JSON document.
        Ok(out) => {
            for n in &notices {
                eprintln!("memdir: {n}");
            }
            Ok(out)
        }
        Err(e) if !notices.is_empty() => Err(e.detail("notices", json!(notices))),
        Err(e) => Err(e),
    }
}

/// `forget`: with --yes or --dry-run as asked; on a terminal, after showing what would go and
/// a yes; otherwise refused. What was shown is what goes: a query's hits are forgotten by
/// their chunk ids, not by running the query again.
fn forget(m: &Ctx, req: api::ForgetRequest, yes: bool) -> Result<Value> {
    if req.dry_run || yes {
        return call(m, &req);
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
    if !matches!(answer.trim().to_lowercase().as_str(), "y" | "yes") {
        return Ok(declined("nothing was forgotten"));
    }
    if !plan.versions.is_empty() {
        return call(m, &req);
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

/// The memory directory; one that names a regular file is refused before anything opens it.
fn memory_dir(cfg: &Config) -> Result<&crate::config::Setting<PathBuf>> {
    let dir = cfg.dir()?;
    if std::fs::metadata(&dir.value).is_ok_and(|m| !m.is_dir()) {
        return Err(Error::invalid(
            "dir",
            format!(
                "the memory directory {} ({}) is a file, not a directory",
                dir.value.display(),
                dir.source.describe()
            ),
        )
        .hint("name a directory (memdir creates it when it does not exist)"));
    }
    Ok(dir)
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
        let root = args::command();
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
