//! The sync plane's parsers: the HTTP wire messages (manifests, diff requests, pull requests,
//! pages), a pushed page as the server applies it (`Peers::sync_push`), a diff request as the
//! server answers it (`Peers::sync_diff`) and git's NUL-separated listings (`git::split_z`).
//! No input may make memdir panic; a refused page changes nothing; a diff changes nothing.
//! `what_a_push_holds_stays` states the replication invariants
//! (docs/design/replication.md) for any page: what the store held is still there, a file
//! outside the layout never lands, and the store stays valid.

use std::collections::BTreeMap;
use std::path::Path;

use memdir_api::{
    SyncDiffRequest, SyncFile, SyncManifestResponse, SyncPage, SyncPullRequest, SyncPushRequest,
};
use memdir_engine::Memdir;
use memdir_engine::service::{NewChunk, SyncAccess, WriteRequest};
use memdir_engine::sync::git::split_z;
use memdir_engine::sync::seal::{Seal, Signer32};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Valid messages of each kind, to damage.
fn valid_messages() -> Vec<Value> {
    let line = "{\"seq\":0,\"content\":\"x\"}\n";
    let hash = blake3::hash(line.as_bytes()).to_hex().to_string();
    vec![
        json!({"format": "memdir-sync/1", "items": [{"path": "sessions/s/r.jsonl", "from": 0, "hash": hash, "data": line}]}),
        json!({"items": [{"path": "history/doc/20250101T000000000Z-0000_r.json", "from": 3, "prefix": hash, "hash": hash, "data": "{}"}], "strategy": "local_wins"}),
        json!({"buckets": {"sessions/s": [{"path": "sessions/s/r.jsonl", "len": 3, "hash": hash}], "history/doc": []}}),
        json!({"want": [{"path": "sessions/s/r.jsonl", "from": 10, "prefix": hash, "whole": true}], "max_bytes": 1024}),
        json!({"format": "memdir-sync/1", "items": [], "rest": [{"path": "history/a/b.json"}]}),
        json!({"format": "memdir-sync/1", "root": hash, "buckets": {"sessions/s": hash}, "files": 1}),
    ]
}

/// One edit of a message's text.
#[derive(Clone, Debug)]
enum Damage {
    Flip(usize, u8),
    Insert(usize, u8),
    Cut(usize, usize),
    Truncate(usize),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(a, b)| Damage::Flip(a, b)),
        (
            any::<usize>(),
            prop::sample::select(b"{}[]\",:\\0-e9 ".to_vec())
        )
            .prop_map(|(a, b)| Damage::Insert(a, b)),
        (any::<usize>(), 0usize..12).prop_map(|(a, n)| Damage::Cut(a, n)),
        any::<usize>().prop_map(Damage::Truncate),
    ]
}

fn apply(mut b: Vec<u8>, edits: &[Damage]) -> Vec<u8> {
    for e in edits {
        let len = b.len();
        match *e {
            Damage::Flip(at, bit) if len > 0 => b[at % len] ^= 1 << bit,
            Damage::Insert(at, byte) => b.insert(at % (len + 1), byte),
            Damage::Cut(at, n) if len > 0 => {
                let at = at % len;
                b.drain(at..(at + n).min(len));
            }
            Damage::Truncate(at) => b.truncate(at % (len + 1)),
            _ => {}
        }
    }
    b
}

