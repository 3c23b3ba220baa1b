//! The nouns of memdir: names, hashes, clock stamps and the records stored on disk.
//!
//! Every type that reaches a file name validates on construction, so that code holding a
//! [`CategoryName`] or a [`SessionId`] can build a path from it without further checks.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use memdir_api::error::{Error, ErrorKind};

/// Longest category name, in characters.
pub const MAX_CATEGORY_NAME_CHARS: usize = 128;
/// Longest session id, in characters.
pub const MAX_SESSION_ID_CHARS: usize = 256;
/// Longest encoded name, in bytes: one file-name component, leaving room for a suffix within
/// the usual 255-byte limit.
pub const MAX_ENCODED_BYTES: usize = 200;
/// Longest project name, in characters.
pub const MAX_PROJECT_CHARS: usize = 256;

/// Encodes a name into one path component of ASCII characters.
///
/// Lower-case letters, digits, `-` and `_` pass through, as does `.` except at the start or
/// end. Every other byte of the UTF-8 encoding becomes `~XX` (upper-case hex), including
/// upper-case letters, so that two names differing only in case never share a file on a
/// case-insensitive filesystem. Names reserved on Windows (`con`, `nul`, `com1`, ...) get their
/// first character escaped. The result never contains `/`, `\`, `:`, NUL or a control
/// character, and is never `.` or `..`.
pub fn encode_component(name: &str) -> String {
    let bytes = name.as_bytes();
    let mut out = String::with_capacity(bytes.len() + 8);
    for (i, &b) in bytes.iter().enumerate() {
        let plain = b.is_ascii_lowercase()
            || b.is_ascii_digit()
            || b == b'-'
            || b == b'_'
            || (b == b'.' && i != 0 && i + 1 != bytes.len());
        if plain {
            out.push(b as char);
        } else {
            out.push_str(&format!("~{b:02X}"));
        }
    }
    if is_windows_reserved(&out) {
        let first = out.as_bytes()[0];
        out = format!("~{first:02X}{}", &out[1..]);
    }
    out
}

