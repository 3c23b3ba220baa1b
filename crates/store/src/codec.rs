//! Canonical encodings: the same content always gives the same bytes.
//!
//! Category and history files are pretty JSON with keys sorted by code point, two-space
//! indentation, LF line endings and a trailing newline. Chunk lines are compact JSON with the
//! fields in the documented order and metadata keys sorted.

use serde_json::Value;

use crate::model::ChunkRecord;

/// Pretty, key-sorted JSON with a trailing newline.
/// The deepest nesting memdir stores ([`memdir_api::limits::MAX_STORED_DEPTH`]).
pub const MAX_DEPTH: usize = memdir_api::limits::MAX_STORED_DEPTH;

/// Nesting depth of a JSON value: 0 for a scalar, 1 for a flat array or object.
pub fn depth(value: &Value) -> usize {
    let mut max = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Array(a) => {
                max = max.max(d + 1);
                stack.extend(a.iter().map(|x| (x, d + 1)));
            }
            Value::Object(o) => {
                max = max.max(d + 1);
                stack.extend(o.values().map(|x| (x, d + 1)));
            }
            _ => {}
        }
    }
    max
}

/// Canonical pretty JSON of a value.
pub fn to_pretty(value: &Value) -> Vec<u8> {
    to_pretty_sized(value, 0)
}

/// [`to_pretty`] into a buffer of `capacity` bytes to start with: a caller that knows about
/// how large the text will be (the previous version of a category) saves the buffer's
/// regrowth and copies.
pub fn to_pretty_sized(value: &Value, capacity: usize) -> Vec<u8> {
    let mut out = String::with_capacity(capacity);
    write_value(&mut out, value, Some(0));
    out.push('\n');
    out.into_bytes()
}

/// [`to_pretty`] of `outer` (an object whose `key` holds `null`) with `pretty`, the
/// [`to_pretty`] bytes of a value, in place of that `null`: the same bytes as serializing the
/// object with the value inside, without serializing the value again.
pub fn to_pretty_with(outer: &Value, key: &str, pretty: &[u8]) -> Vec<u8> {
    let base = to_pretty(outer);
    let mut line = String::from("\n  ");
    write_str(&mut line, key);
    line.push_str(": null");
    let at = base
        .windows(line.len())
        .position(|w| w == line.as_bytes())
        .expect("invariant: the outer object holds the key at depth 1 as null");
    let value = pretty.strip_suffix(b"\n").unwrap_or(pretty);
    let breaks = memchr::memchr_iter(b'\n', value).count();
    let mut out = Vec::with_capacity(base.len() + value.len() + 2 * breaks);
    out.extend_from_slice(&base[..at + line.len() - "null".len()]);
    // One level deeper: every line of the value after its first gains an indent.
    let mut from = 0;
    for nl in memchr::memchr_iter(b'\n', value) {
        out.extend_from_slice(&value[from..=nl]);
        out.extend_from_slice(b"  ");
        from = nl + 1;
    }
    out.extend_from_slice(&value[from..]);
    out.extend_from_slice(&base[at + line.len()..]);
    out
}

