//! The store format version: `memdir.json` at the root of the memory directory.
//!
//! It travels with the files (git, copies, snapshots), so a memdir that opens a store knows
//! whether it understands its layout and file formats. Its content is fixed for a given
//! format (`{"format": N}`), so two replicas that create it independently write the same bytes.
//!
//! - No file: a store from before the version existed (format 0, the same layout as
//!   format 1). Reads go on; the first write records format 1 (the migration).
//! - Format 2 adds history entries written as patches of their parent
//!   ([`crate::history`]). A store is created as format 1 and raised to 2 by the
//!   transaction that writes its first patch ([`PATCHES`]), so a store stays readable by an
//!   older memdir until it holds something that memdir would misread.
//! - An older format with a different layout would be migrated on the first write; there is
//!   none yet.
//! - A newer format: every command refuses, naming the file and the versions, and changes
//!   nothing.

use std::path::PathBuf;

use crate::{Layout, codec, fsx, txn};
use memdir_api::error::{IoContext, IoError};

/// The newest format this memdir reads and writes.
pub const FORMAT: u64 = 3;

/// The format a store is created with (and a store without a format file migrated to).
pub const CREATED: u64 = 1;

/// The first format with patch history entries.
pub const PATCHES: u64 = 2;

/// The first format with notes.
pub const NOTES: u64 = 3;

/// The file's name at the root of the memory directory.
pub const FILE: &str = "memdir.json";

/// What the format file says.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// No file (a store from before format 1, or no store yet).
    Missing,
    /// `{"format": N}`.
    Format(u64),
    /// A file memdir cannot read: why.
    Unreadable(String),
}

/// The path of the format file.
pub fn path(layout: &Layout) -> PathBuf {
    layout.root.join(FILE)
}

/// The canonical bytes of the format file of a new store.
pub fn bytes() -> Vec<u8> {
    bytes_of(CREATED)
}

/// The canonical bytes of the format file saying format `n`.
pub fn bytes_of(n: u64) -> Vec<u8> {
    codec::to_pretty(&serde_json::json!({ "format": n }))
}

/// Reads the format file.
pub fn read(layout: &Layout) -> Found {
    match fsx::read(&path(layout), 64 * 1024) {
        Ok(None) => Found::Missing,
        Ok(Some(b)) => match serde_json::from_slice::<serde_json::Value>(&b)
            .ok()
            .and_then(|v| v.get("format").and_then(serde_json::Value::as_u64))
        {
            Some(n) => Found::Format(n),
            None => Found::Unreadable("it is not a JSON object with an integer \"format\"".into()),
        },
        Err(e) => Found::Unreadable(e.source.to_string()),
    }
}

/// Records the current format if no format file exists. The caller holds the write lock (or
/// is creating the store).
pub fn ensure(layout: &Layout) -> Result<(), IoError> {
    let p = path(layout);
    if std::fs::symlink_metadata(&p).is_ok() {
        return Ok(());
    }
    // Processes creating a store at once race here (`init` runs without the lock): each
    // writes its own copy; the content is the same, so whichever rename lands is right. The
    // copy goes to `.memdir/`, not to staging, whose stray files recovery removes.
    let tmp = layout.meta_dir().join(format!(
        "{FILE}.{}.{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    ));
    fsx::write_synced(&tmp, &bytes())?;
    let renamed = std::fs::rename(&tmp, &p).at("rename", &p);
    let _ = std::fs::remove_file(&tmp);
    renamed?;
    // DURABILITY: the format file names how every other file is to be read.
    fsx::sync_dir(&layout.root)
}

/// Adds the format file raised to [`PATCHES`] to `writes` when the store says an older format
/// (or none): the transaction that brings a store its first patch entry names the format that
/// reads it. Returns whether it added the file.
pub fn raise_for_patches(layout: &Layout, writes: &mut Vec<txn::FileWrite>) -> bool {
    raise_to(layout, writes, PATCHES)
}

/// Adds the format file raised to `n` to `writes` when the store says an older format (or
/// none): the transaction that brings a store the first file of format `n` names the format.
/// Returns whether it added the file.
pub fn raise_to(layout: &Layout, writes: &mut Vec<txn::FileWrite>, n: u64) -> bool {
    if matches!(read(layout), Found::Format(have) if have >= n) {
        return false;
    }
    writes.push(txn::FileWrite {
        rel: FILE.into(),
        bytes: Some(bytes_of(n)),
        hash: None,
    });
    true
}
