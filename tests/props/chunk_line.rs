//! The chunk-line codec (`store::codec::chunk_line`, `parse_chunk_line`) and the segment
//! reader (`store::segment::parse`): exact round trips, escaped input, and arbitrary or
//! damaged bytes that must never panic or surface a chunk from an unterminated line.

use memdir_store::codec::{chunk_line, chunk_line_with, parse_chunk_line};
use memdir_store::model::ChunkRecord;
use memdir_store::segment;
use proptest::prelude::*;

use crate::arb;

/// A line without its newline.
fn body(line: &str) -> &[u8] {
    line.strip_suffix('\n')
        .expect("a chunk line ends in a newline")
        .as_bytes()
}

/// Segment bytes for `records`, with the end offset of each line (newline included).
fn segment_bytes(records: &[ChunkRecord]) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::new();
    let mut ends = Vec::new();
    for r in records {
        bytes.extend_from_slice(chunk_line(r).as_bytes());
        ends.push(bytes.len());
    }
    (bytes, ends)
}

/// Checks what `segment::parse` reports about any bytes: lengths add up, the committed part
/// ends at the last newline, and the chunks are exactly the committed lines that parse.
fn check_segment(bytes: &[u8]) -> Result<segment::Segment, TestCaseError> {
    let seg = segment::parse(bytes);
    let committed = seg.committed_len as usize;
    prop_assert_eq!(committed + seg.tail_len as usize, bytes.len());
    prop_assert!(committed == 0 || bytes[committed - 1] == b'\n');
    prop_assert!(!bytes[committed..].contains(&b'\n'));
    let mut want = Vec::new();
    let mut bad = 0;
    for line in bytes[..committed].split(|&b| b == b'\n') {
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        match parse_chunk_line(line) {
            Ok(c) => want.push(c),
            Err(_) => bad += 1,
        }
    }
    prop_assert_eq!(&seg.chunks, &want);
    prop_assert_eq!(seg.bad_lines.len(), bad);
    let lines = bytes[..committed].split(|&b| b == b'\n').count();
    prop_assert!(seg.bad_lines.iter().all(|(n, _)| (1..=lines).contains(n)));
    Ok(seg)
}

/// One piece of a JSON string body: literal text or a `\uXXXX` escape of any UTF-16 unit.
#[derive(Clone, Debug)]
enum Piece {
    Text(String),
    Escape(u16, bool),
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        arb::text(4).prop_map(Piece::Text),
        (any::<u16>(), any::<bool>()).prop_map(|(u, up)| Piece::Escape(u, up)),
        (0xd800u16..0xe000, any::<bool>()).prop_map(|(u, up)| Piece::Escape(u, up)),
    ]
}

/// How a valid segment is damaged.
#[derive(Clone, Debug)]
enum Damage {
    /// Flip one bit of the byte at this index (modulo the length).
    FlipBit(usize, u8),
    /// Insert a newline at this index.
    Newline(usize),
    /// Overwrite the byte at this index.
    Byte(usize, u8),
    /// Insert bytes at this index.
    Insert(usize, Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(i, b)| Damage::FlipBit(i, b)),
        any::<usize>().prop_map(Damage::Newline),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Damage::Byte(i, b)),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..6))
            .prop_map(|(i, b)| Damage::Insert(i, b)),
    ]
}