/// [`to_pretty`] of the object that `old` (the [`to_pretty`] bytes of an object) becomes when
/// the top-level keys in `remove` are removed and those in `set` set, built by copying the
/// bytes of the entries that did not change: the same bytes as serializing the new object, at
/// the cost of the changed keys and one scan of `old`. The top-level entries of a canonical
/// object each start a line with exactly two spaces and a quote, and string values never hold
/// a raw line break, so `\n  "` finds them all. `None` when `old` does not have that shape
/// (the caller then serializes whole). Only for bytes known to be canonical: entries found in
/// another layout or order would be copied as they are.
pub fn splice_pretty(
    old: &[u8],
    set: &serde_json::Map<String, Value>,
    remove: &[String],
) -> Option<Vec<u8>> {
    const TAIL: &[u8] = b"\n}\n";
    const START: &[u8] = b"\n  \"";
    if !old.starts_with(b"{\n  \"") || !old.ends_with(TAIL) {
        return None;
    }
    // Entries lie in `1..body`; each starts at a `\n  "` and all but the last end in a comma.
    let body = old.len() - TAIL.len();
    let finder = memchr::memmem::Finder::new(START);
    // The first entry start in `from..to` (its pattern may run past `to`), else `to`.
    let next_start = |from: usize, to: usize| -> usize {
        let end = (to + START.len() - 1).min(body);
        finder
            .find(&old[from..end])
            .map_or(to, |i| (from + i).min(to))
    };
    let key_at = |at: usize| -> Option<String> {
        let from = at + 3;
        let mut j = from + 1;
        while j < body {
            match old[j] {
                b'\\' => j += 2,
                b'"' => return serde_json::from_slice(&old[from..=j]).ok(),
                _ => j += 1,
            }
        }
        None
    };
    // Every change in key order; a key both removed and set is set.
    let mut changes: std::collections::BTreeMap<&str, Option<&Value>> =
        remove.iter().map(|k| (k.as_str(), None)).collect();
    changes.extend(set.iter().map(|(k, v)| (k.as_str(), Some(v))));
    let mut out: Vec<u8> = Vec::with_capacity(old.len() + 256);
    out.push(b'{');
    let mut first = true;
    let mut piece = |out: &mut Vec<u8>, bytes: &[u8]| {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
        out.extend_from_slice(bytes);
    };
    // `copied`: where the entries not yet copied start (an entry start, or `body`).
    let mut copied = 1usize;
    for (k, v) in changes {
        // The first entry at or after `copied` whose key is not below `k`, by bisecting the
        // bytes: entries starting before `lo` sort below `k`, and the first entry starting at
        // or after `hi` does not.
        let (mut lo, mut hi) = (copied, body);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let at = next_start(mid, hi);
            if at == hi {
                hi = mid;
            } else if key_at(at)?.as_str() < k {
                lo = at + 1;
            } else {
                hi = mid;
            }
        }
        let at = next_start(lo, body);
        let found = at < body && key_at(at)?.as_str() == k;
        if at > copied {
            // The unchanged entries before `at`, without the comma that follows them.
            let end = if at < body {
                if old[at - 1] != b',' {
                    return None;
                }
                at - 1
            } else {
                body
            };
            piece(&mut out, &old[copied..end]);
        }
        copied = if found { next_start(at + 1, body) } else { at };
        if let Some(v) = v {
            let mut entry = String::from("\n  ");
            write_str(&mut entry, k);
            entry.push_str(": ");
            write_value(&mut entry, v, Some(1));
            piece(&mut out, entry.as_bytes());
        }
    }
    if copied < body {
        piece(&mut out, &old[copied..body]);
    }
    if out.len() == 1 {
        return Some(b"{}\n".to_vec());
    }
    out.extend_from_slice(TAIL);
    Some(out)
}

/// Compact, key-sorted JSON without a newline.
pub fn to_compact(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, None);
    out
}

/// Writes `s` as a JSON string, escaping exactly as serde_json does (quote, backslash and
/// control characters), without an intermediate allocation.
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    // Runs of bytes that need no escape are copied whole; only the rest goes one by one.
    let mut from = 0;
    while let Some(at) = next_escape(bytes, from) {
        out.push_str(&s[from..at]);
        match bytes[at] {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b => {
                use std::fmt::Write as _;
                let _ = write!(out, "\\u{:04x}", b);
            }
        }
        from = at + 1;
    }
    out.push_str(&s[from..]);
    out.push('"');
}

/// The first byte at or after `from` that a JSON string must escape (quote, backslash, a
/// control character). All three are ASCII, so the position is always a character boundary.
/// Blocks of 16 bytes are tested without branching per byte, which the compiler turns into
/// vector instructions: most strings need no escape at all.
fn next_escape(bytes: &[u8], from: usize) -> Option<usize> {
    let needs = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
    let rest = &bytes[from..];
    let mut blocks = rest.chunks_exact(16);
    let mut at = from;
    for block in &mut blocks {
        if block.iter().fold(false, |any, &b| any | needs(b)) {
            return block.iter().position(|&b| needs(b)).map(|i| at + i);
        }
        at += 16;
    }
    blocks
        .remainder()
        .iter()
        .position(|&b| needs(b))
        .map(|i| at + i)
}

fn newline(out: &mut String, indent: Option<usize>) {
    if let Some(n) = indent {
        out.push('\n');
        for _ in 0..n {
            out.push_str("  ");
        }
    }
}

fn write_value(out: &mut String, value: &Value, indent: Option<usize>) {
    let inner = indent.map(|n| n + 1);
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            use std::fmt::Write as _;
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, inner);
                write_value(out, item, inner);
            }
            newline(out, indent);
            out.push(']');
        }
        Value::Object(map) => {
            if map.is_empty() {
                out.push_str("{}");
                return;
            }
            // A map iterates in key order already (no `preserve_order`); sorting is the
            // fallback, never a lookup per key.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            if !entries.is_sorted_by(|a, b| a.0 <= b.0) {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, inner);
                write_str(out, k);
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                write_value(out, v, inner);
            }
            newline(out, indent);
            out.push('}');
        }
    }
}

/// One chunk line, fields in file order, with a trailing newline.
pub fn chunk_line(c: &ChunkRecord) -> String {
    chunk_line_with(c, &c.content)
}

