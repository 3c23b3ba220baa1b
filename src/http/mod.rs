//! HTTP: a REST API (`--transport http`) and MCP over streamable HTTP (`--transport mcp-http`).
//!
//! Architecture Invariant: this module maps HTTP to the operation table ([`memdir_engine::ops`]): its
//! routes are the table's REST routes and every request runs [`ops::call`], so every surface
//! has the same semantics and errors; only the guard and the mapping of [`ErrorKind`] to
//! status codes live here. It never goes through the MCP surface (MCP over HTTP is rmcp's
//! service, mounted at `/mcp`).
//!
//! Security: a loopback bind works without a token; any other bind refuses to start without
//! one, or with one shorter than [`MIN_PUBLIC_TOKEN_CHARS`]. A token nobody could send (empty,
//! whitespace around it, control characters) is refused on every bind. With a token, every
//! request on both transports must carry `Authorization: Bearer <token>` or `X-Token: <token>`
//! (compared in constant time); only `GET /health` stays open and tells nothing but liveness and
//! version. Without a token, `Host` (and `Origin`, when present) must name a loopback host, so a
//! web page cannot reach the server through DNS rebinding; `Origin: null` (sandboxed frames,
//! `data:` URLs) is refused too.
//!
//! A request body must be `application/json`: a web page can send `text/plain` or a form to any
//! address without a CORS preflight, but never JSON, so a page cannot write into memory.
//!
//! Resources are bounded before authentication, since a public bind lets anyone connect: every
//! connection must send its request head within [`Limits::header_timeout`] and is closed after
//! [`Limits::idle_timeout`] without traffic; at most [`Limits::max_connections`] are open (the
//! least recently active idle one makes room for a new one); a body must arrive within
//! [`Limits::body_timeout`] and is read before a concurrency permit is taken; MCP sessions are
//! capped and expire when idle.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::{IncomingStream, Listener};
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

mod body;
mod conn;
mod guard;
mod rest;
use body::*;
use conn::*;
pub use conn::{DEFAULT_BODY_LIMIT, Limits};
pub use guard::MIN_PUBLIC_TOKEN_CHARS;
use guard::*;
use rest::*;

use crate::mcp::Server;
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_engine::acl::Caller;
use memdir_engine::ops::Profile;
use memdir_engine::ops::{self, Op};
use memdir_engine::service::Memdir;

/// Which protocol the server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// The REST API.
    Rest,
    /// MCP streamable HTTP at `/mcp`.
    Mcp,
}

/// Options of an HTTP server.
#[derive(Clone, Debug)]
pub struct Options {
    pub transport: Transport,
    pub host: String,
    pub port: u16,
    /// The single token: whoever sends it acts as an admin device.
    pub token: Option<String>,
    /// Per-device tokens (`[[http.tokens]]`): `(token, device)`.
    pub device_tokens: Vec<(String, String)>,
    /// This server's device (the caller when no token is configured) and the policy every
    /// caller acts under.
    pub device: String,
    pub acl: Option<Arc<memdir_engine::acl::Acl>>,
    pub profile: Profile,
    /// Largest request body, in bytes.
    pub body_limit: usize,
    /// Requests handled at once; more wait, then get 503.
    pub max_concurrency: usize,
    /// Longest a request may take before 503.
    pub timeout: Duration,
    /// Time and count limits on connections and sessions.
    pub limits: Limits,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded data stays consistent across a panic (plain counters and instants).
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Clone)]
struct App {
    memdir: Arc<Memdir>,
    /// The MCP tool profile `GET /tools` lists (the REST routes serve every operation).
    profile: Profile,
    /// Every accepted token and the caller it makes; empty: no token is required.
    auth: Arc<Vec<(Arc<str>, Caller)>>,
    /// The caller when no token is configured (loopback only): this server's device.
    local: Caller,
    body_limit: usize,
    permits: Arc<Semaphore>,
    timeout: Duration,
    limits: Limits,
    /// The MCP sessions (MCP transport only).
    sessions: Option<Arc<Sessions>>,
}

/// The MCP session header (rmcp's `HEADER_SESSION_ID`).
const SESSION_ID: &str = "mcp-session-id";

