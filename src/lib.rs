//! memdir: local-first long-term memory for AI agents.
//!
//! A memory directory holds two kinds of memory in plain files the user owns:
//!
//! - **Session memory**: chunks of past sessions, one JSON line each, in append-only segments
//!   `sessions/<id>/<replica>.jsonl`; searched, listed in a catalog and read back page by page.
//! - **Curated state**: named JSON documents (`categories/<name>.json`) written whole or merged
//!   by key, with compare-and-swap, and logs with retention; every version is a write-once
//!   file under `history/<name>/`.
//!
//! The files are the truth. Everything under `.memdir/` (the SQLite ledger, the search index,
//! staging) is local or derived and may be deleted at any time.
//!
//! Layers, dependencies pointing one way: `cli`/`mcp` → [`service`] → [`ledger`] → [`store`]
//! → [`model`].
#![forbid(unsafe_code)]

pub mod acl;
pub mod api;
pub mod budget;
pub mod cli;
pub mod client;
pub mod clock;
pub mod config;
pub mod embed;
pub mod error;
#[cfg(feature = "http")]
pub mod http;
pub mod human;
pub mod import;
pub mod index;
pub mod jsontext;
pub mod ledger;
pub mod mcp;
pub mod model;
pub mod openapi;
pub mod ops;
pub mod progress;
pub mod redact;
pub mod search;
pub mod service;
pub mod store;
pub mod sync;
pub mod vector;
#[cfg(feature = "http")]
pub mod viewer;

pub use error::{Error, ErrorKind, Result};
pub use service::Memdir;
