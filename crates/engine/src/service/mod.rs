//! The engine: one facade over the store, the ledger and the derived indexes.
//!
//! [`Memdir`] opens a memory directory, recovers staged work, adopts files changed behind its
//! back, and offers every operation with request and response types of its own and one error
//! type ([`Error`]). Front ends reach it through the operation table ([`crate::ops`]).
//!
//! Concurrency: every mutation takes the store's cross-process write lock (`.memdir/lock`),
//! then works on the files and, last, records what it did in the ledger. Readers take no lock:
//! files are only ever replaced by atomic rename or grown by whole lines.

pub(crate) mod categories;
pub(crate) mod indexing;
pub(crate) mod notes;
mod redaction;
pub(crate) mod replication;
pub(crate) mod sessions;
mod shape;
mod state;
pub(crate) mod upkeep;

pub use crate::sync::gate::SyncAccess;
pub(crate) use categories::adoption::Sync;
pub use categories::log::*;
pub use indexing::indexer::{Progress, index_fingerprint};
pub use indexing::search::{catch_up_soon, warm_up};
pub use memdir_api::{
    AppendRequest, CompactRequest, ContextRequest, DeleteRequest, DeltaRequest, DiffRequest,
    FetchRequest, Fields, HistoryRequest, IngestRequest, NewChunk, OverviewRequest, ReadRequest,
    RestoreRequest, SearchRequest, SemanticSearchRequest, VersionRef, WriteRequest,
};
pub use replication::{sync, sync_http};
pub use sessions::*;
pub use upkeep::verify::*;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::Serialize;
use serde_json::{Value, json};

use crate::acl::Caller;
use crate::ledger::Ledger;
use memdir_api::error::{Error, ErrorKind, IoContext, Result};
use memdir_store::clock::{self, Hlc};
use memdir_store::lock::WriteLock;
use memdir_store::model::{CategoryName, CategoryStatus, content_hash};
use memdir_store::{self as store, Layout, fsx, txn};

pub use memdir_api::limits;
pub(crate) use shape::check_depth;
pub use shape::type_name;

/// An open memory directory.
pub struct Memdir {
    layout: Layout,
    settings: Settings,
    /// The call of this device itself: what [`Memdir::cx`] runs with.
    local: Call,
    inner: Mutex<Option<Inner>>,
    last_scan: Mutex<Option<std::time::Instant>>,
    started: Mutex<bool>,
    /// Things this process repaired on its own that the user should hear about.
    notices: Mutex<Vec<String>>,
    /// Why this process serves the store read-only, if it does (see [`Memdir::read_only`]).
    read_only: Mutex<Option<String>>,
    /// Size and change stamp of the format file when this process last found it acceptable:
    /// every write checks the format, with one `stat` while the file is unchanged.
    format_ok: Mutex<Option<(u64, i64)>>,
    /// The categories subsystem's state.
    categories: categories::State,
    /// The indexing subsystem's state.
    indexing: indexing::State,
}

/// One write under way: the store's write lock held and the ledger open for it. What a write
/// does to the files and the ledger takes this value ([`Memdir::with_write`] makes it), so
/// that the lock is held is a fact the types carry instead of a pair threaded by hand.
pub(crate) struct WriteTxn<'a> {
    /// The ledger the write records itself in.
    pub(crate) inner: &'a Inner,
    /// The store's write lock, held until the write returns.
    pub(crate) lock: &'a WriteLock,
}

pub(crate) struct Inner {
    pub(crate) ledger: Ledger,
}