/// Serves until interrupted (SIGINT/SIGTERM).
/// Serves until SIGINT or SIGTERM; `on_listening` learns the bound address once the server
/// listens (the CLI prints it: the one line a supervisor or a test reads).
pub fn serve(memdir: Memdir, opts: Options, on_listening: impl FnOnce(&str)) -> Result<()> {
    check_tokens(&opts.host, opts.token.as_deref(), &opts.device_tokens)?;
    let limits = opts.limits;
    let host = if opts.host.eq_ignore_ascii_case("localhost") {
        "127.0.0.1".to_string()
    } else {
        opts.host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string()
    };
    let ip: IpAddr = host.parse().map_err(|_| {
        Error::invalid(
            "host",
            format!("{:?} is not an IP address or localhost", opts.host),
        )
    })?;
    let addr = SocketAddr::new(ip, opts.port);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::internal(format!("runtime: {e}")))?;
    let memdir = Arc::new(memdir);
    let kept = memdir.clone();
    memdir_engine::service::warm_up(&memdir);
    let served = rt.block_on(async move {
        let sessions = (opts.transport == Transport::Mcp).then(|| {
            let mut manager = LocalSessionManager::default();
            manager.session_config.keep_alive = Some(limits.session_idle);
            Arc::new(Sessions {
                manager: Arc::new(manager),
                max: limits.max_sessions.max(1),
                last_used: Mutex::new(HashMap::new()),
            })
        });
        let app = App {
            memdir: memdir.clone(),
            profile: opts.profile,
            auth: Arc::new(
                opts.token
                    .iter()
                    .map(|t| (Arc::from(t.as_str()), Caller::admin(opts.device.clone(), opts.acl.clone()).from_network()))
                    .chain(opts.device_tokens.iter().map(|(t, d)| {
                        (Arc::from(t.as_str()), Caller::new(d.clone(), opts.acl.clone()).from_network())
                    }))
                    .collect(),
            ),
            local: Caller::new(opts.device.clone(), opts.acl.clone()).from_network(),
            body_limit: opts.body_limit,
            permits: Arc::new(Semaphore::new(opts.max_concurrency.max(1))),
            timeout: opts.timeout,
            limits,
            sessions: sessions.clone(),
        };
        let cancel = CancellationToken::new();
        let router = match &sessions {
            None => rest_router(app.clone()),
            Some(sessions) => {
                let profile = opts.profile;
                let m = memdir.clone();
                let mut config = StreamableHttpServerConfig::default()
                    .with_max_request_body_bytes(opts.body_limit)
                    .with_cancellation_token(cancel.child_token());
                // Host and token checks happen in `guard`, for both transports alike.
                config = config.disable_allowed_hosts();
                let service = StreamableHttpService::new(move || Ok(Server::shared(m.clone(), profile, mcp_caller)), sessions.manager.clone(), config);
                Router::new().nest_service("/mcp", service).layer(middleware::from_fn(session_end)).route("/health", get(health)).fallback(not_found)
            }
        };
        let router = router.layer(middleware::from_fn_with_state(app, guard));
        let tcp = TcpListener::bind(addr).await.map_err(|e| bind_error(addr, &e))?;
        let local = tcp.local_addr().map_err(|e| Error::internal(e.to_string()))?;
        let listener = TrackedListener { tcp, conns: Arc::new(Connections::new(limits)) };
        on_listening(&format!("http://{local}{}", if opts.transport == Transport::Mcp { "/mcp" } else { "" }));
        let shutdown = async move {
            let ctrl_c = tokio::signal::ctrl_c();
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = ctrl_c => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
            }
            cancel.cancel();
        };
        axum::serve(listener, router.into_make_service_with_connect_info::<ConnHandle>())
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|e| Error::new(ErrorKind::Unavailable, format!("HTTP server: {e}")))
    });
    // Stopped (SIGINT, SIGTERM): what the index kept in memory goes to disk.
    kept.indexing().land_index();
    served
}

/// Why the server cannot listen on `addr`: a port another program holds names the ways out.
fn bind_error(addr: SocketAddr, e: &io::Error) -> Error {
    let err = Error::new(
        ErrorKind::Unavailable,
        format!("cannot listen on {addr}: {e}"),
    )
    .detail("address", Value::from(addr.to_string()));
    if e.kind() == io::ErrorKind::AddrInUse {
        err.hint(format!(
            "another program listens on port {}: pass --port 0 to take a free port (the URL is printed), or --port with another number (`http.port` in the config file sets the default)",
            addr.port()
        ))
    } else {
        err
    }
}

