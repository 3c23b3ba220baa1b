//! Registering memdir with MCP clients, installing capture hooks, and writing the example
//! config file.

use super::*;

/// `config --client`: the registration snippet, or its command run or printed.
///
/// A snippet goes to stdout and where to put it to stderr. A desktop app's snippet names this
/// binary by its absolute path unless `--command` names another (see
/// [`crate::client::is_desktop`]), and a line on stderr says so.
pub(super) fn register(
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
    let binary = match &args.command {
        Some(c) => c.clone(),
        None if crate::client::is_desktop(client) => this_binary()?,
        None => "memdir".to_string(),
    };
    let reg = crate::client::registration(client, &binary, dir.as_deref())?;
    if !args.setup {
        if let Some(file) = reg.file {
            eprintln!("memdir: add this to {file}, beside any servers it already lists");
        }
        if args.command.is_none() && crate::client::is_desktop(client) {
            eprintln!(
                "memdir: it names this binary by its full path ({binary}): a desktop app does not start from your shell and may not find `memdir` on its PATH; pass --command to name another"
            );
        }
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
    let line = crate::client::shell_line(&cmd);
    if args.dry_run {
        return Ok((Output::Text(line + "\n"), 0));
    }
    let ran = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            Error::new(
                ErrorKind::Unavailable,
                format!("could not run {}: {e}", cmd[0]),
            )
            .hint(format!("run it by hand: {line}"))
        })?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
    let said = said.trim();
    if ran.status.success() {
        if !said.is_empty() {
            eprintln!("{said}");
        }
        return Ok((
            Output::Json(json!({"client": client, "changed": true, "command": line})),
            0,
        ));
    }
    // Claude Code refuses to add a server whose name it has: memdir is registered already.
    // That registration is left as it is (it may name another binary or directory).
    if said.to_lowercase().contains("already exists") {
        let mut note =
            format!("{client} already has an MCP server named memdir; it was left as it is");
        if let Some(un) = &reg.unregister {
            note.push_str(&format!(
                ". To register this command instead: {}, then run this again",
                crate::client::shell_line(un)
            ));
        }
        return Ok((
            Output::Json(json!({
                "client": client,
                "changed": false,
                "already_registered": true,
                "command": line,
                "note": note,
                "client_said": said,
            })),
            0,
        ));
    }
    let code = ran
        .status
        .code()
        .map_or_else(|| "a signal".to_string(), |c| format!("exit {c}"));
    Err(Error::new(
        ErrorKind::Unavailable,
        format!("{} failed ({code}): {said}", cmd[0]),
    )
    .detail("command", Value::from(line.clone()))
    .hint(format!("run it by hand to see why: {line}")))
}

/// The absolute path of the running memdir binary, which a desktop app can start wherever its
/// `PATH` points.
fn this_binary() -> Result<String> {
    let exe = std::env::current_exe().map_err(|e| {
        Error::new(
            ErrorKind::Unavailable,
            format!("cannot tell where this memdir binary is: {e}"),
        )
        .hint("name the binary with --command PATH")
    })?;
    Ok(exe.display().to_string())
}

/// `config --client claude|codex --hooks`: the agent's settings with memdir's capture hook
/// (Claude Code's settings.json hooks, Codex's config.toml `notify`), written in place (or,
/// with --dry-run, printed).
pub(super) fn install_hooks(
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
    let binary = args.command.as_deref().unwrap_or("memdir");
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
        let argv = crate::client::hook_argv("opencode", binary, dir.as_deref());
        let merged = crate::client::opencode_plugin(existing.as_deref(), &argv);
        (merged, json!(argv), json!(["session.idle"]))
    } else if agent == "codex" {
        let argv = crate::client::hook_argv("codex", binary, dir.as_deref());
        let merged = crate::client::codex_notify(existing.as_deref(), &argv);
        (merged, json!(argv), json!(["agent-turn-complete"]))
    } else {
        let command = crate::client::hook_command(binary, dir.as_deref());
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
pub(super) fn config_init(force: bool) -> Result<(Output, i32)> {
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
