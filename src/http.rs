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

/// Default largest request body: 16 MiB.
pub const DEFAULT_BODY_LIMIT: usize = crate::config::http_defaults::BODY_LIMIT;

/// Shortest token accepted on a non-loopback bind, where anyone who can connect may guess.
pub const MIN_PUBLIC_TOKEN_CHARS: usize = 16;

/// Time and count limits on connections and sessions. Each has a default, a key in the config
/// file's `[http]` section and an environment variable (`MEMDIR_HTTP_*`) that overrides it
/// (resolved by [`crate::config`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A request head must arrive within this time, counted from the connection's first byte
    /// (or, for a new connection, from the accept). `MEMDIR_HTTP_HEADER_TIMEOUT_MS`.
    pub header_timeout: Duration,
    /// A connection without traffic and without a request in progress is closed after this.
    /// `MEMDIR_HTTP_IDLE_TIMEOUT_MS`.
    pub idle_timeout: Duration,
    /// A request body must arrive within this time after its head, else 408.
    /// `MEMDIR_HTTP_BODY_TIMEOUT_MS`.
    pub body_timeout: Duration,
    /// Connections open at once; also at most half the process's open-file limit.
    /// `MEMDIR_HTTP_MAX_CONNECTIONS`.
    pub max_connections: usize,
    /// MCP sessions alive at once; a new one closes the least recently used.
    /// `MEMDIR_HTTP_MAX_SESSIONS`.
    pub max_sessions: usize,
    /// An MCP session without requests for this long is closed. `MEMDIR_HTTP_SESSION_IDLE_MS`.
    pub session_idle: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        use crate::config::http_defaults as d;
        Limits {
            header_timeout: Duration::from_millis(d::HEADER_TIMEOUT_MS),
            idle_timeout: Duration::from_millis(d::IDLE_TIMEOUT_MS),
            body_timeout: Duration::from_millis(d::BODY_TIMEOUT_MS),
            max_connections: d::MAX_CONNECTIONS as usize,
            max_sessions: d::MAX_SESSIONS as usize,
            session_idle: Duration::from_millis(d::SESSION_IDLE_MS),
        }
    }
}

impl Limits {
    /// The limits of a resolved configuration (`[http]`, `MEMDIR_HTTP_*`).
    pub fn from_config(c: &crate::config::HttpConfig) -> Limits {
        let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        Limits {
            header_timeout: Duration::from_millis(c.header_timeout_ms.value),
            idle_timeout: Duration::from_millis(c.idle_timeout_ms.value),
            body_timeout: Duration::from_millis(c.body_timeout_ms.value),
            max_connections: count(c.max_connections.value),
            max_sessions: count(c.max_sessions.value),
            session_idle: Duration::from_millis(c.session_idle_ms.value),
        }
    }
}

/// The soft limit on open files of this process, where the system tells it (Linux).
fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Checks the single token and every device's token; a bind beyond loopback needs at least
/// one. An error names the device whose token is wrong.
fn check_tokens(host: &str, token: Option<&str>, device_tokens: &[(String, String)]) -> Result<()> {
    if device_tokens.is_empty() || token.is_some() {
        check_token(host, token)?;
    }
    for (t, device) in device_tokens {
        check_token(host, Some(t)).map_err(|e| {
            let mut e = e.detail("device", Value::from(device.clone()));
            e.message = format!("the token of device {device:?}: {}", e.message);
            e
        })?;
    }
    Ok(())
}