/// Parses `--transport`.
pub fn parse_transport(s: &str) -> Result<Option<Transport>> {
    match s {
        "stdio" => Ok(None),
        "http" | "rest" => Ok(Some(Transport::Rest)),
        "mcp-http" | "streamable-http" => Ok(Some(Transport::Mcp)),
        _ => Err(Error::invalid(
            "transport",
            format!("transport must be stdio, http or mcp-http; got {s:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names() {
        for h in [
            "127.0.0.1",
            "::1",
            "[::1]",
            "localhost",
            "LOCALHOST",
            "127.3.4.5",
        ] {
            assert!(is_loopback(h), "{h}");
        }
        for h in [
            "0.0.0.0",
            "example.com",
            "192.168.1.2",
            "localhost.evil.com",
            "::",
        ] {
            assert!(!is_loopback(h), "{h}");
        }
    }

    #[test]
    fn host_names_are_parsed() {
        assert_eq!(host_name("localhost:8787"), "localhost");
        assert_eq!(host_name("[::1]:8000"), "::1");
        assert_eq!(host_name("http://127.0.0.1:3000"), "127.0.0.1");
        assert_eq!(host_name("https://evil.com/x"), "evil.com");
        assert_eq!(host_name("evil.com"), "evil.com");
    }

    #[test]
    fn tokens_nobody_could_send_or_too_weak_to_expose_are_refused() {
        let long = "0123456789abcdef";
        for (host, token) in [
            ("127.0.0.1", Some("")),
            ("127.0.0.1", Some(" ")),
            ("localhost", Some("\t")),
            ("127.0.0.1", Some(" 0123456789abcdef")),
            ("127.0.0.1", Some("0123456789abcdef\n")),
            ("127.0.0.1", Some("abc\u{7}def")),
            ("0.0.0.0", None),
            ("0.0.0.0", Some("")),
            ("0.0.0.0", Some("0123456789abcde")),
            ("::", Some("short")),
        ] {
            assert!(check_token(host, token).is_err(), "{host} {token:?}");
        }
        for (host, token) in [
            ("127.0.0.1", None),
            ("::1", Some("short")),
            ("0.0.0.0", Some(long)),
            ("0.0.0.0", Some("ünïcödé-tøkén-16")),
        ] {
            assert!(check_token(host, token).is_ok(), "{host} {token:?}");
        }
        let short = check_token("0.0.0.0", Some("0123456789abcde")).unwrap_err();
        assert_eq!(short.kind, ErrorKind::Denied);
        assert!(
            !short.message.contains("0123456789abcde"),
            "{}",
            short.message
        );
    }

    #[test]
    fn json_content_types() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_str(v).unwrap());
            is_json(&h)
        };
        for v in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            " application/json ;charset=UTF-8",
        ] {
            assert!(with(v), "{v}");
        }
        for v in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
            "text/json",
            "application/json-patch+json",
            "",
        ] {
            assert!(!with(v), "{v}");
        }
        assert!(!is_json(&HeaderMap::new()));
    }

    #[test]
    fn connection_deadlines() {
        let limits = Limits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            ..Limits::default()
        };
        let conns = Connections::new(Limits {
            max_connections: 2,
            ..limits
        });
        let a = conns.admit().expect("room for a");
        // A new connection owes its first head within the header timeout.
        let opened = lock(&a.activity).last;
        assert_eq!(a.deadline(&limits), Some(opened + limits.header_timeout));
        // No deadline while a request runs; then the idle timeout, not the header one.
        let req = a.enter();
        assert_eq!(a.deadline(&limits), None);
        drop(req);
        let ended = lock(&a.activity).last;
        assert_eq!(a.deadline(&limits), Some(ended + limits.idle_timeout));
        // The first byte of the next head starts the header timeout again.
        a.moved(true);
        let head = lock(&a.activity).head_since.expect("head started");
        assert_eq!(a.deadline(&limits), Some(head + limits.header_timeout));

        // At the cap, the idle connection that moved least recently makes room.
        let b = conns.admit().expect("room for b");
        let busy = b.enter();
        let c = conns.admit().expect("a was idle");
        assert!(a.close.is_cancelled() && !b.close.is_cancelled());
        // With every other connection busy, the idle one goes; with all busy, none is admitted.
        let _busy_c = c.enter();
        assert!(conns.admit().is_none());
        drop(busy);
        assert!(conns.admit().is_some());
        assert!(b.close.is_cancelled());
    }

    #[test]
    fn constant_time_compare() {
        assert!(ct_eq(b"secret", b"secret"));
        assert!(!ct_eq(b"secret", b"secreT"));
        assert!(!ct_eq(b"secret", b"secret "));
    }
}
