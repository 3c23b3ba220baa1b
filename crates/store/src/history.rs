//! Version content on disk (store format 2): a history entry holds its content whole, or as a
//! patch of its parent's content (`patch: {base, depth, set, remove}` with `content: null`).
//!
//! A merge into a large category changes a few top-level keys; its entry records those keys,
//! not the whole category again. Every reader goes through this module, which hands out
//! entries resolved (content filled in, `patch` gone), so the rest of memdir never sees a
//! patch. Three rules keep every version readable:
//!
//! - A patch is written only on a readable parent with content whose hash is the current
//!   file's, and at most [`MAX_DEPTH`] patches follow a whole entry ([`PatchPolicy`]).
//! - Whatever takes a version's content away (forget, compaction, a sync bringing either)
//!   first rewrites as whole entries the patches based on it ([`keep_chains`]), in the same
//!   transaction.
//! - A patch whose base cannot be resolved is reported as an unreadable entry, like a
//!   malformed file: it breaks only itself and the patches on it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{HistoryFile, Layout, codec, fsx, read_history, read_history_bytes, txn};
use crate::model::{CategoryName, HistoryEntry, Patch};
use memdir_api::error::{IoContext, IoError};

/// The most patches between a whole entry and any version: a reader applies at most this many
/// patches to one whole content, and one version in `MAX_DEPTH + 1` is written whole.
pub const MAX_DEPTH: u32 = 32;

/// A patch is written only when its serialized changes are at most this fraction of the new
/// content's size (1/`SMALL_RATIO`); a larger change is written whole.
pub const SMALL_RATIO: usize = 4;

/// The content of `base` with `patch` applied.
pub fn apply(base: &Value, patch: &Patch) -> Result<Value, String> {
    let Value::Object(m) = base else {
        return Err(format!(
            "its base version {} has no object content to patch",
            patch.base
        ));
    };
    let mut m = m.clone();
    for k in &patch.remove {
        m.remove(k);
    }
    for (k, v) in &patch.set {
        m.insert(k.clone(), v.clone());
    }
    Ok(Value::Object(m))
}

/// Every history file of a category, oldest first, with patches resolved: each readable
/// entry has its content and no `patch`.
pub fn read_all(layout: &Layout, name: &CategoryName) -> Result<Vec<HistoryFile>, IoError> {
    let mut files = read_unresolved(layout, name)?;
    resolve_files(&mut files);
    Ok(files)
}

/// Every history file of a category, oldest first, as written (patches not resolved).
pub fn read_unresolved(layout: &Layout, name: &CategoryName) -> Result<Vec<HistoryFile>, IoError> {
    super::list_history_ids(layout, name)?
        .iter()
        .map(|id| read_history(layout, name, id))
        .collect()
}

/// Every readable history entry of a category, oldest first, as written: enough for what
/// depends on ids, parents, version vectors and hashes alone.
pub fn unresolved_entries(
    layout: &Layout,
    name: &CategoryName,
) -> Result<Vec<HistoryEntry>, IoError> {
    Ok(read_unresolved(layout, name)?
        .into_iter()
        .filter_map(|f| f.entry.ok())
        .collect())
}

/// One entry resolved by its chain on disk (a whole entry as it is).
pub fn resolve(
    layout: &Layout,
    name: &CategoryName,
    entry: HistoryEntry,
) -> Result<HistoryEntry, String> {
    resolve_in(&layout.root.join(Layout::history_rel(name)), entry)
}

/// Every readable history entry of a category, oldest first, resolved.
pub fn entries(layout: &Layout, name: &CategoryName) -> Result<Vec<HistoryEntry>, IoError> {
    Ok(read_all(layout, name)?
        .into_iter()
        .filter_map(|f| f.entry.ok())
        .collect())
}

/// Resolves the patches among `files` (oldest first): a base sorts before its patch, so one
/// pass in order finds every base already resolved.
fn resolve_files(files: &mut [HistoryFile]) {
    let mut at: HashMap<String, usize> = HashMap::new();
    for i in 0..files.len() {
        let patch = match &mut files[i].entry {
            Ok(e) => e.patch.take(),
            Err(_) => None,
        };
        if let Some(p) = patch {
            files[i].patched = true;
            let content = match at.get(&p.base).map(|&j| &files[j].entry) {
                Some(Ok(base)) if base.forgotten.is_none() => apply(&base.content, &p),
                Some(Ok(_)) => Err(format!("its base version {} was forgotten", p.base)),
                Some(Err(why)) => Err(format!("its base version {} is unreadable: {why}", p.base)),
                None => Err(format!("its base version {} is missing", p.base)),
            };
            match content {
                Ok(c) => {
                    if let Ok(e) = &mut files[i].entry {
                        e.content = c;
                    }
                }
                Err(why) => files[i].entry = Err(why),
            }
        }
        at.insert(files[i].id.clone(), i);
    }
}

