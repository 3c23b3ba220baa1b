//! The architecture invariants of ARCHITECTURE.md that Cargo cannot check, checked against the
//! sources (in the manner of rust-analyzer's tidy test): a violation fails here with the file
//! and line. The layering itself is Cargo's: each crate under `crates/` lists only the crates
//! below it, so an import that points up does not build.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `place` (a file or a folder relative to the repository root), with
/// its text.
fn files(place: &str) -> Vec<(String, String)> {
    let base = root().join(place);
    let walk: Vec<PathBuf> = if base.is_file() {
        vec![base]
    } else {
        walkdir::WalkDir::new(&base)
            .into_iter()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
            .map(|e| e.into_path())
            .collect()
    };
    let mut out = Vec::new();
    for p in walk {
        let rel = p.strip_prefix(root()).unwrap().display().to_string();
        out.push((rel, std::fs::read_to_string(&p).unwrap()));
    }
    assert!(!out.is_empty(), "no sources under {place}");
    out
}

/// The sources of every crate: the binary's `src/` and each library's `crates/*/src/`.
fn all_sources() -> Vec<(String, String)> {
    let mut out = files("src");
    for krate in ["api", "store", "index", "engine"] {
        out.extend(files(&format!("crates/{krate}/src")));
    }
    out
}

/// Code lines (comments and the test module left out), numbered from 1.
fn code(text: &str) -> Vec<(usize, &str)> {
    let end = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..end]
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .collect()
}

fn violations<'a>(
    sources: impl IntoIterator<Item = &'a (String, String)>,
    needles: &[&str],
) -> Vec<String> {
    let mut bad = Vec::new();
    for (rel, text) in sources {
        for (n, line) in code(text) {
            for needle in needles {
                if line.contains(needle) {
                    bad.push(format!("{rel}:{n}: `{needle}` in {line:?}"));
                }
            }
        }
    }
    bad
}

fn forbid(places: &[&str], needles: &[&str], why: &str) {
    let sources: Vec<(String, String)> = places.iter().flat_map(|p| files(p)).collect();
    let bad = violations(&sources, needles);
    assert!(bad.is_empty(), "{why}:\n{}", bad.join("\n"));
}

/// The sources of every crate except the files named in `except` (paths from the root).
fn all_but(except: &[&str]) -> Vec<(String, String)> {
    all_sources()
        .into_iter()
        .filter(|(rel, _)| {
            !except
                .iter()
                .any(|e| rel == e || rel.starts_with(&format!("{e}/")))
        })
        .collect()
}

#[test]
fn the_truth_on_disk_and_the_contract_know_nothing_of_sqlite_tantivy_or_tokio() {
    // Cargo already refuses these imports (the crates do not list them); this also keeps the
    // words out of their manifests, so nobody adds the dependency back by accident.
    for manifest in ["crates/api/Cargo.toml", "crates/store/Cargo.toml"] {
        let text = std::fs::read_to_string(root().join(manifest)).unwrap();
        for dep in ["rusqlite", "tantivy", "tokio", "axum", "rmcp"] {
            let listed = text.lines().any(|l| l.trim_start().starts_with(dep));
            assert!(!listed, "{manifest} lists {dep}");
        }
    }
    let text = std::fs::read_to_string(root().join("crates/index/Cargo.toml")).unwrap();
    assert!(
        !text.contains("rusqlite"),
        "the index must not know the ledger"
    );
}

#[test]
fn ledger_and_index_know_nothing_of_each_other() {
    forbid(
        &["crates/engine/src/ledger.rs"],
        &["tantivy", "memdir_index"],
        "the ledger must not know the index",
    );
    forbid(
        &["crates/index/src"],
        &["rusqlite", "ledger"],
        "the index must not know the ledger",
    );
}

#[test]
fn only_the_cli_prints() {
    // In the store, only failpoints speak: they are test machinery that announces a crash or
    // a pause on stderr.
    let sources = all_but(&[
        "src/cli.rs",
        "src/cli",
        "src/main.rs",
        "crates/store/src/failpoint.rs",
    ]);
    let bad = violations(&sources, &["println!", "eprintln!", "print!(", "eprint!("]);
    assert!(bad.is_empty(), "only the CLI prints:\n{}", bad.join("\n"));
}

#[test]
fn the_environment_is_read_in_one_module() {
    let sources = all_but(&["crates/store/src/env.rs"]);
    let bad = violations(&sources, &["env::var(", "env::var_os(", "env::vars("]);
    assert!(
        bad.is_empty(),
        "only crates/store/src/env.rs reads the process environment:\n{}",
        bad.join("\n")
    );
}

