//! The query planner and engines behind `Indexing::search` (the planner itself,
//! `SearchRequest::plan`, is private; this is the nearest public entry point): any query text
//! and any options give a plan and an answer, or an `invalid`/`too_large` error, never a panic
//! or an internal error.

use std::sync::LazyLock;

use memdir_api::ErrorKind;
use memdir_engine::Memdir;
use memdir_engine::service::{NewChunk, SearchRequest, WriteRequest};
use proptest::prelude::*;
use serde_json::json;

use crate::arb;

/// A small store shared by every case: two sessions and two categories.
struct Store {
    _tmp: tempfile::TempDir,
    memdir: Memdir,
}

static STORE: LazyLock<Store> = LazyLock::new(|| {
    let tmp = tempfile::tempdir().expect("temp dir");
    let memdir = Memdir::open(tmp.path().join("store")).expect("open");
    let texts = [
        "the connection pool timed out under load",
        "ECONNREFUSED 127.0.0.1:5432 from db.connect()",
        "fn parse_chunk_line(line: &[u8]) -> Result<ChunkRecord, String>",
        "ünïcödé wörds and 😀 emoji, \"quoted phrase\" here",
        "retry with backoff; see docs/retry.md#limits",
    ];
    let chunks: Vec<NewChunk> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| NewChunk {
            session_id: format!("s{}", i % 2),
            content: t.to_string(),
            project: Some(if i % 2 == 0 { "web" } else { "db" }.to_string()),
            metadata: None,
            ts: None,
            source_id: None,
            supersedes: None,
        })
        .collect();
    memdir.sessions().ingest(&chunks).expect("ingest");
    for (name, data) in [
        (
            "base",
            json!({"editor": "helix", "shell": "fish", "note": "pool size 20"}),
        ),
        ("projects", json!({"web": {"port": 8080, "owner": "Ada"}})),
    ] {
        memdir
            .categories()
            .write(&WriteRequest {
                category: name.into(),
                data,
                ..WriteRequest::default()
            })
            .expect("write");
    }
    Store { _tmp: tmp, memdir }
});

/// Query text: words from the store, identifier-like tokens, quotes, operators, junk.
fn query() -> impl Strategy<Value = String> {
    let word = prop_oneof![
        prop::sample::select(
            &[
                "pool",
                "timed",
                "ECONNREFUSED",
                "127.0.0.1:5432",
                "parse_chunk_line",
                "\"",
                "\"\"",
                "ünïcödé",
                "😀",
                "AND",
                "OR",
                "NOT",
                "-",
                "+",
                "*",
                "?",
                ":",
                "(",
                ")",
                "[",
                "]",
                "{",
                "}",
                "^2",
                "~",
                "\\",
                "/",
                "docs/retry.md#limits",
                "fn",
                "a",
                "the",
                "é",
            ][..]
        )
        .prop_map(str::to_string),
        arb::text(6),
        "[a-zA-Z0-9_.:/]{1,12}",
    ];
    prop_oneof![
        8 => prop::collection::vec(word, 0..6).prop_map(|w| w.join(" ")),
        2 => prop::collection::vec(arb::char_(), 0..8).prop_map(|c| {
            let s: String = c.into_iter().collect();
            format!("\"{s}\"")
        }),
        1 => Just(String::new()),
        1 => Just("   \t\n".to_string()),
        1 => (9_990usize..10_010).prop_map(|n| "x ".repeat(n / 2) + &"y".repeat(n % 2)),
    ]
}

/// An option: usually absent or one of `values`, rarely any text (mostly refused).
fn option(values: &'static [&'static str]) -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        12 => Just(None),
        6 => prop::sample::select(values).prop_map(|v| Some(v.to_string())),
        1 => arb::text(8).prop_map(Some),
    ]
}

/// A `since`/`until` filter: absent, a known value, or text shaped like a time. Boxed, as are
/// the parts of a request: unboxed, the nested strategy types make stack frames large enough to
/// overflow a test thread's stack in a debug build.
fn time(values: &'static [&'static str]) -> BoxedStrategy<Option<String>> {
    prop_oneof![
        8 => option(values),
        1 => crate::hlc::time_like().prop_map(Some),
    ]
    .boxed()
}

fn request() -> impl Strategy<Value = SearchRequest> {
    (
        (
            query().boxed(),
            option(&["auto", "bm25", "exact", "fts", "keyword", ""]),
            prop_oneof![20 => 1usize..12, 1 => Just(1000usize), 1 => Just(0usize), 1 => Just(1001usize)],
            option(&["web", "db", "", "nope"]),
            option(&["s0", "s1", "", "missing"]),
            option(&["base", "projects", "", "nope"]),
        )
            .boxed(),
        (
            option(&["chunk", "chunks", "session", "category", "categories", ""]),
            time(&["2020-01-01", "2020-01-01T00:00:00Z", "1700000000000", "9999-12-31", "0", "2026-02-30"]),
            time(&["2100-01-01", "2100-01-01T00:00:00+01:00", "1", "2100-12-31"]),
            prop::option::of(prop_oneof![20 => 0usize..=20, 1 => Just(21usize), 1 => Just(usize::MAX)]),
            any::<bool>(),
        )
            .boxed(),
    )
        .prop_map(
            |((q, mode, limit, project, session_id, category), (kind, since, until, context, full))| {
                SearchRequest {
                    mode,
                    limit,
                    project,
                    session_id,
                    category,
                    kind,
                    since,
                    until,
                    context,
                    full,
                    ..SearchRequest::new(&q)
                }
            },
        )
}

proptest! {
    #![proptest_config(crate::config(300))]

    /// Any request is planned and answered, or refused as `invalid` or `too_large`; never a
    /// panic or an internal error, and never more results than the limit.
    #[test]
    fn any_request_is_answered_or_refused(req in request()) {
        let m = &STORE.memdir;
        match m.indexing().search(&req) {
            Ok(v) => {
                prop_assert!(v.results.len() <= req.limit, "{} results for limit {}", v.results.len(), req.limit);
                prop_assert_eq!(v.count, v.results.len());
                prop_assert!(!v.engine.is_empty());
            }
            Err(e) => prop_assert!(
                matches!(e.kind, ErrorKind::Invalid | ErrorKind::TooLarge),
                "{:?}: {}", e.kind, e.message
            ),
        }
    }
}