/// Parses as `T`; a value that parses serializes to one that parses to the same JSON.
fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(
    bytes: &[u8],
) -> Result<(), TestCaseError> {
    if let Ok(v) = serde_json::from_slice::<T>(bytes) {
        let once = serde_json::to_value(&v).unwrap();
        let again: T = serde_json::from_value(once.clone())
            .map_err(|e| TestCaseError::fail(format!("{e}: {once}")))?;
        prop_assert_eq!(serde_json::to_value(&again).unwrap(), once);
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::config(512))]

    /// Every wire message of the sync plane, damaged or as random bytes, parses or is refused,
    /// and what parses survives a round trip.
    #[test]
    fn wire_messages_parse_or_are_refused(
        which in 0usize..6,
        edits in prop::collection::vec(damage(), 0..4),
        noise in prop::collection::vec(any::<u8>(), 0..64),
        random in any::<bool>(),
    ) {
        let bytes = if random {
            noise
        } else {
            apply(valid_messages()[which].to_string().into_bytes(), &edits)
        };
        round_trip::<SyncPushRequest>(&bytes)?;
        round_trip::<SyncDiffRequest>(&bytes)?;
        round_trip::<SyncPullRequest>(&bytes)?;
        round_trip::<SyncPage>(&bytes)?;
        round_trip::<SyncManifestResponse>(&bytes)?;
    }

    /// git's `-z` listings: any bytes split without a panic, and names without NUL come back.
    #[test]
    fn git_listings_split_at_nul(
        names in prop::collection::vec("[^\u{0}]{1,20}", 0..6),
        noise in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let _ = split_z(&noise);
        let mut bytes = Vec::new();
        for n in &names {
            bytes.extend_from_slice(n.as_bytes());
            bytes.push(0);
        }
        prop_assert_eq!(split_z(&bytes), names);
    }
}

proptest! {
    #![proptest_config(crate::config(256))]

    /// A seal file, damaged or as random bytes, parses or is refused without a panic; one that
    /// parses round-trips, verifies only if its signed parts are the sealer's, and vouches
    /// for lines of any bytes without a panic.
    #[test]
    fn seals_parse_or_are_refused_and_damage_never_verifies(
        edits in prop::collection::vec(damage(), 0..4),
        noise in prop::collection::vec(any::<u8>(), 0..64),
        random in any::<bool>(),
        lines in segment_bytes(),
    ) {
        let place = "sessions/s/r.head";
        let segment = b"{\"session_id\":\"s\",\"replica\":\"r\",\"seq\":0,\"hlc\":\"20250101T000000000Z-0000\",\"ts\":\"2025-01-01T00:00:00Z\",\"project\":\"\",\"metadata\":{},\"content\":\"x\"}\n";
        let genuine = Signer32::new(&[7; 32]).seal(place, "r", segment, None).expect("a seal");
        let bytes = if random { noise } else { apply(genuine.to_bytes(), &edits) };
        if let Ok(seal) = Seal::parse(&bytes) {
            let again = Seal::parse(&seal.to_bytes());
            prop_assert_eq!(again.as_ref(), Ok(&seal));
            let signed_same = seal.key == genuine.key
                && seal.replica == genuine.replica
                && seal.leaves == genuine.leaves
                && seal.sig == genuine.sig;
            prop_assert_eq!(seal.verifies(place), signed_same);
            let _ = seal.first_unvouched(&lines);
            let _ = seal.contradicts(&lines);
        }
    }
}

/// Segment-like bytes: chunk lines of two replicas, tombstones, damaged lines, a torn tail.
fn segment_bytes() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        (0u64..4, "[a-z ]{0,12}").prop_map(|(seq, text)| format!(
            "{{\"session_id\":\"s\",\"replica\":\"r\",\"seq\":{seq},\"hlc\":\"20250101T000000000Z-000{seq}\",\"ts\":\"2025-01-01T00:00:00Z\",\"project\":\"\",\"metadata\":{{}},\"content\":\"{text}\"}}\n"
        )),
        (0u64..4).prop_map(|seq| format!(
            "{{\"session_id\":\"s\",\"replica\":\"r\",\"seq\":{seq},\"hlc\":\"20250101T000000000Z-000{seq}\",\"ts\":\"2025-01-01T00:00:00Z\",\"project\":\"\",\"metadata\":{{\"forgotten\":\"2025-02-01T00:00:00Z\"}},\"content\":\"\"}}\n"
        )),
        "[ -~]{0,30}\n".prop_map(|s| s),
        "[ -~]{0,30}".prop_map(|s| s),
    ];
    prop::collection::vec(line, 0..5).prop_map(|ls| ls.concat().into_bytes())
}

// ---------------------------------------------------------------------------------------------
// Pages and diffs against a store.

