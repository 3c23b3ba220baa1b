//! History entries (`model::HistoryEntry`, `store::read_history`, `store::history_head`):
//! the serde round trip through canonical JSON, and a reader that never panics on what it
//! finds on disk.

use memdir_store::codec::to_pretty;
use memdir_store::model::{CategoryName, HistoryEntry};
use memdir_store::{self as store, Layout};
use proptest::prelude::*;
use serde_json::Value;

use crate::arb;
use crate::category::{PARSER_DEPTH, nested};

const OPS: &[&str] = &["write", "merge", "append", "delete", "restore", "external"];

/// A history file id as memdir names them: `<hlc>_<replica>`.
fn entry_id() -> impl Strategy<Value = String> {
    (arb::hlc(), "[a-z0-9-]{1,12}").prop_map(|(h, r)| format!("{h}_{r}"))
}

fn entry() -> impl Strategy<Value = HistoryEntry> {
    (
        (
            entry_id(),
            prop::collection::vec(entry_id(), 0..3),
            prop::collection::btree_map(arb::text(8), any::<u64>(), 0..3),
            prop::sample::select(OPS),
        ),
        (
            prop::option::of("[0-9a-f]{64}"),
            arb::text(10),
            prop::option::of(arb::text(20)),
            arb::text(12),
            prop_oneof![Just(Value::Null), arb::object()],
        ),
    )
        .prop_map(
            |((id, parents, vv, op), (hash, actor, reason, ts, content))| HistoryEntry {
                id,
                parents,
                vv,
                op: op.to_string(),
                hash,
                actor,
                reason,
                ts,
                content,
                forgotten: None,
                patch: None,
            },
        )
}

/// Serialized the way memdir writes history files.
fn entry_bytes(e: &HistoryEntry) -> Vec<u8> {
    to_pretty(&serde_json::to_value(e).expect("history entries serialize"))
}

/// Bytes found in a history file: entries (some under another id), damaged ones, junk.
fn history_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        entry().prop_map(|e| entry_bytes(&e)),
        (entry(), any::<usize>(), any::<u8>()).prop_map(|(e, i, b)| {
            let mut bytes = entry_bytes(&e);
            let n = bytes.len();
            bytes[i % n] = b;
            bytes
        }),
        (entry(), any::<usize>()).prop_map(|(e, cut)| {
            let bytes = entry_bytes(&e);
            bytes[..cut % bytes.len()].to_vec()
        }),
        arb::object().prop_map(|v| to_pretty(&v)),
        Just(b"{\"id\":\"x\",\"parents\":[],\"vv\":{\"a\":-1}}".to_vec()),
    ]
}

proptest! {
    #![proptest_config(crate::config(512))]

    /// An entry written as memdir writes it reads back equal, and rewrites to the same bytes.
    #[test]
    fn history_entries_round_trip(e in entry()) {
        let bytes = entry_bytes(&e);
        let back: HistoryEntry = serde_json::from_slice(&bytes)
            .map_err(|err| TestCaseError::fail(err.to_string()))?;
        prop_assert_eq!(&back, &e);
        prop_assert_eq!(entry_bytes(&back), bytes);
        // The version number is the saturating sum of the version vector.
        let sum = e.vv.values().fold(0u64, |a, &v| a.saturating_add(v));
        prop_assert_eq!(back.ordinal(), sum);
    }

    /// Whatever a history file holds, reading it (and the head of its category) never
    /// panics; an entry is accepted only if it parses and its id matches the file name.
    #[test]
    fn history_reader_never_panics(
        (bytes, id) in prop_oneof![
            (history_bytes(), entry_id()),
            // An entry filed under its own id, sometimes damaged.
            (entry(), prop::option::of((any::<usize>(), any::<u8>()))).prop_map(|(e, damage)| {
                let mut bytes = entry_bytes(&e);
                if let Some((i, b)) = damage {
                    let n = bytes.len();
                    bytes[i % n] = b;
                }
                (bytes, e.id)
            }),
        ],
        name in "[a-zA-Z0-9 é._-]{1,12}",
    ) {
        let Ok(name) = CategoryName::new(&name) else { return Ok(()) };
        let tmp = tempfile::tempdir().expect("temp dir");
        let layout = Layout::new(tmp.path());
        let dir = tmp.path().join(Layout::history_rel(&name));
        std::fs::create_dir_all(&dir).expect("history dir");
        std::fs::write(dir.join(format!("{id}.json")), &bytes).expect("history file");
        let f = store::read_history(&layout, &name, &id).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let want = match serde_json::from_slice::<HistoryEntry>(&bytes) {
            Ok(e) if e.id == id => Some(e),
            _ => None,
        };
        match &want {
            Some(e) => prop_assert_eq!(&f.entry, &Ok(e.clone())),
            None => prop_assert!(f.entry.is_err()),
        }
        let head = store::history_head(&layout, &name).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(head, want);
        prop_assert_eq!(store::list_history_ids(&layout, &name).unwrap(), vec![id]);
    }

    /// Content nested as deep as a category file may be still gives a history entry the
    /// parser accepts: memdir must be able to read back every version it writes.
    #[test]
    fn nested_content_keeps_a_readable_history_entry(
        // memdir keeps no content nested deeper than `store::codec::MAX_DEPTH` (writes are
        // refused, hand-placed files reported), so entries are at most that deep plus one.
        depth in prop_oneof![1usize..=memdir_store::codec::MAX_DEPTH, Just(memdir_store::codec::MAX_DEPTH)],
        e in entry(),
    ) {
        let content: Value = serde_json::from_str(&nested(depth, true)).expect("fits the parser");
        let e = HistoryEntry { content, ..e };
        let back: Result<HistoryEntry, _> = serde_json::from_slice(&entry_bytes(&e));
        prop_assert!(back.is_ok(), "depth {}: {:?}", depth, back.err());
    }
}

