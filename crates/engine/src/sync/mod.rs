//! Sync between replicas of one memory directory: the merge core ([`merge`]), pure, and the
//! git transport's process driver ([`git`]). The engine's side (`Memdir::sync`, `resolve`)
//! is in `service::sync`.

pub mod git;
pub mod http;
pub mod merge;
