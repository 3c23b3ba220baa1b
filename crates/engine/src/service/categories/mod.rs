//! The categories subsystem: named JSON documents with merge writes, compare-and-swap,
//! write-once versions, logs with retention, and adoption of the files' hand edits.
//!
//! [`Categories`](super::Categories) is its door. Its state is the file cache and the last
//! committed head of this process ([`State`]); it reaches the core (layout, ledger, lock,
//! clock) through the call it runs in, and the indexes only through `indexing()`.

pub(crate) mod adoption;
mod blame;
pub(crate) mod category;
pub(crate) mod log;
mod review;
pub(crate) mod version;

use std::sync::Mutex;

/// What the categories subsystem keeps in memory between calls.
#[derive(Default)]
pub(crate) struct State {
    /// The category files this process wrote or read last (see
    /// `Categories::read_category_cached`).
    pub(in crate::service) file_cache: Mutex<version::FileCache>,
    /// The version this process committed last, as a patch base: (id, hash, depth).
    pub(in crate::service) last_head: Mutex<Option<(String, String, u32)>>,
}

impl State {
    /// Forgets everything kept (the store under this process was replaced).
    pub(in crate::service) fn forget(&self) {
        if let Ok(mut g) = self.file_cache.lock() {
            g.clear();
        }
        if let Ok(mut g) = self.last_head.lock() {
            *g = None;
        }
    }
}
