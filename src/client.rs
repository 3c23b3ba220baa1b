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

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("invariant: a str serializes")
}

/// The registration of memdir with `client`, launching `binary`, optionally on store `dir`.
pub fn registration(client: &str, binary: &str, dir: Option<&Path>) -> Result<Registration> {
    let dir = dir.map(|d| d.display().to_string());
    let env_json = match &dir {
        Some(d) => json!({"MEMDIR_DIR": d}),
        None => json!({}),
    };
    let pretty = |v: serde_json::Value| {
        serde_json::to_string_pretty(&v).expect("invariant: JSON serializes") + "\n"
    };
    Ok(match client {
        "claude" => {
            let mut cmd = vec![
                "claude".to_string(),
                "mcp".into(),
                "add".into(),
                "--scope".into(),
                "user".into(),
            ];
            if let Some(d) = &dir {
                cmd.extend(["--env".into(), format!("MEMDIR_DIR={d}")]);
            }
            cmd.extend(["memdir".into(), "--".into(), binary.into(), "serve".into()]);
            Registration {
                snippet: cmd.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ") + "\n",
                file: None,
                command: Some(cmd),
            }
        }
        "codex" => {
            let mut snippet = format!(
                "[mcp_servers.memdir]\ncommand = {}\nargs = [\"serve\"]\n",
                toml_str(binary)
            );
            if let Some(d) = &dir {
                snippet.push_str(&format!("env = {{ MEMDIR_DIR = {} }}\n", toml_str(d)));
            }
            let mut cmd = vec![
                "codex".to_string(),
                "mcp".into(),
                "add".into(),
                "memdir".into(),
            ];
            if let Some(d) = &dir {
                cmd.extend(["--env".into(), format!("MEMDIR_DIR={d}")]);
            }
            cmd.extend(["--".into(), binary.into(), "serve".into()]);
            Registration {
                snippet,
                file: Some("~/.codex/config.toml"),
                command: Some(cmd),
            }
        }
        "cursor" | "generic" => {
            let mut server = json!({"command": binary, "args": ["serve"]});
            if dir.is_some() {
                server["env"] = env_json;
            }
            Registration {
                snippet: pretty(json!({"mcpServers": {"memdir": server}})),
                file: Some(if client == "cursor" {
                    "~/.cursor/mcp.json"
                } else {
                    "your client's MCP configuration"
                }),
                command: None,
            }
        }
        "opencode" => {
            let mut server =
                json!({"type": "local", "command": [binary, "serve"], "enabled": true});
            if dir.is_some() {
                server["environment"] = env_json;
            }
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
        }
        assert!(registration("vim", "memdir", None).is_err());
    }
}