/// What the engine takes from the configuration. The caller resolves it (the CLI from flags,
/// the environment and the config file, see the binary's `config`); the engine reads no
/// environment variable for any of it.
#[derive(Clone, Debug)]
pub struct Settings {
    /// This device's name: the actor recorded on every write. It is not the replica id: two
    /// stores on one device have one device name and two replicas.
    pub device: String,
    /// Where the choice of the memory directory came from (`status` and `doctor` report it).
    pub dir_source: String,
    /// How long a write waits for the store lock (and an indexer for the index lock).
    pub lock_timeout: std::time::Duration,
    /// How often a long-running process re-scans the files for changes made behind its back.
    pub scan_interval: std::time::Duration,
    /// The search analyzer.
    pub analyzer: memdir_index::index::AnalyzerConfig,
    /// The retention, in entries, of a log created without `max_entries`.
    pub log_max_entries: u64,
    /// How a sync resolves concurrent versions of a category (`last_write_wins`, `merge`,
    /// `manual`).
    pub conflict_strategy: String,
    /// `[sync] remote`: the remote a sync uses when the request names none (empty: `origin`).
    pub sync_remote: String,
    /// `[sync] token_env`: the variable holding an HTTP remote's token (empty: none).
    pub sync_token_env: String,
    /// `[sync] interval_ms`: how often a server syncs on its own (zero: never).
    pub sync_interval: std::time::Duration,
    /// What is redacted before anything is stored (`crate::redact`).
    pub redaction: std::sync::Arc<crate::redact::Redactor>,
    /// The embeddings provider (`[embeddings]`); `None`: keyword search only.
    pub embeddings: Option<memdir_index::embed::Spec>,
    /// Whether this process embeds in the background (a server).
    pub background_embedding: bool,
    /// Whether index commits between durable ones stay in this process's memory (a server:
    /// a search right after a write then creates no file; see `index::Overlay`).
    pub index_tail_in_memory: bool,
    /// Where `models` lists and fetches models.
    pub model_cache: Option<PathBuf>,
}

/// Who a call acts for: the actor its writes record and the caller whose rights it runs
/// under. Every write names its actor from here; nothing about a call travels beside it.
#[derive(Clone, Debug)]
pub struct Call {
    /// Recorded on every version, line and log entry the call writes.
    pub actor: String,
    /// The device and its rights (checked by the operation table before a call runs).
    pub caller: Caller,
}

impl Call {
    /// A call by `caller`, acting as its device.
    pub fn by(caller: &Caller) -> Call {
        Call {
            actor: caller.device.clone(),
            caller: caller.clone(),
        }
    }

    /// A call of this device itself (a library caller, an import, a hook on this machine).
    pub fn local(device: &str) -> Call {
        Call::by(&Caller::new(device, None))
    }
}

/// One call on one engine: the store, who acts, and where a long job reports its progress.
/// The subsystems are reached from here ([`Cx::categories`], ...), each a view of the engine
/// for the length of a call: a subsystem owns its state (a field of [`Memdir`] only its
/// module touches), reaches the core (layout, ledger, lock, clock) through `Deref`, and
/// another subsystem only through that subsystem's door.
#[derive(Clone, Copy)]
pub struct Cx<'a> {
    m: &'a Memdir,
    call: &'a Call,
    progress: Option<Progress<'a>>,
}

impl std::ops::Deref for Cx<'_> {
    type Target = Memdir;
    fn deref(&self) -> &Memdir {
        self.m
    }
}

impl<'a> Cx<'a> {
    /// The engine itself.
    pub fn engine(&self) -> &'a Memdir {
        self.m
    }

    /// Who this call acts for.
    pub fn call(&self) -> &'a Call {
        self.call
    }

    /// The actor recorded on this call's writes.
    pub fn actor(&self) -> String {
        self.call.actor.clone()
    }

    /// Where a long job of this call reports its progress, if anyone watches.
    pub fn progress(&self) -> Option<Progress<'a>> {
        self.progress
    }

    /// The same call, reporting progress to `progress`.
    pub fn with_progress(self, progress: Option<Progress<'a>>) -> Cx<'a> {
        Cx { progress, ..self }
    }

    /// Categories: documents, versions, logs, adoption of hand edits.
    pub fn categories(self) -> Categories<'a> {
        Categories(self)
    }

    /// Sessions: ingest, fetch, the catalog.
    pub fn sessions(self) -> Sessions<'a> {
        Sessions(self)
    }

    /// Indexing and search: the derived indexes, vectors, queries.
    pub fn indexing(self) -> Indexing<'a> {
        Indexing(self)
    }

    /// Notes: the text files under `notes/`, their versions, the memory-tool protocol.
    pub fn notes(self) -> Notes<'a> {
        Notes(self)
    }

    /// Replication over git, and conflicts.
    pub fn replication(self) -> Replication<'a> {
        Replication(self)
    }

    /// Replication with HTTP peers (both sides).
    pub fn peers(self) -> Peers<'a> {
        Peers(self)
    }

    /// Upkeep: verify, forget, snapshot, export, status.
    pub fn upkeep(self) -> Upkeep<'a> {
        Upkeep(self)
    }
}

macro_rules! subsystem {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name<'a>(Cx<'a>);

        impl<'a> std::ops::Deref for $name<'a> {
            type Target = Cx<'a>;
            fn deref(&self) -> &Cx<'a> {
                &self.0
            }
        }
    };
}

