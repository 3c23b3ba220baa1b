//! Registration snippets for MCP clients (`memdir config --client ...`).

use std::path::Path;

use serde_json::json;

use memdir_api::error::{Error, Result};

/// The MCP clients memdir can print a registration for.
pub const CLIENTS: &[&str] = &[
    "claude",
    "claude-desktop",
    "codex",
    "cursor",
    "gemini",
    "opencode",
    "vscode",
    "windsurf",
    "zed",
    "generic",
];

/// Whether `client` is a desktop app. A desktop app is started by the desktop, not from a
/// shell, so it may not see the `PATH` a shell profile sets (macOS apps never do): its snippet
/// names memdir by an absolute path. The terminal agents (Claude Code, Codex, Gemini CLI,
/// opencode) start from a shell and find a bare `memdir` where the user does.
pub fn is_desktop(client: &str) -> bool {
    matches!(
        client,
        "claude-desktop" | "cursor" | "vscode" | "windsurf" | "zed" | "generic"
    )
}

/// A registration: the snippet to paste, where it goes, and the command that registers it
/// when the client has one.
pub struct Registration {
    pub snippet: String,
    pub file: Option<&'static str>,
    pub command: Option<Vec<String>>,
    /// The command that takes an existing registration away, for a client whose `command`
    /// refuses to replace one.
    pub unregister: Option<Vec<String>>,
}

fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A command as one shell line, each argument quoted where the shell would split or expand it.
pub fn shell_line(cmd: &[String]) -> String {
    cmd.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("invariant: a str serializes")
}

