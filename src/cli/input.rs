//! Input read from a file or stdin, bounded in size, and JSON parsed with errors that name
//! the field (and refuse integers JSON numbers cannot hold).

use super::*;

/// Largest input read from a file or stdin, in bytes.
pub(super) const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

pub(super) fn read_limited(mut r: impl Read, what: &str) -> Result<String> {
    let mut buf = Vec::new();
    r.by_ref()
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Error::new(ErrorKind::Unavailable, format!("reading {what}: {e}")))?;
    if buf.len() as u64 > MAX_INPUT_BYTES {
        return Err(Error::too_large(
            what,
            buf.len(),
            MAX_INPUT_BYTES as usize,
            "bytes",
        ));
    }
    String::from_utf8(buf).map_err(|_| Error::invalid(what, format!("{what} is not valid UTF-8")))
}

pub(super) fn read_source(path: Option<&PathBuf>, what: &str) -> Result<String> {
    match path {
        Some(p) if p.as_os_str() != "-" => {
            let f = std::fs::File::open(p)
                .map_err(|e| Error::invalid(what, format!("cannot open {}: {e}", p.display())))?;
            read_limited(f, what)
        }
        _ => {
            if std::io::stdin().is_terminal() {
                return Err(Error::invalid(
                    what,
                    format!(
                        "no {what} given: pass it as an argument or a file, or pipe it to stdin"
                    ),
                ));
            }
            read_limited(std::io::stdin(), what)
        }
    }
}

pub(super) fn parse_json(text: &str, field: &str) -> Result<Value> {
    if text.trim().is_empty() {
        return Err(Error::invalid(
            field,
            format!("{field} is empty: expected JSON (an object such as {{\"key\": \"value\"}})"),
        )
        .hint("pass it with --data, a file, or pipe it to stdin"));
    }
    let v = serde_json::from_str(text)
        .map_err(|e| Error::invalid(field, format!("{field} is not valid JSON: {e}")))?;
    if let Some(n) = oversized_integer(text) {
        return Err(Error::invalid(
            field,
            format!("{field} holds the integer {n}, which does not fit in 64 bits and would lose precision"),
        )
        .hint("store it as a string"));
    }
    Ok(v)
}

/// The first integer literal outside the 64-bit range in valid JSON text, if any (such numbers
/// would silently become floating point).
pub(super) fn oversized_integer(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let lit = &text[start..i];
                let integral = !lit.contains(['.', 'e', 'E']);
                if integral && lit.parse::<i64>().is_err() && lit.parse::<u64>().is_err() {
                    return Some(lit.to_string());
                }
            }
            _ => i += 1,
        }
    }
    None
}