/// Refuses a token nobody could use, and a weak one where anyone can connect.
fn check_token(host: &str, token: Option<&str>) -> Result<()> {
    let public = !is_loopback(host);
    let regenerate = "generate one, e.g. `head -c 24 /dev/urandom | base64`";
    match token {
        None | Some("") if public => Err(Error::new(
            ErrorKind::Denied,
            format!("refusing to listen on {host} without a token: anyone who can reach it could read and change your memory"),
        )
        .hint("set --token or MEMDIR_HTTP_TOKEN, or bind to 127.0.0.1, ::1 or localhost")),
        None => Ok(()),
        Some(t) if t.trim().is_empty() => Err(Error::invalid(
            "token",
            "the token is empty or only whitespace: no client could send it",
        )
        .hint(regenerate)
        .hint("or leave --token and MEMDIR_HTTP_TOKEN unset to serve loopback without one")),
        Some(t) if t.trim() != t => Err(Error::invalid(
            "token",
            "the token starts or ends with whitespace, which HTTP strips from header values: no client could send it",
        )
        .hint("remove the surrounding whitespace")),
        Some(t) if t.chars().any(char::is_control) => Err(Error::invalid(
            "token",
            "the token contains control characters, which no HTTP header can carry",
        )
        .hint(regenerate)),
        Some(t) if public && t.chars().count() < MIN_PUBLIC_TOKEN_CHARS => Err(Error::new(
            ErrorKind::Denied,
            format!(
                "refusing to listen on {host} with a token of {} characters: a non-loopback bind needs at least {MIN_PUBLIC_TOKEN_CHARS}",
                t.chars().count()
            ),
        )
        .hint(regenerate)),
        Some(_) => Ok(()),
    }
}

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
        ErrorKind::Denied | ErrorKind::Forbidden => StatusCode::FORBIDDEN,
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded data stays consistent across a panic (plain counters and instants).
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------------
// Connections: header and idle deadlines, and a cap that makes room by closing idle ones.
//
// hyper's own header timeout also runs while a keep-alive connection waits for its next
// request, so it cannot tell a slow head from an idle connection; and axum::serve has no cap.
// So every accepted stream is wrapped: it knows whether a request is in progress (the guard
// marks it), when it last moved a byte and when the current head began, and fails its pending
// read or write with `TimedOut` once the deadline that applies has passed.
// ---------------------------------------------------------------------------------------------

/// One accepted connection, shared by its stream, the guard and the registry.
struct Conn {
    id: u64,
    activity: Mutex<Activity>,
    /// Cancelled to close the connection (eviction).
    close: CancellationToken,
}

struct Activity {
    /// Requests in the guard (a request whose response is being written counts as traffic).
    busy: usize,
    /// The last byte read or written, or the end of the last request.
    last: Instant,
    /// When the head now being read began: the accept, or the first byte after a request.
    head_since: Option<Instant>,
}

impl Conn {
    /// When this connection is to be closed if nothing changes; `None` while a request runs.
    fn deadline(&self, limits: &Limits) -> Option<Instant> {
        let a = lock(&self.activity);
        if a.busy > 0 {
            return None;
        }
        let idle = a.last + limits.idle_timeout;
        Some(
            a.head_since
                .map_or(idle, |h| idle.min(h + limits.header_timeout)),
        )
    }

    fn moved(&self, read: bool) {
        let now = Instant::now();
        let mut a = lock(&self.activity);
        a.last = now;
        if read && a.busy == 0 && a.head_since.is_none() {
            a.head_since = Some(now);
        }
    }

    /// Marks a request in progress until the returned value is dropped.
    fn enter(self: &Arc<Self>) -> InProgress {
        let mut a = lock(&self.activity);
        a.busy += 1;
        a.head_since = None;
        InProgress(self.clone())
    }
}

struct InProgress(Arc<Conn>);

impl Drop for InProgress {
    fn drop(&mut self) {
        let mut a = lock(&self.0.activity);
        a.busy -= 1;
        a.last = Instant::now();
    }
}

/// The open connections.
struct Connections {
    limits: Limits,
    /// `limits.max_connections`, lowered to half the open-file limit.
    cap: usize,
    live: Mutex<HashMap<u64, Arc<Conn>>>,
    next_id: AtomicU64,
}

impl Connections {
    fn new(limits: Limits) -> Connections {
        let cap = open_file_limit()
            .map_or(limits.max_connections, |n| {
                limits.max_connections.min(n / 2)
            })
            .max(1);
        Connections {
            limits,
            cap,
            live: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
        }
    }

    /// Registers a new connection; at the cap, first closes the least recently active idle one.
    /// `None` (refuse the new one) when every connection has a request in progress.
    fn admit(&self) -> Option<Arc<Conn>> {
        let mut live = lock(&self.live);
        if live.len() >= self.cap && !Self::evict_idlest(&mut live) {
            return None;
        }
        let now = Instant::now();
        let conn = Arc::new(Conn {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            activity: Mutex::new(Activity {
                busy: 0,
                last: now,
                head_since: Some(now),
            }),
            close: CancellationToken::new(),
        });
        live.insert(conn.id, conn.clone());
        Some(conn)
    }

    /// Closes the idle connection that moved a byte least recently; false if none is idle.
    fn evict_idlest(live: &mut HashMap<u64, Arc<Conn>>) -> bool {
        let idlest = live
            .values()
            .filter_map(|c| {
                let a = lock(&c.activity);
                (a.busy == 0).then_some((a.last, c.id))
            })
            .min();
        let Some((_, id)) = idlest else {
            return false;
        };
        if let Some(c) = live.remove(&id) {
            c.close.cancel();
        }
        true
    }