/// Decodes a component written by [`encode_component`]; `None` unless it is canonical.
pub fn decode_component(component: &str) -> Option<String> {
    let bytes = component.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'~' {
            let hex = component.get(i + 1..i + 3)?;
            if hex.bytes().any(|c| c.is_ascii_lowercase()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let name = String::from_utf8(out).ok()?;
    (encode_component(&name) == component).then_some(name)
}

fn is_windows_reserved(component: &str) -> bool {
    let stem = component.split('.').next().unwrap_or("");
    matches!(stem, "con" | "prn" | "aux" | "nul")
        || ((stem.starts_with("com") || stem.starts_with("lpt"))
            && stem.len() == 4
            && stem.as_bytes()[3].is_ascii_digit())
}

fn validate_name(what: &str, field: &str, name: &str, max_chars: usize) -> Result<(), Error> {
    let count = name.chars().count();
    if count == 0 {
        return Err(Error::invalid(field, format!("{what} must not be empty")));
    }
    if count > max_chars {
        return Err(Error::invalid(
            field,
            format!("{what} is {count} characters long; the limit is {max_chars}"),
        ));
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(Error::invalid(
            field,
            format!("{what} contains the control character U+{:04X}", c as u32),
        ));
    }
    if name.trim() != name {
        return Err(Error::invalid(
            field,
            format!("{what} must not start or end with white space"),
        ));
    }
    let encoded = encode_component(name).len();
    if encoded > MAX_ENCODED_BYTES {
        return Err(Error::invalid(
            field,
            format!(
                "{what} is {encoded} bytes once encoded as a file name; the limit is {MAX_ENCODED_BYTES} (upper-case and non-ASCII characters take 3 bytes per byte)"
            ),
        )
        .hint("use a shorter name"));
    }
    Ok(())
}

/// The name of a category: 1 to 128 characters, no control characters, no `/` or `\`, not
/// `.` or `..`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct CategoryName(String);

impl CategoryName {
    /// Validates `name`.
    pub fn new(name: &str) -> Result<Self, Error> {
        validate_name("category name", "category", name, MAX_CATEGORY_NAME_CHARS)?;
        if name.contains('/') || name.contains('\\') || name == "." || name == ".." {
            return Err(Error::invalid(
                "category",
                format!("category name {name:?} must not contain '/' or '\\' or be '.' or '..'"),
            )
            .hint("use names such as base, projects, my-laptop, workflow_my-laptop"));
        }
        Ok(CategoryName(name.to_string()))
    }

    /// The name as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The file-name component for this category.
    pub fn file_stem(&self) -> String {
        encode_component(&self.0)
    }
}

impl fmt::Display for CategoryName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The id of a session: 1 to 256 characters, no control characters. Any other character is
/// allowed and encoded for the file system.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    /// Validates `id`.
    pub fn new(id: &str) -> Result<Self, Error> {
        validate_name("session id", "session_id", id, MAX_SESSION_ID_CHARS)?;
        Ok(SessionId(id.to_string()))
    }

    /// The id as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The directory name for this session.
    pub fn dir_name(&self) -> String {
        encode_component(&self.0)
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Validates a project name (may be empty).
pub fn validate_project(project: &str) -> Result<(), Error> {
    if project.is_empty() {
        return Ok(());
    }
    validate_name("project", "project", project, MAX_PROJECT_CHARS)
}

/// The blake3 hex digest of a file's bytes.
pub fn content_hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Checks that `s` looks like a content hash (64 lower-case hex digits).
pub fn is_content_hash(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The fewest hex digits of a hash that `expected_hash` accepts: what a terminal shows
/// (48 bits: a different version of the same category shares them about once in 2^48).
pub const MIN_HASH_PREFIX: usize = 12;

/// Checks that `s` is a content hash or its first [`MIN_HASH_PREFIX`] or more digits.
pub fn is_hash_prefix(s: &str) -> bool {
    (MIN_HASH_PREFIX..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// What a compare-and-swap expects the category to be before a mutation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// No precondition.
    Any,
    /// The category must not exist.
    Absent,
    /// The category file's hash must be this, or begin with it (a prefix of at least
    /// [`MIN_HASH_PREFIX`] digits, as a terminal shows it).
    Hash(String),
}

impl Expect {
    /// Parses the `expected_hash` parameter: absent, `"absent"` (or `""`), or a hash (whole, or
    /// its first 12 or more digits).
    pub fn parse(value: Option<&str>) -> Result<Self, Error> {
        match value {
            None => Ok(Expect::Any),
            Some("") | Some("absent") => Ok(Expect::Absent),
            Some(h) if is_hash_prefix(h) => Ok(Expect::Hash(h.to_string())),
            Some(h) => Err(Error::invalid(
                "expected_hash",
                format!(
                    "expected_hash {h:?} is neither a hash (64 lower-case hex digits, or the first \
                     {MIN_HASH_PREFIX} or more of them) nor \"absent\""
                ),
            )
            .hint("pass the hash returned by {op:read} or {op:list}, or \"absent\" to create only if the category does not exist")),
        }
    }
}

/// One chunk line of a session segment, in file order of its fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkRecord {
    pub session_id: String,
    pub replica: String,
    pub seq: u64,
    pub hlc: String,
    pub ts: String,
    #[serde(default)]
    pub project: String,
    #[serde(default = "empty_object")]
    pub metadata: Value,
    pub content: String,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

impl ChunkRecord {
    /// The stable handle of the chunk.
    pub fn chunk_id(&self) -> String {
        format!("{}:{}", self.replica, self.seq)
    }

    /// Whether this line is a forgotten chunk's tombstone: empty content and a `forgotten`
    /// time in its metadata, its `seq`, `hlc` and `ts` kept so positions stay stable.
    pub fn is_tombstone(&self) -> bool {
        self.content.is_empty() && self.metadata.get(TOMBSTONE_KEY).is_some()
    }
}

/// The metadata key of a chunk tombstone: the time the chunk was forgotten.
pub const TOMBSTONE_KEY: &str = "forgotten";

/// Kinds of category content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CategoryKind {
    /// A JSON object written and merged by key.
    Document,
    /// An append-only list of entries with retention.
    Log,
}

impl CategoryKind {
    /// The kind of a category's JSON content.
    pub fn of(content: &Value) -> Self {
        match content.get("_kind") {
            Some(Value::String(k)) if k == "log" => CategoryKind::Log,
            _ => CategoryKind::Document,
        }
    }

    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            CategoryKind::Document => "document",
            CategoryKind::Log => "log",
        }
    }
}

/// Where a category stands, as its cached ledger row records it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CategoryStatus {
    /// The file exists and parses.
    Ok,
    /// The file exists but does not parse; memdir leaves it untouched.
    Malformed,
    /// No file, but a history: the category was deleted.
    Deleted,
    /// Neither a file nor a history.
    #[default]
    Absent,
}

impl CategoryStatus {
    /// The lower-case name, as the ledger stores it and the responses show it.
    pub fn as_str(self) -> &'static str {
        match self {
            CategoryStatus::Ok => "ok",
            CategoryStatus::Malformed => "malformed",
            CategoryStatus::Deleted => "deleted",
            CategoryStatus::Absent => "absent",
        }
    }

    /// The status named by [`CategoryStatus::as_str`]; `None` for any other text.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ok" => Some(CategoryStatus::Ok),
            "malformed" => Some(CategoryStatus::Malformed),
            "deleted" => Some(CategoryStatus::Deleted),
            "absent" => Some(CategoryStatus::Absent),
            _ => None,
        }
    }

    /// Whether a current file exists, readable or not.
    pub fn has_file(self) -> bool {
        matches!(self, CategoryStatus::Ok | CategoryStatus::Malformed)
    }
}

