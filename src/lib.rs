//! memdir: local-first long-term memory for AI agents; this crate is the binary's glue.
//!
//! The layers are crates, each depending only on those below it:
//! `memdir` (this crate: CLI, MCP, REST, the viewer, config) → [`memdir_engine`] (the
//! operation table and the subsystems behind it) → [`memdir_index`] (derived search) →
//! [`memdir_store`] (the files, the truth) → [`memdir_api`] (the contract).
//!
//! Only this crate prints, speaks MCP or HTTP, and knows the words of the CLI.
#![forbid(unsafe_code)]

pub mod cli;
pub mod client;
pub mod config;
#[cfg(feature = "http")]
pub mod http;
pub mod human;
pub mod mcp;
pub mod openapi;
pub mod progress;
#[cfg(feature = "http")]
pub mod viewer;