/// One chunk line whose content is `content` (the record's own `content` is ignored), so a
/// caller can write a line without first copying the text into a record.
pub fn chunk_line_with(c: &ChunkRecord, content: &str) -> String {
    let mut out = String::with_capacity(content.len() + 160);
    out.push_str("{\"session_id\":");
    write_str(&mut out, &c.session_id);
    out.push_str(",\"replica\":");
    write_str(&mut out, &c.replica);
    out.push_str(",\"seq\":");
    out.push_str(&c.seq.to_string());
    out.push_str(",\"hlc\":");
    write_str(&mut out, &c.hlc);
    out.push_str(",\"ts\":");
    write_str(&mut out, &c.ts);
    out.push_str(",\"project\":");
    write_str(&mut out, &c.project);
    out.push_str(",\"metadata\":");
    write_value(&mut out, &c.metadata, None);
    out.push_str(",\"content\":");
    write_str(&mut out, content);
    out.push_str("}\n");
    out
}

/// Parses one chunk line (without its newline).
pub fn parse_chunk_line(line: &[u8]) -> Result<ChunkRecord, String> {
    let rec: ChunkRecord = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    if !rec.metadata.is_object() {
        return Err("metadata is not an object".into());
    }
    if crate::clock::Hlc::parse(&rec.hlc).is_none() {
        return Err(format!(
            "hlc {:?} is not a stamp YYYYMMDDTHHMMSSmmmZ-CCCC",
            rec.hlc
        ));
    }
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pretty_is_sorted_and_stable() {
        let v = json!({"b": [1, {"z": null, "a": "x\ny"}], "a": {}, "c": []});
        let s = String::from_utf8(to_pretty(&v)).unwrap();
        assert_eq!(
            s,
            "{\n  \"a\": {},\n  \"b\": [\n    1,\n    {\n      \"a\": \"x\\ny\",\n      \"z\": null\n    }\n  ],\n  \"c\": []\n}\n"
        );
        let back: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back, v);
        assert_eq!(
            to_compact(&v),
            r#"{"a":{},"b":[1,{"a":"x\ny","z":null}],"c":[]}"#
        );
    }

    #[test]
    fn a_value_spliced_into_an_object_reads_as_if_serialized_inside_it() {
        for v in [
            json!({"b": [1, {"z": null, "a": "x\ny"}], "a": {}, "c": []}),
            json!({}),
            json!([]),
            json!("a \"quoted\"\n  \"content\": null line"),
            json!(12.5),
            json!({"content": null, "deep": {"content": null}}),
        ] {
            let mut outer =
                json!({"actor": "a\n  \"content\": null", "content": null, "zeta": [1, 2]});
            let spliced = to_pretty_with(&outer, "content", &to_pretty(&v));
            outer["content"] = v.clone();
            assert_eq!(
                String::from_utf8(spliced).unwrap(),
                String::from_utf8(to_pretty(&outer)).unwrap(),
                "{v}"
            );
        }
    }

    #[test]
    fn strings_escape_like_serde_json() {
        for s in [
            "plain",
            "q\"uote",
            "back\\slash",
            "nl\ncr\rtab\t",
            "\u{1}\u{8}\u{c}\u{1f}",
            "é 😀 \u{7f} /",
        ] {
            let mut out = String::new();
            write_str(&mut out, s);
            assert_eq!(out, serde_json::to_string(s).unwrap());
        }
        // Escapes at every place around the 16-byte blocks the scan tests at once.
        for len in 0..40 {
            for at in 0..len {
                for c in ['"', '\\', '\n', '\u{1}', 'é'] {
                    let s: String = (0..len)
                        .map(|i| if i == at { c } else { 'a' })
                        .chain((at % 3 == 0).then_some('\t'))
                        .collect();
                    let mut out = String::new();
                    write_str(&mut out, &s);
                    assert_eq!(out, serde_json::to_string(&s).unwrap(), "{s:?}");
                }
            }
        }
    }

    #[test]
    fn chunk_lines_round_trip() {
        let c = ChunkRecord {
            session_id: "s\"1".into(),
            replica: "host-abcd".into(),
            seq: 3,
            hlc: "20251129T110203004Z-0007".into(),
            ts: "2025-11-29T11:02:03.004Z".into(),
            project: "p".into(),
            metadata: json!({"role": "user", "a": 1}),
            content: "line\nbreak \u{1F600}".into(),
        };
        let line = chunk_line(&c);
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        assert!(line.starts_with("{\"session_id\""));
        assert_eq!(parse_chunk_line(line.trim_end().as_bytes()).unwrap(), c);
        assert!(parse_chunk_line(b"{\"session_id\":1}").is_err());
    }
}