/// One entry read from `dir` (a category's history directory), unresolved.
fn read_in(dir: &Path, id: &str) -> Result<HistoryEntry, String> {
    match super::read_history_in(dir, id) {
        Ok(f) => f.entry,
        Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => Err("missing".into()),
        Err(e) => Err(e.source.to_string()),
    }
}

/// Resolves one entry by following its chain in `dir` back to a whole entry.
fn resolve_in(dir: &Path, entry: HistoryEntry) -> Result<HistoryEntry, String> {
    resolve_with(entry, |id| read_in(dir, id))
}

/// Resolves one entry by following its chain back to a whole entry, each base read by
/// `base(id)` (the files here, or another copy of the history such as a remote's tree).
pub fn resolve_with(
    mut entry: HistoryEntry,
    mut base: impl FnMut(&str) -> Result<HistoryEntry, String>,
) -> Result<HistoryEntry, String> {
    let Some(first) = entry.patch.take() else {
        return Ok(entry);
    };
    let mut chain = vec![first];
    let content = loop {
        let p = chain
            .last()
            .expect("invariant: the chain starts with one patch");
        // Ids sort as time and a base is older than its patch: a chain that does not go back
        // in time (a damaged file) ends here instead of looping.
        let newer = if chain.len() == 1 {
            entry.id.as_str()
        } else {
            chain[chain.len() - 2].base.as_str()
        };
        if p.base.as_str() >= newer {
            return Err(format!("its base version {} is not older than it", p.base));
        }
        let b = base(&p.base)
            .map_err(|why| format!("its base version {} is unreadable: {why}", p.base))?;
        if b.forgotten.is_some() {
            return Err(format!("its base version {} was forgotten", p.base));
        }
        match b.patch {
            Some(next) => chain.push(next),
            None => break b.content,
        }
    };
    let mut content = content;
    for p in chain.iter().rev() {
        content = apply(&content, p)?;
    }
    entry.content = content;
    Ok(entry)
}

/// The serialized bytes of a whole entry.
pub fn whole_bytes(e: &HistoryEntry) -> Vec<u8> {
    debug_assert!(e.patch.is_none());
    codec::to_pretty(&serde_json::to_value(e).expect("invariant: history entries serialize"))
}

