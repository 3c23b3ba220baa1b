//! `memdir serve` and `memdir ui`: the HTTP transports, the viewer's URL, and the background
//! syncer a server runs.

use super::*;

/// `[sync] interval_ms` under `memdir serve`: a thread that syncs with the configured remote
/// every interval, in one server per memory directory (the one holding the syncer lock; the
/// others try again each interval, so one takes over when it stops). Each outcome is recorded
/// for `status`; a problem is also a line on stderr. Nothing is synced at start.
pub(super) fn spawn_syncer(cfg: &Config, dir: std::path::PathBuf, settings: service::Settings) {
    let every = settings.sync_interval;
    if every.is_zero() {
        return;
    }
    let caller = cfg.caller();
    std::thread::spawn(move || {
        let m = Memdir::open_lazy_with(dir, settings);
        let call = service::Call::by(&caller);
        let mut holder = None;
        loop {
            std::thread::sleep(every);
            if holder.is_none() {
                holder = m.replication().syncer_lock().ok();
                if holder.is_none() {
                    continue;
                }
            }
            let req = api::SyncRequest::default();
            let outcome = memdir_engine::ops::sync_token(&m, &caller, &req).and_then(|token| {
                m.acting(&call)
                    .replication()
                    .sync_recorded(&req, token, None, "periodic")
            });
            match outcome {
                Ok(r) if r.push_pending => eprintln!(
                    "memdir: periodic sync with {}: push pending: {}",
                    r.remote,
                    r.offline.unwrap_or_default()
                ),
                Ok(r) if !r.reported.is_empty() => eprintln!(
                    "memdir: periodic sync with {}: {} problems reported (memdir status)",
                    r.remote,
                    r.reported.len()
                ),
                Ok(_) => {}
                Err(e) => eprintln!("memdir: periodic sync: {}", e.message),
            }
        }
    });
}

/// The line `serve` writes at start: which memory directory it serves, and why that one.
pub(super) fn serving_line(dir: &config::Setting<PathBuf>) -> String {
    format!(
        "memdir: memory directory {} ({})",
        dir.value.display(),
        dir.source.describe()
    )
}

#[cfg(feature = "http")]
pub(super) fn serve_http(
    cfg: &Config,
    memdir: Memdir,
    transport: &str,
    profile: crate::mcp::Profile,
    token: Option<String>,
    on_listening: impl FnOnce(&str),
) -> Result<()> {
    use crate::http::{Limits, Options, Transport, parse_transport, serve};
    let Some(t) = parse_transport(transport)? else {
        return Err(Error::internal("invariant: stdio is served by the caller"));
    };
    let dir = cfg.dir()?;
    let h = &cfg.http;
    serve(
        memdir,
        Options {
            transport: t,
            host: h.host.value.clone(),
            port: h
                .port
                .value
                .unwrap_or(if t == Transport::Rest { 8787 } else { 8000 }),
            token,
            device_tokens: cfg.http_tokens(&config::process_env)?,
            device: cfg.device.value.clone(),
            acl: cfg.acl.clone(),
            profile,
            body_limit: h.body_limit.value,
            max_concurrency: 64,
            timeout: std::time::Duration::from_secs(30),
            limits: Limits::from_config(h),
        },
        |url| {
            eprintln!("{}", serving_line(dir));
            eprintln!("memdir: listening on {url}");
            on_listening(url);
        },
    )
}

/// What `memdir ui` does once its server listens: prints the viewer's URL on stdout and, unless
/// told not to, hands it to the desktop's opener (`open` on macOS, `xdg-open` elsewhere). A
/// missing opener is a note on stderr, not an error: the URL is printed either way.
pub(super) fn open_viewer(url: &str, open: bool) {
    let url = format!("{url}/");
    println!("{url}");
    let _ = std::io::Write::flush(&mut std::io::stdout());
    if !open {
        return;
    }
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    match std::process::Command::new(opener)
        .arg(&url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        // Reaped on its own thread, so the server never waits for the browser.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(e) => eprintln!("memdir: could not run {opener} ({e}); open {url} yourself"),
    }
}

#[cfg(not(feature = "http"))]
pub(super) fn serve_http(
    _: &Config,
    _: Memdir,
    transport: &str,
    _: crate::mcp::Profile,
    _: Option<String>,
    _: impl FnOnce(&str),
) -> Result<()> {
    Err(Error::invalid(
        "transport",
        format!("transport {transport:?} needs a build with the `http` feature"),
    ))
}
