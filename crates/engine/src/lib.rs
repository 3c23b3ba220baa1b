//! memdir's engine: the operations over a memory directory.
//!
//! The operation table ([`ops`]) is the crate's public door: every surface (CLI, MCP, REST)
//! calls [`ops::call`] with an api request and a caller, and the table checks access
//! ([`acl`]), runs the engine ([`service::Memdir`]) and returns the api response. Beside the
//! engine: the ledger ([`ledger`], SQLite, safe to lose), redaction ([`redact`]), replication
//! ([`sync`]: merge, git, HTTP) and the importers ([`import`]).
#![forbid(unsafe_code)]

pub mod acl;
pub mod import;
pub mod ledger;
pub mod ops;
pub mod redact;
pub mod service;
pub mod sync;

pub use service::Memdir;
