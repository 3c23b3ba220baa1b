//! The HTTP transport's client: JSON over blocking HTTP (`ureq`) to the REST routes of a
//! `memdir serve --transport http`, with a bearer token.
//!
//! It only moves JSON: what the messages mean (manifest, diff, pages) and how they are
//! applied is the engine's (`service::sync_http`). Every call has a timeout; an answer that
//! is not JSON, or an error status, becomes a [`RemoteError`] that says which.

use std::time::Duration;

use serde_json::Value;

/// The routes of the sync plane (the operation table defines the same paths).
pub const MANIFEST: &str = "/api/v1/sync/manifest";
pub const DIFF: &str = "/api/v1/sync/diff";
pub const PULL: &str = "/api/v1/sync/pull";
pub const PUSH: &str = "/api/v1/sync/push";

/// Largest answer read, in bytes (a page is at most 8 MiB of data, escaped as JSON).
const MAX_BODY: u64 = 64 << 20;

/// Why a call failed.
#[derive(Debug)]
pub enum RemoteError {
    /// No answer: refused, unreachable, timed out.
    Unreachable(String),
    /// The server answered with an error status and its error body (`code`, `message`).
    Status {
        status: u16,
        code: String,
        message: String,
        /// The error's other fields (the rule that refused, the device, ...).
        details: serde_json::Map<String, Value>,
    },
    /// An answer that is not what the protocol says.
    Protocol(String),
}

/// Whether `remote` names an HTTP remote rather than a git remote.
pub fn is_url(remote: &str) -> bool {
    remote.starts_with("http://") || remote.starts_with("https://")
}

/// A memdir server reached over HTTP.
pub struct Remote {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
}

impl Remote {
    /// `url` is the server's base (`http://host:8787`); `token` its bearer token.
    pub fn new(url: &str, token: Option<String>, timeout: Duration) -> Remote {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .into();
        Remote {
            agent,
            base: url.trim_end_matches('/').to_string(),
            token,
        }
    }

    /// POSTs `body` to `route` (GETs `route` when `body` is `None`) and returns the JSON
    /// answer.
    pub fn call(&self, route: &str, body: Option<&Value>) -> Result<Value, RemoteError> {
        let url = format!("{}{route}", self.base);
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let sent = match body {
            Some(b) => {
                let mut req = self
                    .agent
                    .post(&url)
                    .header("Content-Type", "application/json");
                if let Some(a) = &auth {
                    req = req.header("Authorization", a);
                }
                req.send_json(b)
            }
            None => {
                let mut req = self.agent.get(&url);
                if let Some(a) = &auth {
                    req = req.header("Authorization", a);
                }
                req.call()
            }
        };
        let mut resp = sent.map_err(|e| RemoteError::Unreachable(format!("{url}: {e}")))?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_string()
            .map_err(|e| RemoteError::Unreachable(format!("{url}: reading the answer: {e}")))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| {
            let snippet: String = text.chars().take(200).collect();
            RemoteError::Protocol(format!(
                "{url} answered HTTP {status} with something that is not JSON ({e}): {snippet}"
            ))
        })?;
        if status != 200 {
            let err = &v["error"];
            return Err(RemoteError::Status {
                status,
                code: err["code"].as_str().unwrap_or("unknown").to_string(),
                message: err["message"]
                    .as_str()
                    .map(String::from)
                    .unwrap_or_else(|| format!("HTTP {status} from {url}")),
                details: err
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .filter(|(k, _)| !["code", "message", "hints"].contains(&k.as_str()))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect()
                    })
                    .unwrap_or_default(),
            });
        }
        Ok(v)
    }
}
