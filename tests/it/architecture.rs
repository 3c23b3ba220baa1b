//! The architecture invariants of ARCHITECTURE.md, checked against the sources (in the manner
//! of rust-analyzer's tidy test): a violation fails here with the file and line.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir` (relative to `src/`), with its text.
fn files(dir: &str) -> Vec<(String, String)> {
    let root = src().join(dir);
    let mut out = Vec::new();
    let walk: Vec<PathBuf> = if root.is_file() {
        vec![root]
    } else {
        walkdir::WalkDir::new(&root)
            .into_iter()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
            .map(|e| e.into_path())
            .collect()
    };
    for p in walk {
        let rel = p.strip_prefix(src()).unwrap().display().to_string();
        out.push((rel, std::fs::read_to_string(&p).unwrap()));
    }
    assert!(!out.is_empty(), "no sources under src/{dir}");
    out
}

/// Code lines (comments and the test module left out), numbered from 1.
fn code(text: &str) -> Vec<(usize, &str)> {
    let end = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..end]
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| {
            let t = l.trim_start();
            !(t.starts_with("//") || t.starts_with("///") || t.starts_with("//!"))
        })
        .collect()
}

fn forbid(dirs: &[&str], needles: &[&str], why: &str) {
    let mut bad = Vec::new();
    for d in dirs {
        for (rel, text) in files(d) {
            for (n, line) in code(&text) {
                for needle in needles {
                    if line.contains(needle) {
                        bad.push(format!("src/{rel}:{n}: `{needle}` in {line:?}"));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "{why}:\n{}", bad.join("\n"));
}

#[test]
fn the_truth_on_disk_knows_nothing_of_sqlite_tantivy_or_tokio() {
    forbid(
        &[
            "store",
            "model.rs",
            "clock.rs",
            "error.rs",
            "api.rs",
            "jsontext.rs",
        ],
        &["rusqlite", "tantivy", "tokio", "axum", "rmcp"],
        "store, model, clock, error, api and jsontext must build without SQLite, tantivy or tokio",
    );
    forbid(
        &["store"],
        &[
            "crate::ledger",
            "crate::index",
            "crate::search",
            "crate::service",
            "crate::ops",
            "crate::api",
            "crate::cli",
            "crate::mcp",
            "crate::http",
        ],
        "store depends on model, clock and error only",
    );
}

#[test]
fn ledger_and_index_know_nothing_of_each_other() {
    forbid(
        &["ledger.rs"],
        &["tantivy", "crate::index"],
        "the ledger must not know the index",
    );
    forbid(
        &["index.rs"],
        &["rusqlite", "crate::ledger"],
        "the index must not know the ledger",
    );
}

#[test]
fn only_the_cli_prints() {
    let mut dirs: Vec<String> = std::fs::read_dir(src())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "cli.rs" && n != "main.rs" && n != "store")
        .collect();
    dirs.sort();
    let dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
    forbid(
        &dirs,
        &["println!", "eprintln!", "print!(", "eprint!("],
        "only the CLI prints",
    );
    // In the store, only failpoints speak: they are test machinery that announces a crash or
    // a pause on stderr.
    let mut bad = Vec::new();
    for (rel, text) in files("store") {
        if rel.ends_with("failpoint.rs") {
            continue;
        }
        for (n, line) in code(&text) {
            if line.contains("println!") || line.contains("eprintln!") {
                bad.push(format!("src/{rel}:{n}"));
            }
        }
    }
    assert!(bad.is_empty(), "only the CLI prints: {bad:?}");
}

#[test]
fn the_engine_knows_no_surface() {
    forbid(
        &[
            "service",
            "search.rs",
            "index.rs",
            "ledger.rs",
            "store",
            "model.rs",
            "api.rs",
        ],
        &["crate::cli", "crate::mcp", "crate::http", "crate::ops"],
        "the engine and the contract must not know the surfaces or the table",
    );
    // Hints name operations as {op:NAME} and arguments as {arg:NAME}; each surface renders
    // them in its own words.
    forbid(
        &[
            "service",
            "search.rs",
            "index.rs",
            "ledger.rs",
            "store",
            "model.rs",
            "error.rs",
        ],
        &[
            "memory_list",
            "memory_read",
            "memory_write",
            "memory_history",
            "memory_append",
            "memory_search",
            "memory_overview",
            "memory_fetch",
            "memory_ingest",
            "`memdir ",
        ],
        "engine messages must not name one surface's commands or tools",
    );
}

#[test]
fn no_surface_goes_through_another() {
    forbid(
        &["ops.rs", "api.rs"],
        &["crate::cli", "crate::mcp", "crate::http"],
        "the table knows no surface",
    );
    forbid(
        &["mcp.rs"],
        &["crate::http", "crate::cli"],
        "MCP reaches the engine through the table only",
    );
    forbid(
        &["http.rs"],
        &["crate::cli", "Server::call", "mcp::tools"],
        "REST reaches the engine through the table only",
    );
    // Surfaces call the engine through `ops::call`; the CLI's reindex progress bar is the one
    // documented exception.
    for (rel, text) in [files("mcp.rs"), files("http.rs")].concat() {
        for (n, line) in code(&text) {
            for call in [
                "memdir.search(",
                "memdir.read(",
                "memdir.write(",
                ".ingest(",
                "memdir.status(",
            ] {
                assert!(
                    !line.contains(call),
                    "src/{rel}:{n}: a surface calls the engine directly: {line}"
                );
            }
        }
    }
}

#[test]
fn only_the_configuration_reads_the_settings_it_owns() {
    // Every setting the config file can hold is resolved once, by `config` (flags, environment,
    // file, default), and handed on; a module that read one of these variables itself would
    // ignore the file and the precedence.
    let mut others: Vec<String> = std::fs::read_dir(src())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "config.rs" && n != "cli.rs" && n != "main.rs")
        .collect();
    others.sort();
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    forbid(
        &others,
        &[
            "\"MEMDIR_DIR\"",
            "\"MEMDIR_DEVICE\"",
            "\"MEMDIR_CONFIG\"",
            "\"MEMDIR_REQUIRE_CONFIG\"",
            "\"MEMDIR_LOCK_TIMEOUT_MS\"",
            "\"MEMDIR_SCAN_INTERVAL_MS\"",
            "\"MEMDIR_ANALYZER\"",
            "\"MEMDIR_TOOLS\"",
            "\"MEMDIR_HTTP_HEADER_TIMEOUT_MS\"",
            "\"MEMDIR_HTTP_IDLE_TIMEOUT_MS\"",
            "\"MEMDIR_HTTP_BODY_TIMEOUT_MS\"",
            "\"MEMDIR_HTTP_MAX_CONNECTIONS\"",
            "\"MEMDIR_HTTP_MAX_SESSIONS\"",
            "\"MEMDIR_HTTP_SESSION_IDLE_MS\"",
            "\"XDG_DATA_HOME\"",
        ],
        "only config reads the settings of the config file",
    );
    // It reads its one file and writes nothing (`config init` writes from the CLI).
    forbid(
        &["config.rs"],
        &[
            "fs::write",
            "create_dir",
            "rename(",
            "OpenOptions",
            "remove_file",
            "hard_link",
        ],
        "config reads the config file and writes nothing",
    );
}
