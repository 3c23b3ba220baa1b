//! Importers of the clients' own memory files, each file a note.
//!
//! - `claude-memory`: Claude Code's auto-memory, `~/.claude/projects/<project>/memory/**/*.md`,
//!   and its `CLAUDE.md` files (the user's, `~/.claude/CLAUDE.md`, and a project's when the
//!   path is a project directory) → `imports/claude-code/<project>/...`.
//! - `codex-memories`: Codex's `~/.codex/memories/**` and `AGENTS.md` →
//!   `imports/codex/...`.
//! - `cursor-rules`: a project's `.cursor/rules/**/*.mdc` and `.cursorrules` →
//!   `imports/cursor/<project>/...`.
//!
//! The note's path comes from the file's path alone, so a second run finds the same note and
//! adds a version only for a file whose text changed; each version keeps the file's
//! modification time as its time. The source is never written.

use std::path::{Path, PathBuf};

use super::{Report, Sink, find_files};
use memdir_api::error::Result;
use memdir_store::note::NotePath;

/// The formats that write notes.
pub const FORMATS: &[&str] = &["claude-memory", "codex-memories", "cursor-rules"];

/// One component of a note path made from a foreign name: characters a note path refuses
/// become `_`, a leading dot goes (`.cursor` is `cursor`).
fn component(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_control() || "\\:*?\"<>|".contains(c) {
                '_'
            } else {
                c
            }
        })
        .collect();
    s = s
        .trim_start_matches('.')
        .trim()
        .trim_end_matches('.')
        .to_string();
    if s.is_empty() {
        s = "_".into();
    }
    s.chars().take(128).collect()
}

/// The note path for a source file: `prefix` then the file's path below `base`, each
/// component made safe; `None` when it still cannot be a note path (too deep, too long).
fn note_path(prefix: &[&str], base: &Path, file: &Path) -> Option<NotePath> {
    let rel = file.strip_prefix(base).ok()?;
    let mut parts: Vec<String> = prefix.iter().map(|p| component(p)).collect();
    parts.extend(
        rel.components()
            .map(|c| component(&c.as_os_str().to_string_lossy())),
    );
    NotePath::new(&parts.join("/")).ok()
}

/// Every (source file, note path) of a format under `root`.
fn sources(format: &str, root: &Path, report: &mut Report) -> Vec<(PathBuf, Option<NotePath>)> {
    let md = |p: &Path| p.extension().is_some_and(|x| x == "md" || x == "markdown");
    let dir_name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "project".into())
    };
    let mut out = Vec::new();
    if root.is_file() {
        let src = match format {
            "claude-memory" => "claude-code",
            "codex-memories" => "codex",
            _ => "cursor",
        };
        let base = root.parent().unwrap_or(root);
        out.push((root.to_path_buf(), note_path(&["imports", src], base, root)));
        return out;
    }
    match format {
        "claude-memory" => {
            let projects = root.join("projects");
            if projects.is_dir() {
                for f in find_files(&projects, report, md) {
                    // projects/<project>/memory/<...>.md only: the transcripts are sessions.
                    let rel = f.strip_prefix(&projects).unwrap_or(&f);
                    let mut c = rel.components();
                    let (Some(project), Some(mem)) = (c.next(), c.next()) else {
                        continue;
                    };
                    if mem.as_os_str() != "memory" {
                        continue;
                    }
                    let project = project.as_os_str().to_string_lossy().into_owned();
                    let base = projects.join(&project).join("memory");
                    out.push((
                        f.clone(),
                        note_path(&["imports", "claude-code", &project], &base, &f),
                    ));
                }
            }
            for name in ["CLAUDE.md", "CLAUDE.local.md"] {
                let f = root.join(name);
                if f.is_file() {
                    // The user's own (beside projects/) or a project directory's.
                    let project = dir_name(root);
                    let mut prefix = vec!["imports", "claude-code"];
                    if !projects.is_dir() {
                        prefix.push(&project);
                    }
                    out.push((f.clone(), note_path(&prefix, root, &f)));
                }
            }
            let dot = root.join(".claude").join("CLAUDE.md");
            if dot.is_file() {
                let project = dir_name(root);
                out.push((
                    dot.clone(),
                    note_path(
                        &["imports", "claude-code", &project],
                        &root.join(".claude"),
                        &dot,
                    ),
                ));
            }
        }
        "codex-memories" => {
            let memories = root.join("memories");
            if memories.is_dir() {
                for f in find_files(&memories, report, |p| p.is_file() || p.is_symlink()) {
                    out.push((
                        f.clone(),
                        note_path(&["imports", "codex", "memories"], &memories, &f),
                    ));
                }
            }
            let agents = root.join("AGENTS.md");
            if agents.is_file() {
                out.push((
                    agents.clone(),
                    note_path(&["imports", "codex"], root, &agents),
                ));
            }
        }
        _ => {
            let project = dir_name(root);
            let rules = root.join(".cursor").join("rules");
            if rules.is_dir() {
                let mdc = |p: &Path| p.extension().is_some_and(|x| x == "mdc" || x == "md");
                for f in find_files(&rules, report, mdc) {
                    out.push((
                        f.clone(),
                        note_path(&["imports", "cursor", &project], &rules, &f),
                    ));
                }
            }
            let legacy = root.join(".cursorrules");
            if legacy.is_file() {
                out.push((
                    legacy.clone(),
                    note_path(&["imports", "cursor", &project], root, &legacy),
                ));
            }
        }
    }
    out
}

/// Imports the memory files of `format` under `path` as notes.
pub fn import(format: &str, path: &Path, sink: &mut Sink<'_>) -> Result<()> {
    let found = sources(format, path, &mut sink.report);
    for (file, note) in found {
        sink.report.files += 1;
        let Some(note) = note else {
            sink.report.skip("path_not_a_note_path");
            continue;
        };
        let meta = match std::fs::symlink_metadata(&file) {
            Ok(m) if m.is_file() => m,
            _ => {
                sink.report.skip("link_or_special_file");
                continue;
            }
        };
        if meta.len() > memdir_store::note::MAX_NOTE_BYTES as u64 {
            sink.report.skip("file_too_large");
            continue;
        }
        let text = match memdir_store::fsx::read(&file, memdir_store::note::MAX_NOTE_BYTES as u64) {
            Ok(Some(b)) => match String::from_utf8(b) {
                Ok(t) => t,
                Err(_) => {
                    sink.report.skip("not_utf8");
                    continue;
                }
            },
            _ => {
                sink.report.skip("unreadable");
                continue;
            }
        };
        let ts = memdir_store::clock::rfc3339(memdir_store::mtime_ns(&meta) / 1_000_000);
        sink.note(
            &note,
            &text,
            &ts,
            &format!("imported from {}", file.display()),
        )?;
    }
    Ok(())
}
