//! Sync between replicas of one memory directory: the gate every incoming file passes
//! ([`gate`], pure), the merge core ([`merge`], pure), the seals that let a replica check
//! another's lines ([`seal`]), and the transports' process and HTTP drivers ([`git`],
//! [`http`]). The engine's side (`Replication::sync`, `resolve`) is in
//! `service::sync` and `service::sync_http`.

pub mod gate;
pub mod git;
pub mod http;
pub mod merge;
pub mod seal;
