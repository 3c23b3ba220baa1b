//! The ledger: a SQLite database under `.memdir/` holding derived, rebuildable state.
//!
//! It records transactions, the hybrid-clock high-water mark, caches of category heads and
//! session segments (keyed by file size and mtime, so a stale row is detected by one `stat`),
//! and a change feed that the search index catches up from.
//!
//! Architecture Invariant: the ledger is never the only copy of a memory. Deleting
//! `ledger.db` loses nothing; the next open rebuilds it from the files. Writes to it happen
//! only under the store's write lock.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use serde_json::Value;

use memdir_api::error::IoContext;
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_store::fsx;
use memdir_store::model::CategoryStatus;

/// The ledger's schema version; a different version is rebuilt from the files.
pub const LEDGER_SCHEMA: i64 = 6;

/// Cached state of one category.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CategoryRow {
    pub name: String,
    /// `Ok`, `Malformed` or `Deleted` (an `Absent` category has no row).
    pub status: CategoryStatus,
    pub file_hash: Option<String>,
    pub file_len: i64,
    pub mtime_ns: i64,
    pub head_id: Option<String>,
    pub vv: String,
    pub version: i64,
    pub kind: String,
    pub updated_at: String,
    pub updated_by: String,
    /// Change stamp of the category's history directory when the row was made: while it is
    /// unchanged, no history entry was added or removed, so `head_id` is still the newest.
    pub hist_stamp: i64,
}

/// Cached state of one session segment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SegmentRow {
    pub rel: String,
    pub session_id: String,
    pub replica: String,
    pub len: i64,
    pub mtime_ns: i64,
    pub chunks: i64,
    pub next_seq: i64,
    pub project: String,
    pub title: String,
    pub first_ts: String,
    pub last_ts: String,
    pub bad_lines: i64,
    /// The largest stamp in the segment: the next chunk appended to it sorts after it.
    pub max_hlc: String,
    /// The signature of the first `len` bytes (`segment::sign`; empty: unknown): a file whose
    /// stamp moved but whose signature did not (a copied or restored store) is unchanged.
    pub sig: String,
}

/// An idempotency key of a chunk: its session, its `source_id` and the chunk that holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceKey {
    pub session_id: String,
    pub source_id: String,
    pub chunk_id: String,
}

/// SQLite errors at the boundary: busy is `busy`, anything else `unavailable`, with a hint
/// that says whether deleting the (derived) ledger could help.
pub fn sql_error(e: rusqlite::Error) -> Error {
    {
        if let rusqlite::Error::SqliteFailure(f, _) = &e
            && matches!(
                f.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            )
        {
            return Error::new(ErrorKind::Busy, format!("ledger busy: {e}"))
                .hint("another memdir process holds the store; retry in a moment");
        }
        let denied = matches!(
            &e,
            rusqlite::Error::SqliteFailure(f, _) if matches!(
                f.code,
                rusqlite::ErrorCode::ReadOnly
                    | rusqlite::ErrorCode::CannotOpen
                    | rusqlite::ErrorCode::DiskFull
                    | rusqlite::ErrorCode::PermissionDenied
            )
        );
        let err = Error::new(ErrorKind::Unavailable, format!("ledger: {e}"));
        if denied {
            // Deleting the ledger would not help where memdir may not write.
            err.detail("write_denied", Value::Bool(true))
                .hint("memdir cannot write under .memdir/ (permissions, a read-only file system or a full disk); reads go on from the files")
        } else {
            err.hint(
                "the ledger under .memdir/ is derived state: it may be deleted and is rebuilt from the files",
            )
        }
    }
}

/// Whether an error says the ledger file is not a readable database.
fn is_damaged(e: &Error) -> bool {
    e.message.contains("file is not a database")
        || e.message.contains("database disk image is malformed")
}

