//! The one merge core for two replicas' histories, used by every transport.
//!
//! Pure: it takes history entries and returns what the merged store holds. What may enter a
//! replica at all (a segment only as an extension or a forget, history and conflict records
//! write-once) is decided before, file by file, by the gate ([`super::gate`]); what this
//! module decides is what the union of two histories serves:
//!
//! - categories: the file is derived from the merged history. One head (every other version is
//!   in its ancestry): fast-forward. Several concurrent heads: [`resolve`] writes one version
//!   with all of them as parents, chosen by the [`Strategy`]; its id and bytes depend on the
//!   heads and the strategy only, so every replica that resolves the same heads writes the
//!   same file. Logs are a union of entries by id whatever the strategy, then retention.
//!
//! Every value that loses is still a version in history, and [`resolve`] returns a
//! [`ConflictRecord`] naming it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use memdir_store::clock::{self, Hlc};
use memdir_store::codec;
use memdir_store::model::{CategoryKind, HistoryEntry, content_hash};

/// How concurrent versions of a category are resolved (`[sync] conflict_strategy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// The newest head by HLC wins; the replica id breaks ties.
    LastWriteWins,
    /// Three-way per top-level key against the common ancestor; a key changed on both sides
    /// falls back to last-write-wins for that key.
    Merge,
    /// Last-write-wins is served, and the conflict stays open until resolved by hand.
    Manual,
    /// For one sync run: this replica's head wins.
    LocalWins,
    /// For one sync run: the other replica's head wins.
    RemoteWins,
}

impl Strategy {
    /// The configured strategies (`local_wins`/`remote_wins` exist for one run only).
    pub const CONFIGURABLE: [&'static str; 3] = ["last_write_wins", "merge", "manual"];

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::LastWriteWins => "last_write_wins",
            Strategy::Merge => "merge",
            Strategy::Manual => "manual",
            Strategy::LocalWins => "local_wins",
            Strategy::RemoteWins => "remote_wins",
        }
    }

    pub fn parse(s: &str) -> Option<Strategy> {
        Some(match s.trim() {
            "last_write_wins" => Strategy::LastWriteWins,
            "merge" => Strategy::Merge,
            "manual" => Strategy::Manual,
            "local_wins" => Strategy::LocalWins,
            "remote_wins" => Strategy::RemoteWins,
            _ => return None,
        })
    }
}

/// The replica part of the id of a version made by a sync: `<hlc>_merge-<8 hex>`.
pub const MERGE_PREFIX: &str = "merge-";

/// Whether a history id names a version made by a sync (not by a writer).
pub fn is_sync_version(id: &str) -> bool {
    id.get(25..).is_some_and(|r| r.starts_with(MERGE_PREFIX))
}

/// Whether `a`'s version vector is at least `b`'s for every replica.
fn covers(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> bool {
    b.iter().all(|(k, v)| a.get(k).copied().unwrap_or(0) >= *v)
}

/// The heads of a category's history: the versions no other version descends from, sorted
/// by id. A version is superseded when another names it as a parent, or covers its version
/// vector (ancestry survives compaction that way); two versions with equal vectors are
/// resolutions of the same heads, and the larger id stands for both.
pub fn heads(entries: &[HistoryEntry]) -> Vec<&HistoryEntry> {
    let parents: BTreeSet<&str> = entries
        .iter()
        .flat_map(|e| e.parents.iter().map(String::as_str))
        .collect();
    let mut out: Vec<&HistoryEntry> = entries
        .iter()
        .filter(|x| !parents.contains(x.id.as_str()))
        .filter(|x| {
            !entries
                .iter()
                .any(|y| y.id != x.id && covers(&y.vv, &x.vv) && (y.vv != x.vv || y.id > x.id))
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out.dedup_by(|a, b| a.id == b.id);
    out
}

/// The newest version in the ancestry of every head (`None` when they share none that is
/// still in history).
pub fn common_ancestor<'a>(
    entries: &'a [HistoryEntry],
    heads: &[&HistoryEntry],
) -> Option<&'a HistoryEntry> {
    let by_id: BTreeMap<&str, &HistoryEntry> = entries.iter().map(|e| (e.id.as_str(), e)).collect();
    let ancestry = |h: &HistoryEntry| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![h.id.clone()];
        while let Some(id) = stack.pop() {
            if !seen.insert(id.clone()) {
                continue;
            }
            if let Some(e) = by_id.get(id.as_str()) {
                stack.extend(e.parents.iter().cloned());
            }
        }
        seen
    };
    let mut common: Option<BTreeSet<String>> = None;
    for h in heads {
        let a = ancestry(h);
        common = Some(match common {
            None => a,
            Some(c) => c.intersection(&a).cloned().collect(),
        });
    }
    common?
        .iter()
        .rev()
        .find_map(|id| by_id.get(id.as_str()).copied())
}