/// What made a version of a category: the `op` of its history entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionOp {
    /// The whole document replaced.
    Write,
    /// Keys merged into the document.
    Merge,
    /// An entry appended to a log.
    Append,
    /// The file deleted: a tombstone with no content.
    Delete,
    /// An old version's content written again.
    Restore,
    /// A change made behind memdir's back, adopted.
    External,
    /// The content chosen for a category a sync left in conflict.
    Resolve,
    /// A note's text changed in place (a replacement, an insertion, an append).
    Edit,
    /// A note moved: a tombstone at its old path and this version at the new one.
    Rename,
}

impl VersionOp {
    /// The lower-case name written in history files.
    pub fn as_str(self) -> &'static str {
        match self {
            VersionOp::Write => "write",
            VersionOp::Merge => "merge",
            VersionOp::Append => "append",
            VersionOp::Delete => "delete",
            VersionOp::Restore => "restore",
            VersionOp::External => "external",
            VersionOp::Resolve => "resolve",
            VersionOp::Edit => "edit",
            VersionOp::Rename => "rename",
        }
    }

    /// The op named by [`VersionOp::as_str`]; `None` for any other text.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "write" => Some(VersionOp::Write),
            "merge" => Some(VersionOp::Merge),
            "append" => Some(VersionOp::Append),
            "delete" => Some(VersionOp::Delete),
            "restore" => Some(VersionOp::Restore),
            "external" => Some(VersionOp::External),
            "resolve" => Some(VersionOp::Resolve),
            "edit" => Some(VersionOp::Edit),
            "rename" => Some(VersionOp::Rename),
            _ => None,
        }
    }
}

/// One write-once history entry, `history/<name>/<hlc>_<replica>.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryEntry {
    pub id: String,
    pub parents: Vec<String>,
    pub vv: std::collections::BTreeMap<String, u64>,
    /// What made this version, as written ([`VersionOp::as_str`] for versions memdir makes).
    /// Kept as text so that an entry with an op this memdir does not know still reads.
    pub op: String,
    /// Hash of the category file this version wrote; `null` for a delete tombstone.
    pub hash: Option<String>,
    pub actor: String,
    #[serde(default)]
    pub reason: Option<String>,
    pub ts: String,
    /// The category content of this version; `null` for a delete tombstone and a forgotten
    /// version.
    pub content: Value,
    /// When this version's content was forgotten (`memdir forget --category`): its content
    /// is null, its hash and place in the chain stay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forgotten: Option<String>,
    /// Store format 2: this version as a change of its parent's content (top-level keys set
    /// and removed), with `content` null on disk. Readers resolve it
    /// ([`crate::history`]); an entry handed to the service layer is resolved: its
    /// content filled in and this field `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<Patch>,
}

/// A version's content as a change of another version's (store format 2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    /// The id of the version this one changes (its parent).
    pub base: String,
    /// Patches between this one and the nearest whole entry, this one included (1 or more).
    pub depth: u32,
    /// Top-level keys whose value this version sets.
    #[serde(default)]
    pub set: serde_json::Map<String, Value>,
    /// Top-level keys this version removes.
    #[serde(default)]
    pub remove: Vec<String>,
}

impl HistoryEntry {
    /// The ordinal shown to users: the number of versions in this entry's ancestry.
    pub fn ordinal(&self) -> u64 {
        // Saturating: a damaged history file must break only itself, never the reader.
        self.vv.values().fold(0u64, |a, b| a.saturating_add(*b))
    }

    /// What made this version; `None` for an op this memdir does not know.
    pub fn version_op(&self) -> Option<VersionOp> {
        VersionOp::parse(&self.op)
    }