/// History ids list in time order, and a directory of malformed entries has no head.
#[test]
fn history_ids_sort_as_time() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let layout = Layout::new(tmp.path());
    let name = CategoryName::new("base").unwrap();
    let dir = tmp.path().join(Layout::history_rel(&name));
    std::fs::create_dir_all(&dir).unwrap();
    let ids = [
        "20251129T110203004Z-0007_a",
        "20251129T110203004Z-0010_a",
        "20251129T110203005Z-0000_a",
        "19991231T235959999Z-9999_b",
    ];
    for id in ids {
        std::fs::write(dir.join(format!("{id}.json")), b"{").unwrap();
    }
    let mut want: Vec<&str> = ids.to_vec();
    want.sort();
    assert_eq!(store::list_history_ids(&layout, &name).unwrap(), want);
    assert!(store::history_head(&layout, &name).unwrap().is_none());
}

/// Bug (fixed): memdir writes versions it cannot read back when content is nested near the
/// parser's depth limit. serde_json refuses documents nested deeper than 127 levels. A
/// category whose content is nested 127 deep is accepted by `write`, but its history entry
/// wraps the content one level deeper and no longer parses (`verify-store`: "malformed history
/// entry", then "unadopted change"); a log wraps each entry's data three levels deeper, so an
/// append of data nested 125 deep leaves a log file memdir itself reports as `corrupt`.
/// Expected: such a write is refused as `invalid`, or stored so that it reads back.
#[test]
fn a_category_nested_as_deep_as_the_parser_allows_keeps_a_readable_history() {
    use memdir_engine::service::{AppendRequest, WriteRequest};
    let tmp = tempfile::tempdir().unwrap();
    let m = memdir_engine::Memdir::open(tmp.path().join("store")).unwrap();
    let deep = |d: usize| -> Value { serde_json::from_str(&nested(d, true)).unwrap() };
    let wrote = m.categories().write(&WriteRequest {
        category: "deep".into(),
        data: deep(PARSER_DEPTH),
        ..WriteRequest::default()
    });
    let appended = m.categories().append(&AppendRequest {
        category: "journal".into(),
        data: deep(PARSER_DEPTH - 2),
        ..AppendRequest::default()
    });
    if wrote.is_ok() {
        m.categories()
            .read(&memdir_engine::service::ReadRequest {
                category: "deep".into(),
                ..Default::default()
            })
            .expect("a category memdir wrote reads back");
    }
    if appended.is_ok() {
        m.categories()
            .read(&memdir_engine::service::ReadRequest {
                category: "journal".into(),
                ..Default::default()
            })
            .expect("a log memdir wrote reads back");
    }
    let v = m.upkeep().verify().unwrap();
    assert!(v.ok, "{v:#?}");
}

/// Bug (fixed): `HistoryEntry::ordinal` sums the version vector with `+`, so an entry whose
/// counts add up past `u64::MAX` (a damaged or hand-edited history file, say
/// `"vv": {"a": 18446744073709551615, "b": 1}`) panics debug builds ("attempt to add with
/// overflow": `memdir history <name>` exits 101) and silently wraps to a wrong version in
/// release builds, although a malformed file should break only itself. Expected: such an
/// entry is reported as malformed (or the sum saturates).
#[test]
fn a_version_vector_summing_past_u64_max_is_not_a_panic() {
    let e = HistoryEntry {
        id: "20251129T110203004Z-0007_a".into(),
        parents: vec![],
        vv: [("a".to_string(), u64::MAX), ("b".to_string(), 1)]
            .into_iter()
            .collect(),
        op: "write".into(),
        hash: None,
        actor: "a".into(),
        reason: None,
        ts: "2025-11-29T11:02:03.004Z".into(),
        content: Value::Null,
        forgotten: None,
        patch: None,
    };
    let _ = std::panic::catch_unwind(|| e.ordinal()).expect("ordinal does not panic");
}