subsystem!(
    /// The categories subsystem (see [`categories`]).
    Categories
);
subsystem!(
    /// The sessions subsystem (see [`sessions`]).
    Sessions
);
subsystem!(
    /// The indexing subsystem (see [`indexing`]).
    Indexing
);
subsystem!(
    /// The notes subsystem (see [`notes`]).
    Notes
);
subsystem!(
    /// Replication over git (see [`replication`]).
    Replication
);
subsystem!(
    /// Replication with HTTP peers (see [`replication`]).
    Peers
);
subsystem!(
    /// The upkeep subsystem (see [`upkeep`]).
    Upkeep
);

/// The default scan interval.
pub const DEFAULT_SCAN_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

impl Default for Settings {
    /// The defaults, with the host name as the device: what a library caller that configures
    /// nothing gets.
    fn default() -> Self {
        Settings {
            device: host_name(),
            dir_source: "caller".to_string(),
            lock_timeout: memdir_store::lock::DEFAULT_LOCK_TIMEOUT,
            scan_interval: DEFAULT_SCAN_INTERVAL,
            analyzer: memdir_index::index::AnalyzerConfig::default(),
            log_max_entries: limits::DEFAULT_LOG_ENTRIES,
            conflict_strategy: "last_write_wins".to_string(),
            sync_remote: String::new(),
            sync_token_env: String::new(),
            sync_interval: std::time::Duration::ZERO,
            redaction: std::sync::Arc::new(crate::redact::Redactor::default()),
            embeddings: None,
            background_embedding: false,
            index_tail_in_memory: false,
            model_cache: None,
        }
    }
}

/// This machine's host name (`localhost` when it has none).
pub fn host_name() -> String {
    for p in ["/proc/sys/kernel/hostname", "/etc/hostname"] {
        if let Ok(h) = std::fs::read_to_string(p)
            && !h.trim().is_empty()
        {
            return h.trim().to_string();
        }
    }
    memdir_store::env::process_raw("HOSTNAME")
        .filter(|h| !h.trim().is_empty())
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|| "localhost".to_string())
}

/// What `open` found and did.
#[derive(Debug, Default, Serialize)]
pub struct OpenReport {
    pub recovered: Vec<String>,
    pub discarded: Vec<String>,
    pub adopted: Vec<String>,
    pub rebuilt_ledger: bool,
}

impl Memdir {
    /// Opens the memory directory at `root` (which need not exist yet) with the default
    /// [`Settings`], recovering staged work and adopting external changes.
    pub fn open(root: impl Into<PathBuf>) -> Result<Memdir> {
        Memdir::open_with(root, Settings::default())
    }

    /// Opens the memory directory at `root` with `settings`, recovering staged work and
    /// adopting external changes.
    pub fn open_with(root: impl Into<PathBuf>, settings: Settings) -> Result<Memdir> {
        let m = Memdir::open_lazy_with(root, settings);
        m.startup()?;
        Ok(m)
    }

    /// Opens with the default [`Settings`] without touching the disk; work happens on first
    /// use.
    pub fn open_lazy(root: impl Into<PathBuf>) -> Memdir {
        Memdir::open_lazy_with(root, Settings::default())
    }

    /// Opens with `settings` without touching the disk; work happens on first use.
    pub fn open_lazy_with(root: impl Into<PathBuf>, settings: Settings) -> Memdir {
        let background = settings.background_embedding;
        let m = Memdir {
            layout: Layout::new(root),
            local: Call::local(&settings.device),
            settings,
            inner: Mutex::new(None),
            last_scan: Mutex::new(None),
            started: Mutex::new(false),
            notices: Mutex::new(Vec::new()),
            read_only: Mutex::new(None),
            format_ok: Mutex::new(None),
            categories: Default::default(),
            indexing: Default::default(),
        };
        if background {
            m.indexing().start_background_embedding();
        }
        m
    }

    /// Records a write whose files are already durable in the ledger, as one SQLite
    /// transaction. A failure here does not fail the write (see [`Memdir::ledger_missed`]).
    pub(crate) fn record_durable(&self, inner: &Inner, f: impl FnOnce(&Ledger) -> Result<()>) {
        let recorded = store::failpoint::io("ledger.update")
            .map_err(|e| {
                Error::from(memdir_api::error::IoError {
                    op: "record",
                    path: self.layout.ledger_path(),
                    source: e,
                })
            })
            .and_then(|_| inner.ledger.atomically(f));
        if let Err(e) = recorded {
            self.ledger_missed(&e);
        }
    }

