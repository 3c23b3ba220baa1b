//! HTTP: a REST API (`--transport http`) and MCP over streamable HTTP (`--transport mcp-http`).
//!
//! Architecture Invariant: this module maps HTTP to the operation table ([`crate::ops`]): its
//! routes are the table's REST routes and every request runs [`ops::call`], so every surface
//! has the same semantics and errors; only the guard and the mapping of [`ErrorKind`] to
//! status codes live here. It never goes through the MCP surface (MCP over HTTP is rmcp's
//! service, mounted at `/mcp`).
//!
//! Security: a loopback bind works without a token; any other bind refuses to start without
//! one. With a token, every request on both transports must carry `Authorization: Bearer
//! <token>` or `X-Token: <token>` (compared in constant time); only `GET /health` stays open and
//! tells nothing but liveness and version. Without a token, `Host` (and `Origin`, when present)
//! must name a loopback host, so a web page cannot reach the server through DNS rebinding.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Map, Value, json};
use tokio::sync::Semaphore;

use crate::error::{Error, ErrorKind, Result};
use crate::mcp::{Profile, Server};
use crate::ops::{self, Op};
use crate::service::Memdir;

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
    pub token: Option<String>,
    pub profile: Profile,
    /// Largest request body, in bytes.
    pub body_limit: usize,
    /// Requests handled at once; more wait, then get 503.
    pub max_concurrency: usize,
    /// Longest a request may take before 503.
    pub timeout: Duration,
}

/// Default largest request body: 16 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 16 * 1024 * 1024;

/// Whether a host name or address is loopback.
pub fn is_loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost") || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The host part of a `Host` header or an origin (`http://name:port`).
fn host_name(value: &str) -> &str {
    let v = value.split("://").nth(1).unwrap_or(value);
    let v = v.split('/').next().unwrap_or(v);
    if let Some(rest) = v.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    v.rsplit_once(':')
        .filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()))
        .map_or(v, |(n, _)| n)
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    // Length is not secret; the content is compared without an early exit.
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::Invalid => StatusCode::BAD_REQUEST,
        ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::Busy | ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Corrupt => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::Denied => StatusCode::FORBIDDEN,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn json_response(status: StatusCode, v: &Value) -> Response {
    let mut r = (status, serde_json::to_string(v).unwrap_or_default()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn error_response(e: &Error) -> Response {
    let e = &ops::for_surface(e.clone(), ops::Surface::Rest);
    let status = status_of(e.kind);
    let mut r = json_response(status, &json!({"error": e.to_json()}));
    if status == StatusCode::SERVICE_UNAVAILABLE {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    r
}

fn plain_error(status: StatusCode, code: &str, message: &str) -> Response {
    json_response(
        status,
        &json!({"error": {"code": code, "message": message, "hints": []}}),
    )
}

#[derive(Clone)]
struct App {
    memdir: Arc<Memdir>,
    /// The MCP tool profile `GET /tools` lists (the REST routes serve every operation).
    profile: Profile,
    token: Option<Arc<str>>,
    body_limit: usize,
    permits: Arc<Semaphore>,
    timeout: Duration,
}

/// Authentication, Host/Origin checks, concurrency and time limits, and JSON for every error
/// the router itself produces (404, 405).
async fn guard(State(app): State<App>, req: Request, next: Next) -> Response {
    let open = req.method() == Method::GET && req.uri().path() == "/health";
    let headers = req.headers();
    match &app.token {
        Some(token) if !open => {
            // The scheme name is case-insensitive (RFC 9110 §11.1); exactly one space follows.
            let bearer = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split_once(' '))
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                .map(|(_, t)| t.as_bytes());
            let x_token = headers.get("x-token").map(HeaderValue::as_bytes);
            let ok = bearer
                .or(x_token)
                .is_some_and(|t| ct_eq(t, token.as_bytes()));
            if !ok {
                let mut r = plain_error(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "a valid token is required: send Authorization: Bearer <token> or X-Token: <token>",
                );
                r.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                return r;
            }
        }
        None => {
            let host_ok = headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|h| is_loopback(host_name(h)));
            let origin_ok = headers
                .get(header::ORIGIN)
                .map(|v| {
                    v.to_str()
                        .ok()
                        .is_some_and(|o| o == "null" || is_loopback(host_name(o)))
                })
                .unwrap_or(true);
            if !host_ok || !origin_ok {
                return plain_error(
                    StatusCode::FORBIDDEN,
                    "denied",
                    "Host and Origin must name this machine (localhost, 127.0.0.1, ::1); set a token to serve other names",
                );
            }
        }
        _ => {}
    }
    let Ok(permit) = tokio::time::timeout(app.timeout, app.permits.clone().acquire_owned()).await
    else {
        let mut r = plain_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "too many requests at once; retry",
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return r;
    };
    let is_mcp = req.uri().path().starts_with("/mcp");
    let response = if is_mcp {
        // MCP keeps streams open (SSE): no overall deadline there.
        next.run(req).await
    } else {
        match tokio::time::timeout(app.timeout, next.run(req)).await {
            Ok(r) => r,
            Err(_) => {
                let mut r = plain_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "busy",
                    "the request took too long; retry",
                );
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                r
            }
        }
    };
    drop(permit);
    if response.status() == StatusCode::METHOD_NOT_ALLOWED && !is_mcp {
        let allow = response.headers().get(header::ALLOW).cloned();
        let mut r = plain_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this path does not accept that method; see the Allow header",
        );
        if let Some(a) = allow {
            r.headers_mut().insert(header::ALLOW, a);
        }
        return r;
    }
    response
}