/// A fresh store holding one session of two chunks and one category with one version.
fn store() -> (tempfile::TempDir, Memdir) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let m = Memdir::open(tmp.path().join("store")).expect("open");
    let chunks: Vec<NewChunk> = ["first held chunk", "second held chunk"]
        .iter()
        .map(|t| NewChunk {
            session_id: "s".into(),
            content: t.to_string(),
            project: None,
            metadata: None,
            ts: None,
            source_id: None,
            supersedes: None,
        })
        .collect();
    m.sessions().ingest(&chunks).expect("ingest");
    m.categories()
        .write(&WriteRequest {
            category: "doc".into(),
            data: json!({"held": "value"}),
            ..WriteRequest::default()
        })
        .expect("write");
    // A replica seals its own segments before it offers any: a store that has synced once.
    m.peers()
        .sync_manifest(&SyncAccess::all())
        .expect("manifest");
    (tmp, m)
}

/// Every file of the store outside `.memdir/`, with its bytes.
fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".memdir")
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(root).unwrap().display().to_string();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// A path a peer might name: the layout's, and what lies outside it.
fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => Just("HELD_SEGMENT".to_string()),
        2 => Just("HELD_HISTORY".to_string()),
        1 => "[a-z]{1,4}".prop_map(|s| format!("sessions/{s}/peer-0001.jsonl")),
        1 => "[a-z]{1,4}".prop_map(|s| format!("history/{s}/20250101T000000000Z-0001_peer.json")),
        1 => "[a-z]{1,4}".prop_map(|s| format!("conflicts/{s}/{}.json", "a".repeat(64))),
        1 => prop::sample::select(vec![
            ".gitignore",
            "memdir.json",
            "..",
            "sessions/../x.jsonl",
            "sessions/s/../../x.jsonl",
            "sessions/S/peer.jsonl",
            "sessions/s/.hidden.jsonl",
            "history/doc/x.json/y",
            "categories/doc.json",
            "/etc/passwd",
            "sessions//peer.jsonl",
        ])
        .prop_map(str::to_string),
        1 => "[ -~]{0,40}",
    ]
}

/// The bytes a peer might send for a path.
fn data() -> impl Strategy<Value = String> {
    prop_oneof![
        segment_bytes().prop_map(|b| String::from_utf8(b).unwrap()),
        Just(String::new()),
        "[ -~\n]{0,80}",
        (0u64..3).prop_map(|n| format!(
            "{{\"id\":\"x\",\"content\":{{\"forged\":{n}}},\"hash\":\"{}\",\"actor\":\"someone\"}}\n",
            "0".repeat(64)
        )),
    ]
}

#[derive(Clone, Debug)]
struct Pushed {
    path: String,
    from: u64,
    good_hash: bool,
    data: String,
    /// Start from the held file's bytes (rewritten, truncated or extended) instead of `data`.
    from_held: Option<u8>,
}

fn pushed() -> impl Strategy<Value = Pushed> {
    (
        path(),
        prop_oneof![3 => Just(0u64), 1 => 0u64..4096],
        prop::bool::weighted(0.9),
        data(),
        prop::option::weighted(0.7, 0u8..4),
    )
        .prop_map(|(path, from, good_hash, data, from_held)| Pushed {
            path,
            from,
            good_hash,
            data,
            from_held,
        })
}

