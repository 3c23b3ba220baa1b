//! One pass over JSON text, without building its value: the top-level `id` and `method` of a
//! message, its nesting depth, and integer literals that would lose digits.
//!
//! serde_json turns an integer literal beyond 64 bits into a float and silently drops digits;
//! memdir refuses such input on every surface (naming the field), and the MCP stdio framing
//! needs a message's `id` even when the message does not parse, to answer it. Pure: no I/O.

use serde_json::Value;

use crate::error::{Error, Result};

/// Deepest nesting of arrays and objects serde_json parses (its recursion limit). A message
/// nested deeper is answered with a parse error instead of being dropped.
pub const MAX_JSON_DEPTH: usize = 127;

/// Nesting levels whose keys [`Scan`] remembers (for the path of a refused number); deeper
/// levels are only counted, so a line of a million `[` costs no memory.
pub const MAX_TRACKED_DEPTH: usize = 64;

/// Longest key or top-level `id`/`method` value [`Scan`] keeps, in bytes.
pub const MAX_SCAN_TOKEN: usize = 256;

/// One step of the path to a value inside a JSON text.
#[derive(Clone, Debug, PartialEq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// `data.items[2].n`: the notation of serde's field paths in `invalid` errors.
pub fn path_string(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) if out.is_empty() => out.push_str(k),
            Seg::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

pub enum Container {
    /// `key` is the key of the member being read; `want_key` until its key string has been seen.
    Object {
        key: Option<String>,
        want_key: bool,
    },
    Array {
        index: usize,
    },
}

pub struct Token {
    /// The bytes kept (up to `MAX_SCAN_TOKEN`), when the token is wanted.
    pub bytes: Option<Vec<u8>>,
    pub len: usize,
    pub is_key: bool,
    /// Inside a string: the previous byte was a backslash.
    pub escape: bool,
    /// A number with `.`, `e` or `E`.
    pub fraction: bool,
}

impl Token {
    pub fn new(wanted: bool, is_key: bool) -> Token {
        Token {
            bytes: wanted.then(Vec::new),
            len: 0,
            is_key,
            escape: false,
            fraction: false,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.len += bytes.len();
        if let Some(b) = &mut self.bytes {
            let room = MAX_SCAN_TOKEN.saturating_sub(b.len());
            b.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
    }

    /// The whole token, unless it was cut.
    pub fn whole(&self) -> Option<&[u8]> {
        self.bytes.as_deref().filter(|b| b.len() == self.len)
    }
}

/// One pass over a JSON text fed in pieces, without building its value, that finds what the
/// framing needs: the top-level `id` and `method` (to answer a message that does not parse),
/// the nesting depth, and the first integer literal below `prefix` that does not fit in 64
/// bits (serde_json would turn it into a float and silently lose digits; the CLI refuses such
/// input too). Malformed text gives best-effort answers and never an error.
pub struct Scan {
    pub prefix: &'static [&'static str],
    pub stack: Vec<Container>,
    pub depth: usize,
    pub max_depth: usize,
    pub string: Option<Token>,
    pub number: Option<Token>,
    /// The top-level `id`, when it is a number or a string.
    pub id: Option<Value>,
    pub method: Option<String>,
    /// Path (below `prefix`) and text of the first integer literal outside 64 bits.
    pub lossy: Option<(Vec<Seg>, String)>,
    /// Path (below `prefix`) where the nesting first went past `MAX_JSON_DEPTH`.
    pub too_deep: Option<Vec<Seg>>,
}

impl Scan {
    pub fn new(prefix: &'static [&'static str]) -> Scan {
        Scan {
            prefix,
            stack: Vec::new(),
            depth: 0,
            max_depth: 0,
            string: None,
            number: None,
            id: None,
            method: None,
            lossy: None,
            too_deep: None,
        }
    }

    /// The key of the top-level member being read, if the scan is at depth 1.
    pub fn top_key(&self) -> Option<&str> {
        match (self.depth, self.stack.first()) {
            (
                1,
                Some(Container::Object {
                    key,
                    want_key: false,
                }),
            ) => key.as_deref(),
            _ => None,
        }
    }

    /// The path to the current position, relative to `prefix`; `None` outside it.
    pub fn relative_path(&self) -> Option<Vec<Seg>> {
        let mut path: Vec<Seg> = self
            .stack
            .iter()
            .map_while(|c| match c {
                Container::Object { key: Some(k), .. } => Some(Seg::Key(k.clone())),
                Container::Object { key: None, .. } => None,
                Container::Array { index } => Some(Seg::Index(*index)),
            })
            .collect();
        if path.len() <= self.prefix.len()
            || !self
                .prefix
                .iter()
                .zip(&path)
                .all(|(p, s)| *s == Seg::Key((*p).to_string()))
        {
            return None;
        }
        Some(path.split_off(self.prefix.len()))
    }