    /// The files of a write are durable, but the ledger failed to record it (a full disk, a
    /// damaged ledger). The write stands and is acknowledged: the files are the truth and the
    /// ledger is derived. Its rows are now stale, which every reader detects by size and
    /// mtime; the next refresh in this process re-scans the files so the index sees the write.
    pub(crate) fn ledger_missed(&self, e: &Error) {
        if let Ok(mut l) = self.last_scan.lock() {
            *l = None;
        }
        self.notice(format!(
            "the write is stored, but the ledger could not record it ({}); it is rebuilt from the files on the next read",
            e.message
        ));
    }

    /// Records something this process repaired on its own.
    pub(crate) fn notice(&self, text: String) {
        if let Ok(mut n) = self.notices.lock() {
            n.push(text);
        }
    }

    /// What this process repaired on its own so far (the CLI prints it on stderr; `status`
    /// reports it).
    pub fn notices(&self) -> Vec<String> {
        self.notices.lock().map(|n| n.clone()).unwrap_or_default()
    }

    /// The layout of this store.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// A call of this device itself on this engine.
    pub fn cx(&self) -> Cx<'_> {
        self.acting(&self.local)
    }

    /// `call` on this engine.
    pub fn acting<'a>(&'a self, call: &'a Call) -> Cx<'a> {
        Cx {
            m: self,
            call,
            progress: None,
        }
    }

    /// The categories subsystem, for this device.
    pub fn categories(&self) -> Categories<'_> {
        self.cx().categories()
    }

    /// The sessions subsystem, for this device.
    pub fn sessions(&self) -> Sessions<'_> {
        self.cx().sessions()
    }

    /// The indexing subsystem, for this device.
    pub fn indexing(&self) -> Indexing<'_> {
        self.cx().indexing()
    }

    /// Replication over git, for this device.
    pub fn replication(&self) -> Replication<'_> {
        self.cx().replication()
    }

    /// Replication with HTTP peers, for this device.
    pub fn peers(&self) -> Peers<'_> {
        self.cx().peers()
    }

    /// The upkeep subsystem, for this device.
    pub fn upkeep(&self) -> Upkeep<'_> {
        self.cx().upkeep()
    }

    /// The settings this store was opened with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Runs [`Memdir::startup`] once: servers open the store on their first request (not at
    /// their handshake, which must answer at once). A failure (a busy lock, say) is returned as
    /// it is and retried by the next call.
    pub fn ensure_started(&self) -> Result<()> {
        let mut started = self
            .started
            .lock()
            .map_err(|_| Error::internal("startup poisoned"))?;
        if !*started {
            self.startup()?;
            *started = true;
        }
        Ok(())
    }

    /// Why this process serves the store read-only, if it does: memdir may not write under
    /// the memory directory (permissions, a read-only file system, a full disk). Reads are then
    /// served from the files alone, with a ledger and a search index built in memory; writes
    /// fail with a clear error and change nothing.
    pub fn read_only(&self) -> Option<String> {
        self.read_only.lock().ok().and_then(|r| r.clone())
    }

    /// Switches this process to read-only service after `cause`, a failure to write derived
    /// state, and builds the in-memory ledger from the files.
    pub(crate) fn enter_read_only(&self, cause: &Error) -> Result<()> {
        {
            let mut r = self
                .read_only
                .lock()
                .map_err(|_| Error::internal("read-only flag poisoned"))?;
            if r.is_some() {
                return Ok(());
            }
            *r = Some(cause.message.clone());
        }
        self.notice(format!(
            "memdir cannot write under {} ({}): serving reads from the files; writes are refused",
            self.layout.root.display(),
            cause.message
        ));
        self.indexing.close();
        let mut guard = self.inner.lock().map_err(|_| {
            Error::internal("a previous operation panicked while holding the store")
        })?;
        let mut inner = Inner {
            ledger: Ledger::open_memory()?,
        };
        self.rebuild_ledger(&mut inner, None)?;
        *guard = Some(inner);
        Ok(())
    }

    /// The error for a write attempted on a store served read-only.
    fn read_only_error(&self, why: &str) -> Error {
        Error::new(
            ErrorKind::Unavailable,
            format!(
                "the memory directory {} is read-only for memdir ({why}); nothing was changed",
                self.layout.root.display()
            ),
        )
        .hint("writes need write access to the memory directory (and free disk space); reads keep working")
        .detail("read_only", Value::Bool(true))
    }

    /// Recovery and external-change adoption; a no-op on a directory that does not exist. A
    /// store memdir may not write is served read-only from its files.
    pub fn startup(&self) -> Result<OpenReport> {
        match self.startup_rw() {
            Err(e) if e.write_denied() && self.layout.exists() => {
                self.enter_read_only(&e)?;
                Ok(OpenReport::default())
            }
            r => r,
        }
    }

    fn startup_rw(&self) -> Result<OpenReport> {
        let mut report = OpenReport::default();
        if !self.layout.exists() {
            return Ok(report);
        }
        self.check_format()?;
        let mut guard = self.inner()?;
        let Some(inner) = guard.as_mut() else {
            return Ok(report);
        };
        txn::sweep_trash(&self.layout.staging());
        let fresh = inner.ledger.meta("built")?.is_none();
        let staged = !memdir_store::recovery::pending(&self.layout.staging()).is_empty()
            || self.replication().settle_pending();
        if staged || fresh {
            let lock = self.lock()?;
            self.recover(&mut report)?;
            if inner.ledger.meta("built")?.is_none() {
                self.rebuild_ledger(inner, Some(&lock))?;
                report.rebuilt_ledger = true;
            }
        }
        memdir_store::failpoint::fault("ledger.scan").map_err(|e| {
            Error::from(memdir_api::error::IoError {
                op: "refresh ledger",
                path: self.layout.ledger_path(),
                source: e,
            })
        })?;
        // An open skips the notes another process checked within the interval.
        report.adopted = self.scan(inner, self.settings.scan_interval)?;
        self.indexing().note_scanned();
        Ok(report)
    }

    fn recover(&self, report: &mut OpenReport) -> Result<()> {
        for (name, outcome) in
            memdir_store::recovery::recover(&self.layout.root, &self.layout.staging())?
        {
            match outcome {
                txn::Recovered::RolledForward(_) => report.recovered.push(name),
                txn::Recovered::Discarded => report.discarded.push(name),
            }
        }
        // A sync killed after committing history and before deriving the category files
        // from it: derived now, before anything could adopt those files as hand edits.
        self.replication().finish_pending_settle()
    }

    /// The ledger, opened on first use; `None` while the memory directory does not exist.
    pub(crate) fn inner(&self) -> Result<MutexGuard<'_, Option<Inner>>> {
        let mut guard = self.inner.lock().map_err(|_| {
            Error::internal("a previous operation panicked while holding the store")
        })?;
        if guard.is_none() && self.layout.exists() && self.layout.holds_store() {
            let meta = self.layout.meta_dir();
            if !meta.is_dir() {
                self.layout.init()?;
            }
            if self.read_only().is_some() {
                return Ok(guard);
            }
            let (ledger, _fresh) =
                Ledger::open(&self.layout.ledger_path(), self.settings.lock_timeout)?;
            if let Some(aside) = ledger.set_aside() {
                self.notice(format!(
                    "the ledger was not a readable database: it was moved aside to {} and is rebuilt from the files (nothing in it was the only copy of anything)",
                    aside.display()
                ));
            }
            *guard = Some(Inner { ledger });
        }
        Ok(guard)
    }

    /// Refuses a store written in a format this memdir does not know (a newer one, or a
    /// format file it cannot read). A store without a format file predates it and is read
    /// as format 1; its first write records the format.
    pub(crate) fn check_format(&self) -> Result<()> {
        let path = store::format::path(&self.layout);
        let stat = store::stat(&path).ok().flatten();
        if stat.is_some()
            && *self
                .format_ok
                .lock()
                .map_err(|_| Error::internal("format cache poisoned"))?
                == stat
        {
            return Ok(());
        }
        match store::format::read(&self.layout) {
            store::format::Found::Missing => Ok(()),
            store::format::Found::Format(n) if n <= store::format::FORMAT => {
                if let Ok(mut ok) = self.format_ok.lock() {
                    *ok = stat;
                }
                Ok(())
            }
            store::format::Found::Format(n) => Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "{} says this store has format {n}; this memdir ({}) reads format {} and older, so it changes nothing",
                    path.display(),
                    env!("CARGO_PKG_VERSION"),
                    store::format::FORMAT
                ),
            )
            .hint("upgrade memdir to open this store")
            .detail("format", Value::from(n))),
            store::format::Found::Unreadable(why) => Err(Error::new(
                ErrorKind::Corrupt,
                format!("{} cannot be read: {why}", path.display()),
            )
            .hint(format!(
                "it should hold exactly {}",
                String::from_utf8_lossy(&store::format::bytes()).trim()
            ))),
        }
    }

    /// Creates the memory directory if needed, and returns the open inner state.
    pub(crate) fn inner_for_write(&self) -> Result<MutexGuard<'_, Option<Inner>>> {
        if let Some(why) = self.read_only() {
            return Err(self.read_only_error(&why));
        }
        if !self.layout.exists() || !self.layout.staging().is_dir() {
            self.layout.init()?;
        }
        let guard = self.inner()?;
        if guard.is_none() {
            return Err(Error::internal(
                "invariant: an initialised store has a ledger",
            ));
        }
        Ok(guard)
    }

    /// Takes the cross-process write lock.
    pub(crate) fn lock(&self) -> Result<WriteLock> {
        if let Some(why) = self.read_only() {
            return Err(self.read_only_error(&why));
        }
        WriteLock::acquire(&self.layout.lock_path(), self.settings.lock_timeout)
    }

    /// Takes the write lock and recovers whatever a crashed writer left staged.
    pub(crate) fn lock_and_recover(&self) -> Result<WriteLock> {
        let lock = self.lock()?;
        if !memdir_store::recovery::pending(&self.layout.staging()).is_empty()
            || self.replication().settle_pending()
        {
            let mut report = OpenReport::default();
            self.recover(&mut report)?;
        }
        Ok(lock)
    }

    /// `memdir init`: creates the directory skeleton.
    pub fn init(&self) -> Result<memdir_api::InitResponse> {
        if let Some(why) = self.read_only() {
            return Err(self.read_only_error(&why));
        }
        let created = self.layout.init()?;
        drop(self.inner()?);
        Ok(memdir_api::InitResponse {
            dir: self.layout.root.display().to_string(),
            created,
        })
    }

    /// This store's replica id on this machine, minted on first use. Caller holds the lock.
    pub(crate) fn replica(&self, _lock: &WriteLock) -> Result<String> {
        let path = self.layout.replica_path();
        let fingerprint = machine_fingerprint(&self.layout.root);
        if let Ok(bytes) = std::fs::read(&path)
            && let Ok(v) = serde_json::from_slice::<Value>(&bytes)
            && v["fingerprint"] == fingerprint
            && let Some(id) = v["id"].as_str()
            && is_replica_id(id)
        {
            return Ok(id.to_string());
        }
        // The id ends in its signing key's fingerprint, so no other key can seal for it.
        let secret = mint_secret(&fingerprint)?;
        let key = crate::sync::seal::Signer32::new(&secret).public();
        let id = mint_replica_id(&self.settings.device, &crate::sync::seal::key_id(&key));
        let body = store::codec::to_pretty(&json!({
            "id": id,
            "fingerprint": fingerprint,
            "actor": self.settings.device,
            "key": crate::sync::seal::hex(&secret),
            "previous": replication::seals::previous_after_copy(&path),
        }));
        let tmp = path.with_extension("tmp");
        fsx::write_synced(&tmp, &body)?;
        std::fs::rename(&tmp, &path).at("rename", &path)?;
        // DURABILITY: every file name this replica writes depends on the id.
        fsx::sync_dir(&self.layout.meta_dir())?;
        Ok(id)
    }

    /// The replica id if one was minted (read-only).
    pub fn current_replica(&self) -> Option<String> {
        let v: Value =
            serde_json::from_slice(&std::fs::read(self.layout.replica_path()).ok()?).ok()?;
        (v["fingerprint"] == machine_fingerprint(&self.layout.root))
            .then(|| v["id"].as_str().map(String::from))?
    }

    /// Issues the next HLC stamp. Caller holds the lock.
    /// `now` is the wall-clock time the caller also records as the display `ts`, so both come
    /// from one clock reading.
    pub(crate) fn tick(&self, inner: &Inner, now: i64) -> Result<Hlc> {
        let next = self.last_hlc(inner)?.tick(now);
        inner.ledger.observe_hlc(&next.to_string())?;
        Ok(next)
    }

    /// Lets a stamp read from the files move the clock on, unless it is further ahead of the
    /// wall clock than [`clock::MAX_FORWARD_MS`] (verify-store reports such stamps).
    pub(crate) fn observe(&self, inner: &Inner, stamp: &str) -> Result<()> {
        if let Some(h) = Hlc::parse(stamp)
            && h.admissible(clock::now_ms())
        {
            inner.ledger.observe_hlc(stamp)?;
        }
        Ok(())
    }

    /// The newest stamp issued or observed. A batch ticks from it in memory and records its
    /// last stamp once (caller holds the lock).
    pub(crate) fn last_hlc(&self, inner: &Inner) -> Result<Hlc> {
        match inner.ledger.meta("hlc")?.and_then(|s| Hlc::parse(&s)) {
            Some(h) => Ok(h),
            None => self.max_hlc_on_disk(),
        }
    }

    /// The newest admissible stamp found in the files (history ids, segment lines, log entry
    /// ids); stamps too far ahead of the wall clock are left out (see [`Hlc::admissible`]).
    fn max_hlc_on_disk(&self) -> Result<Hlc> {
        let mut stamps: Vec<Hlc> = Vec::new();
        for name in store::list_history_names(&self.layout)? {
            for id in store::list_history_ids(&self.layout, &name)? {
                stamps.extend(id.get(..24).and_then(Hlc::parse));
            }
        }
        for (_, rel) in store::list_session_dirs(&self.layout)? {
            for seg in store::list_segments(&self.layout, &rel)? {
                let Ok(parsed) = store::segment::read(&self.layout.root.join(&seg.rel)) else {
                    continue;
                };
                stamps.extend(parsed.chunks.iter().filter_map(|c| Hlc::parse(&c.hlc)));
            }
        }
        for name in store::list_category_files(&self.layout)?.0 {
            if let Some(f) = store::read_category(&self.layout, &name)?
                && let Ok(v) = &f.content
                && let Some(entries) = v.get("entries").and_then(Value::as_array)
            {
                stamps.extend(
                    entries
                        .iter()
                        .filter_map(|e| Hlc::parse(e.get("id")?.as_str()?.get(..24)?)),
                );
            }
        }
        let now = clock::now_ms();
        Ok(stamps
            .into_iter()
            .filter(|h| h.admissible(now))
            .max()
            .unwrap_or(Hlc::ZERO))
    }

    /// Rebuilds the ledger's caches from the files. Caller holds the lock, unless the store is
    /// served read-only (then nothing is adopted or repaired).
    fn rebuild_ledger(&self, inner: &mut Inner, lock: Option<&WriteLock>) -> Result<()> {
        let mut names = store::list_category_files(&self.layout)?.0;
        names.extend(store::list_history_names(&self.layout)?);
        names.sort();
        names.dedup();
        for name in names {
            self.categories()
                .sync_category(inner, &name, lock, Sync::Full)?;
        }
        self.sessions().sync_sessions(inner, lock)?;
        let hlc = self.max_hlc_on_disk()?;
        inner.ledger.set_meta("hlc", &hlc.to_string())?;
        let epoch = content_hash(
            format!(
                "{}-{}-{:?}",
                std::process::id(),
                clock::now_ms(),
                std::time::Instant::now()
            )
            .as_bytes(),
        );
        inner.ledger.mark_built(&epoch[..16])?;
        Ok(())
    }

    /// Finds files changed behind memdir's back, adopts them, and refreshes stale caches;
    /// notes only when no process checked them within `notes_interval` (see
    /// `Notes::scan_every`). Returns the adopted category names.
    pub(crate) fn scan(
        &self,
        inner: &mut Inner,
        notes_interval: std::time::Duration,
    ) -> Result<Vec<String>> {
        let mut adopted = Vec::new();
        let mut names = store::list_category_files(&self.layout)?.0;
        for row in inner.ledger.categories()? {
            if row.status != CategoryStatus::Deleted
                && let Ok(n) = CategoryName::new(&row.name)
            {
                names.push(n);
            }
        }
        names.sort();
        names.dedup();
        for name in names {
            let before = inner
                .ledger
                .category(name.as_str())?
                .and_then(|r| r.head_id);
            // One file that cannot be adopted now (busy lock, unreadable) must not break the
            // open of the whole store: the next scan retries it, verify-store reports it.
            match self
                .categories()
                .sync_category(inner, &name, None, Sync::Fast)
            {
                Ok(st) if st.row.head_id != before && st.row.updated_by == "external" => {
                    adopted.push(name.to_string())
                }
                Ok(_) => {}
                Err(e) if e.kind == ErrorKind::Internal => return Err(e),
                Err(_) => {}
            }
        }
        self.sessions().sync_sessions(inner, None)?;
        self.cx().notes().scan_every(inner, notes_interval)?;
        Ok(adopted)
    }

    /// Runs `f` as one write: the lock held, staged work recovered, the store initialised.
    pub(crate) fn with_write<T>(&self, f: impl FnOnce(&WriteTxn<'_>) -> Result<T>) -> Result<T> {
        let mut guard = self.inner_for_write()?;
        let inner = guard
            .as_mut()
            .expect("invariant: inner_for_write returns an open ledger");
        let lock = self.lock_and_recover()?;
        self.check_format()?;
        // A store from before the format file: its first write records the format.
        store::format::ensure(&self.layout)?;
        if inner.ledger.meta("built")?.is_none() {
            self.rebuild_ledger(inner, Some(&lock))?;
        }
        f(&WriteTxn { inner, lock: &lock })
    }
}