/// Moves a damaged ledger (and its WAL and shared-memory files) aside; returns the new path.
fn set_aside(path: &Path) -> Result<std::path::PathBuf> {
    let stamp = memdir_store::clock::now_ms();
    let aside = path.with_extension(format!("db.corrupt-{stamp}"));
    std::fs::rename(path, &aside).map_err(|e| memdir_api::error::IoError {
        op: "set aside damaged ledger",
        path: path.to_path_buf(),
        source: e,
    })?;
    for ext in ["db-wal", "db-shm"] {
        let _ = std::fs::remove_file(path.with_extension(ext));
    }
    Ok(aside)
}

/// What changed, in the change feed the derived indexes catch up from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ChangeKind {
    /// Lines appended to a segment; the key is `<segment path>\n<length before>`.
    Append,
    /// A segment changed otherwise (new to the ledger, edited by hand, removed): re-read whole.
    Segment,
    /// A category's head changed.
    Category,
    /// A note changed (written, edited by hand, removed); the key is its path.
    Note,
}

impl ChangeKind {
    /// The name stored in the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Append => "append",
            ChangeKind::Segment => "segment",
            ChangeKind::Category => "category",
            ChangeKind::Note => "note",
        }
    }

    /// The kind a stored name names.
    pub fn parse(s: &str) -> Option<ChangeKind> {
        match s {
            "append" => Some(ChangeKind::Append),
            "segment" => Some(ChangeKind::Segment),
            "category" => Some(ChangeKind::Category),
            "note" => Some(ChangeKind::Note),
            _ => None,
        }
    }
}