/// A conflict that a resolution decided: every head, the value chosen, the keys at stake.
#[derive(Clone, Debug, PartialEq)]
pub struct ConflictRecord {
    pub category: String,
    /// `edit-edit`, `delete-edit` or `keys` (per-key merge with keys changed on both sides).
    pub kind: &'static str,
    pub strategy: Strategy,
    /// The common ancestor's id.
    pub base: Option<String>,
    /// The id of the version that resolved it (the one served).
    pub merged: String,
    /// Keys changed differently on several heads (strategy `merge`).
    pub keys: Vec<String>,
    /// Every head, with its content.
    pub heads: Vec<HistoryEntry>,
}

impl ConflictRecord {
    /// The record's canonical bytes: they depend on the conflict only.
    pub fn to_bytes(&self) -> Vec<u8> {
        let heads: Vec<Value> = self
            .heads
            .iter()
            .map(|h| {
                json!({"id": h.id, "op": h.op, "hash": h.hash, "actor": h.actor, "ts": h.ts, "content": h.content})
            })
            .collect();
        codec::to_pretty(&json!({
            "category": self.category,
            "kind": self.kind,
            "strategy": self.strategy.as_str(),
            "base": self.base,
            "merged": self.merged,
            "keys": self.keys,
            "heads": heads,
        }))
    }

    /// `<hash of the bytes>.json`: two replicas that record the same conflict write one file.
    pub fn file_name(&self) -> String {
        format!("{}.json", &content_hash(&self.to_bytes())[..32])
    }
}

/// A resolution of concurrent heads: the version to record, and the conflict it decided
/// (none when nothing was lost: disjoint keys, or a log union).
#[derive(Clone, Debug)]
pub struct Resolution {
    pub entry: HistoryEntry,
    pub conflict: Option<ConflictRecord>,
}

