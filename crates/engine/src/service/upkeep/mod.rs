//! The upkeep subsystem ([`Upkeep`](super::Upkeep)): what keeps a store healthy and lets it
//! leave: verification, forgetting for good, snapshots and their restore, export, status and
//! doctor. It keeps no state of its own.

pub(crate) mod export;
pub(crate) mod forget;
pub(crate) mod snapshot;
pub(crate) mod status;
pub(crate) mod verify;