/// An open ledger.
pub struct Ledger {
    conn: Connection,
    set_aside: Option<std::path::PathBuf>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS category (
  name TEXT PRIMARY KEY, status TEXT NOT NULL, file_hash TEXT, file_len INTEGER NOT NULL,
  mtime_ns INTEGER NOT NULL, head_id TEXT, vv TEXT NOT NULL, version INTEGER NOT NULL,
  kind TEXT NOT NULL, updated_at TEXT NOT NULL, updated_by TEXT NOT NULL, hist_stamp INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS segment (
  rel TEXT PRIMARY KEY, session_id TEXT NOT NULL, replica TEXT NOT NULL, len INTEGER NOT NULL,
  mtime_ns INTEGER NOT NULL, chunks INTEGER NOT NULL, next_seq INTEGER NOT NULL,
  project TEXT NOT NULL, title TEXT NOT NULL, first_ts TEXT NOT NULL, last_ts TEXT NOT NULL,
  bad_lines INTEGER NOT NULL, max_hlc TEXT NOT NULL, sig TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS segment_session ON segment(session_id);
CREATE TABLE IF NOT EXISTS source_key (
  session_id TEXT NOT NULL, source_id TEXT NOT NULL, rel TEXT NOT NULL, chunk_id TEXT NOT NULL,
  PRIMARY KEY (session_id, source_id, rel));
CREATE INDEX IF NOT EXISTS source_key_rel ON source_key(rel);
CREATE TABLE IF NOT EXISTS txn (
  id INTEGER PRIMARY KEY AUTOINCREMENT, txid TEXT NOT NULL, op TEXT NOT NULL,
  target TEXT NOT NULL, actor TEXT NOT NULL, at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS change (
  gen INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, key TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS change_kind ON change(kind, gen);
CREATE TABLE IF NOT EXISTS import_cursor (source TEXT PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS session_dir (rel TEXT PRIMARY KEY, stamp INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS note (path TEXT PRIMARY KEY, len INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, hash TEXT NOT NULL);
";

impl Ledger {
    /// Opens (or creates) the ledger at `path`. Returns whether it had to be (re)built empty.
    ///
    /// A file that is not a readable SQLite database (damaged, or something else written
    /// over it) is moved aside as `ledger.db.corrupt-<ms>` and a new ledger is created in its
    /// place: everything in it is derived from the files. [`Ledger::set_aside`] says where the
    /// damaged file went. `wait` bounds the wait for other processes creating it at once.
    pub fn open(path: &Path, wait: std::time::Duration) -> Result<(Ledger, bool)> {
        match Self::open_once(path, wait) {
            // Judged twice, a moment apart, and only for a file holding at least a header: a
            // database being created by another process at this instant is not damage.
            Err(e) if is_damaged(&e) && std::fs::metadata(path).is_ok_and(|m| m.len() >= 100) => {
                std::thread::sleep(std::time::Duration::from_millis(50));
                match Self::open_once(path, wait) {
                    Err(e) if is_damaged(&e) => {
                        let aside = set_aside(path)?;
                        let (mut l, _) = Self::open_once(path, wait)?;
                        l.set_aside = Some(aside);
                        Ok((l, true))
                    }
                    r => r,
                }
            }
            r => r,
        }
    }

    /// A ledger in memory, for a store memdir may only read: rebuilt from the files by the
    /// caller, gone when the process ends.
    pub fn open_memory() -> Result<Ledger> {
        let conn = Connection::open_in_memory().map_err(sql_error)?;
        conn.execute_batch(SCHEMA).map_err(sql_error)?;
        Ok(Ledger {
            conn,
            set_aside: None,
        })
    }

    /// Where a damaged ledger was moved by [`Ledger::open`], if it was.
    pub fn set_aside(&self) -> Option<&Path> {
        self.set_aside.as_deref()
    }

    fn open_once(path: &Path, wait_max: std::time::Duration) -> Result<(Ledger, bool)> {
        // Private from its first byte: SQLite gives its -wal and -shm files the database
        // file's permissions, so creating the file here first makes all three owner-only.
        fsx::private_file(
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false),
        )
        .open(path)
        .at("create", path)?;
        fsx::make_private(path)?;
        let conn = Connection::open(path).map_err(sql_error)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(sql_error)?;
        // Every statement is prepared once per connection (`prepare_cached`): room for all of them.
        conn.set_prepared_statement_cache_capacity(64);
        // DURABILITY: the ledger is derived state, rebuilt from the files after a loss, so it
        // does not need a sync per commit; WAL lets readers run beside the one writer.
        // Switching a new database to WAL needs an exclusive lock, and SQLite reports "busy" at
        // once instead of waiting when several processes create the ledger together: retry
        // within the same deadline as the store lock.
        let deadline = std::time::Instant::now() + wait_max;
        let mut wait = 2u64;
        loop {
            let r = conn
                // secure_delete: a row that a forget replaces leaves no copy in free pages.
                .execute_batch(
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA secure_delete=ON;",
                )
                .and_then(|_| conn.execute_batch(SCHEMA));
            match r {
                Ok(()) => break,
                Err(rusqlite::Error::SqliteFailure(f, _))
                    if matches!(
                        f.code,
                        rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                    ) && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(wait));
                    wait = (wait * 2).min(50);
                }
                Err(e) => return Err(sql_error(e)),
            }
        }
        let ledger = Ledger {
            conn,
            set_aside: None,
        };
        let version: Option<i64> = ledger.meta("schema")?.and_then(|v| v.parse().ok());
        let fresh = version != Some(LEDGER_SCHEMA) || ledger.meta("built")?.is_none();
        if version.is_some() && version != Some(LEDGER_SCHEMA) {
            // Another schema: everything here is derived, so drop it and rebuild from the files.
            ledger.conn.execute_batch(
                "DROP TABLE IF EXISTS meta; DROP TABLE IF EXISTS category; DROP TABLE IF EXISTS segment;
                 DROP TABLE IF EXISTS source_key; DROP TABLE IF EXISTS change; DROP TABLE IF EXISTS txn;
                 DROP TABLE IF EXISTS import_cursor; DROP TABLE IF EXISTS session_dir; DROP TABLE IF EXISTS note;",
            ).map_err(sql_error)?;
            ledger.conn.execute_batch(SCHEMA).map_err(sql_error)?;
        }
        Ok((ledger, fresh))
    }

    /// Marks a full rebuild from the files as finished.
    pub fn mark_built(&self, epoch: &str) -> Result<()> {
        self.set_meta("schema", &LEDGER_SCHEMA.to_string())?;
        self.set_meta("epoch", epoch)?;
        self.set_meta("built", "1")
    }

    /// Folds the write-ahead log into the database and empties it, so that replaced rows
    /// survive in neither (after a forget). Best effort while other processes read: their
    /// snapshot keeps the log until they finish.
    pub fn checkpoint(&self) -> Result<()> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(sql_error)?;
        Ok(())
    }

    /// Runs `f` inside one SQLite transaction.
    pub fn atomically<T>(&self, f: impl FnOnce(&Ledger) -> Result<T>) -> Result<T> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(sql_error)?;
        match f(self) {
            Ok(v) => {
                self.conn.execute_batch("COMMIT").map_err(sql_error)?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT value FROM meta WHERE key = ?1")
            .map_err(sql_error)?
            .query_row([key], |r| r.get(0))
            .optional()
            .map_err(sql_error)
    }

    /// The saved read position of an incremental import of `source` (a file), as JSON text.
    /// Only a fast path: without it the source is read again from its start, and idempotency
    /// keys make that add nothing.
    pub fn import_cursor(&self, source: &str) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT state FROM import_cursor WHERE source = ?1")
            .map_err(sql_error)?
            .query_row([source], |r| r.get(0))
            .optional()
            .map_err(sql_error)
    }

    /// Saves the read position of an incremental import of `source`.
    pub fn put_import_cursor(&self, source: &str, state: &str) -> Result<()> {
        const SQL: &str = "INSERT INTO import_cursor(source, state) VALUES (?1, ?2) ON CONFLICT(source) DO UPDATE SET state = ?2";
        self.conn
            .prepare_cached(SQL)
            .map_err(sql_error)?
            .execute(params![source, state])
            .map_err(sql_error)?;
        Ok(())
    }

    pub fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        const SQL: &str = "INSERT INTO meta(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = ?2";
        self.conn
            .prepare_cached(SQL)
            .map_err(sql_error)?
            .execute(params![key, value])
            .map_err(sql_error)?;
        Ok(())
    }

    /// Raises the stored HLC high-water mark to `stamp` if it is newer (stamps sort as text).
    pub fn observe_hlc(&self, stamp: &str) -> Result<()> {
        const SQL: &str = "INSERT INTO meta(key, value) VALUES ('hlc', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value WHERE excluded.value > meta.value";
        self.conn
            .prepare_cached(SQL)
            .map_err(sql_error)?
            .execute([stamp])
            .map_err(sql_error)?;
        Ok(())
    }

    pub fn category(&self, name: &str) -> Result<Option<CategoryRow>> {
        self.conn
            .prepare_cached("SELECT * FROM category WHERE name = ?1")
            .map_err(sql_error)?
            .query_row([name], category_from_row)
            .optional()
            .map_err(sql_error)
    }

    pub fn categories(&self) -> Result<Vec<CategoryRow>> {
        let mut st = self
            .conn
            .prepare_cached("SELECT * FROM category ORDER BY name")
            .map_err(sql_error)?;
        let rows = st
            .query_map([], category_from_row)
            .map_err(sql_error)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(sql_error)?;
        Ok(rows)
    }

    pub fn put_category(&self, r: &CategoryRow) -> Result<()> {
        const SQL: &str = "INSERT OR REPLACE INTO category VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";
        self.conn
            .prepare_cached(SQL)
            .map_err(sql_error)?
            .execute(params![
                r.name,
                r.status.as_str(),
                r.file_hash,
                r.file_len,
                r.mtime_ns,
                r.head_id,
                r.vv,
                r.version,
                r.kind,
                r.updated_at,
                r.updated_by,
                r.hist_stamp
            ])
            .map_err(sql_error)?;
        Ok(())
    }

    pub fn remove_category(&self, name: &str) -> Result<()> {
        self.conn
            .prepare_cached("DELETE FROM category WHERE name = ?1")
            .map_err(sql_error)?
            .execute([name])
            .map_err(sql_error)?;
        Ok(())
    }

    /// The size, change stamp and content hash (empty: unknown) each note file had when
    /// memdir last saw it, by path.
    pub fn note_stats(&self) -> Result<std::collections::HashMap<String, (i64, i64, String)>> {
        let mut st = self
            .conn
            .prepare_cached("SELECT path, len, mtime_ns, hash FROM note")
            .map_err(sql_error)?;
        let rows = st
            .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))
            .map_err(sql_error)?
            .collect::<Result<_, _>>()
            .map_err(sql_error)?;
        Ok(rows)
    }