    fn evict_one(&self) -> bool {
        Self::evict_idlest(&mut lock(&self.live))
    }

    fn remove(&self, id: u64) {
        lock(&self.live).remove(&id);
    }
}

/// A TCP listener that wraps each accepted stream in a [`TrackedStream`].
struct TrackedListener {
    tcp: TcpListener,
    conns: Arc<Connections>,
}

impl Listener for TrackedListener {
    type Io = TrackedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TrackedStream, SocketAddr) {
        loop {
            match self.tcp.accept().await {
                Ok((tcp, addr)) => {
                    // At the cap with every connection busy, the new one is closed at once.
                    if let Some(conn) = self.conns.admit() {
                        return (TrackedStream::new(tcp, conn, self.conns.clone()), addr);
                    }
                }
                Err(e) => {
                    // Out of descriptors: make room; any other error (the peer left before the
                    // accept) is the client's. Back off briefly either way, as a busy loop on a
                    // persistent error would starve the connections being served.
                    let out_of_files = matches!(e.raw_os_error(), Some(23 | 24));
                    if out_of_files {
                        self.conns.evict_one();
                    }
                    tokio::time::sleep(Duration::from_millis(if out_of_files { 10 } else { 1 }))
                        .await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

/// An accepted stream that fails its pending I/O once its connection's deadline passes or it
/// is evicted, and leaves the registry when dropped.
struct TrackedStream {
    tcp: TcpStream,
    conn: Arc<Conn>,
    conns: Arc<Connections>,
    timer: Pin<Box<tokio::time::Sleep>>,
    closed: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl TrackedStream {
    fn new(tcp: TcpStream, conn: Arc<Conn>, conns: Arc<Connections>) -> TrackedStream {
        let closed = Box::pin(conn.close.clone().cancelled_owned());
        TrackedStream {
            tcp,
            conn,
            conns,
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
            closed,
        }
    }

    fn check_closed(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        match self.closed.as_mut().poll(cx) {
            Poll::Ready(()) => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed to make room for a new connection",
            )),
            Poll::Pending => Ok(()),
        }
    }

    /// Called when the socket is not ready: pending until the deadline, then `TimedOut`.
    fn wait<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let Some(deadline) = self.conn.deadline(&self.conns.limits) else {
            return Poll::Pending;
        };
        let deadline = tokio::time::Instant::from_std(deadline);
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no request head, or no traffic, within the time limit",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for TrackedStream {
    fn drop(&mut self) {
        self.conns.remove(self.conn.id);
    }
}

impl AsyncRead for TrackedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check_closed(cx)?;
        let before = buf.filled().len();
        match Pin::new(&mut self.tcp).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    self.conn.moved(true);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.wait(cx),
        }
    }
}

