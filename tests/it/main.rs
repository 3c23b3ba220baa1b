//! Integration tests: one binary that drives the built `memdir` the way users do.

mod util;

mod acl;
mod architecture;
mod as_of;
mod cli;
mod concurrency;
mod config;
mod crash;
mod docs;
mod embeddings;
mod forget;
mod format;
mod handedit;
mod hardening;
mod hook;
mod import;
mod mcp;
mod mcp_framing;
mod model;
mod notes;
mod ops;
mod patches;
mod redaction;
mod replication;
mod search;
mod snapshot;
mod supersede;
mod sync;
mod sync_http;
mod sync_notes;