#[test]
fn engine_messages_name_no_surfaces_words() {
    // Hints name operations as {op:NAME} and arguments as {arg:NAME}; each surface renders
    // them in its own words.
    forbid(
        &[
            "crates/engine/src/service",
            "crates/engine/src/ledger.rs",
            "crates/index/src",
            "crates/store/src",
            "crates/api/src/error.rs",
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
        &["src/mcp"],
        &["crate::http", "crate::cli"],
        "MCP reaches the engine through the table only",
    );
    forbid(
        &["src/http"],
        &["crate::cli", "Server::call", "mcp::tools"],
        "REST reaches the engine through the table only",
    );
    // Surfaces call the engine through `ops::call`.
    let sources = [files("src/mcp"), files("src/http")].concat();
    let bad = violations(
        &sources,
        &[
            "memdir.search(",
            "memdir.read(",
            "memdir.write(",
            ".ingest(",
            "memdir.status(",
        ],
    );
    assert!(
        bad.is_empty(),
        "a surface calls the engine directly:\n{}",
        bad.join("\n")
    );
}

#[test]
fn a_call_carries_its_actor_and_the_cli_keeps_no_list_of_operations() {
    // The actor of a write travels in the call (`service::Call`), never beside it.
    forbid(
        &["crates/engine/src"],
        &["thread_local!"],
        "the engine keeps no per-thread call state: a call carries its actor in `Call`",
    );
    // The CLI runs the operation its subcommand names in the table (`Op::cli`); naming
    // operations itself would be a second list that can drift from the table.
    forbid(
        &["src/cli"],
        &["ops::find(", "call(m, \"", "call(&ctx, \""],
        "the CLI finds a command's operation by its subcommand name in the table",
    );
    // Subsystems reach the engine's state through their own module: the fields of another
    // subsystem's state are named only in its folder.
    for (state, home) in [
        ("file_cache", "crates/engine/src/service/categories"),
        ("last_head", "crates/engine/src/service/categories"),
        (".dense", "crates/engine/src/service/indexing"),
    ] {
        let others = all_but(&[home]);
        let bad = violations(&others, &[state]);
        assert!(
            bad.is_empty(),
            "{state} is the state of {home} alone:\n{}",
            bad.join("\n")
        );
    }
}

#[test]
fn only_the_configuration_reads_the_settings_it_owns() {
    // Every setting the config file can hold is resolved once, by `config` (flags, environment,
    // file, default), and handed on; a module that read one of these variables itself would
    // ignore the file and the precedence.
    let sources = all_but(&[
        "src/config.rs",
        "src/cli.rs",
        "src/cli",
        "src/main.rs",
        "crates/store/src/env.rs",
    ]);
    let bad = violations(
        &sources,
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
    );
    assert!(
        bad.is_empty(),
        "only config reads the settings of the config file:\n{}",
        bad.join("\n")
    );
    // It reads its one file and writes nothing (`config init` writes from the CLI); it opens
    // that file read-only and without blocking, so a FIFO cannot hang it.
    forbid(
        &["src/config.rs"],
        &[
            "fs::write",
            "create_dir",
            "rename(",
            ".write(true)",
            ".append(true)",
            ".create(true)",
            "remove_file",
            "hard_link",
        ],
        "config reads the config file and writes nothing",
    );
}

#[test]
fn every_module_says_what_it_is_for() {
    let missing: Vec<String> = all_sources()
        .into_iter()
        .filter(|(_, text)| !text.trim_start().starts_with("//!"))
        .map(|(rel, _)| rel)
        .collect();
    assert!(
        missing.is_empty(),
        "modules without a `//!` doc: {missing:?}"
    );
}

#[test]
fn no_test_is_ignored() {
    let mut sources = all_sources();
    sources.extend(files("tests"));
    let bad: Vec<String> = sources
        .iter()
        .filter(|(rel, _)| !rel.ends_with("tests/it/architecture.rs"))
        .flat_map(|(rel, text)| {
            text.lines()
                .enumerate()
                .filter(|(_, l)| l.trim_start().starts_with("#[ignore"))
                .map(move |(n, _)| format!("{rel}:{}", n + 1))
        })
        .collect();
    assert!(bad.is_empty(), "ignored tests: {bad:?}");
}

/// Functions over [`MAX_FN_LINES`] lines that may exist, with their length: none since the
/// engine became subsystems (the operation table is built in four parts). Should one ever be
/// accepted, it goes here and may only shrink.
const LONG_FUNCTIONS: &[(&str, &str, usize)] = &[];

/// The longest function STYLE.md accepts, in lines from `fn` to its closing brace.
const MAX_FN_LINES: usize = 120;

/// Types with more than [`MAX_METHODS`] methods today, with their count; the same ratchet.
const LARGE_TYPES: &[(&str, usize)] = &[];

/// The most methods STYLE.md accepts on one type, over all its `impl` blocks.
const MAX_METHODS: usize = 40;

/// What follows `fn ` when `line` (trimmed) declares a function, whatever its visibility
/// (`pub`, `pub(crate)`, `pub(in crate::service)`) and qualifiers.
fn fn_signature(line: &str) -> Option<&str> {
    let mut t = line;
    if let Some(rest) = t.strip_prefix("pub(") {
        t = rest.split_once(") ")?.1;
    }
    t = t.strip_prefix("pub ").unwrap_or(t);
    for q in ["const ", "async ", "unsafe "] {
        t = t.strip_prefix(q).unwrap_or(t);
    }
    t.strip_prefix("fn ")
}

/// Every function of the non-test code: (file, name, lines from `fn` to its closing brace).
/// A function ends at the first line that is its indentation followed by `}`, as rustfmt
/// writes it.
fn functions() -> Vec<(String, String, usize)> {
    let mut out = Vec::new();
    for (rel, text) in all_sources() {
        let end = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
        let lines: Vec<&str> = text[..end].lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            let indent = &line[..line.len() - trimmed.len()];
            let Some(sig) = fn_signature(trimmed) else {
                continue;
            };
            let name: String = sig
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let close = format!("{indent}}}");
            if let Some(j) = lines[i + 1..].iter().position(|l| *l == close) {
                out.push((rel.clone(), name, j + 2));
            }
        }
    }
    out
}