/// Resolves the concurrent heads of one category (`None` with fewer than two heads).
/// `local` holds the ids of the heads this replica had before the sync (for
/// `local_wins`/`remote_wins`); the other strategies ignore it, so every replica computes the
/// same bytes.
pub fn resolve(
    category: &str,
    entries: &[HistoryEntry],
    strategy: Strategy,
    local: &BTreeSet<String>,
) -> Option<Resolution> {
    let hs = heads(entries);
    if hs.len() < 2 {
        return None;
    }
    let base = common_ancestor(entries, &hs);
    // Last writer by (hlc, replica): the id sorts exactly that way.
    let lww = *hs.last().expect("invariant: two heads or more");
    let pick = |want_local: bool| {
        hs.iter()
            .rev()
            .find(|h| local.contains(&h.id) == want_local)
            .copied()
            .unwrap_or(lww)
    };
    let any_tombstone = hs.iter().any(|h| h.is_tombstone());
    let all_logs = !any_tombstone
        && hs
            .iter()
            .all(|h| CategoryKind::of(&h.content) == CategoryKind::Log);
    let all_objects = !any_tombstone && hs.iter().all(|h| h.content.is_object());
    let mut keys = Vec::new();
    let (content, winner) = if all_logs {
        (merge_logs(base.map(|b| &b.content), &hs, lww), None)
    } else {
        match strategy {
            Strategy::LastWriteWins | Strategy::Manual => (lww.content.clone(), Some(lww)),
            Strategy::LocalWins => {
                let w = pick(true);
                (w.content.clone(), Some(w))
            }
            Strategy::RemoteWins => {
                let w = pick(false);
                (w.content.clone(), Some(w))
            }
            Strategy::Merge if all_objects => {
                let (c, k) = merge_keys(base.map(|b| &b.content), &hs);
                keys = k;
                (c, None)
            }
            // A delete, or a document that is not an object: the whole category is the key.
            Strategy::Merge => (lww.content.clone(), Some(lww)),
        }
    };
    let tombstone = content.is_null();
    let hash = (!tombstone).then(|| content_hash(&codec::to_pretty(&content)));
    let parents: Vec<String> = hs.iter().map(|h| h.id.clone()).collect();
    let mut vv: BTreeMap<String, u64> = BTreeMap::new();
    for h in &hs {
        for (k, v) in &h.vv {
            let e = vv.entry(k.clone()).or_insert(0);
            *e = (*e).max(*v);
        }
    }
    let stamp = hs
        .iter()
        .filter_map(|h| h.id.get(..24).and_then(Hlc::parse))
        .max()
        .unwrap_or(Hlc::ZERO);
    let stamp = stamp.tick(stamp.ms);
    let tag = content_hash(
        codec::to_compact(
            &json!({"parents": parents, "strategy": strategy.as_str(), "hash": hash}),
        )
        .as_bytes(),
    );
    let id = format!("{stamp}_{MERGE_PREFIX}{}", &tag[..8]);
    let reason = match winner {
        Some(w) => format!(
            "sync: {} concurrent versions resolved by {}; {} kept",
            hs.len(),
            strategy.as_str(),
            w.id
        ),
        None if all_logs => format!("sync: {} concurrent versions of a log united", hs.len()),
        None => format!("sync: {} concurrent versions merged by key", hs.len()),
    };
    let entry = HistoryEntry {
        id: id.clone(),
        parents,
        vv,
        op: if tombstone { "delete" } else { "merge" }.to_string(),
        hash,
        actor: "sync".to_string(),
        reason: Some(reason),
        ts: lww.ts.clone(),
        content: content.clone(),
        forgotten: None,
        patch: None,
    };
    // Lost: a head whose value is not what is served (for a per-key merge: a key changed
    // differently on several heads).
    let lost = match winner {
        Some(w) => hs.iter().any(|h| h.hash != w.hash),
        None => !keys.is_empty(),
    };
    let conflict = lost.then(|| ConflictRecord {
        category: category.to_string(),
        kind: if !keys.is_empty() {
            "keys"
        } else if any_tombstone {
            "delete-edit"
        } else {
            "edit-edit"
        },
        strategy,
        base: base.map(|b| b.id.clone()),
        merged: id,
        keys,
        heads: hs.iter().map(|h| (*h).clone()).collect(),
    });
    Some(Resolution { entry, conflict })
}

/// What `head` had changed from `base` that `served` does not hold: `None` when nothing (the
/// head's changes all made it in), else the top-level keys (empty when the head or the served
/// version is not an object: the whole head was set aside).
pub fn set_aside(base: Option<&Value>, head: &Value, served: &Value) -> Option<Vec<String>> {
    if head == served {
        return None;
    }
    let (Some(h), Some(s)) = (head.as_object(), served.as_object()) else {
        return Some(Vec::new());
    };
    let empty = Map::new();
    let b = base.and_then(Value::as_object).unwrap_or(&empty);
    let mut names: BTreeSet<&String> = h.keys().collect();
    names.extend(b.keys());
    let keys: Vec<String> = names
        .into_iter()
        .filter(|k| h.get(*k) != b.get(*k) && h.get(*k) != s.get(*k))
        .cloned()
        .collect();
    (!keys.is_empty()).then_some(keys)
}

/// Three-way merge per top-level key of several object heads against `base`: a key changed
/// on one head takes that value; changed alike on several, that value; changed differently,
/// the value of the newest head that changed it. Returns the keys decided that way.
fn merge_keys(base: Option<&Value>, hs: &[&HistoryEntry]) -> (Value, Vec<String>) {
    let empty = Map::new();
    let base = base.and_then(Value::as_object).unwrap_or(&empty);
    let objs: Vec<&Map<String, Value>> = hs
        .iter()
        .map(|h| h.content.as_object().unwrap_or(&empty))
        .collect();
    let mut names: BTreeSet<&String> = base.keys().collect();
    for o in &objs {
        names.extend(o.keys());
    }
    let mut out = Map::new();
    let mut conflicted = Vec::new();
    for k in names {
        let b = base.get(k);
        // Heads in id order; the last changed one is the newest.
        let changed: Vec<Option<&Value>> =
            objs.iter().map(|o| o.get(k)).filter(|v| *v != b).collect();
        let value = match changed.last() {
            None => b,
            Some(newest) => {
                if changed.iter().any(|v| v != newest) {
                    conflicted.push(k.clone());
                }
                *newest
            }
        };
        if let Some(v) = value {
            out.insert(k.clone(), v.clone());
        }
    }
    (Value::Object(out), conflicted)
}