    /// Records the size, change stamp and content hash (empty: unknown) of a note file as
    /// seen (`None`: it is gone).
    pub fn put_note_stat(&self, path: &str, stat: Option<(i64, i64)>, hash: &str) -> Result<()> {
        match stat {
            Some((len, mtime)) => self
                .conn
                .prepare_cached("INSERT OR REPLACE INTO note VALUES (?1, ?2, ?3, ?4)")
                .map_err(sql_error)?
                .execute(params![path, len, mtime, hash]),
            None => self
                .conn
                .prepare_cached("DELETE FROM note WHERE path = ?1")
                .map_err(sql_error)?
                .execute([path]),
        }
        .map_err(sql_error)?;
        Ok(())
    }

    pub fn segment(&self, rel: &str) -> Result<Option<SegmentRow>> {
        self.conn
            .prepare_cached("SELECT * FROM segment WHERE rel = ?1")
            .map_err(sql_error)?
            .query_row([rel], segment_from_row)
            .optional()
            .map_err(sql_error)
    }

    pub fn segments(&self) -> Result<Vec<SegmentRow>> {
        let mut st = self
            .conn
            .prepare_cached("SELECT * FROM segment ORDER BY rel")
            .map_err(sql_error)?;
        let rows = st
            .query_map([], segment_from_row)
            .map_err(sql_error)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(sql_error)?;
        Ok(rows)
    }