/// Before `writes` take content away from history entries (a removal, a forgotten or
/// unreadable entry in place of one with content), adds to them a whole copy of every other
/// entry whose patch is based on one of those, resolved from the files as they are now. After
/// the commit, every entry that was readable still is.
pub fn keep_chains(root: &Path, writes: &mut Vec<txn::FileWrite>) -> Result<(), IoError> {
    let written: BTreeSet<PathBuf> = writes.iter().map(|w| w.rel.clone()).collect();
    let mut lost: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    for w in writes.iter() {
        let Some((dir, id)) = history_path(&w.rel) else {
            continue;
        };
        let keeps = match &w.bytes {
            None => false,
            Some(b) => read_history_bytes(b).is_ok_and(|e| {
                e.forgotten.is_none() && (!e.content.is_null() || e.patch.is_some())
            }),
        };
        if !keeps && root.join(&w.rel).exists() {
            lost.entry(dir).or_default().insert(id);
        }
    }
    for (dir_rel, ids) in lost {
        let dir = root.join(&dir_rel);
        let mut names: Vec<String> = Vec::new();
        match std::fs::read_dir(&dir) {
            Ok(rd) => {
                for entry in rd {
                    let entry = entry.at("list", &dir)?;
                    if let Some(id) = entry.file_name().to_string_lossy().strip_suffix(".json") {
                        names.push(id.to_string());
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(IoError {
                    op: "list",
                    path: dir,
                    source: e,
                });
            }
        }
        names.sort();
        for id in names {
            let rel = dir_rel.join(format!("{id}.json"));
            if written.contains(&rel) {
                continue;
            }
            let Ok(e) = read_in(&dir, &id) else {
                continue;
            };
            if e.patch.as_ref().is_some_and(|p| ids.contains(&p.base))
                && let Ok(whole) = resolve_in(&dir, e)
            {
                writes.push(txn::FileWrite {
                    rel,
                    bytes: Some(whole_bytes(&whole)),
                    hash: None,
                });
            }
        }
    }
    Ok(())
}

/// Commits `writes` (which take content away from history entries) as one staged
/// transaction, together with [`keep_chains`]'s whole copies of the patches they would break.
pub fn commit_keeping_chains(
    layout: &Layout,
    txid: &str,
    mut writes: Vec<txn::FileWrite>,
) -> Result<(), IoError> {
    keep_chains(&layout.root, &mut writes)?;
    txn::commit(&layout.root, &layout.staging(), txid, &writes)
}

/// `history/<stem>/<id>.json` split into the directory and the id.
fn history_path(rel: &Path) -> Option<(PathBuf, String)> {
    let mut parts = rel.iter();
    if parts.next()? != "history" {
        return None;
    }
    let stem = parts.next()?;
    let id = parts.next()?.to_str()?.strip_suffix(".json")?.to_string();
    if parts.next().is_some() {
        return None;
    }
    Some((Path::new("history").join(stem), id))
}

/// The depth of `head_id` as the base of a new patch: `Some` when it recorded `file_hash`
/// (the file the new version replaces), has content, is not forgotten, and every version of
/// its chain back to a whole entry is on disk with content, at most [`MAX_DEPTH`] patches.
pub fn patch_base(
    layout: &Layout,
    name: &CategoryName,
    head_id: &str,
    file_hash: &str,
) -> Option<u32> {
    let dir = layout.root.join(Layout::history_rel(name));
    let (hash, depth) = walk_chain(&dir, head_id, MAX_DEPTH)?;
    (hash == file_hash).then_some(depth)
}

/// Whether the chain of the patch entry `id` in `dir` leads back to a whole entry, every
/// version on it readable and with content (so the entry resolves).
pub fn chain_intact(dir: &Path, id: &str) -> bool {
    walk_chain(dir, id, u32::MAX).is_some()
}

/// The hash and depth of entry `id` in `dir` when it and every base back to a whole entry are
/// on disk, parse, have content (not forgotten) and go back in time, over at most `max_links`
/// patches. Reads the entries without building their content.
fn walk_chain(dir: &Path, id: &str, max_links: u32) -> Option<(String, u32)> {
    #[derive(serde::Deserialize)]
    struct Probe {
        id: String,
        hash: Option<String>,
        #[serde(default)]
        forgotten: Option<String>,
        #[serde(default)]
        patch: Option<Link>,
    }
    #[derive(serde::Deserialize)]
    struct Link {
        base: String,
        depth: u32,
    }
    let probe = |id: &str| -> Option<Probe> {
        let bytes = fsx::read(&dir.join(format!("{id}.json")), fsx::MAX_JSON_FILE).ok()??;
        let p: Probe = serde_json::from_slice(&bytes).ok()?;
        (p.id == id && p.forgotten.is_none() && p.hash.is_some()).then_some(p)
    };
    let head = probe(id)?;
    let hash = head.hash.clone()?;
    let depth = head.patch.as_ref().map_or(0, |l| l.depth);
    let mut link = head.patch;
    let mut newer = id.to_string();
    let mut links = 0u32;
    while let Some(l) = link {
        links += 1;
        if links > max_links || l.base >= newer {
            return None;
        }
        let base = probe(&l.base)?;
        newer = l.base;
        link = base.patch;
    }
    Some((hash, depth))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patch(base: &str, set: Value, remove: &[&str]) -> Patch {
        Patch {
            base: base.into(),
            depth: 1,
            set: set.as_object().cloned().unwrap_or_default(),
            remove: remove.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_patch_sets_and_removes_top_level_keys() {
        let base = json!({"a": 1, "b": {"x": 1}, "c": 3});
        let got = apply(
            &base,
            &patch("p", json!({"b": {"y": 2}, "d": 4}), &["c", "zz"]),
        )
        .unwrap();
        assert_eq!(got, json!({"a": 1, "b": {"y": 2}, "d": 4}));
        assert!(apply(&json!([1]), &patch("p", json!({}), &[])).is_err());
        assert!(apply(&Value::Null, &patch("p", json!({}), &[])).is_err());
    }

    #[test]
    fn history_paths_name_their_directory_and_id() {
        assert_eq!(
            history_path(Path::new("history/notes/20260101T000000000Z-0000_a.json")),
            Some((
                PathBuf::from("history/notes"),
                "20260101T000000000Z-0000_a".to_string()
            ))
        );
        assert_eq!(history_path(Path::new("categories/notes.json")), None);
        assert_eq!(history_path(Path::new("history/notes/x/y.json")), None);
        assert_eq!(history_path(Path::new("history/notes/x.txt")), None);
    }
}
