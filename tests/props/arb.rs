//! Generators shared by the properties: text that stresses JSON escaping, JSON values,
//! clock stamps and chunk records.

use memdir_store::clock::{Hlc, parse_time};
use memdir_store::model::ChunkRecord;
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Characters that stress a JSON encoder or a line reader.
pub const AWKWARD: &[char] = &[
    '\0',
    '\n',
    '\r',
    '\t',
    '\u{8}',
    '\u{c}',
    '\u{b}',
    '\u{1b}',
    '\u{1f}',
    '\u{7f}',
    '\u{85}',
    '"',
    '\\',
    '/',
    '\u{2028}',
    '\u{2029}',
    '\u{feff}',
    '\u{fffd}',
    '\u{10ffff}',
    'é',
    '😀',
    '~',
    ' ',
];

/// One character: anything, often an awkward one or plain ASCII.
pub fn char_() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => any::<char>(),
        2 => prop::sample::select(AWKWARD),
        3 => prop::char::range(' ', '~'),
    ]
}

/// Text of up to `max` characters from [`char_`].
pub fn text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(char_(), 0..=max).prop_map(|v| v.into_iter().collect())
}

/// Whether serde_json reads its own text of `f` back as `f`.
///
/// Whether a float survives a JSON round trip exactly (serde_json's `float_roundtrip`
/// feature, which memdir enables, makes this hold for every finite float).
pub fn float_reads_back(f: f64) -> bool {
    serde_json::from_str::<f64>(&serde_json::to_string(&f).expect("finite floats serialize"))
        .is_ok_and(|g| g == f)
}

/// A JSON number: any integer, or a finite float.
pub fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1000i64..1000).prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
    ]
}

/// A JSON leaf.
pub fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        text(12).prop_map(Value::String),
    ]
}

/// An object key: usually short, sometimes awkward.
pub fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-e_]{1,3}",
        1 => text(6),
    ]
}

/// Any JSON value, a few levels deep.
pub fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A JSON object (category content, chunk metadata).
pub fn object() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(key(), value(), 0..6)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// The first and last millisecond a stamp can name: years 0000 to 9999.
pub fn stamp_range() -> (i64, i64) {
    let lo = parse_time("0000-01-01T00:00:00.000Z").expect("invariant: year 0 parses");
    let hi = parse_time("9999-12-31T23:59:59.999Z").expect("invariant: year 9999 parses");
    (lo, hi)
}

/// A stamp anywhere in the representable range, often near its ends or near now.
pub fn hlc() -> impl Strategy<Value = Hlc> {
    let (lo, hi) = stamp_range();
    let ms = prop_oneof![
        4 => lo..=hi,
        2 => 1_700_000_000_000i64..1_900_000_000_000,
        1 => (0i64..3).prop_map(move |d| lo + d),
        1 => (0i64..3).prop_map(move |d| hi - d),
        1 => -3i64..3,
    ];
    let counter = prop_oneof![0u16..=9999, Just(0u16), Just(9998u16), Just(9999u16)];
    (ms, counter).prop_map(|(ms, counter)| Hlc { ms, counter })
}

/// A chunk record as memdir would write it (a valid stamp), with hostile strings elsewhere.
pub fn chunk_record() -> impl Strategy<Value = ChunkRecord> {
    (
        (text(12), text(12), any::<u64>(), hlc(), text(30)),
        (text(12), object(), text(80)),
    )
        .prop_map(
            |((session_id, replica, seq, hlc, ts), (project, metadata, content))| ChunkRecord {
                session_id,
                replica,
                seq,
                hlc: hlc.to_string(),
                ts,
                project,
                metadata,
                content,
            },
        )
}