impl AsyncWrite for TrackedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.check_closed(cx)?;
        match Pin::new(&mut self.tcp).poll_write(cx, data) {
            Poll::Ready(Ok(n)) => {
                self.conn.moved(false);
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.wait(cx),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.check_closed(cx)?;
        match Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs) {
            Poll::Ready(Ok(n)) => {
                self.conn.moved(false);
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.wait(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// The connection a request came on, for the guard (axum's `ConnectInfo`).
#[derive(Clone)]
struct ConnHandle(Arc<Conn>);

impl Connected<IncomingStream<'_, TrackedListener>> for ConnHandle {
    fn connect_info(stream: IncomingStream<'_, TrackedListener>) -> Self {
        ConnHandle(stream.io().conn.clone())
    }
}

// ---------------------------------------------------------------------------------------------
// MCP sessions: rmcp closes a session idle for its keep-alive; the count is capped here.
// ---------------------------------------------------------------------------------------------

/// The MCP sessions and when each last served a request.
struct Sessions {
    manager: Arc<LocalSessionManager>,
    max: usize,
    last_used: Mutex<HashMap<Arc<str>, Instant>>,
}

impl Sessions {
    /// Records a new session (from an `initialize` response).
    fn created(&self, id: &str) {
        lock(&self.last_used).insert(Arc::from(id), Instant::now());
    }

    /// Records a request in a session. Unknown ids (made up, or closed) are not recorded, so
    /// the map holds live sessions only.
    fn touch(&self, id: &str) {
        if let Some(t) = lock(&self.last_used).get_mut(id) {
            *t = Instant::now();
        }
    }

    /// Before an `initialize`: forgets closed sessions, and closes the least recently used
    /// ones until one more fits.
    async fn make_room(&self) {
        let ids: HashSet<Arc<str>> = self.manager.sessions.read().await.keys().cloned().collect();
        lock(&self.last_used).retain(|id, _| ids.contains(id));
        if ids.len() < self.max {
            return;
        }
        let victims: Vec<Arc<str>> = {
            let used = lock(&self.last_used);
            // A session not recorded yet is one whose `initialize` is still being answered.
            let now = Instant::now();
            let mut by_age: Vec<(Instant, Arc<str>)> = ids
                .iter()
                .map(|id| (used.get(id).copied().unwrap_or(now), id.clone()))
                .collect();
            by_age.sort();
            by_age
                .into_iter()
                .take(ids.len() + 1 - self.max)
                .map(|(_, id)| id)
                .collect()
        };
        for id in victims {
            lock(&self.last_used).remove(&id);
            // Closing an already finished session is not an error worth a response.
            let _ = self.manager.close_session(&id).await;
        }
    }
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

fn busy_response(message: &str) -> Response {
    let mut r = plain_error(StatusCode::SERVICE_UNAVAILABLE, "busy", message);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// Whether the `Content-Type` is `application/json`, parameters (`; charset=utf-8`) allowed.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// The 413 error for a body over `limit` (`declared`: its `Content-Length`, if any).
fn body_too_large(declared: Option<usize>, limit: usize) -> Error {
    match declared {
        Some(n) if n > limit => {
            Error::too_large("body", n, limit, "bytes").hint("send a smaller request")
        }
        _ => Error::new(
            ErrorKind::TooLarge,
            format!("the body is over the limit of {limit} bytes"),
        )
        .field("body")
        .detail("limit", Value::from(limit))
        .hint("send a smaller request"),
    }
}

/// Reads the whole body within `limits.body_timeout`, so a slow client never holds a
/// concurrency permit; the request goes on with the body in memory.
/// How a body read ended when it was over the limit.
struct Oversize {
    /// Bytes read in all (or the declared length, when that was over the limit already).
    size: usize,
    /// The JSON-RPC id found in the body, for an MCP request read to its end.
    id: Option<Value>,
}

/// Reads a body of at most `limit` bytes. A REST body over the limit stops the read at once;
/// an MCP message over it is read to its end through a scan that keeps none of its bytes, so
/// the answer can carry the request's id (the caller bounds the time).
async fn read_limited(
    mut body: Body,
    limit: usize,
    mcp: bool,
) -> std::result::Result<std::result::Result<Bytes, Oversize>, ()> {
    use axum::body::HttpBody;
    let mut buf: Vec<u8> = Vec::new();
    let mut scan: Option<memdir_api::jsontext::Scan> = None;
    let mut size = 0usize;
    while let Some(frame) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
    {
        let Ok(frame) = frame else { return Err(()) };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        size += data.len();
        if let Some(sc) = scan.as_mut() {
            sc.feed(&data);
        } else if size <= limit {
            buf.extend_from_slice(&data);
        } else if mcp {
            let mut sc = memdir_api::jsontext::Scan::new(&[]);
            sc.feed(&buf);
            sc.feed(&data);
            buf = Vec::new();
            scan = Some(sc);
        } else {
            return Ok(Err(Oversize { size, id: None }));
        }
    }
    match scan {
        Some(mut sc) => {
            sc.finish();
            Ok(Err(Oversize { size, id: sc.id }))
        }
        None => Ok(Ok(Bytes::from(buf))),
    }
}

async fn buffer_body(app: &App, req: Request) -> std::result::Result<(Request, Bytes), Response> {
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    // An MCP request gets its answer as a JSON-RPC error with its id, as over stdio.
    let mcp = app.sessions.is_some() && parts.uri.path().starts_with("/mcp");
    let too_large = |size: Option<usize>, id: Option<Value>| {
        let e = body_too_large(size, app.body_limit);
        if mcp {
            json_response(
                if id.is_some() {
                    StatusCode::OK
                } else {
                    StatusCode::PAYLOAD_TOO_LARGE
                },
                &crate::mcp::error_reply(id, &ops::for_surface(e, ops::Surface::Mcp)),
            )
        } else {
            error_response(&e)
        }
    };
    if !mcp && declared.is_some_and(|n| n > app.body_limit) {
        return Err(too_large(declared, None));
    }
    let read = read_limited(body, app.body_limit, mcp);
    match tokio::time::timeout(app.limits.body_timeout, read).await {
        Ok(Ok(Ok(bytes))) => Ok((Request::from_parts(parts, Body::from(bytes.clone())), bytes)),
        Ok(Ok(Err(over))) => Err(too_large(
            Some(over.size.max(declared.unwrap_or(0))),
            over.id,
        )),
        Ok(Err(())) => Err(too_large(declared, None)),
        Err(_) => {
            let mut r = plain_error(
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                &format!(
                    "the request body did not arrive within {} ms; send the whole request at once",
                    app.limits.body_timeout.as_millis()
                ),
            );
            r.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            Err(r)
        }
    }
}

/// Authentication, Host/Origin and Content-Type checks, body, concurrency and time limits,
/// MCP session bookkeeping, and JSON for every error the router itself produces (404, 405).
async fn guard(State(app): State<App>, req: Request, next: Next) -> Response {
    // Held until the response is ready: the connection has a request in progress.
    let _in_progress = req
        .extensions()
        .get::<ConnectInfo<ConnHandle>>()
        .map(|c| c.0.0.enter());
    // Liveness and the viewer's files (which hold no data) need no token.
    let open = (req.method() == Method::GET && req.uri().path() == "/health")
        || (app.sessions.is_none() && crate::viewer::is_asset(req.method(), req.uri().path()));
    let headers = req.headers();
    let mut caller = app.local.clone();
    match app.auth.is_empty() {
        false if !open => {
            // The scheme name is case-insensitive (RFC 9110 §11.1); exactly one space follows.
            let bearer = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split_once(' '))
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                .map(|(_, t)| t.as_bytes());
            let x_token = headers.get("x-token").map(HeaderValue::as_bytes);
            let sent = bearer.or(x_token);
            // Every token is compared (in constant time each), so the time taken does not say
            // which one came close.
            let mut found = None;
            for (token, c) in app.auth.iter() {
                if sent.is_some_and(|t| ct_eq(t, token.as_bytes())) && found.is_none() {
                    found = Some(c.clone());
                }
            }
            match found {
                Some(c) => caller = c,
                None => {
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
        }
        true => {
            let host_ok = headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|h| is_loopback(host_name(h)));
            // `Origin: null` comes from sandboxed frames, `data:` URLs and some redirects: a
            // page of unknown address, so it is refused like any other foreign origin.
            let origin_ok = headers
                .get(header::ORIGIN)
                .map(|v| v.to_str().ok().is_some_and(|o| is_loopback(host_name(o))))
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
    if open {
        // Liveness takes no permit and reads no body, so it answers however busy the server is.
        return next.run(req).await;
    }
    let is_mcp = req.uri().path().starts_with("/mcp");
    // Read in full even when it is refused below: a response sent while the client is still
    // sending would be lost to a connection reset.
    let (mut req, body) = match buffer_body(&app, req).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    // Who asks: REST handlers and MCP tools (through rmcp's copy of the request parts) act
    // as this device.
    req.extensions_mut().insert(caller);
    // A page can send text/plain and form bodies anywhere without a CORS preflight, JSON never.
    if !body.is_empty() && !is_json(req.headers()) {
        return plain_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "a request body must be JSON: send Content-Type: application/json",
        );
    }
    // rmcp parses the body itself: it turns an integer beyond 64 bits into a float and answers
    // a body it cannot parse (too deep, not JSON) with a plain-text 415. Such a message is
    // answered here with the JSON-RPC error (or tool error) it gets over stdio.
    if is_mcp
        && app.sessions.is_some()
        && req.method() == Method::POST
        && let Some(reply) = crate::mcp::refuse(&body)
    {
        let status = if reply.get("id").is_some_and(|id| !id.is_null()) {
            StatusCode::OK
        } else {
            StatusCode::BAD_REQUEST
        };
        return json_response(status, &reply);
    }
    let session = req
        .headers()
        .get(SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let initialize = is_mcp
        && session.is_none()
        && req.method() == Method::POST
        && serde_json::from_slice::<Value>(&body)
            .is_ok_and(|v| v.get("method").and_then(Value::as_str) == Some("initialize"));
    if let Some(sessions) = &app.sessions {
        if let Some(id) = &session {
            sessions.touch(id);
        } else if initialize {
            sessions.make_room().await;
        }
    }
    let Ok(permit) = tokio::time::timeout(app.timeout, app.permits.clone().acquire_owned()).await
    else {
        return busy_response("too many requests at once; retry");
    };
    let response = if is_mcp {
        // MCP keeps streams open (SSE): no overall deadline there.
        next.run(req).await
    } else {
        match tokio::time::timeout(app.timeout, next.run(req)).await {
            Ok(r) => r,
            Err(_) => busy_response("the request took too long; retry"),
        }
    };
    drop(permit);
    if let Some(sessions) = &app.sessions
        && initialize
        && let Some(id) = response
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
    {
        sessions.created(id);
    }
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

/// The JSON object of a body the guard has already read (and limited in size and time).
async fn read_json(req: Request, limit: usize) -> Result<Map<String, Value>> {
    let bytes: Bytes = axum::body::to_bytes(req.into_body(), limit)
        .await
        .map_err(|_| body_too_large(None, limit))?;
    if bytes.is_empty() {
        return Ok(Map::new());
    }
    // An integer literal beyond 64 bits would silently become a float: refused, as on every
    // surface.
    memdir_api::jsontext::check_integers(&bytes)?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(Error::invalid(
            "body",
            format!(
                "the body must be a JSON object, got {}",
                memdir_engine::service::type_name(&other)
            ),
        )),
        Err(e) => Err(Error::invalid(
            "body",
            format!("the body is not valid JSON: {e}"),
        )),
    }
}

/// The caller the guard found for a request.
fn caller_of(req: &Request) -> Result<Caller> {
    req.extensions()
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| Error::internal("invariant: the guard names every request's caller"))
}

/// The caller of an MCP request, from rmcp's copy of the HTTP request parts.
fn mcp_caller(ext: &rmcp::model::Extensions) -> Option<Caller> {
    ext.get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<Caller>().cloned())
}

/// Runs an operation on the blocking pool and shapes the response.
async fn run(app: &App, caller: Caller, op: &'static Op, args: Map<String, Value>) -> Response {
    if let Err(e) = app.memdir.ensure_started() {
        return error_response(&e);
    }
    let memdir = app.memdir.clone();
    let out =
        tokio::task::spawn_blocking(move || ops::call(&memdir, &caller, op, Value::Object(args)))
            .await
            .unwrap_or_else(|e| Err(Error::internal(format!("request panicked: {e}"))));
    match out {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(e) => error_response(&e),
    }
}

async fn post_op(State(app): State<App>, op: &'static Op, req: Request) -> Response {
    let caller = match caller_of(&req) {
        Ok(c) => c,
        Err(e) => return error_response(&e),
    };
    match read_json(req, app.body_limit).await {
        Ok(args) => run(&app, caller, op, args).await,
        Err(e) => error_response(&e),
    }
}

async fn get_op(State(app): State<App>, op: &'static Op, req: Request) -> Response {
    let caller = match caller_of(&req) {
        Ok(c) => c,
        Err(e) => return error_response(&e),
    };
    match query_args(&req, &integer_params(op)) {
        Ok(args) => run(&app, caller, op, args).await,
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
        let v = memdir_api::uri::decode(&v).ok_or_else(|| {
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

/// `POST /search`: keyword search, or with `"semantic": true` semantic search (`query` and
/// `limit` only).
async fn search(State(app): State<App>, req: Request) -> Response {
    let caller = match caller_of(&req) {
        Ok(c) => c,
        Err(e) => return error_response(&e),
    };
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
                    memdir_engine::service::type_name(&other)
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
        return run(&app, caller, op("search_semantic"), args).await;
    }
    run(&app, caller, op("search"), args).await
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
/// switch, the web viewer at `/` and `/ui/`), then every REST route of the operation table.
fn rest_router(app: App) -> Router {
    let mut r = crate::viewer::router()
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
                    .map(|t| (Arc::from(t.as_str()), Caller::admin(opts.device.clone(), opts.acl.clone())))
                    .chain(opts.device_tokens.iter().map(|(t, d)| {
                        (Arc::from(t.as_str()), Caller::new(d.clone(), opts.acl.clone()))
                    }))
                    .collect(),
            ),
            local: Caller::new(opts.device.clone(), opts.acl.clone()),
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
                Router::new().nest_service("/mcp", service).route("/health", get(health)).fallback(not_found)
            }
        };
        let router = router.layer(middleware::from_fn_with_state(app, guard));
        let tcp = TcpListener::bind(addr)
            .await
            .map_err(|e| Error::new(ErrorKind::Unavailable, format!("cannot listen on {addr}: {e}")))?;
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
    kept.land_index();
    served
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
