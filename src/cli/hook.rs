//! `memdir hook`: capture an agent's session from its hook. It never holds the agent up: it
//! always exits 0, bounds its reading and waiting, and logs problems to `.memdir/hook.log`.

use super::*;

/// Largest `hook.log` before it is rotated to `hook.log.1` (one old file is kept).
pub(super) const HOOK_LOG_BYTES: u64 = 256 * 1024;

/// Appends a line to the hook log, `<dir>/.memdir/hook.log` (rotated at
/// [`HOOK_LOG_BYTES`]); without a memory directory, the line goes to stderr. Never fails.
pub(super) fn hook_log(dir: Option<&std::path::Path>, line: &str) {
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
pub(super) fn hook_input(wait: std::time::Duration) -> Result<Vec<u8>> {
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
pub(super) fn hook(cli: &Cli, agent: &str, arg: Option<&str>, timeout_ms: u64) {
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
        let import = op_of("import")
            .ok_or_else(|| Error::internal("invariant: the table has an import command"))?;
        let args = serde_json::to_value(&req)
            .map_err(|e| Error::internal(format!("the import request did not serialize: {e}")))?;
        ops::admit(&m, &caller, import, args)?;
        // Codex and opencode: the event names a session in the agent's own directory.
        let agent_dir = |what: &str, var: &str| {
            memdir_engine::import::default_path(agent, &config::process_env).ok_or_else(|| {
                Error::invalid("event", format!("no {what} directory: set {var} or HOME"))
            })
        };
        let call = service::Call::by(&caller);
        let cx = m.acting(&call);
        let run = |name: String, f: &dyn Fn() -> Result<memdir_engine::import::hook::Capture>| {
            f().map_err(|e| e.detail("event", Value::from(name)))
        };
        if agent == "opencode" {
            let event = memdir_engine::import::hook::parse_opencode_event(&input)?;
            let root = agent_dir("opencode data", "XDG_DATA_HOME")?;
            return run(event.name.clone(), &|| {
                memdir_engine::import::hook::opencode(cx, &root, &event)
            });
        }
        if agent == "codex" {
            let event = memdir_engine::import::hook::parse_codex_event(&input)?;
            let home = agent_dir("Codex", "CODEX_HOME")?;
            return run(event.name.clone(), &|| {
                memdir_engine::import::hook::codex(cx, &home, &event)
            });
        }
        let event = memdir_engine::import::hook::parse_event(&input)?;
        let deadline = start + budget / 2;
        run(event.name.clone(), &|| {
            memdir_engine::import::hook::claude_code(cx, &event, deadline)
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