async fn read_json(req: Request, limit: usize) -> Result<Map<String, Value>> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let bytes: Bytes = axum::body::to_bytes(req.into_body(), limit)
        .await
        .map_err(|_| match declared {
            Some(n) if n > limit => {
                Error::too_large("body", n, limit, "bytes").hint("send a smaller request")
            }
            _ => Error::new(
                ErrorKind::TooLarge,
                format!("the body is over the limit of {limit} bytes (or could not be read)"),
            )
            .field("body")
            .detail("limit", Value::from(limit))
            .hint("send a smaller request"),
        })?;
    if bytes.is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(Error::invalid(
            "body",
            format!(
                "the body must be a JSON object, got {}",
                crate::service::type_name(&other)
            ),
        )),
        Err(e) => Err(Error::invalid(
            "body",
            format!("the body is not valid JSON: {e}"),
        )),
    }
}

/// Runs an operation on the blocking pool and shapes the response.
async fn run(app: &App, op: &'static Op, args: Map<String, Value>) -> Response {
    if let Err(e) = app.memdir.ensure_started() {
        return error_response(&e);
    }
    let memdir = app.memdir.clone();
    let out = tokio::task::spawn_blocking(move || ops::call(&memdir, op, Value::Object(args)))
        .await
        .unwrap_or_else(|e| Err(Error::internal(format!("request panicked: {e}"))));
    match out {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(e) => error_response(&e),
    }
}

async fn post_op(State(app): State<App>, op: &'static Op, req: Request) -> Response {
    match read_json(req, app.body_limit).await {
        Ok(args) => run(&app, op, args).await,
        Err(e) => error_response(&e),
    }
}

async fn get_op(State(app): State<App>, op: &'static Op, req: Request) -> Response {
    match query_args(&req, &integer_params(op)) {
        Ok(args) => run(&app, op, args).await,
        Err(e) => error_response(&e),
    }
}

/// The names of an operation's integer parameters (query strings carry only text).
fn integer_params(op: &Op) -> Vec<String> {
    ops::input_schema(op)
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, s)| s.get("type") == Some(&json!("integer")))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default()
}

fn query_args(req: &Request, ints: &[String]) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    for pair in req
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = v.replace('+', " ");
        let v = percent_decode(&v).ok_or_else(|| {
            Error::invalid(
                k,
                format!("query parameter {k} is not valid percent-encoding"),
            )
        })?;
        if ints.iter().any(|i| i == k) {
            let n: u64 = v.parse().map_err(|_| {
                Error::invalid(k, format!("{k} must be a non-negative integer, got {v:?}"))
            })?;
            out.insert(k.to_string(), Value::from(n));
        } else {
            out.insert(k.to_string(), Value::from(v));
        }
    }
    Ok(out)
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `POST /search`: keyword search, or with `"semantic": true` semantic search (`query` and
/// `limit` only).
async fn search(State(app): State<App>, req: Request) -> Response {
    let mut args = match read_json(req, app.body_limit).await {
        Ok(a) => a,
        Err(e) => return error_response(&e),
    };
    // `semantic` is strictly a boolean: "false" is an error, not true.
    let semantic = match args.remove("semantic") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => b,
        Some(other) => {
            return error_response(&Error::invalid(
                "semantic",
                format!(
                    "semantic must be true or false, got {}",
                    crate::service::type_name(&other)
                ),
            ));
        }
    };
    if semantic {
        let extra: Vec<String> = args
            .keys()
            .filter(|k| !["query", "limit"].contains(&k.as_str()))
            .cloned()
            .collect();
        if !extra.is_empty() {
            return error_response(&Error::invalid(
                &extra[0],
                format!(
                    "semantic search takes query and limit only; got {}",
                    extra.join(", ")
                ),
            ));
        }
        return run(&app, op("search_semantic"), args).await;
    }
    run(&app, op("search"), args).await
}

