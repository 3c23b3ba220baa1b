//! Bounded resources before authentication: connection limits and deadlines (header, idle,
//! body), the connection cap that closes the least recently active idle connection, and the
//! cap on MCP sessions.

use super::*;

/// Default largest request body: 16 MiB.
pub const DEFAULT_BODY_LIMIT: usize = crate::config::http_defaults::BODY_LIMIT;

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
pub(super) fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
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
pub(super) struct Conn {
    pub(super) id: u64,
    pub(super) activity: Mutex<Activity>,
    /// Cancelled to close the connection (eviction).
    pub(super) close: CancellationToken,
}

pub(super) struct Activity {
    /// Requests in the guard (a request whose response is being written counts as traffic).
    pub(super) busy: usize,
    /// The last byte read or written, or the end of the last request.
    pub(super) last: Instant,
    /// When the head now being read began: the accept, or the first byte after a request.
    pub(super) head_since: Option<Instant>,
}

impl Conn {
    /// When this connection is to be closed if nothing changes; `None` while a request runs.
    pub(super) fn deadline(&self, limits: &Limits) -> Option<Instant> {
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

    pub(super) fn moved(&self, read: bool) {
        let now = Instant::now();
        let mut a = lock(&self.activity);
        a.last = now;
        if read && a.busy == 0 && a.head_since.is_none() {
            a.head_since = Some(now);
        }
    }

    /// Marks a request in progress until the returned value is dropped.
    pub(super) fn enter(self: &Arc<Self>) -> InProgress {
        let mut a = lock(&self.activity);
        a.busy += 1;
        a.head_since = None;
        InProgress(self.clone())
    }
}

pub(super) struct InProgress(pub(super) Arc<Conn>);

impl Drop for InProgress {
    fn drop(&mut self) {
        let mut a = lock(&self.0.activity);
        a.busy -= 1;
        a.last = Instant::now();
    }
}

/// The open connections.
pub(super) struct Connections {
    pub(super) limits: Limits,
    /// `limits.max_connections`, lowered to half the open-file limit.
    pub(super) cap: usize,
    pub(super) live: Mutex<HashMap<u64, Arc<Conn>>>,
    pub(super) next_id: AtomicU64,
}

impl Connections {
    pub(super) fn new(limits: Limits) -> Connections {
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
    pub(super) fn admit(&self) -> Option<Arc<Conn>> {
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
    pub(super) fn evict_idlest(live: &mut HashMap<u64, Arc<Conn>>) -> bool {
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

    pub(super) fn evict_one(&self) -> bool {
        Self::evict_idlest(&mut lock(&self.live))
    }

    pub(super) fn remove(&self, id: u64) {
        lock(&self.live).remove(&id);
    }
}

/// A TCP listener that wraps each accepted stream in a [`TrackedStream`].
pub(super) struct TrackedListener {
    pub(super) tcp: TcpListener,
    pub(super) conns: Arc<Connections>,
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
pub(super) struct TrackedStream {
    pub(super) tcp: TcpStream,
    pub(super) conn: Arc<Conn>,
    pub(super) conns: Arc<Connections>,
    pub(super) timer: Pin<Box<tokio::time::Sleep>>,
    pub(super) closed: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl TrackedStream {
    pub(super) fn new(tcp: TcpStream, conn: Arc<Conn>, conns: Arc<Connections>) -> TrackedStream {
        let closed = Box::pin(conn.close.clone().cancelled_owned());
        TrackedStream {
            tcp,
            conn,
            conns,
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
            closed,
        }
    }

    pub(super) fn check_closed(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        match self.closed.as_mut().poll(cx) {
            Poll::Ready(()) => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed to make room for a new connection",
            )),
            Poll::Pending => Ok(()),
        }
    }

    /// Called when the socket is not ready: pending until the deadline, then `TimedOut`.
    pub(super) fn wait<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
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
pub(super) struct ConnHandle(pub(super) Arc<Conn>);

impl Connected<IncomingStream<'_, TrackedListener>> for ConnHandle {
    fn connect_info(stream: IncomingStream<'_, TrackedListener>) -> Self {
        ConnHandle(stream.io().conn.clone())
    }
}

// ---------------------------------------------------------------------------------------------
// MCP sessions: rmcp closes a session idle for its keep-alive; the count is capped here.
// ---------------------------------------------------------------------------------------------

/// The MCP sessions and when each last served a request.
pub(super) struct Sessions {
    pub(super) manager: Arc<LocalSessionManager>,
    pub(super) max: usize,
    pub(super) last_used: Mutex<HashMap<Arc<str>, Instant>>,
}

impl Sessions {
    /// Records a new session (from an `initialize` response).
    pub(super) fn created(&self, id: &str) {
        lock(&self.last_used).insert(Arc::from(id), Instant::now());
    }

    /// Records a request in a session. Unknown ids (made up, or closed) are not recorded, so
    /// the map holds live sessions only.
    pub(super) fn touch(&self, id: &str) {
        if let Some(t) = lock(&self.last_used).get_mut(id) {
            *t = Instant::now();
        }
    }

    /// Before an `initialize`: forgets closed sessions, and closes the least recently used
    /// ones until one more fits.
    pub(super) async fn make_room(&self) {
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
