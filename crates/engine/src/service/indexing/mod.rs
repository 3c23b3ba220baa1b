//! The indexing subsystem: the derived indexes (keyword and vector) kept caught up with the
//! files, and the searches answered from them.
//!
//! [`Indexing`](super::Indexing) is its door. Its state is the open [`SearchIndex`] handle
//! and the vectors ([`State`]); nothing on the write path touches them: a write records a
//! change in the ledger's feed, and the next search catches up (see `indexer`).

pub(crate) mod dense;
pub(crate) mod indexer;
pub(crate) mod search;

use std::sync::{Arc, Mutex};

use memdir_index::index::SearchIndex;

/// What the indexing subsystem keeps in memory between calls.
#[derive(Default)]
pub(crate) struct State {
    /// Shared with the searches running on it: a search clones the handle, takes its
    /// searchers (`search::View`) and lets the mutex go, so its query runs beside catch-ups.
    /// The background embedder reads it too (it holds what a server keeps in memory).
    pub(in crate::service) index: Arc<Mutex<Option<Arc<SearchIndex>>>>,
    /// Vectors for semantic and hybrid search, opened on first use (see `dense`).
    pub(in crate::service) dense: Arc<Mutex<Option<dense::DenseState>>>,
    /// The categories as they stood at a time, indexed for the last search as of it: (the
    /// time, the ledger's marks it was built at (last transaction, last category change), its
    /// searcher). A search as of the same time reuses it while neither moved.
    pub(in crate::service) then: Mutex<Option<Then>>,
    /// The background catch-up after a server's writes (`search::catch_up_soon`): idle,
    /// running, or running with another round asked for.
    pub(in crate::service) soon: std::sync::atomic::AtomicU8,
}

/// The categories as they stood at a time, indexed: (the time, the ledger's marks when built,
/// the searcher).
pub(in crate::service) type Then = (i64, (i64, i64), tantivy::Searcher);

impl State {
    /// Closes the open index (the store under this process was replaced, or the index was
    /// removed); the next search opens it again.
    pub(in crate::service) fn close(&self) {
        if let Ok(mut g) = self.index.lock() {
            *g = None;
        }
    }
}
