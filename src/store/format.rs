//! The store format version: `memdir.json` at the root of the memory directory.
//!
//! It travels with the files (git, copies, snapshots), so a memdir that opens a store knows
//! whether it understands its layout and file formats. Its content is fixed for a given
//! format (`{"format": N}`), so two replicas that create it independently write the same bytes.
//!
//! - No file: a store from before the version existed (format 0, the same layout as
//!   format 1). Reads go on; the first write records format 1 (the migration).
//! - An older format with a different layout would be migrated on the first write; there is
//!   none yet.
//! - A newer format: every command refuses, naming the file and the versions, and changes
//!   nothing.

use std::path::PathBuf;

use crate::error::{IoContext, IoError};
use crate::store::{Layout, codec, fsx, txn};

/// The format this memdir writes and reads.
pub const FORMAT: u64 = 1;

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

/// The canonical bytes of the format file.
pub fn bytes() -> Vec<u8> {
    codec::to_pretty(&serde_json::json!({ "format": FORMAT }))
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
    txn::write_synced(&tmp, &bytes())?;
    let renamed = std::fs::rename(&tmp, &p).at("rename", &p);
    let _ = std::fs::remove_file(&tmp);
    renamed?;
    // DURABILITY: the format file names how every other file is to be read.
    txn::sync_dir(&layout.root)
}