/// An operation of the table by name.
fn op(name: &str) -> &'static Op {
    ops::find(name).expect("invariant: the REST surface names operations of the table")
}

async fn health() -> Response {
    json_response(
        StatusCode::OK,
        &json!({"ok": true, "version": env!("CARGO_PKG_VERSION")}),
    )
}

async fn tools(State(app): State<App>) -> Response {
    let list: Vec<Value> = ops::tools(app.profile)
        .iter()
        .map(|(op, t)| json!({"name": t.name, "description": op.description, "input_schema": Value::Object(ops::input_schema(op))}))
        .collect();
    json_response(StatusCode::OK, &json!({"tools": list}))
}

async fn not_found(req: Request) -> Response {
    plain_error(
        StatusCode::NOT_FOUND,
        "not_found",
        &format!("no such endpoint: {} {}", req.method(), req.uri().path()),
    )
}

/// The REST routes: the surface's own (`/health`, `/tools`, `/search` with its semantic
/// switch), then every REST route of the operation table.
fn rest_router(app: App) -> Router {
    let mut r = Router::new()
        .route("/health", get(health))
        .route("/tools", get(tools))
        .route("/search", post(search));
    for op in ops::table() {
        let Some(route) = op.rest else { continue };
        if route.path == "/search" {
            continue;
        }
        r = match route.method {
            ops::Method::Get => r.route(
                route.path,
                get(move |state: State<App>, req: Request| get_op(state, op, req)),
            ),
            ops::Method::Post => r.route(
                route.path,
                post(move |state: State<App>, req: Request| post_op(state, op, req)),
            ),
        };
    }
    r.fallback(not_found).with_state(app)
}

/// Serves until interrupted (SIGINT/SIGTERM).
pub fn serve(memdir: Memdir, opts: Options) -> Result<()> {
    if !is_loopback(&opts.host) && opts.token.as_deref().is_none_or(str::is_empty) {
        return Err(Error::new(
            ErrorKind::Denied,
            format!("refusing to listen on {} without a token: anyone who can reach it could read and change your memory", opts.host),
        )
        .hint("set --token or MEMDIR_HTTP_TOKEN, or bind to 127.0.0.1, ::1 or localhost"));
    }
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
    rt.block_on(async move {
        let memdir = Arc::new(memdir);
        let app = App {
            memdir: memdir.clone(),
            profile: opts.profile,
            token: opts.token.filter(|t| !t.is_empty()).map(Arc::from),
            body_limit: opts.body_limit,
            permits: Arc::new(Semaphore::new(opts.max_concurrency.max(1))),
            timeout: opts.timeout,
        };
        let cancel = tokio_util::sync::CancellationToken::new();
        let router = match opts.transport {
            Transport::Rest => rest_router(app.clone()),
            Transport::Mcp => {
                let profile = opts.profile;
                let m = memdir.clone();
                let mut config = StreamableHttpServerConfig::default()
                    .with_max_request_body_bytes(opts.body_limit)
                    .with_cancellation_token(cancel.child_token());
                // Host and token checks happen in `guard`, for both transports alike.
                config = config.disable_allowed_hosts();
                let service = StreamableHttpService::new(move || Ok(Server::shared(m.clone(), profile)), Arc::new(LocalSessionManager::default()), config);
                Router::new().nest_service("/mcp", service).route("/health", get(health)).fallback(not_found)
            }
        };
        let router = router.layer(middleware::from_fn_with_state(app, guard));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::new(ErrorKind::Unavailable, format!("cannot listen on {addr}: {e}")))?;
        let local = listener.local_addr().map_err(|e| Error::internal(e.to_string()))?;
        // The one line a supervisor (or a test) reads to learn the address; logs go to stderr.
        eprintln!("memdir: listening on http://{local}{}", if opts.transport == Transport::Mcp { "/mcp" } else { "" });
        let shutdown = async move {
            let ctrl_c = tokio::signal::ctrl_c();
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = ctrl_c => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
            }
            cancel.cancel();
        };
        axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|e| Error::new(ErrorKind::Unavailable, format!("HTTP server: {e}")))
    })
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
    fn constant_time_compare() {
        assert!(ct_eq(b"secret", b"secret"));
        assert!(!ct_eq(b"secret", b"secreT"));
        assert!(!ct_eq(b"secret", b"secret "));
    }
}