/// Random bytes, or pieces of valid lines mixed with junk.
fn noisy_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..40),
        arb::chunk_record().prop_map(|r| chunk_line(&r).into_bytes()),
        (arb::chunk_record(), any::<usize>()).prop_map(|(r, cut)| {
            let l = chunk_line(&r).into_bytes();
            l[..cut % l.len()].to_vec()
        }),
        Just(b"\n".to_vec()),
        Just(b"\r\n \t\n".to_vec()),
        Just(b"{}\n".to_vec()),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(crate::config(384))]

    /// Any record memdir writes reads back as the same record, and re-encodes to the same
    /// bytes: one line, one newline, fields in file order.
    #[test]
    fn chunk_lines_round_trip_exactly(rec in arb::chunk_record()) {
        let line = chunk_line(&rec);
        prop_assert!(line.ends_with('\n'));
        prop_assert_eq!(line.matches('\n').count(), 1, "{}", line);
        prop_assert!(!line.contains('\r'));
        let start = "{\"session_id\":";
        prop_assert!(line.starts_with(start));
        let back = parse_chunk_line(body(&line)).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&back, &rec);
        prop_assert_eq!(chunk_line(&back), line.clone());
        let other = ChunkRecord { content: String::new(), ..rec.clone() };
        prop_assert_eq!(chunk_line_with(&other, &rec.content), line);
    }

    /// Content written with `\uXXXX` escapes (as another tool might) decodes as UTF-16: a
    /// valid sequence gives exactly its text, a lone surrogate makes the line an error.
    #[test]
    fn escaped_content_decodes_as_utf16_or_is_rejected(
        rec in arb::chunk_record(),
        pieces in prop::collection::vec(piece(), 0..8),
    ) {
        let mut json = String::new();
        let mut units: Vec<u16> = Vec::new();
        for p in &pieces {
            match p {
                Piece::Text(t) => {
                    let quoted = serde_json::to_string(t).expect("strings serialize");
                    json.push_str(&quoted[1..quoted.len() - 1]);
                    units.extend(t.encode_utf16());
                }
                Piece::Escape(u, upper) => {
                    json.push_str(&if *upper { format!("\\u{u:04X}") } else { format!("\\u{u:04x}") });
                    units.push(*u);
                }
            }
        }
        let prefix = chunk_line(&ChunkRecord { content: String::new(), ..rec.clone() });
        let prefix = prefix.strip_suffix("\"\"}\n").expect("content is the last field");
        let line = format!("{prefix}\"{json}\"}}");
        let got = parse_chunk_line(line.as_bytes());
        match String::from_utf16(&units) {
            Ok(want) => {
                let got = got.map_err(|e| TestCaseError::fail(format!("{e}: {line}")))?;
                prop_assert_eq!(&got.content, &want);
                prop_assert_eq!(got, ChunkRecord { content: want, ..rec });
            }
            Err(_) => prop_assert!(got.is_err(), "a lone surrogate was accepted: {}", line),
        }
    }

    /// Arbitrary bytes never panic the line parser or the segment reader, and the reader only
    /// reports chunks from lines that end in a newline.
    #[test]
    fn arbitrary_bytes_never_panic_the_readers(bytes in noisy_bytes()) {
        let _ = parse_chunk_line(&bytes);
        let seg = check_segment(&bytes)?;
        // Whatever follows the last newline is never read as a chunk.
        let mut longer = bytes.clone();
        longer.extend_from_slice(b"{\"session_id\":\"x\"");
        prop_assert_eq!(&check_segment(&longer)?.chunks, &seg.chunks);
    }

    /// A segment cut anywhere (a torn write) shows exactly the chunks whose whole line,
    /// newline included, is before the cut.
    #[test]
    fn a_torn_segment_shows_only_whole_lines(
        records in prop::collection::vec(arb::chunk_record(), 1..5),
        cut in any::<usize>(),
    ) {
        let (bytes, ends) = segment_bytes(&records);
        let cut = cut % (bytes.len() + 1);
        let seg = check_segment(&bytes[..cut])?;
        let whole = ends.iter().filter(|&&e| e <= cut).count();
        prop_assert_eq!(&seg.chunks[..], &records[..whole]);
        prop_assert!(seg.bad_lines.is_empty(), "{:?}", seg.bad_lines);
        prop_assert_eq!(seg.committed_len as usize, if whole == 0 { 0 } else { ends[whole - 1] });
    }

    /// Damage to one line (a flipped bit, a stray newline, an overwritten or inserted byte)
    /// breaks at most that line: every other chunk is still read, in order.
    #[test]
    fn damage_breaks_only_the_damaged_line(
        records in prop::collection::vec(arb::chunk_record(), 1..5),
        damage in damage(),
    ) {
        let (mut bytes, ends) = segment_bytes(&records);
        let at = |i: usize| i % bytes.len();
        let pos = match &damage {
            Damage::FlipBit(i, b) => { let p = at(*i); bytes[p] ^= 1 << b; p }
            Damage::Byte(i, b) => { let p = at(*i); bytes[p] = *b; p }
            Damage::Newline(i) => { let p = at(*i); bytes.insert(p, b'\n'); p }
            Damage::Insert(i, b) => { let p = at(*i); bytes.splice(p..p, b.iter().copied()); p }
        };
        // The damaged line, and the next one when its newline was the byte changed.
        let hit = ends.iter().position(|&e| pos < e).expect("pos is inside the segment");
        let mut touched = vec![hit];
        if pos + 1 == ends[hit] && hit + 1 < records.len() {
            touched.push(hit + 1);
        }
        let seg = check_segment(&bytes)?;
        let untouched: Vec<&ChunkRecord> = records
            .iter()
            .enumerate()
            .filter(|(i, _)| !touched.contains(i))
            .map(|(_, r)| r)
            .collect();
        // The untouched records appear in order; anything else came from the damaged line.
        let mut it = seg.chunks.iter();
        for want in &untouched {
            prop_assert!(
                it.any(|c| c == *want),
                "chunk {:?} lost after {:?}; read {:?}", want, damage, seg.chunks
            );
        }
        prop_assert!(seg.chunks.len() <= records.len() + 1);
        prop_assert!(seg.chunks.len() >= untouched.len());
    }
}

/// `\ud800` escaped in a line is a lone surrogate: the line is an error, not a panic.
#[test]
fn an_escaped_lone_surrogate_is_a_bad_line() {
    let line = br#"{"session_id":"s","replica":"r","seq":0,"hlc":"20251129T110203004Z-0007","ts":"t","project":"","metadata":{},"content":"a\ud800b"}"#;
    assert!(parse_chunk_line(line).is_err());
    let mut seg = line.to_vec();
    seg.push(b'\n');
    let s = segment::parse(&seg);
    assert!(s.chunks.is_empty());
    assert_eq!(s.bad_lines.len(), 1);
}
