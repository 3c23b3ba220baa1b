//! Registration snippets for MCP clients (`memdir config --client ...`).

use std::path::Path;

use serde_json::json;

use crate::error::{Error, Result};

/// The MCP clients memdir can print a registration for.
pub const CLIENTS: &[&str] = &["claude", "codex", "cursor", "opencode", "generic"];

/// A registration: the snippet to paste, where it goes, and the command that registers it
/// when the client has one.
pub struct Registration {
    pub snippet: String,
    pub file: Option<&'static str>,
    pub command: Option<Vec<String>>,
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
            Registration {
                snippet,
                file: Some("~/.codex/config.toml"),
                command: Some(cmd),
            }
        }
        "cursor" | "generic" => Registration {
            snippet: pretty(json!({"mcpServers": {"memdir": {"command": binary, "args": args}}})),
            file: Some(if client == "cursor" {
                "~/.cursor/mcp.json"
            } else {
                "your client's MCP configuration"
            }),
            command: None,
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
}
