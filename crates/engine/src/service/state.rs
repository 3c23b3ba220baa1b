//! The state a write starts from and the version it adds: a category as it stands after
//! adopting external changes ([`CatState`]), and the version to commit on top of it
//! ([`NewVersion`], with the keys a merge changed, [`Delta`]). Shared by adoption, which adds
//! `external` versions, and every writer; it depends on neither.

use serde_json::Value;

use crate::ledger::CategoryRow;
use memdir_store::CategoryFile;
use memdir_store::model::{CategoryName, VersionOp};

/// A category as it stands after adopting external changes.
pub(crate) struct CatState {
    /// The current file, when it was read (`Sync::Full`, or the cache was stale).
    pub file: Option<CategoryFile>,
    pub row: CategoryRow,
    /// `file` is the one remembered, not yet compared with the file on disk (`Sync::Deferred`).
    pub unverified: bool,
}

impl CatState {
    pub(super) fn exists(&self) -> bool {
        self.row.status.has_file()
    }
}

/// The top-level keys a merge sets and removes: the change a new version may record as a
/// patch of its parent instead of its whole content ([`store::history`]).
pub(super) struct Delta {
    pub(super) set: serde_json::Map<String, Value>,
    pub(super) remove: Vec<String>,
}

/// One version to commit ([`Categories::commit_version`]): what it is, who wrote it and why, and
/// what the writer already computed of it.
pub(super) struct NewVersion<'a> {
    pub name: &'a CategoryName,
    /// The category as the write found it (its head is the new version's parent).
    pub base: &'a CatState,
    pub op: VersionOp,
    pub actor: String,
    pub reason: Option<String>,
    /// The new content; `None` for a delete.
    pub content: Option<Value>,
    /// The content's file bytes ([`codec::to_pretty`]) and their hash, when the writer has
    /// them already: the content is then serialized and hashed once per write, for the file
    /// and for its history entry alike.
    pub serialized: Option<(Vec<u8>, String)>,
    /// The keys a merge changed, for the ledger's change list.
    pub delta: Option<Delta>,
    /// Whether the category file is written too (false when adopting a file already there).
    pub write_file: bool,
}

impl<'a> NewVersion<'a> {
    /// A version of `content` (`None`: a delete) by `actor`, written to the category file,
    /// with no reason and nothing precomputed.
    pub fn new(
        name: &'a CategoryName,
        base: &'a CatState,
        op: VersionOp,
        actor: impl Into<String>,
        content: Option<Value>,
    ) -> NewVersion<'a> {
        NewVersion {
            name,
            base,
            op,
            actor: actor.into(),
            reason: None,
            content,
            serialized: None,
            delta: None,
            write_file: true,
        }
    }
}