/// The registration of memdir with `client`, launching `binary`, optionally on store `dir`.
///
/// The directory is an argument of the server command (`memdir --dir PATH serve`), not an
/// environment variable: some clients drop environment blocks, and the server then serves
/// the default directory without a word.
pub fn registration(client: &str, binary: &str, dir: Option<&Path>) -> Result<Registration> {
    let mut args: Vec<String> = Vec::new();
    if let Some(d) = dir {
        args.extend(["--dir".to_string(), d.display().to_string()]);
    }
    args.push("serve".to_string());
    let pretty = |v: serde_json::Value| {
        serde_json::to_string_pretty(&v).expect("invariant: JSON serializes") + "\n"
    };
    Ok(match client {
        "claude" => {
            let mut cmd: Vec<String> = [
                "claude", "mcp", "add", "--scope", "user", "memdir", "--", binary,
            ]
            .map(String::from)
            .to_vec();
            cmd.extend(args);
            Registration {
                snippet: shell_line(&cmd) + "\n",
                file: None,
                command: Some(cmd),
                unregister: Some(
                    ["claude", "mcp", "remove", "--scope", "user", "memdir"]
                        .map(String::from)
                        .to_vec(),
                ),
            }
        }
        "codex" => {
            let snippet = format!(
                "[mcp_servers.memdir]\ncommand = {}\nargs = [{}]\n",
                toml_str(binary),
                args.iter()
                    .map(|a| toml_str(a))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let mut cmd: Vec<String> = ["codex", "mcp", "add", "memdir", "--", binary]
                .map(String::from)
                .to_vec();
            cmd.extend(args);
            // `codex mcp add` replaces a server of the same name: running it again is harmless.
            Registration {
                snippet,
                file: Some("~/.codex/config.toml"),
                command: Some(cmd),
                unregister: None,
            }
        }
        "cursor" | "claude-desktop" | "gemini" | "windsurf" | "generic" => Registration {
            snippet: pretty(json!({"mcpServers": {"memdir": {"command": binary, "args": args}}})),
            file: Some(match client {
                "cursor" => "~/.cursor/mcp.json (or .cursor/mcp.json in a project)",
                "claude-desktop" => {
                    "claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/, Windows: %APPDATA%\\Claude\\)"
                }
                "gemini" => "~/.gemini/settings.json (or .gemini/settings.json in a project)",
                "windsurf" => "~/.codeium/windsurf/mcp_config.json",
                _ => "your client's MCP configuration",
            }),
            command: None,
            unregister: None,
        },
        "vscode" => Registration {
            snippet: pretty(
                json!({"servers": {"memdir": {"type": "stdio", "command": binary, "args": args}}}),
            ),
            file: Some(
                ".vscode/mcp.json in a workspace, or the user mcp.json (command \"MCP: Open User Configuration\")",
            ),
            command: None,
            unregister: None,
        },
        "zed" => Registration {
            snippet: pretty(
                json!({"context_servers": {"memdir": {"command": binary, "args": args, "env": {}}}}),
            ),
            file: Some(
                "Zed's settings.json (~/.config/zed/settings.json; command \"zed: open settings\")",
            ),
            command: None,
            unregister: None,
        },
        "opencode" => {
            let mut command = vec![binary.to_string()];
            command.extend(args);
            let server = json!({"type": "local", "command": command, "enabled": true});
            Registration {
                snippet: pretty(
                    json!({"$schema": "https://opencode.ai/config.json", "mcp": {"memdir": server}}),
                ),
                file: Some("opencode.json (project) or ~/.config/opencode/opencode.json"),
                command: None,
                unregister: None,
            }
        }
        other => {
            return Err(Error::invalid(
                "client",
                format!(
                    "unknown client {other:?}; use one of: {}",
                    CLIENTS.join(", ")
                ),
            ));
        }
    })
}

/// The Claude Code hook events memdir captures on: the end of each turn, before a
/// compaction rewrites the context, and the end of the session.
pub const HOOK_EVENTS: &[&str] = &["Stop", "PreCompact", "SessionEnd"];

/// Seconds Claude Code lets the hook run (memdir stops itself well before).
const HOOK_TIMEOUT_S: u64 = 30;

/// The shell command of memdir's Claude Code hook, launching `binary`, optionally on `dir`.
pub fn hook_command(binary: &str, dir: Option<&Path>) -> String {
    let mut cmd = vec![binary.to_string()];
    if let Some(d) = dir {
        cmd.extend(["--dir".to_string(), d.display().to_string()]);
    }
    cmd.extend(["hook".to_string(), "claude-code".to_string()]);
    shell_line(&cmd)
}

/// Whether a hook command is memdir's capture hook (whatever binary or directory it names).
fn is_memdir_hook(command: &str) -> bool {
    command.trim_end().ends_with(" hook claude-code")
}

/// Claude Code's settings with memdir's hooks merged in.
pub struct MergedSettings {
    /// The whole settings file (pretty JSON, keys in sorted order, a final newline).
    pub text: String,
    /// Whether it differs from the file as it was.
    pub changed: bool,
}

/// Merges memdir's capture hook `command` into Claude Code's settings (`existing`, the text
/// of settings.json if there is one): one `{"matcher": "", "hooks": [{"type": "command",
/// "command": ..., "timeout": 30}]}` group per event of [`HOOK_EVENTS`]. Every other key and
/// hook stays; a memdir hook already there is updated in place, never added twice. Settings
/// that are not a JSON object, or whose `hooks` are not shaped as Claude Code reads them, are
/// refused and nothing is returned to write.
pub fn claude_hooks(existing: Option<&str>, command: &str) -> Result<MergedSettings> {
    let malformed = |why: String| {
        Error::invalid(
            "hooks",
            format!("Claude Code's settings.json {why}; it was left as it is"),
        )
        .hint("fix the file (or move it away) and run this again")
    };
    let text = existing.unwrap_or("");
    let mut root: serde_json::Value = if text.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(text).map_err(|e| malformed(format!("is not valid JSON ({e})")))?
    };
    let before = root.clone();
    let Some(obj) = root.as_object_mut() else {
        return Err(malformed("is not a JSON object".to_string()));
    };
    let hooks = obj.entry("hooks").or_insert_with(|| json!({}));
    let Some(hooks) = hooks.as_object_mut() else {
        return Err(malformed("has `hooks` that is not an object".to_string()));
    };
    for event in HOOK_EVENTS {
        let groups = hooks.entry(event.to_string()).or_insert_with(|| json!([]));
        let Some(groups) = groups.as_array_mut() else {
            return Err(malformed(format!("has `hooks.{event}` that is not a list")));
        };
        let mut found = false;
        for (i, group) in groups.iter_mut().enumerate() {
            let Some(list) = group.get_mut("hooks") else {
                continue;
            };
            let Some(list) = list.as_array_mut() else {
                return Err(malformed(format!(
                    "has `hooks.{event}[{i}].hooks` that is not a list"
                )));
            };
            for h in list.iter_mut() {
                let ours = h
                    .get("command")
                    .and_then(serde_json::Value::as_str)
                    .is_some_and(is_memdir_hook);
                if ours {
                    if found {
                        continue;
                    }
                    found = true;
                    h["command"] = json!(command);
                    h["type"] = json!("command");
                }
            }
        }
        if !found {
            groups.push(json!({
                "matcher": "",
                "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}],
            }));
        }
    }
    let changed = existing.is_none() || root != before;
    let text = if changed {
        serde_json::to_string_pretty(&root).expect("invariant: JSON serializes") + "\n"
    } else {
        text.to_string()
    };
    Ok(MergedSettings { text, changed })
}