#[test]
fn no_function_grows_past_120_lines_and_the_long_ones_only_shrink() {
    let mut bad = Vec::new();
    let found = functions();
    for (rel, name, n) in &found {
        if *n <= MAX_FN_LINES {
            continue;
        }
        match LONG_FUNCTIONS
            .iter()
            .find(|(f, m, _)| f == rel && m == name)
        {
            None => bad.push(format!(
                "{rel}: fn {name} is {n} lines (at most {MAX_FN_LINES})"
            )),
            Some((_, _, was)) if n > was => {
                bad.push(format!("{rel}: fn {name} grew from {was} to {n} lines"))
            }
            Some(_) => {}
        }
    }
    for (rel, name, was) in LONG_FUNCTIONS {
        let now = found.iter().find(|(f, m, _)| f == rel && m == name);
        if now.is_none_or(|(_, _, n)| *n <= MAX_FN_LINES) {
            bad.push(format!(
                "{rel}: fn {name} ({was} lines) is gone or short now: delete its line from LONG_FUNCTIONS"
            ));
        }
    }
    assert!(bad.is_empty(), "function lengths:\n{}", bad.join("\n"));
}

#[test]
fn no_type_gathers_more_than_40_methods_and_the_large_ones_only_shrink() {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for (_, text) in all_sources() {
        let end = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
        let mut current: Option<String> = None;
        for line in text[..end].lines() {
            if let Some(head) = line.strip_prefix("impl") {
                // `impl<T> Trait for Type<T> {` or `impl Type {`: the type is the last path
                // before `{`, less its generics.
                let head = head.trim_end_matches('{').trim();
                // Less the impl's own generics: `impl<'a> Type<'a> {`.
                let head = match head.strip_prefix('<') {
                    Some(rest) => rest.split_once("> ").map_or(rest, |(_, t)| t),
                    None => head,
                };
                let ty = head.rsplit(" for ").next().unwrap_or(head);
                let ty = ty.split('<').next().unwrap_or(ty).trim();
                let ty = ty
                    .rsplit("::")
                    .next()
                    .unwrap_or(ty)
                    .rsplit(' ')
                    .next()
                    .unwrap_or(ty);
                current = Some(ty.to_string());
                continue;
            }
            if line.starts_with('}') {
                current = None;
                continue;
            }
            let Some(ty) = &current else { continue };
            let t = line.strip_prefix("    ").unwrap_or("");
            if !t.starts_with(' ') && fn_signature(t).is_some() {
                *counts.entry(ty.clone()).or_default() += 1;
            }
        }
    }
    let mut bad = Vec::new();
    for (ty, n) in &counts {
        if *n <= MAX_METHODS {
            continue;
        }
        match LARGE_TYPES.iter().find(|(t, _)| t == ty) {
            None => bad.push(format!("{ty} has {n} methods (at most {MAX_METHODS})")),
            Some((_, was)) if n > was => bad.push(format!("{ty} grew from {was} to {n} methods")),
            Some(_) => {}
        }
    }
    for (ty, was) in LARGE_TYPES {
        if counts.get(*ty).is_none_or(|n| *n <= MAX_METHODS) {
            bad.push(format!(
                "{ty} ({was} methods) is small now: delete its line from LARGE_TYPES"
            ));
        }
    }
    let sizes: Vec<String> = counts
        .iter()
        .filter(|(_, n)| **n > 20)
        .map(|(t, n)| format!("{t} {n}"))
        .collect();
    assert!(
        bad.is_empty(),
        "methods per type:\n{}\n(types past 20: {})",
        bad.join("\n"),
        sizes.join(", ")
    );
}