    pub fn put_segment(&self, r: &SegmentRow) -> Result<()> {
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO segment VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)").map_err(sql_error)?
            .execute(params![
                r.rel, r.session_id, r.replica, r.len, r.mtime_ns, r.chunks, r.next_seq, r.project,
                r.title, r.first_ts, r.last_ts, r.bad_lines, r.max_hlc, r.sig
            ]).map_err(sql_error)?;
        Ok(())
    }

    pub fn remove_segment(&self, rel: &str) -> Result<()> {
        self.conn
            .prepare_cached("DELETE FROM segment WHERE rel = ?1")
            .map_err(sql_error)?
            .execute([rel])
            .map_err(sql_error)?;
        // The directory's listing no longer matches the rows: the next scan lists it again.
        if let Some((dir, _)) = rel.rsplit_once('/') {
            self.conn
                .prepare_cached("DELETE FROM session_dir WHERE rel = ?1")
                .map_err(sql_error)?
                .execute([dir])
                .map_err(sql_error)?;
        }
        self.replace_source_keys(rel, &[])
    }

    /// The change stamp of each session directory whose listing the segment rows matched
    /// when it was recorded (see `Sessions::sync_sessions`).
    pub fn session_dir_stamps(&self) -> Result<std::collections::HashMap<String, i64>> {
        let mut st = self
            .conn
            .prepare_cached("SELECT rel, stamp FROM session_dir")
            .map_err(sql_error)?;
        let rows = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(sql_error)?
            .collect::<Result<_, _>>()
            .map_err(sql_error)?;
        Ok(rows)
    }

    /// Records the change stamps of session directories listed in full.
    pub fn put_session_dir_stamps(&self, stamps: &[(String, i64)]) -> Result<()> {
        let mut st = self
            .conn
            .prepare_cached("INSERT OR REPLACE INTO session_dir VALUES (?1, ?2)")
            .map_err(sql_error)?;
        for (rel, stamp) in stamps {
            st.execute(params![rel, stamp]).map_err(sql_error)?;
        }
        Ok(())
    }

    /// Replaces the idempotency keys (`source_id`s) a segment holds, read from its file.
    pub fn replace_source_keys(&self, rel: &str, keys: &[SourceKey]) -> Result<()> {
        self.conn
            .prepare_cached("DELETE FROM source_key WHERE rel = ?1")
            .map_err(sql_error)?
            .execute([rel])
            .map_err(sql_error)?;
        self.add_source_keys(rel, keys)
    }

    /// Adds the idempotency keys of chunks appended to a segment.
    pub fn add_source_keys(&self, rel: &str, keys: &[SourceKey]) -> Result<()> {
        let mut st = self
            .conn
            .prepare_cached("INSERT OR IGNORE INTO source_key VALUES (?1, ?2, ?3, ?4)")
            .map_err(sql_error)?;
        for k in keys {
            st.execute(params![k.session_id, k.source_id, rel, k.chunk_id])
                .map_err(sql_error)?;
        }
        Ok(())
    }

    /// The chunk of a session that holds an idempotency key, if any.
    pub fn source_key(&self, session_id: &str, source_id: &str) -> Result<Option<String>> {
        self
            .conn
            .prepare_cached(
                "SELECT chunk_id FROM source_key WHERE session_id = ?1 AND source_id = ?2 ORDER BY rel LIMIT 1",
            ).map_err(sql_error)?
            .query_row([session_id, source_id], |r| r.get(0))
            .optional().map_err(sql_error)
    }

    /// The chunks, in any session, whose idempotency key is `source_id`: (session, chunk id).
    pub fn chunks_with_source_id(&self, source_id: &str) -> Result<Vec<(String, String)>> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT DISTINCT session_id, chunk_id FROM source_key WHERE source_id = ?1 ORDER BY session_id, chunk_id",
            )
            .map_err(sql_error)?;
        let rows = st
            .query_map([source_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(sql_error)?;
        rows.collect::<std::result::Result<Vec<(String, String)>, _>>()
            .map_err(sql_error)
    }

    /// Forgets every idempotency key (before they are read again from all segments).
    pub fn clear_source_keys(&self) -> Result<()> {
        self.conn
            .prepare_cached("DELETE FROM source_key")
            .map_err(sql_error)?
            .execute([])
            .map_err(sql_error)?;
        Ok(())
    }

    /// Records a committed transaction.
    pub fn record_txn(
        &self,
        txid: &str,
        op: &str,
        target: &str,
        actor: &str,
        at: &str,
    ) -> Result<()> {
        const SQL: &str =
            "INSERT INTO txn(txid, op, target, actor, at) VALUES (?1, ?2, ?3, ?4, ?5)";
        self.conn
            .prepare_cached(SQL)
            .map_err(sql_error)?
            .execute(params![txid, op, target, actor, at])
            .map_err(sql_error)?;
        Ok(())
    }

    /// Appends to the change feed; returns the new generation.
    pub fn record_change(&self, kind: ChangeKind, key: &str) -> Result<i64> {
        self.conn
            .prepare_cached("INSERT INTO change(kind, key) VALUES (?1, ?2)")
            .map_err(sql_error)?
            .execute(params![kind.as_str(), key])
            .map_err(sql_error)?;
        Ok(self.conn.last_insert_rowid())
    }

    /// The newest generation of the change feed (0 when empty).
    pub fn generation(&self) -> Result<i64> {
        self.conn
            .prepare_cached("SELECT COALESCE(MAX(gen), 0) FROM change")
            .map_err(sql_error)?
            .query_row([], |r| r.get(0))
            .map_err(sql_error)
    }

    /// The newest generation among changes of the given kinds (0 when none).
    pub fn last_change_of(&self, kinds: &[ChangeKind]) -> Result<i64> {
        let mut max = 0;
        for k in kinds {
            let g: i64 = self
                .conn
                .prepare_cached("SELECT COALESCE(MAX(gen), 0) FROM change WHERE kind = ?1")
                .map_err(sql_error)?
                .query_row([k.as_str()], |r| r.get(0))
                .map_err(sql_error)?;
            max = max.max(g);
        }
        Ok(max)
    }

    /// Drops changes older than `before` that every index has absorbed. The newest change is
    /// always kept, so the generation never goes back.
    pub fn prune_changes(&self, before: i64) -> Result<usize> {
        self.conn
            .prepare_cached(
                "DELETE FROM change WHERE gen < ?1 AND gen < (SELECT MAX(gen) FROM change)",
            )
            .map_err(sql_error)?
            .execute([before])
            .map_err(sql_error)
    }

    /// Changes after `gen`, oldest first: (gen, kind, key).
    pub fn changes_since(&self, gen_after: i64) -> Result<Vec<(i64, ChangeKind, String)>> {
        let mut st = self
            .conn
            .prepare_cached("SELECT gen, kind, key FROM change WHERE gen > ?1 ORDER BY gen")
            .map_err(sql_error)?;
        let rows = st
            .query_map([gen_after], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(sql_error)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(sql_error)?;
        // A kind this memdir does not know (a newer one's ledger) means nothing to it.
        Ok(rows
            .into_iter()
            .filter_map(|(g, k, key)| ChangeKind::parse(&k).map(|k| (g, k, key)))
            .collect())
    }

    /// Number of recorded transactions.
    /// The newest transaction's row number (0 before the first): it moves with every
    /// transaction, history-only ones (a forgotten or compacted version) included.
    pub fn txn_mark(&self) -> Result<i64> {
        self.conn
            .prepare_cached("SELECT COALESCE(MAX(rowid), 0) FROM txn")
            .map_err(sql_error)?
            .query_row([], |r| r.get(0))
            .map_err(sql_error)
    }

    pub fn txn_count(&self) -> Result<i64> {
        self.conn
            .prepare_cached("SELECT COUNT(*) FROM txn")
            .map_err(sql_error)?
            .query_row([], |r| r.get(0))
            .map_err(sql_error)
    }
}

fn category_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<CategoryRow> {
    Ok(CategoryRow {
        name: r.get(0)?,
        status: {
            let s: String = r.get(1)?;
            CategoryStatus::parse(&s).ok_or_else(|| {
                rusqlite::Error::FromSqlConversionFailure(
                    1,
                    rusqlite::types::Type::Text,
                    format!("unknown category status {s:?}").into(),
                )
            })?
        },
        file_hash: r.get(2)?,
        file_len: r.get(3)?,
        mtime_ns: r.get(4)?,
        head_id: r.get(5)?,
        vv: r.get(6)?,
        version: r.get(7)?,
        kind: r.get(8)?,
        updated_at: r.get(9)?,
        updated_by: r.get(10)?,
        hist_stamp: r.get(11)?,
    })
}

fn segment_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SegmentRow> {
    Ok(SegmentRow {
        rel: r.get(0)?,
        session_id: r.get(1)?,
        replica: r.get(2)?,
        len: r.get(3)?,
        mtime_ns: r.get(4)?,
        chunks: r.get(5)?,
        next_seq: r.get(6)?,
        project: r.get(7)?,
        title: r.get(8)?,
        first_ts: r.get(9)?,
        last_ts: r.get(10)?,
        bad_lines: r.get(11)?,
        max_hlc: r.get(12)?,
        sig: r.get(13)?,
    })
}