fn entry_id(e: &Value) -> Option<&str> {
    e.get("id").and_then(Value::as_str)
}

/// The union of several heads of a log: entries by id; an entry in `base` that a head no
/// longer has was trimmed there and stays out; sorted by id; the other keys (retention
/// included) from `lww`; then retention, with age measured from the newest entry.
fn merge_logs(base: Option<&Value>, hs: &[&HistoryEntry], lww: &HistoryEntry) -> Value {
    let entries_of = |v: &Value| -> Vec<Value> {
        v.get("entries")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let base_ids: BTreeSet<String> = base
        .map(entries_of)
        .unwrap_or_default()
        .iter()
        .filter_map(|e| entry_id(e).map(String::from))
        .collect();
    let mut dropped = BTreeSet::new();
    let mut all: BTreeMap<String, Value> = BTreeMap::new();
    for h in hs {
        let es = entries_of(&h.content);
        let ids: BTreeSet<&str> = es.iter().filter_map(entry_id).collect();
        for id in &base_ids {
            if !ids.contains(id.as_str()) {
                dropped.insert(id.clone());
            }
        }
        for e in es {
            if let Some(id) = entry_id(&e) {
                // Ids are unique per replica; for a damaged duplicate the larger bytes win,
                // whichever side merges.
                let id = id.to_string();
                match all.get(&id) {
                    Some(old) if codec::to_compact(old) >= codec::to_compact(&e) => {}
                    _ => {
                        all.insert(id, e);
                    }
                }
            }
        }
    }
    let mut entries: Vec<Value> = all
        .into_iter()
        .filter(|(id, _)| !dropped.contains(id))
        .map(|(_, e)| e)
        .collect();
    let mut out = lww.content.as_object().cloned().unwrap_or_default();
    let retention = out
        .get("_retention")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let max_entries = retention
        .get("max_entries")
        .and_then(Value::as_u64)
        .map(|n| n.max(1) as usize);
    let max_age_days = retention.get("max_age_days").and_then(Value::as_u64);
    apply_retention(&mut entries, max_entries, max_age_days);
    out.insert("entries".into(), Value::Array(entries));
    Value::Object(out)
}

/// Log retention: entries older than `max_age_days` before the newest entry go first, then
/// the oldest beyond `max_entries`. Entries are sorted by id. Returns how many were dropped.
pub fn apply_retention(
    entries: &mut Vec<Value>,
    max_entries: Option<usize>,
    max_age_days: Option<u64>,
) -> usize {
    let before = entries.len();
    let ts = |e: &Value| {
        e.get("ts")
            .and_then(Value::as_str)
            .and_then(clock::parse_time)
    };
    if let Some(days) = max_age_days
        && let Some(newest) = entries.iter().filter_map(ts).max()
    {
        let cutoff = newest - days as i64 * 86_400_000;
        entries.retain(|e| ts(e).is_none_or(|t| t >= cutoff));
    }
    if let Some(max) = max_entries
        && entries.len() > max
    {
        entries.drain(..entries.len() - max);
    }
    before - entries.len()
}

/// The file kinds of a memory directory, by path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathKind {
    Category,
    History,
    Conflict,
    Segment,
    Other,
}