/// The page `items` describe, against the store at `root`.
fn page(root: &Path, items: &[Pushed]) -> SyncPushRequest {
    let held = files(root);
    let held_segment = held.keys().find(|p| p.starts_with("sessions/")).cloned();
    let held_history = held.keys().find(|p| p.starts_with("history/")).cloned();
    let items = items
        .iter()
        .map(|it| {
            let path = match it.path.as_str() {
                "HELD_SEGMENT" => held_segment.clone().unwrap_or_default(),
                "HELD_HISTORY" => held_history.clone().unwrap_or_default(),
                p => p.to_string(),
            };
            let mut data = it.data.clone();
            if let (Some(how), Some(bytes)) = (it.from_held, held.get(&path)) {
                let text = String::from_utf8_lossy(bytes).into_owned();
                data = match how {
                    // Every line rewritten, and one more: a "longer" copy.
                    0 => {
                        let rewritten = text.replace("held", "peer");
                        let last = rewritten.lines().last().unwrap_or("").to_string();
                        rewritten + &last + "\n"
                    }
                    1 => text
                        .lines()
                        .next()
                        .map(|l| format!("{l}\n"))
                        .unwrap_or_default(),
                    2 => text.lines().rev().map(|l| format!("{l}\n")).collect(),
                    _ => text + &it.data,
                };
            }
            let hash = if it.good_hash {
                blake3::hash(data.as_bytes()).to_hex().to_string()
            } else {
                "f".repeat(64)
            };
            serde_json::from_value(
                json!({"path": path, "from": it.from, "hash": hash, "data": data}),
            )
            .expect("an item")
        })
        .collect();
    SyncPushRequest {
        items,
        ..SyncPushRequest::default()
    }
}

proptest! {
    #![proptest_config(crate::config(48))]

    /// A page from a peer, however forged: applied or refused without a panic, and a refused
    /// page changes nothing.
    #[test]
    fn a_pushed_page_is_applied_or_refused_whole(items in prop::collection::vec(pushed(), 1..4)) {
        let (tmp, m) = store();
        let root = tmp.path().join("store");
        let req = page(&root, &items);
        let before = files(&root);
        if m.peers().sync_push(&req, &SyncAccess::all()).is_err() {
            prop_assert_eq!(files(&root), before, "a refused page changed the store");
        }
    }

    /// The replication invariants for any page: every file the store held keeps its bytes (a
    /// segment may only grow at its end), nothing lands outside the layout, and `verify`
    /// stays clean.
    #[test]
    fn what_a_push_holds_stays(items in prop::collection::vec(pushed(), 1..4)) {
        let (tmp, m) = store();
        let root = tmp.path().join("store");
        let req = page(&root, &items);
        let before = files(&root);
        let _ = m.peers().sync_push(&req, &SyncAccess::all());
        let after = files(&root);
        for (p, bytes) in &before {
            if p.starts_with("categories/") {
                continue;
            }
            let now = after.get(p);
            prop_assert!(
                now.is_some_and(|n| n.starts_with(bytes)),
                "{} was rewritten by a push:\nbefore: {}\nafter:  {}",
                p,
                String::from_utf8_lossy(bytes),
                String::from_utf8_lossy(now.map(Vec::as_slice).unwrap_or(b"(removed)"))
            );
        }
        for p in after.keys().filter(|p| !before.contains_key(*p)) {
            prop_assert!(
                ["history/", "conflicts/", "sessions/", "categories/"].iter().any(|t| p.starts_with(t)),
                "a push created {} outside the layout", p
            );
        }
        let v = m.upkeep().verify().expect("verify runs");
        prop_assert!(v.ok, "the store is not valid after a push: {:?}", v);
    }

    /// A diff request names the caller's files; answering it reads and never writes.
    #[test]
    fn a_diff_request_is_answered_or_refused_and_changes_nothing(
        buckets in prop::collection::btree_map(
            prop_oneof![
                Just("sessions/s".to_string()),
                Just("history/doc".to_string()),
                "[ -~]{0,20}",
            ],
            prop::collection::vec(
                (path(), any::<u64>(), prop_oneof![Just("0".repeat(64)), "[0-9a-f]{0,70}"]),
                0..4,
            ),
            0..4,
        ),
    ) {
        let (tmp, m) = store();
        let root = tmp.path().join("store");
        let req = SyncDiffRequest {
            buckets: buckets
                .into_iter()
                .map(|(b, fs)| {
                    let fs = fs
                        .into_iter()
                        .map(|(path, len, hash)| SyncFile { path, len, hash })
                        .collect();
                    (b, fs)
                })
                .collect(),
        };
        let before = files(&root);
        let _ = m.peers().sync_diff(&req, &SyncAccess::all());
        prop_assert_eq!(files(&root), before, "a diff changed the store");
    }
}
