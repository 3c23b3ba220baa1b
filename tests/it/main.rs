//! Integration tests: one binary that drives the built `memdir` the way users do.

mod util;

mod cli;
mod concurrency;
mod crash;
mod handedit;
mod mcp;
mod model;
mod search;
