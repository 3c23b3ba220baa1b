//! The replication subsystem: sync with a git remote ([`Replication`](super::Replication),
//! `sync`) and with HTTP peers ([`Peers`](super::Peers), `sync_http`), conflicts and their
//! resolution, and the seals a replica signs its segments with (`seals`).
//!
//! Every file from outside passes [`crate::sync::gate`] before it is written; the merge rules
//! are [`crate::sync::merge`]; every git invocation is in [`crate::sync::git`].

pub(crate) mod seals;
pub mod sync;
pub mod sync_http;