    /// Whether this entry is a delete tombstone.
    pub fn is_tombstone(&self) -> bool {
        self.version_op() == Some(VersionOp::Delete)
    }
}

/// Returns `Err` with kind `Invalid` unless `ok`.
pub fn ensure(ok: bool, field: &str, message: impl FnOnce() -> String) -> Result<(), Error> {
    if ok {
        Ok(())
    } else {
        Err(Error::new(ErrorKind::Invalid, message()).field(field))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_hash_takes_a_whole_hash_or_its_first_twelve_digits() {
        let h = content_hash(b"x");
        assert_eq!(Expect::parse(Some(&h)).unwrap(), Expect::Hash(h.clone()));
        assert_eq!(
            Expect::parse(Some(&h[..12])).unwrap(),
            Expect::Hash(h[..12].to_string())
        );
        assert!(Expect::parse(Some(&h[..11])).is_err());
        assert!(Expect::parse(Some(&h.to_uppercase())).is_err());
        assert!(Expect::parse(Some(&format!("{h}0"))).is_err());
    }

    #[test]
    fn plain_names_pass_through() {
        for n in [
            "base",
            "my-laptop",
            "workflow_my-laptop",
            "a.b",
            "2026-11-29",
        ] {
            assert_eq!(encode_component(n), n);
            assert_eq!(decode_component(n).as_deref(), Some(n));
        }
    }

    #[test]
    fn hostile_names_stay_one_component() {
        for n in [
            "../x",
            "/etc/passwd",
            "a/b",
            "a\\b",
            "..",
            ".",
            "x\0y",
            "C:",
            "CON",
            "con",
            "nul.txt",
            "com1",
            "lpt9.log",
            "a:b",
            "trailing.",
            " sp",
            "ünï",
            "😀",
        ] {
            let e = encode_component(n);
            assert!(!e.is_empty());
            assert!(e.is_ascii(), "{e}");
            assert!(!e.contains('/') && !e.contains('\\') && !e.contains(':') && !e.contains('\0'));
            assert!(e != "." && e != "..");
            assert!(!e.starts_with('.') && !e.ends_with('.'));
            assert!(!is_windows_reserved(&e), "{e}");
            assert_eq!(decode_component(&e).as_deref(), Some(n));
        }
    }

    #[test]
    fn case_twins_get_distinct_case_insensitive_files() {
        let a = encode_component("Base").to_lowercase();
        let b = encode_component("base").to_lowercase();
        assert_ne!(a, b);
    }

    #[test]
    fn non_canonical_components_do_not_decode() {
        assert_eq!(decode_component("~2e"), None);
        assert_eq!(decode_component("A"), None);
        assert_eq!(decode_component("~4"), None);
    }

    #[test]
    fn category_names_are_validated() {
        assert!(CategoryName::new("base").is_ok());
        assert!(CategoryName::new("").is_err());
        assert!(CategoryName::new("../x").is_err());
        assert!(CategoryName::new("a\nb").is_err());
        assert!(CategoryName::new(&"x".repeat(129)).is_err());
        assert!(SessionId::new("rollout-2026-11-29T10:00:00-abc").is_ok());
        assert!(SessionId::new("a\0b").is_err());
    }

    #[test]
    fn statuses_and_ops_round_trip_their_names() {
        for s in [
            CategoryStatus::Ok,
            CategoryStatus::Malformed,
            CategoryStatus::Deleted,
            CategoryStatus::Absent,
        ] {
            assert_eq!(CategoryStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(CategoryStatus::parse("OK"), None);
        for op in [
            VersionOp::Write,
            VersionOp::Merge,
            VersionOp::Append,
            VersionOp::Delete,
            VersionOp::Restore,
            VersionOp::External,
            VersionOp::Resolve,
            VersionOp::Edit,
            VersionOp::Rename,
        ] {
            assert_eq!(VersionOp::parse(op.as_str()), Some(op));
        }
        assert_eq!(VersionOp::parse("move"), None);
    }

    #[test]
    fn expect_parses() {
        assert_eq!(Expect::parse(None).unwrap(), Expect::Any);
        assert_eq!(Expect::parse(Some("absent")).unwrap(), Expect::Absent);
        assert!(Expect::parse(Some("xyz")).is_err());
        let h = content_hash(b"x");
        assert_eq!(Expect::parse(Some(&h)).unwrap(), Expect::Hash(h));
    }
}
