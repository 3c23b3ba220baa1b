//! Reference output derived from the definitions: the operation table as JSON, shell
//! completions and man pages.

use super::*;

/// The operation table as JSON, with each CLI command's arguments as clap parses them (the
/// field each fills, as a flag or by position).
pub(super) fn ops_table() -> Value {
    let root = super::args::command();
    let list: Vec<Value> = ops::table()
        .iter()
        .map(|op| {
            let cli_args: Option<Value> = op.cli.and_then(|c| super::commands::find_command(&root, c.name).map(|sub| (c.name, sub))).map(|(name, sub)| {
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
                json!({"command": name, "positional": positional, "flags": flags})
            });
            json!({
                "name": op.name,
                "summary": op.summary,
                "cli": cli_args,
                "mcp": op.mcp.map(|t| json!({"tool": t.name, "profile": t.profile.name()})),
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

/// The completion script for `shell`, from the same definitions as the parser.
pub(super) fn completions(shell: &str) -> Result<String> {
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
    clap_complete::generate(sh, &mut super::args::command(), "memdir", &mut buf);
    String::from_utf8(buf).map_err(|e| Error::internal(format!("completions: {e}")))
}

/// The man page of `cmd` in roff.
pub(super) fn man_page(cmd: clap::Command) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd)
        .source(format!("memdir {}", env!("CARGO_PKG_VERSION")))
        .render(&mut buf)
        .map_err(|e| Error::internal(format!("man page: {e}")))?;
    Ok(buf)
}

/// `memdir man`: the page on stdout, or every command's page written into a directory.
pub(super) fn man(out: Option<&std::path::Path>) -> Result<(Output, i32)> {
    let root = super::args::command();
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