impl PathKind {
    pub fn of(rel: &str) -> PathKind {
        if rel.starts_with("categories/") {
            PathKind::Category
        } else if rel.starts_with("history/") {
            PathKind::History
        } else if rel.starts_with("conflicts/") {
            PathKind::Conflict
        } else if rel.starts_with("sessions/") {
            PathKind::Segment
        } else {
            PathKind::Other
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_aside_names_only_the_keys_a_head_changed_that_the_pick_dropped() {
        let base = json!({"editor": "vim", "shell": "bash"});
        let lap = json!({"editor": "helix", "shell": "bash"});
        let desk = json!({"editor": "vim", "shell": "fish", "term": "kitty"});
        // Last-write-wins kept desk: lap's editor was set aside, its unchanged shell was not.
        assert_eq!(
            set_aside(Some(&base), &lap, &desk),
            Some(vec!["editor".to_string()])
        );
        assert_eq!(set_aside(Some(&base), &desk, &desk), None);
        // A key the head removed that the served version still has.
        let removed = json!({"editor": "vim"});
        assert_eq!(
            set_aside(Some(&base), &removed, &desk),
            Some(vec!["shell".to_string()])
        );
        // Changes that made it in through a merge are not set aside.
        let merged = json!({"editor": "helix", "shell": "fish", "term": "kitty"});
        assert_eq!(set_aside(Some(&base), &lap, &merged), None);
        // A delete, or a document that is not an object: the whole head.
        assert_eq!(set_aside(Some(&base), &Value::Null, &desk), Some(vec![]));
        assert_eq!(set_aside(None, &json!([1]), &desk), Some(vec![]));
    }

    fn entry(id: &str, parents: &[&str], vv: &[(&str, u64)], content: Value) -> HistoryEntry {
        let tomb = content.is_null();
        HistoryEntry {
            id: id.into(),
            parents: parents.iter().map(|s| s.to_string()).collect(),
            vv: vv.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            op: if tomb { "delete" } else { "write" }.into(),
            hash: (!tomb).then(|| content_hash(&codec::to_pretty(&content))),
            actor: "t".into(),
            reason: None,
            ts: "2026-01-01T00:00:00.000Z".into(),
            content,
            forgotten: None,
            patch: None,
        }
    }

    const T1: &str = "20260101T000000001Z-0000";
    const T2: &str = "20260101T000000002Z-0000";
    const T3: &str = "20260101T000000003Z-0000";

    fn base_and_two(a: Value, b: Value) -> Vec<HistoryEntry> {
        vec![
            entry(
                &format!("{T1}_a-aaaa"),
                &[],
                &[("a-aaaa", 1)],
                json!({"k": 1, "x": 1}),
            ),
            entry(
                &format!("{T2}_a-aaaa"),
                &[&format!("{T1}_a-aaaa")],
                &[("a-aaaa", 2)],
                a,
            ),
            entry(
                &format!("{T3}_b-bbbb"),
                &[&format!("{T1}_a-aaaa")],
                &[("a-aaaa", 1), ("b-bbbb", 1)],
                b,
            ),
        ]
    }

    fn none() -> BTreeSet<String> {
        BTreeSet::new()
    }

    #[test]
    fn one_head_is_a_fast_forward() {
        let mut es = base_and_two(json!({"k": 2}), json!({}));
        es.pop();
        assert_eq!(heads(&es).len(), 1);
        assert!(resolve("c", &es, Strategy::Merge, &none()).is_none());
    }

    #[test]
    fn a_covered_version_is_no_head_even_without_its_child() {
        // v1 -> v2 -> v3 with v2 compacted away: v1 is still in v3's ancestry.
        let es = vec![
            entry(&format!("{T1}_a-aaaa"), &[], &[("a-aaaa", 1)], json!({})),
            entry(
                &format!("{T3}_a-aaaa"),
                &["gone"],
                &[("a-aaaa", 3)],
                json!({}),
            ),
        ];
        assert_eq!(heads(&es).len(), 1);
    }

    #[test]
    fn last_write_wins_keeps_the_newest_and_records_the_loser() {
        let es = base_and_two(json!({"k": 2, "x": 1}), json!({"k": 3, "x": 1}));
        let r = resolve("c", &es, Strategy::LastWriteWins, &none()).unwrap();
        assert_eq!(r.entry.content, json!({"k": 3, "x": 1}));
        assert_eq!(r.entry.parents.len(), 2);
        assert!(r.entry.id > es[2].id);
        assert!(is_sync_version(&r.entry.id));
        let c = r.conflict.unwrap();
        assert_eq!(c.kind, "edit-edit");
        assert_eq!(c.heads.len(), 2);
        assert_eq!(c.base.as_deref(), Some(es[0].id.as_str()));
    }

    #[test]
    fn merge_by_key_takes_disjoint_changes_and_lww_on_a_shared_key() {
        let es = base_and_two(
            json!({"k": 2, "x": 1, "a": 1}),
            json!({"k": 3, "x": 1, "b": 1}),
        );
        let r = resolve("c", &es, Strategy::Merge, &none()).unwrap();
        assert_eq!(r.entry.content, json!({"a": 1, "b": 1, "k": 3, "x": 1}));
        assert_eq!(r.conflict.unwrap().keys, vec!["k".to_string()]);
        // Disjoint changes only: nothing lost, no record.
        let es = base_and_two(json!({"k": 1, "x": 2}), json!({"k": 1, "x": 1, "b": 1}));
        let r = resolve("c", &es, Strategy::Merge, &none()).unwrap();
        assert_eq!(r.entry.content, json!({"b": 1, "k": 1, "x": 2}));
        assert!(r.conflict.is_none());
        // A key removed on one side, untouched on the other: removed.
        let es = base_and_two(json!({"k": 1}), json!({"k": 1, "x": 1, "b": 1}));
        let r = resolve("c", &es, Strategy::Merge, &none()).unwrap();
        assert_eq!(r.entry.content, json!({"b": 1, "k": 1}));
    }

    #[test]
    fn resolution_is_the_same_whatever_the_order_of_the_entries() {
        for s in [Strategy::LastWriteWins, Strategy::Merge, Strategy::Manual] {
            let es = base_and_two(json!({"k": 2}), json!({"k": 3, "y": 1}));
            let mut rev = es.clone();
            rev.reverse();
            let a = resolve("c", &es, s, &none()).unwrap();
            let b = resolve("c", &rev, s, &none()).unwrap();
            assert_eq!(a.entry, b.entry);
            assert_eq!(
                a.conflict.map(|c| c.to_bytes()),
                b.conflict.map(|c| c.to_bytes())
            );
        }
    }

    #[test]
    fn a_delete_against_an_edit_follows_the_strategy() {
        let es = base_and_two(Value::Null, json!({"k": 9}));
        // The edit is newer (T3): it wins under last-write-wins and under merge.
        for s in [Strategy::LastWriteWins, Strategy::Merge] {
            let r = resolve("c", &es, s, &none()).unwrap();
            assert_eq!(r.entry.content, json!({"k": 9}));
            assert_eq!(r.conflict.unwrap().kind, "delete-edit");
        }
        // The delete is newer.
        let es = base_and_two(json!({"k": 9}), Value::Null);
        let r = resolve("c", &es, Strategy::LastWriteWins, &none()).unwrap();
        assert!(r.entry.content.is_null());
        assert_eq!(r.entry.op, "delete");
        assert!(r.entry.hash.is_none());
        // An explicit choice for one run.
        let local: BTreeSet<String> = [es[1].id.clone()].into();
        let r = resolve("c", &es, Strategy::LocalWins, &local).unwrap();
        assert_eq!(r.entry.content, json!({"k": 9}));
        let r = resolve("c", &es, Strategy::RemoteWins, &local).unwrap();
        assert!(r.entry.content.is_null());
    }

    #[test]
    fn logs_unite_by_id_and_keep_retention() {
        let log = |ids: &[&str]| {
            json!({"_kind": "log", "_retention": {"max_entries": 3, "max_age_days": null},
                "entries": ids.iter().map(|i| json!({"id": i, "ts": "2026-01-01T00:00:00.000Z", "data": {}})).collect::<Vec<_>>()})
        };
        let mut es = base_and_two(log(&["1", "2"]), log(&["1", "3"]));
        es[0].content = log(&["1"]);
        for s in [Strategy::LastWriteWins, Strategy::Merge, Strategy::Manual] {
            let r = resolve("c", &es, s, &none()).unwrap();
            assert_eq!(r.entry.content, log(&["1", "2", "3"]));
            assert!(r.conflict.is_none());
        }
        // A trimmed entry stays out; retention applies to the union.
        es[0].content = log(&["0", "1"]);
        es[1].content = log(&["1", "2", "4", "5"]);
        es[2].content = log(&["0", "1", "3"]);
        let r = resolve("c", &es, Strategy::Merge, &none()).unwrap();
        assert_eq!(r.entry.content, log(&["3", "4", "5"]));
    }

    #[test]
    fn resolutions_of_the_same_heads_by_two_strategies_converge() {
        let es = base_and_two(json!({"k": 2}), json!({"k": 3}));
        let a = resolve("c", &es, Strategy::LastWriteWins, &none()).unwrap();
        let b = resolve("c", &es, Strategy::LocalWins, &[es[1].id.clone()].into()).unwrap();
        assert_ne!(a.entry.id, b.entry.id);
        let mut all = es.clone();
        all.push(a.entry.clone());
        all.push(b.entry.clone());
        let hs = heads(&all);
        assert_eq!(hs.len(), 1);
        assert_eq!(hs[0].id, a.entry.id.clone().max(b.entry.id.clone()));
    }
}