/// A fingerprint of this machine and the store's path: a store copied elsewhere mints a new
/// replica id.
fn machine_fingerprint(root: &Path) -> String {
    let machine = memdir_store::env::process_raw("MEMDIR_MACHINE_ID")
        .or_else(|| std::fs::read_to_string("/etc/machine-id").ok())
        .or_else(|| std::fs::read_to_string("/var/lib/dbus/machine-id").ok())
        .unwrap_or_else(host_name);
    let path = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    content_hash(format!("{}\0{}", machine.trim(), path.display()).as_bytes())[..16].to_string()
}

fn is_replica_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 40
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !id.starts_with('-')
}

/// A slug of the actor and the replica's key id, e.g. `laptop-7f3kq2mzx4ab5c6d` (at most 40
/// characters).
fn mint_replica_id(actor: &str, key_id: &str) -> String {
    let mut slug: String = actor
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .collect();
    slug = slug
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    slug.truncate(39 - key_id.len());
    let slug = slug.trim_end_matches('-');
    let slug = if slug.is_empty() { "memdir" } else { slug };
    format!("{slug}-{key_id}")
}

/// A new replica's signing secret: 32 random bytes, or with `MEMDIR_SEED` set (tests that
/// replay a run) derived from it and the machine fingerprint.
fn mint_secret(fingerprint: &str) -> Result<[u8; 32]> {
    match memdir_store::env::process_raw("MEMDIR_SEED") {
        Some(seed) => Ok(blake3::derive_key(
            "memdir replica secret from a test seed",
            format!("{seed}\0{fingerprint}").as_bytes(),
        )),
        None => replication::seals::random32(),
    }
}