/// The argv of memdir's capture hook for `agent`: `binary [--dir DIR] hook AGENT` (Codex's
/// notify and memdir's opencode plugin add the event as the last argument).
pub fn hook_argv(agent: &str, binary: &str, dir: Option<&Path>) -> Vec<String> {
    let mut argv = vec![binary.to_string()];
    if let Some(d) = dir {
        argv.extend(["--dir".to_string(), d.display().to_string()]);
    }
    argv.extend(["hook".to_string(), agent.to_string()]);
    argv
}

/// The first line of memdir's opencode plugin: a file that starts otherwise is not memdir's.
const OPENCODE_PLUGIN_MARK: &str = "// memdir capture plugin";

/// memdir's opencode plugin (`plugins/memdir-capture.js` in opencode's config directory): on
/// each `session.idle` event (a turn ended) it starts `argv` with the event as its last
/// argument and does not wait for it, so the agent never waits for memdir. An existing file
/// that is not memdir's plugin is refused and nothing is returned to write.
pub fn opencode_plugin(existing: Option<&str>, argv: &[String]) -> Result<MergedSettings> {
    if let Some(old) = existing
        && !old.starts_with(OPENCODE_PLUGIN_MARK)
    {
        return Err(Error::invalid(
            "hooks",
            "opencode's plugins/memdir-capture.js exists and is not memdir's plugin; it was left as it is",
        )
        .hint("move it away and run this again"));
    }
    let argv_json = serde_json::to_string(argv).expect("invariant: strings serialize");
    let text = format!(
        "{OPENCODE_PLUGIN_MARK} (written by `memdir config --client opencode --hooks`; memdir rewrites this file).
// When a session goes idle (a turn ended), memdir saves the turns it has not saved yet, in the
// background: the agent does not wait for it, and a failure never reaches the agent (memdir
// logs it in .memdir/hook.log of the memory directory).
const MEMDIR = {argv_json};

export const MemdirCapture = async () => ({{
  event: async ({{ event }}) => {{
    if (event?.type !== \"session.idle\") return;
    try {{
      const p = Bun.spawn([...MEMDIR, JSON.stringify(event)], {{ stdin: \"ignore\", stdout: \"ignore\", stderr: \"ignore\" }});
      p.unref();
    }} catch {{}}
  }},
}});
"
    );
    Ok(MergedSettings {
        changed: existing != Some(text.as_str()),
        text,
    })
}

/// Whether a `notify` value is memdir's Codex hook (whatever binary or directory it names).
fn is_memdir_notify(v: &toml::Value) -> bool {
    let Some(a) = v.as_array() else {
        return false;
    };
    let words: Vec<&str> = a.iter().filter_map(toml::Value::as_str).collect();
    words.len() == a.len() && words.ends_with(&["hook", "codex"])
}

/// Sets memdir's notify program in Codex's `config.toml` (`existing`, its text if there is
/// one) as the top-level `notify = [...]`. The file is edited as text, so comments, order
/// and formatting stay; the result is parsed back and must hold exactly the old settings plus
/// the new `notify`. Codex runs one notify program: a file that names another one, or that is
/// not valid TOML, is refused and nothing is returned to write.
pub fn codex_notify(existing: Option<&str>, argv: &[String]) -> Result<MergedSettings> {
    let malformed = |why: String| {
        Error::invalid(
            "hooks",
            format!("Codex's config.toml {why}; it was left as it is"),
        )
    };
    let text = existing.unwrap_or("");
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        malformed(format!("is not valid TOML ({})", e.message()))
            .hint("fix the file (or move it away) and run this again")
    })?;
    let want = toml::Value::Array(argv.iter().map(|a| toml::Value::from(a.as_str())).collect());
    let line = format!(
        "notify = [{}]\n",
        argv.iter()
            // A JSON string is a valid TOML basic string.
            .map(|a| serde_json::Value::from(a.as_str()).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    match table.get("notify") {
        Some(v) if *v == want => {
            return Ok(MergedSettings {
                text: text.to_string(),
                changed: false,
            });
        }
        Some(v) if !is_memdir_notify(v) => {
            return Err(malformed(format!(
                "already names a notify program ({}), and Codex runs only one",
                serde_json::to_string(v).unwrap_or_default()
            ))
            .hint("remove that `notify` line, or have that program also run `memdir hook codex \"$1\"`, then run this again"));
        }
        _ => {}
    }
    // The expected result: the old settings with `notify` set.
    let mut expected = table.clone();
    expected.insert("notify".into(), want);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let ok =
        |candidate: &str| toml::from_str::<toml::Table>(candidate).is_ok_and(|t| t == expected);
    let join = |before: &[&str], after: &[&str]| {
        let mut out: String = before.concat();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&line);
        out.push_str(&after.concat());
        out
    };
    let mut candidates: Vec<String> = Vec::new();
    if table.contains_key("notify") {
        // memdir's own line(s), from `notify =` to where the value ends: replaced.
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            if t.starts_with("notify") && t["notify".len()..].trim_start().starts_with('=') {
                for end in i + 1..=lines.len() {
                    candidates.push(join(&lines[..i], &lines[end..]));
                }
            }
        }
    } else {
        // A new top-level key goes before the first table header (or at the end).
        for (i, l) in lines.iter().enumerate() {
            if l.trim_start().starts_with('[') {
                candidates.push(join(&lines[..i], &lines[i..]));
            }
        }
        candidates.push(join(&lines, &[]));
    }
    match candidates.into_iter().find(|c| ok(c)) {
        Some(out) => Ok(MergedSettings {
            text: out,
            changed: true,
        }),
        None => Err(malformed(
            "could not take a top-level `notify` line without changing anything else".into(),
        )
        .hint("add the line yourself, near the top: ".to_string() + line.trim_end())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_is_shell_safe() {
        assert_eq!(quote("memdir"), "memdir");
        assert_eq!(quote("/a b/it's"), "'/a b/it'\\''s'");
    }

    #[test]
    fn every_client_has_a_snippet() {
        for c in CLIENTS {
            let r = registration(c, "memdir", Some(Path::new("/x y"))).unwrap();
            assert!(r.snippet.contains("/x y"), "{c}: {}", r.snippet);
            assert!(!r.snippet.contains("MEMDIR_DIR"), "{c}: {}", r.snippet);
            if let Some(cmd) = r.command {
                let tail = &cmd[cmd.len() - 4..];
                assert_eq!(tail, ["memdir", "--dir", "/x y", "serve"], "{c}");
            }
        }
        assert!(registration("vim", "memdir", None).is_err());
    }

    #[test]
    fn hooks_merge_into_settings_once() {
        let cmd = hook_command("memdir", Some(Path::new("/m")));
        assert_eq!(cmd, "memdir --dir /m hook claude-code");
        let old = r#"{"model": "opus", "hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "say done"}]}]}}"#;
        let once = claude_hooks(Some(old), &cmd).unwrap();
        assert!(once.changed);
        let v: serde_json::Value = serde_json::from_str(&once.text).unwrap();
        assert_eq!(v["model"], "opus");
        assert_eq!(v["hooks"]["Stop"].as_array().unwrap().len(), 2);
        assert_eq!(v["hooks"]["Stop"][0]["hooks"][0]["command"], "say done");
        for e in HOOK_EVENTS {
            assert!(once.text.contains(e));
        }
        let twice = claude_hooks(Some(&once.text), &cmd).unwrap();
        assert!(!twice.changed);
        assert_eq!(twice.text, once.text);
        // Another binary or directory updates the hook in place.
        let moved = claude_hooks(Some(&once.text), "/opt/memdir hook claude-code").unwrap();
        let v: serde_json::Value = serde_json::from_str(&moved.text).unwrap();
        assert_eq!(v["hooks"]["Stop"].as_array().unwrap().len(), 2);
        assert_eq!(
            v["hooks"]["Stop"][1]["hooks"][0]["command"],
            "/opt/memdir hook claude-code"
        );
        for bad in ["{", "[]", r#"{"hooks": []}"#, r#"{"hooks": {"Stop": {}}}"#] {
            assert!(claude_hooks(Some(bad), &cmd).is_err(), "{bad}");
        }
        assert!(claude_hooks(None, &cmd).unwrap().changed);
    }

    #[test]
    fn codex_notify_is_set_once_and_keeps_the_rest_of_the_file() {
        let argv = hook_argv("codex", "memdir", Some(Path::new("/m y")));
        assert_eq!(argv, ["memdir", "--dir", "/m y", "hook", "codex"]);
        let old = "# my codex settings\nmodel = \"o3\"  # fast\n\n[mcp_servers.x]\ncommand = \"x\"\nargs = [\n  \"[not a header]\",\n]\n";
        let once = codex_notify(Some(old), &argv).unwrap();
        assert!(once.changed);
        assert!(
            once.text
                .starts_with("# my codex settings\nmodel = \"o3\"  # fast\n\nnotify = ["),
            "{}",
            once.text
        );
        assert!(
            once.text.ends_with(
                "[mcp_servers.x]\ncommand = \"x\"\nargs = [\n  \"[not a header]\",\n]\n"
            ),
            "{}",
            once.text
        );
        let t: toml::Table = toml::from_str(&once.text).unwrap();
        assert_eq!(t["notify"].as_array().unwrap().len(), 5);
        assert_eq!(t["mcp_servers"]["x"]["command"].as_str(), Some("x"));
        let twice = codex_notify(Some(&once.text), &argv).unwrap();
        assert!(!twice.changed);
        assert_eq!(twice.text, once.text);
        // Another binary replaces memdir's line in place, even one spread over lines.
        let spread = once.text.replace("notify = [", "notify = [\n ");
        let moved = codex_notify(Some(&spread), &hook_argv("codex", "/opt/memdir", None)).unwrap();
        let t: toml::Table = toml::from_str(&moved.text).unwrap();
        assert_eq!(
            t["notify"].as_array().unwrap()[0].as_str(),
            Some("/opt/memdir")
        );
        assert_eq!(moved.text.matches("notify").count(), 1, "{}", moved.text);
        assert!(moved.text.contains("[mcp_servers.x]"));
        // Someone else's notify program, or a broken file: refused.
        assert!(codex_notify(Some("notify = [\"say\", \"done\"]\n"), &argv).is_err());
        assert!(codex_notify(Some("model = \n"), &argv).is_err());
        let fresh = codex_notify(None, &argv).unwrap();
        // The opencode plugin: memdir's own file is rewritten, another file is refused.
        let oc = hook_argv("opencode", "memdir", Some(Path::new("/m")));
        let plugin = opencode_plugin(None, &oc).unwrap();
        assert!(plugin.changed);
        assert!(
            plugin
                .text
                .contains(r#"const MEMDIR = ["memdir","--dir","/m","hook","opencode"];"#),
            "{}",
            plugin.text
        );
        assert!(plugin.text.contains("session.idle"));
        assert!(!opencode_plugin(Some(&plugin.text), &oc).unwrap().changed);
        assert!(
            opencode_plugin(
                Some(
                    "export const Mine = 1;
"
                ),
                &oc
            )
            .is_err()
        );
        assert_eq!(
            fresh.text,
            "notify = [\"memdir\", \"--dir\", \"/m y\", \"hook\", \"codex\"]\n"
        );
    }
}