    pub fn want_value(&self) -> bool {
        matches!(self.top_key(), Some("id" | "method"))
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        let mut i = 0;
        while i < bytes.len() {
            if let Some(s) = &mut self.string {
                if s.escape {
                    s.escape = false;
                    s.push(&bytes[i..i + 1]);
                    i += 1;
                    continue;
                }
                let rest = &bytes[i..];
                match rest.iter().position(|b| *b == b'"' || *b == b'\\') {
                    None => {
                        s.push(rest);
                        i = bytes.len();
                    }
                    Some(n) if rest[n] == b'\\' => {
                        s.push(&rest[..=n]);
                        s.escape = true;
                        i += n + 1;
                    }
                    Some(n) => {
                        s.push(&rest[..n]);
                        i += n + 1;
                        self.end_string();
                    }
                }
                continue;
            }
            let b = bytes[i];
            if let Some(n) = &mut self.number {
                if matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                    n.fraction |= matches!(b, b'.' | b'e' | b'E');
                    n.push(&bytes[i..i + 1]);
                    i += 1;
                    continue;
                }
                self.end_number();
            }
            match b {
                b'"' => {
                    let is_key = matches!(
                        self.stack.last(),
                        Some(Container::Object { want_key: true, .. })
                    ) && self.depth <= MAX_TRACKED_DEPTH;
                    self.string = Some(Token::new(is_key || self.want_value(), is_key));
                }
                b'-' | b'0'..=b'9' => {
                    // Kept whole up to MAX_SCAN_TOKEN: a longer integer is out of range anyway.
                    let mut t = Token::new(true, false);
                    t.push(&bytes[i..i + 1]);
                    self.number = Some(t);
                }
                b'{' | b'[' => {
                    self.depth += 1;
                    self.max_depth = self.max_depth.max(self.depth);
                    if self.depth <= MAX_TRACKED_DEPTH {
                        self.stack.push(if b == b'{' {
                            Container::Object {
                                key: None,
                                want_key: true,
                            }
                        } else {
                            Container::Array { index: 0 }
                        });
                    }
                    if self.depth == MAX_JSON_DEPTH + 1 && self.too_deep.is_none() {
                        self.too_deep = Some(self.relative_path().unwrap_or_default());
                    }
                }
                b'}' | b']' => {
                    if self.depth <= MAX_TRACKED_DEPTH {
                        self.stack.pop();
                    }
                    self.depth = self.depth.saturating_sub(1);
                }
                b',' if self.depth <= MAX_TRACKED_DEPTH => match self.stack.last_mut() {
                    Some(Container::Object { key, want_key }) => {
                        *key = None;
                        *want_key = true;
                    }
                    Some(Container::Array { index }) => *index += 1,
                    None => {}
                },
                _ => {}
            }
            i += 1;
        }
    }

    /// Ends the text: a number at its very end is complete.
    pub fn finish(&mut self) {
        if self.number.is_some() {
            self.end_number();
        }
    }

    pub fn end_string(&mut self) {
        let Some(s) = self.string.take() else { return };
        let text = s.whole().map(|b| {
            // The raw bytes between the quotes, escapes included: let serde_json decode them.
            let mut quoted = Vec::with_capacity(b.len() + 2);
            quoted.push(b'"');
            quoted.extend_from_slice(b);
            quoted.push(b'"');
            serde_json::from_slice::<String>(&quoted).ok()
        });
        if s.is_key {
            if let Some(Container::Object { key, want_key }) = self.stack.last_mut() {
                // A key too long to keep names nothing the scan looks for.
                *key = Some(text.flatten().unwrap_or_else(|| "…".to_string()));
                *want_key = false;
            }
            return;
        }
        match (self.top_key(), text.flatten()) {
            (Some("id"), Some(t)) => self.id = Some(Value::from(t)),
            (Some("method"), Some(t)) => self.method = Some(t),
            _ => {}
        }
    }

    pub fn end_number(&mut self) {
        let Some(n) = self.number.take() else { return };
        let text = n.bytes.as_deref().unwrap_or_default();
        if self.top_key() == Some("id") {
            self.id = n
                .whole()
                .and_then(|b| serde_json::from_slice::<Value>(b).ok());
        }
        if n.fraction || self.lossy.is_some() {
            return;
        }
        let fits = n.whole().is_some_and(|b| {
            std::str::from_utf8(b)
                .is_ok_and(|t| t.parse::<i64>().is_ok() || t.parse::<u64>().is_ok())
        });
        if !fits && let Some(path) = self.relative_path() {
            let mut literal = String::from_utf8_lossy(text).into_owned();
            if n.whole().is_none() {
                literal.push('…');
            }
            self.lossy = Some((path, literal));
        }
    }
}

/// The refusal of an integer literal that would lose digits, as the CLI words it.
pub fn lossy_error(path: &[Seg], literal: &str) -> Error {
    let field = path_string(&path[..1]);
    Error::invalid(
        &field,
        format!(
            "{} holds the integer {literal}, which does not fit in 64 bits and would lose precision",
            path_string(path)
        ),
    )
    .detail("path", Value::from(path_string(path)))
    .hint("store it as a string")
}

/// Refuses JSON text holding an integer literal outside the 64-bit range (which serde_json
/// would silently turn into a float), naming the field: what the CLI does for `--data`, for
/// surfaces that receive raw JSON text (the REST body, for example).
pub fn check_integers(json: &[u8]) -> Result<()> {
    let mut scan = Scan::new(&[]);
    scan.feed(json);
    scan.finish();
    match scan.lossy {
        Some((path, literal)) => Err(lossy_error(&path, &literal)),
        None => Ok(()),
    }
}