/// Validates a page limit.
pub fn check_limit(field: &str, limit: usize) -> Result<usize> {
    if limit == 0 || limit > limits::MAX_LIMIT {
        return Err(Error::invalid(
            field,
            format!(
                "{field} must be between 1 and {}; got {limit}",
                limits::MAX_LIMIT
            ),
        ));
    }
    Ok(limit)
}

/// A reason, validated.
pub(crate) fn check_reason(reason: Option<&str>) -> Result<Option<String>> {
    match reason {
        Some(r) if r.chars().count() > limits::MAX_REASON_CHARS => Err(Error::too_large(
            "reason",
            r.chars().count(),
            limits::MAX_REASON_CHARS,
            "characters",
        )),
        Some(r) if r.trim().is_empty() => Ok(None),
        Some(r) => Ok(Some(r.to_string())),
        None => Ok(None),
    }
}

/// The time an `as_of` names, in ms: RFC 3339, a date (the end of that day), epoch ms, a time
/// ago (7d), today or yesterday; `None` when not given.
pub(crate) fn as_of_ms(v: Option<&str>) -> Result<Option<i64>> {
    match v.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => match clock::parse_when(s, clock::now_ms()) {
            Some((t, whole_day)) => Ok(Some(if whole_day { t + 86_400_000 - 1 } else { t })),
            None => Err(Error::invalid(
                "as_of",
                format!(
                    "as_of {s:?} is not a time: use RFC 3339 (2026-11-29T10:00:00Z), a date (2026-11-29), epoch milliseconds, a time ago (30m, 12h, 7d, 2w), today or yesterday"
                ),
            )),
        },
    }
}

/// Deserializes tool or request arguments, turning serde's message into an `invalid` error
/// that names the field where serde does.
pub fn from_args<T: serde::de::DeserializeOwned>(args: Value) -> Result<T> {
    serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.inner().to_string();
        // serde names unknown and missing fields in its message; others come from the path.
        let field = if path != "." && !path.is_empty() {
            Some(path.clone())
        } else {
            msg.split('`')
                .nth(1)
                .filter(|_| msg.contains("field"))
                .map(str::to_string)
        };
        match field {
            Some(f) => {
                Error::new(ErrorKind::Invalid, format!("invalid argument {f}: {msg}")).field(&f)
            }
            None => Error::new(ErrorKind::Invalid, format!("invalid arguments: {msg}")),
        }
    })
}
