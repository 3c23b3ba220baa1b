//! The configuration: a TOML file, the environment and the command line, resolved once.
//!
//! Every setting has one value and remembers where it came from ([`Source`]), taken in this
//! order: a command-line flag, an environment variable, the config file, the default. The
//! file is `$MEMDIR_CONFIG`, else `$XDG_CONFIG_HOME/memdir/config.toml`, else
//! `~/.config/memdir/config.toml`. It may be absent, unless `MEMDIR_REQUIRE_CONFIG=1` says a
//! managed deployment must not run on defaults (fail closed) or `MEMDIR_CONFIG` names it. A
//! key the file does not know, or a value of the wrong type or out of range, is an error that
//! names the key, the file and the line; so is a bad environment variable, by its name.
//!
//! This module reads the environment it is handed and the one file, and nothing else; it
//! prints nothing and writes nothing. The CLI resolves a [`Config`] once and hands the engine
//! its part ([`Config::settings`]) and the servers theirs, so the engine reads no environment
//! variable for anything configured here.
//!
//! The `[acl]` section becomes the access-control policy ([`memdir_engine::acl::Acl`]); `[[http.tokens]]`
//! map bearer tokens to devices. A token itself is never in the file: each names the
//! environment variable or the file that holds it, read only when a server starts
//! ([`Config::http_tokens`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer};
use serde_json::{Map, Value, json};

use memdir_api::error::{Error, ErrorKind, Result};
use memdir_engine::service::{self, Settings, limits};
use memdir_index::index::AnalyzerConfig;

/// The commented example of every key (`examples/config.toml`, written by `config init`).
pub const EXAMPLE: &str = include_str!("../examples/config.toml");

/// A day in milliseconds: the largest time setting (larger values are surely mistakes, and
/// would overflow instants).
const DAY_MS: u64 = 86_400_000;

/// Largest config file read, in bytes.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Where a setting's value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A command-line flag, e.g. `--dir`.
    Flag(&'static str),
    /// An environment variable, e.g. `MEMDIR_DIR`.
    Env(&'static str),
    /// The config file at this path.
    File(PathBuf),
    /// The built-in default.
    Default,
}

impl Source {
    /// The source as `status`, `doctor` and `config show` report it: `flag --dir`,
    /// `environment MEMDIR_DIR`, `file /path/config.toml` or `default`.
    pub fn label(&self) -> String {
        match self {
            Source::Flag(f) => format!("flag {f}"),
            Source::Env(v) => format!("environment {v}"),
            Source::File(p) => format!("file {}", p.display()),
            Source::Default => "default".to_string(),
        }
    }

    /// The source in a sentence: `set by --dir`, `set by MEMDIR_DIR`, `set in /path`, `the
    /// default`.
    pub fn describe(&self) -> String {
        match self {
            Source::Flag(f) => format!("set by {f}"),
            Source::Env(v) => format!("set by {v}"),
            Source::File(p) => format!("set in {}", p.display()),
            Source::Default => "the default".to_string(),
        }
    }
}

/// One resolved value and its source.
#[derive(Clone, Debug)]
pub struct Setting<T> {
    pub value: T,
    pub source: Source,
}

/// The command-line flags that override the environment and the file (`None`: not given).
#[derive(Clone, Debug, Default)]
pub struct Flags {
    pub dir: Option<PathBuf>,
    pub device: Option<String>,
    pub tools: Option<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub body_limit: Option<usize>,
}

/// The config file's location.
#[derive(Clone, Debug)]
pub struct FileLocation {
    /// `None` when no location can be formed (no `MEMDIR_CONFIG`, `XDG_CONFIG_HOME` or
    /// `HOME`).
    pub path: Option<PathBuf>,
    /// `environment MEMDIR_CONFIG` or `default`.
    pub source: Source,
}

/// The effective configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where the file is (or would be).
    pub file: FileLocation,
    /// Whether it was found and read.
    pub file_found: bool,
    /// `MEMDIR_REQUIRE_CONFIG`: a missing or invalid file is fatal.
    pub required: bool,
    /// The memory directory; `None` when no default can be formed (no `HOME`).
    pub dir: Option<Setting<PathBuf>>,
    /// This device's name, the actor of every write.
    pub device: Setting<String>,
    pub lock_timeout_ms: Setting<u64>,
    pub scan_interval_ms: Setting<u64>,
    /// The search analyzer (`english`, `none`, `german-nostop`, ...).
    pub analyzer: Setting<String>,
    /// Retention of a log created without `max_entries`.
    pub log_max_entries: Setting<u64>,
    /// The MCP tool profile (`default` or `full`), on stdio and over HTTP.
    pub tools: Setting<String>,
    /// `[sync] conflict_strategy`: how a sync resolves concurrent versions of a category.
    pub conflict_strategy: Setting<String>,
    /// `[sync] remote`: the remote `sync` uses when none is given (empty: `origin`).
    pub sync_remote: Setting<String>,
    /// `[sync] token_env`: the variable holding an HTTP remote's token (empty: none).
    pub sync_token_env: Setting<String>,
    /// `[sync] interval_ms`: how often `memdir serve` syncs on its own (0: never).
    pub sync_interval_ms: Setting<u64>,
    pub http: HttpConfig,
    /// The access-control policy: `None` without an `[acl]` section (everything allowed).
    pub acl: Option<std::sync::Arc<memdir_engine::acl::Acl>>,
    pub redaction: RedactionConfig,
    /// `[embeddings]`: `None` without the section (keyword search only).
    pub embeddings: Option<memdir_index::embed::Spec>,
    /// The model cache: `$XDG_CACHE_HOME/memdir/models`, else `~/.cache/memdir/models`.
    pub model_cache: Option<PathBuf>,
}

/// What is redacted before anything is stored (`[redaction]`).
#[derive(Clone, Debug)]
pub struct RedactionConfig {
    pub enabled: Setting<bool>,
    /// Extra patterns: (kind, regular expression).
    pub patterns: Setting<Vec<(String, String)>>,
    /// Exceptions: a candidate one of these matches is kept.
    pub allow: Setting<Vec<String>>,
}

/// The settings of `memdir serve --transport http|mcp-http`.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    pub host: Setting<String>,
    /// `None`: 8787 for REST, 8000 for MCP over HTTP.
    pub port: Setting<Option<u16>>,
    pub body_limit: Setting<usize>,
    pub header_timeout_ms: Setting<u64>,
    pub idle_timeout_ms: Setting<u64>,
    pub body_timeout_ms: Setting<u64>,
    pub max_connections: Setting<u64>,
    pub max_sessions: Setting<u64>,
    pub session_idle_ms: Setting<u64>,
    /// `[[http.tokens]]`: per-device tokens (where each is kept, never the token).
    pub tokens: Vec<TokenEntry>,
}

// ---------------------------------------------------------------------------------------------
// The file
// ---------------------------------------------------------------------------------------------

/// The file as written. Every field is optional; every value is checked while it is read, so
/// an error carries the key's path and its place in the file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    dir: Option<FileDir>,
    device: Option<Device>,
    lock_timeout_ms: Option<Ranged<0, DAY_MS>>,
    scan_interval_ms: Option<Ranged<0, DAY_MS>>,
    #[serde(default)]
    search: FileSearch,
    #[serde(default)]
    logs: FileLogs,
    #[serde(default)]
    mcp: FileMcp,
    #[serde(default)]
    http: FileHttp,
    #[serde(default)]
    sync: FileSync,
    #[serde(default)]
    redaction: FileRedaction,
    /// Access control.
    acl: Option<FileAcl>,
    /// The embeddings provider for semantic and hybrid search.
    embeddings: Option<FileEmbeddings>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileEmbeddings {
    provider: EmbedProvider,
    url: Option<String>,
    model: Option<String>,
    api_key_env: Option<EnvName>,
    dimensions: Option<Ranged<1, 65_536>>,
    batch_size: Option<Ranged<1, 4096>>,
    timeout_ms: Option<Ranged<1, DAY_MS>>,
    retries: Option<Ranged<0, 20>>,
    model_dir: Option<FileDir>,
    max_per_search: Option<Ranged<0, 1_000_000>>,
    query_prefix: Option<String>,
    document_prefix: Option<String>,
    query_input_type: Option<String>,
    document_input_type: Option<String>,
}

#[derive(Debug)]
struct EmbedProvider(String);

impl<'de> Deserialize<'de> for EmbedProvider {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        checked(d, |s| match s {
            "openai" | "local" => Ok(EmbedProvider(s.to_string())),
            _ => Err(format!("{s:?} is not a provider: use openai or local")),
        })
    }
}

/// Default texts per provider call.
pub const EMBED_BATCH: usize = 32;
/// Default most texts one search embeds before answering.
pub const EMBED_PER_SEARCH: usize = 256;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAcl {
    #[serde(default)]
    admin_devices: Vec<Device>,
    #[serde(default)]
    device_categories: Vec<Device>,
    #[serde(default)]
    rules: Vec<FileRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRule {
    device: Pattern,
    read: Option<Vec<Pattern>>,
    #[serde(default)]
    write: Vec<Pattern>,
    ingest: Option<Vec<Pattern>>,
    #[serde(default)]
    delete: bool,
}

/// A name or glob of the access-control list.
#[derive(Debug)]
struct Pattern(String);

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        checked(d, |s| {
            memdir_engine::acl::check_pattern(s).map(|()| Pattern(s.to_string()))
        })
    }
}

/// `[[http.tokens]]`: a device and where its token is kept.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToken {
    device: Device,
    token_env: Option<EnvName>,
    token_file: Option<FileDir>,
}

/// The name of an environment variable.
#[derive(Debug)]
struct EnvName(String);

impl<'de> Deserialize<'de> for EnvName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        checked(d, |s| {
            let ok = !s.is_empty()
                && !s.starts_with(|c: char| c.is_ascii_digit())
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if ok {
                Ok(EnvName(s.to_string()))
            } else {
                Err(format!(
                    "{s:?} is not an environment variable name (letters, digits and _)"
                ))
            }
        })
    }
}

/// Where a device's HTTP token is kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenSource {
    Env(String),
    File(PathBuf),
}

/// A `[[http.tokens]]` entry.
#[derive(Clone, Debug)]
pub struct TokenEntry {
    pub device: String,
    pub source: TokenSource,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSearch {
    analyzer: Option<Analyzer>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLogs {
    max_entries: Option<Ranged<1, { limits::MAX_LOG_ENTRIES }>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSync {
    conflict_strategy: Option<ConflictStrategy>,
    remote: Option<SyncRemote>,
    token_env: Option<SyncTokenEnv>,
    interval_ms: Option<Ranged<0, DAY_MS>>,
}

/// `[sync] token_env`: an environment variable's name, or empty for none.
#[derive(Debug)]
struct SyncTokenEnv(String);

impl<'de> Deserialize<'de> for SyncTokenEnv {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        checked(d, |s| {
            if s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                Ok(SyncTokenEnv(s.to_string()))
            } else {
                Err(format!("{s:?} is not an environment variable's name"))
            }
        })
    }
}

/// `[sync] remote`: a git remote's name or an HTTP server's URL.
#[derive(Debug)]
struct SyncRemote(String);

impl<'de> Deserialize<'de> for SyncRemote {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        checked(d, |s| {
            let s = s.trim();
            let url = s.starts_with("http://") || s.starts_with("https://");
            let name = !s.is_empty()
                && !s.starts_with('-')
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if url || name || s.is_empty() {
                Ok(SyncRemote(s.to_string()))
            } else {
                Err(format!(
                    "{s:?} is neither a git remote name nor an http:// or https:// URL"
                ))
            }
        })
    }
}

#[derive(Debug)]
struct ConflictStrategy(String);

impl<'de> Deserialize<'de> for ConflictStrategy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        checked(d, |s| {
            let s = s.trim();
            if memdir_engine::sync::merge::Strategy::CONFIGURABLE.contains(&s) {
                Ok(ConflictStrategy(s.to_string()))
            } else {
                Err(format!(
                    "unknown conflict strategy {s:?}; one of: {} (local_wins and remote_wins are flags of one sync run)",
                    memdir_engine::sync::merge::Strategy::CONFIGURABLE.join(", ")
                ))
            }
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMcp {
    tools: Option<Tools>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHttp {
    host: Option<Host>,
    port: Option<u16>,
    body_limit: Option<Ranged<1, { 1 << 40 }>>,
    header_timeout_ms: Option<Ranged<1, DAY_MS>>,
    idle_timeout_ms: Option<Ranged<1, DAY_MS>>,
    body_timeout_ms: Option<Ranged<1, DAY_MS>>,
    max_connections: Option<Ranged<1, DAY_MS>>,
    max_sessions: Option<Ranged<1, DAY_MS>>,
    session_idle_ms: Option<Ranged<1, DAY_MS>>,
    /// Per-device tokens.
    #[serde(default)]
    tokens: Vec<FileToken>,
}

/// `[redaction]`: the switch, extra patterns and exceptions.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRedaction {
    enabled: Option<bool>,
    allow: Option<Vec<Regex>>,
    patterns: Option<Vec<FilePattern>>,
}

/// `[[redaction.patterns]]`: a kind name and its regular expression.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePattern {
    kind: Kind,
    pattern: Regex,
}

/// A redaction kind name (`a-z 0-9 _`).
#[derive(Debug)]
struct Kind(String);

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        checked(d, |s| {
            memdir_engine::redact::check_kind(s).map(|_| Kind(s.to_string()))
        })
    }
}

/// A regular expression that compiles.
#[derive(Debug)]
struct Regex(String);

impl<'de> Deserialize<'de> for Regex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        checked(d, |s| {
            memdir_engine::redact::check_pattern(s)
                .map(|_| Regex(s.to_string()))
                .map_err(|e| format!("not a regular expression: {e}"))
        })
    }
}

/// Deserializes a string and checks it with `check`, which says what is wrong.
fn checked<'de, D: Deserializer<'de>, T>(
    d: D,
    check: impl FnOnce(&str) -> std::result::Result<T, String>,
) -> std::result::Result<T, D::Error> {
    let s = String::deserialize(d)?;
    check(&s).map_err(de::Error::custom)
}

/// An integer from `LO` to `HI`.
#[derive(Debug, Clone, Copy)]
struct Ranged<const LO: u64, const HI: u64>(u64);

impl<'de, const LO: u64, const HI: u64> Deserialize<'de> for Ranged<LO, HI> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let n = u64::deserialize(d)?;
        if (LO..=HI).contains(&n) {
            Ok(Ranged(n))
        } else {
            Err(de::Error::custom(format!(
                "{n} is out of range: it must be from {LO} to {HI}"
            )))
        }
    }
}

/// A memory directory in the file: absolute, or under the home directory (`~/...`).
#[derive(Debug)]
struct FileDir(String);

impl<'de> Deserialize<'de> for FileDir {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        checked(d, |s| {
            if s == "~" || s.starts_with("~/") || Path::new(s).is_absolute() {
                Ok(FileDir(s.to_string()))
            } else {
                Err(format!(
                    "{s:?} is not an absolute path; write it in full or start it with ~/ (a relative path would depend on where memdir is started)"
                ))
            }
        })
    }
}

#[derive(Debug)]
struct Device(String);

impl<'de> Deserialize<'de> for Device {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        checked(d, |s| check_device(s).map(Device))
    }
}

#[derive(Debug)]
struct Analyzer(String);

impl<'de> Deserialize<'de> for Analyzer {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        checked(d, |s| {
            AnalyzerConfig::parse(s)
                .map(|_| Analyzer(s.trim().to_lowercase()))
                .map_err(|e| with_hints(&e))
        })
    }
}

#[derive(Debug)]
struct Tools(String);

impl<'de> Deserialize<'de> for Tools {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        checked(d, |s| {
            memdir_engine::ops::Profile::parse(s)
                .map(|_| Tools(s.to_string()))
                .map_err(|e| e.message)
        })
    }
}

#[derive(Debug)]
struct Host(String);

impl<'de> Deserialize<'de> for Host {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        checked(d, |s| check_host(s).map(|_| Host(s.to_string())))
    }
}

fn with_hints(e: &Error) -> String {
    match e.hints.first() {
        Some(h) => format!("{}; {h}", e.message),
        None => e.message.clone(),
    }
}

fn check_device(s: &str) -> std::result::Result<String, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("the device name is empty".to_string());
    }
    if t.chars().any(char::is_control) {
        return Err(format!("the device name {t:?} contains control characters"));
    }
    Ok(t.to_string())
}

fn check_host(s: &str) -> std::result::Result<(), String> {
    let bare = s.trim_start_matches('[').trim_end_matches(']');
    if s.eq_ignore_ascii_case("localhost") || bare.parse::<std::net::IpAddr>().is_ok() {
        Ok(())
    } else {
        Err(format!("{s:?} is not an IP address or localhost"))
    }
}

/// Line and column (from 1) of byte `offset` in `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The error for a file that does not parse or holds a bad value: names the key (when known),
/// the file, the line and the column.
fn file_error(path: &Path, text: &str, key: Option<String>, e: &toml::de::Error) -> Error {
    let place = e.span().map(|s| position(text, s.start));
    let mut message = match &key {
        Some(k) => format!("config key `{k}` in {}", path.display()),
        None => format!("config file {}", path.display()),
    };
    if let Some((line, column)) = place {
        message.push_str(&format!(" (line {line}, column {column})"));
    }
    message.push_str(": ");
    message.push_str(e.message().trim());
    let mut err = Error::new(ErrorKind::Invalid, message)
        .detail("file", Value::from(path.display().to_string()))
        .hint("examples/config.toml documents every key; `memdir config show` prints the effective configuration");
    if let Some(k) = key {
        err = err.field(&k).detail("key", Value::from(k));
    }
    if let Some((line, column)) = place {
        err = err
            .detail("line", Value::from(line))
            .detail("column", Value::from(column));
    }
    err
}

/// Parses the file's text.
fn parse(path: &Path, text: &str) -> Result<FileConfig> {
    let de = toml::de::Deserializer::parse(text).map_err(|e| file_error(path, text, None, &e))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let at = e.path().to_string();
        let at = (at != "." && !at.is_empty()).then_some(at);
        let inner = e.inner();
        // serde names an unknown key in its message; the path may stop at its table.
        let unknown = inner
            .message()
            .strip_prefix("unknown field `")
            .and_then(|m| m.split('`').next());
        let key = match (at, unknown) {
            (Some(p), Some(u)) if p == u || p.ends_with(&format!(".{u}")) => Some(p),
            (Some(p), Some(u)) => Some(format!("{p}.{u}")),
            (None, Some(u)) => Some(u.to_string()),
            (p, None) => p,
        };
        file_error(path, text, key, inner)
    })
}

/// Reads the file at `path`: `None` if there is none. A link is followed (a dotfile manager's
/// link is the user's choice), but only a regular file is read: the file is opened without
/// blocking and its type checked on the open descriptor, so a FIFO or a device named by
/// `MEMDIR_CONFIG` is refused at once instead of holding every command (and an agent's hook)
/// up.
fn read_file(path: &Path) -> Result<Option<String>> {
    let unreadable = |why: String| {
        Error::new(
            ErrorKind::Invalid,
            format!("config file {} cannot be read: {why}", path.display()),
        )
        .detail("file", Value::from(path.display().to_string()))
    };
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        open.custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    let f = match open.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(e.to_string())),
    };
    match f.metadata() {
        Ok(m) if !m.is_file() => return Err(unreadable("it is not a regular file".into())),
        Err(e) => return Err(unreadable(e.to_string())),
        Ok(_) => {}
    }
    let mut buf = Vec::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| unreadable(e.to_string()))?;
    if buf.len() as u64 > MAX_FILE_BYTES {
        return Err(unreadable(format!(
            "it is larger than {MAX_FILE_BYTES} bytes"
        )));
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| unreadable("it is not UTF-8 text".into()))
}

// ---------------------------------------------------------------------------------------------
// Resolution
// ---------------------------------------------------------------------------------------------

pub use memdir_store::env::{Env, config_home, data_home};

/// The process environment (an empty value counts as unset).
pub fn process_env(name: &str) -> Option<String> {
    memdir_store::env::process(name)
}

fn var(env: Env, name: &str) -> Option<String> {
    env(name).filter(|v| !v.is_empty())
}

/// The config file's location.
pub fn file_location(env: Env) -> FileLocation {
    if let Some(p) = var(env, "MEMDIR_CONFIG") {
        return FileLocation {
            path: Some(PathBuf::from(p)),
            source: Source::Env("MEMDIR_CONFIG"),
        };
    }
    let path = match var(env, "XDG_CONFIG_HOME").filter(|x| Path::new(x).is_absolute()) {
        Some(x) => Some(PathBuf::from(x).join("memdir/config.toml")),
        None => var(env, "HOME").map(|h| PathBuf::from(h).join(".config/memdir/config.toml")),
    };
    FileLocation {
        path,
        source: Source::Default,
    }
}

/// Whether `MEMDIR_REQUIRE_CONFIG` asks for a config file.
pub fn required(env: Env) -> Result<bool> {
    match var(env, "MEMDIR_REQUIRE_CONFIG").as_deref() {
        None | Some("0") | Some("false") | Some("no") => Ok(false),
        Some("1") | Some("true") | Some("yes") => Ok(true),
        Some(other) => Err(Error::invalid(
            "MEMDIR_REQUIRE_CONFIG",
            format!("MEMDIR_REQUIRE_CONFIG must be 1 or 0, got {other:?}"),
        )),
    }
}

/// An integer environment variable from `lo` to `hi`.
fn env_int(env: Env, name: &'static str, lo: u64, hi: u64) -> Result<Option<u64>> {
    let Some(v) = var(env, name) else {
        return Ok(None);
    };
    match v.trim().parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
        _ => Err(Error::invalid(
            name,
            format!("{name} must be an integer from {lo} to {hi}, got {v:?}"),
        )),
    }
}

/// The first of flag, environment, file and default that is set.
fn pick<T>(
    flag: Option<(T, &'static str)>,
    env: Option<(T, &'static str)>,
    file: Option<T>,
    path: &Path,
    default: T,
) -> Setting<T> {
    if let Some((value, f)) = flag {
        return Setting {
            value,
            source: Source::Flag(f),
        };
    }
    if let Some((value, v)) = env {
        return Setting {
            value,
            source: Source::Env(v),
        };
    }
    if let Some(value) = file {
        return Setting {
            value,
            source: Source::File(path.to_path_buf()),
        };
    }
    Setting {
        value: default,
        source: Source::Default,
    }
}

impl Config {
    /// Resolves the configuration from `flags`, the environment `env` and the config file.
    /// Reading the file is this function's only I/O.
    pub fn load(flags: &Flags, env: Env) -> Result<Config> {
        let required = required(env)?;
        let file = file_location(env);
        let text = match &file.path {
            Some(p) => read_file(p)?,
            None => None,
        };
        let parsed = match (&file.path, &text) {
            (Some(p), Some(t)) => parse(p, t)?,
            _ => FileConfig::default(),
        };
        if text.is_none() && (required || file.source != Source::Default) {
            let shown = file
                .path
                .as_ref()
                .map_or("(no location: HOME is not set)".to_string(), |p| {
                    p.display().to_string()
                });
            let why = if file.source != Source::Default {
                "MEMDIR_CONFIG names it"
            } else {
                "MEMDIR_REQUIRE_CONFIG=1 requires it"
            };
            return Err(Error::new(
                ErrorKind::Invalid,
                format!("no config file at {shown}, and {why}: nothing was done"),
            )
            .detail("file", Value::from(shown))
            .hint("create it (`memdir config init` writes a commented example), or point MEMDIR_CONFIG at the right file"));
        }
        Config::resolve(flags, env, file, text.is_some(), required, parsed)
    }

    fn resolve(
        flags: &Flags,
        env: Env,
        file: FileLocation,
        file_found: bool,
        required: bool,
        f: FileConfig,
    ) -> Result<Config> {
        let path = file.path.clone().unwrap_or_default();
        let home = var(env, "HOME");
        // Settings are checked in this order, so that of several bad ones the same is
        // reported first.
        let dir = resolve_dir(flags, env, f.dir, home.as_deref(), &path)?;
        let device = resolve_device(flags, env, f.device, &path)?;
        let analyzer = pick(
            None,
            env_analyzer(env)?,
            f.search.analyzer.map(|a| a.0),
            &path,
            "english".to_string(),
        );
        let tools = resolve_tools(flags, env, f.mcp.tools, &path)?;
        let acl = f.acl.map(acl_policy);
        let mut h = f.http;
        let tokens = token_entries(std::mem::take(&mut h.tokens), home.as_deref(), &path)?;
        let embeddings = match f.embeddings {
            Some(e) => Some(embeddings_spec(e, env, home.as_deref(), &path)?),
            None => None,
        };
        let lock_timeout_ms = pick(
            None,
            env_setting(env, "MEMDIR_LOCK_TIMEOUT_MS", 0, DAY_MS)?,
            f.lock_timeout_ms.map(|r| r.0),
            &path,
            memdir_store::lock::DEFAULT_LOCK_TIMEOUT.as_millis() as u64,
        );
        let scan_interval_ms = pick(
            None,
            env_setting(env, "MEMDIR_SCAN_INTERVAL_MS", 0, DAY_MS)?,
            f.scan_interval_ms.map(|r| r.0),
            &path,
            service::DEFAULT_SCAN_INTERVAL.as_millis() as u64,
        );
        let http = http_config(flags, env, h, tokens, &path)?;
        Ok(Config {
            embeddings,
            model_cache: memdir_index::embed::cache_dir(
                var(env, "XDG_CACHE_HOME").as_deref(),
                home.as_deref(),
            ),
            acl,
            redaction: redaction_config(f.redaction, &path),
            dir,
            device,
            lock_timeout_ms,
            scan_interval_ms,
            analyzer,
            log_max_entries: pick(
                None,
                None,
                f.logs.max_entries.map(|r| r.0),
                &path,
                limits::DEFAULT_LOG_ENTRIES,
            ),
            tools,
            conflict_strategy: pick(
                None,
                None,
                f.sync.conflict_strategy.map(|c| c.0),
                &path,
                "last_write_wins".to_string(),
            ),
            sync_remote: pick(None, None, f.sync.remote.map(|r| r.0), &path, String::new()),
            sync_token_env: pick(
                None,
                None,
                f.sync.token_env.map(|e| e.0),
                &path,
                String::new(),
            ),
            sync_interval_ms: pick(None, None, f.sync.interval_ms.map(|r| r.0), &path, 0),
            http,
            file,
            file_found,
            required,
        })
    }

    /// The memory directory, or the error that says how to name one.
    pub fn dir(&self) -> Result<&Setting<PathBuf>> {
        self.dir.as_ref().ok_or_else(|| {
            Error::invalid(
                "dir",
                "no memory directory: set --dir, MEMDIR_DIR, `dir` in the config file, or HOME",
            )
        })
    }

    /// This device acting under the access-control policy (the CLI and MCP over stdio).
    pub fn caller(&self) -> memdir_engine::acl::Caller {
        memdir_engine::acl::Caller::new(self.device.value.clone(), self.acl.clone())
    }

    /// The per-device HTTP tokens, read from where `[[http.tokens]]` says each is kept:
    /// `(token, device)`. A variable that is unset, a file that cannot be read or that others
    /// may read, and a token given to two devices are errors naming the key.
    pub fn http_tokens(&self, env: Env) -> Result<Vec<(String, String)>> {
        let path = self.file.path.clone().unwrap_or_default();
        let mut out: Vec<(String, String)> = Vec::new();
        for (i, t) in self.http.tokens.iter().enumerate() {
            let key = format!("http.tokens[{i}]");
            let err = |why: String| {
                Error::invalid(
                    &key,
                    format!(
                        "config key `{key}` (device {:?}) in {}: {why}",
                        t.device,
                        path.display()
                    ),
                )
                .detail("key", Value::from(key.clone()))
                .detail("file", Value::from(path.display().to_string()))
            };
            let token = match &t.source {
                TokenSource::Env(name) => var(env, name)
                    .ok_or_else(|| err(format!("the environment variable {name} is not set")))?,
                TokenSource::File(p) => read_secret(p).map_err(err)?,
            };
            if let Some((_, other)) = out.iter().find(|(tok, _)| tok == &token) {
                return Err(err(format!(
                    "its token is also the token of device {other:?}: each device needs its own"
                )));
            }
            out.push((token, t.device.clone()));
        }
        Ok(out)
    }

    /// What the engine takes from the configuration.
    pub fn settings(&self) -> Result<Settings> {
        Ok(Settings {
            device: self.device.value.clone(),
            dir_source: self
                .dir
                .as_ref()
                .map_or_else(|| "none".to_string(), |d| d.source.label()),
            lock_timeout: Duration::from_millis(self.lock_timeout_ms.value),
            scan_interval: Duration::from_millis(self.scan_interval_ms.value),
            analyzer: AnalyzerConfig::parse(&self.analyzer.value)?,
            log_max_entries: self.log_max_entries.value,
            conflict_strategy: self.conflict_strategy.value.clone(),
            sync_remote: self.sync_remote.value.clone(),
            sync_token_env: self.sync_token_env.value.clone(),
            sync_interval: Duration::from_millis(self.sync_interval_ms.value),
            redaction: std::sync::Arc::new(
                memdir_engine::redact::Redactor::new(
                    self.redaction.enabled.value,
                    &self.redaction.patterns.value,
                    &self.redaction.allow.value,
                )
                .map_err(|e| Error::invalid("redaction", e))?,
            ),
            embeddings: self.embeddings.clone(),
            background_embedding: false,
            index_tail_in_memory: false,
            model_cache: self.model_cache.clone(),
        })
    }

    /// The effective configuration as `config show` prints it: every key of the file with its
    /// value and source.
    pub fn show(&self) -> Value {
        fn entry<T: serde::Serialize>(s: &Setting<T>) -> Value {
            json!({"value": s.value, "source": s.source.label()})
        }
        let mut settings = Map::new();
        settings.insert(
            "dir".into(),
            match &self.dir {
                Some(d) => {
                    json!({"value": d.value.display().to_string(), "source": d.source.label()})
                }
                None => json!({"value": null, "source": "none (HOME is not set)"}),
            },
        );
        let h = &self.http;
        for (key, v) in [
            ("device", entry(&self.device)),
            ("lock_timeout_ms", entry(&self.lock_timeout_ms)),
            ("scan_interval_ms", entry(&self.scan_interval_ms)),
            ("search.analyzer", entry(&self.analyzer)),
            ("logs.max_entries", entry(&self.log_max_entries)),
            ("mcp.tools", entry(&self.tools)),
            ("sync.conflict_strategy", entry(&self.conflict_strategy)),
            ("sync.remote", entry(&self.sync_remote)),
            ("sync.token_env", entry(&self.sync_token_env)),
            ("sync.interval_ms", entry(&self.sync_interval_ms)),
            ("http.host", entry(&h.host)),
            ("http.port", entry(&h.port)),
            ("http.body_limit", entry(&h.body_limit)),
            ("http.header_timeout_ms", entry(&h.header_timeout_ms)),
            ("http.idle_timeout_ms", entry(&h.idle_timeout_ms)),
            ("http.body_timeout_ms", entry(&h.body_timeout_ms)),
            ("http.max_connections", entry(&h.max_connections)),
            ("http.max_sessions", entry(&h.max_sessions)),
            ("http.session_idle_ms", entry(&h.session_idle_ms)),
            ("redaction.enabled", entry(&self.redaction.enabled)),
        ] {
            settings.insert(key.into(), v);
        }
        let acl = match &self.acl {
            None => {
                json!({"enabled": false, "summary": "no [acl] section: every device may do everything"})
            }
            Some(a) => json!({
                "enabled": true,
                "admin_devices": a.admin_devices,
                "device_categories": a.device_categories,
                "rules": a.rules.iter().map(|r| json!({
                    "device": r.device,
                    "read": r.read.clone().unwrap_or_else(|| vec!["*".into()]),
                    "write": r.write,
                    "ingest": r.ingest,
                    "delete": r.delete,
                })).collect::<Vec<_>>(),
                "this_device": self.caller().describe(),
            }),
        };
        let tokens: Vec<Value> = self
            .http
            .tokens
            .iter()
            .map(|t| match &t.source {
                TokenSource::Env(v) => json!({"device": t.device, "token_env": v}),
                TokenSource::File(p) => {
                    json!({"device": t.device, "token_file": p.display().to_string()})
                }
            })
            .collect();
        let r = &self.redaction;
        settings.insert(
            "redaction.patterns".into(),
            json!({
                "value": r.patterns.value.iter().map(|(k, p)| json!({"kind": k, "pattern": p})).collect::<Vec<_>>(),
                "source": r.patterns.source.label(),
            }),
        );
        settings.insert("redaction.allow".into(), entry(&r.allow));
        json!({
            "file": {
                "path": self.file.path.as_ref().map(|p| p.display().to_string()),
                "source": self.file.source.label(),
                "found": self.file_found,
                "required": self.required,
            },
            "settings": settings,
            "acl": acl,
            "http_tokens": tokens,
            "embeddings": self.embeddings.as_ref().map(memdir_index::embed::Spec::shown),
        })
    }
}

/// The memory directory: `--dir`, `MEMDIR_DIR`, `dir` in the file, else
/// `$XDG_DATA_HOME/memdir` or `~/.local/share/memdir`; `None` when no default can be formed.
/// The file's `dir` is expanded (and so checked) even when a flag or variable wins.
fn resolve_dir(
    flags: &Flags,
    env: Env,
    file_dir: Option<FileDir>,
    home: Option<&str>,
    path: &Path,
) -> Result<Option<Setting<PathBuf>>> {
    let file_dir = match file_dir {
        Some(FileDir(d)) => Some(expand_home(&d, home, path)?),
        None => None,
    };
    let default_dir = match var(env, "XDG_DATA_HOME").filter(|x| Path::new(x).is_absolute()) {
        Some(x) => Some(PathBuf::from(x).join("memdir")),
        None => home.map(|h| PathBuf::from(h).join(".local/share/memdir")),
    };
    let dir = if let Some(d) = &flags.dir {
        Some(Setting {
            value: d.clone(),
            source: Source::Flag("--dir"),
        })
    } else if let Some(d) = var(env, "MEMDIR_DIR") {
        Some(Setting {
            value: PathBuf::from(d),
            source: Source::Env("MEMDIR_DIR"),
        })
    } else if let Some(d) = file_dir {
        Some(Setting {
            value: d,
            source: Source::File(path.to_path_buf()),
        })
    } else {
        default_dir.map(|d| Setting {
            value: d,
            source: Source::Default,
        })
    };
    Ok(dir)
}

/// This device's name: `--device`, `MEMDIR_DEVICE`, `device` in the file, else the host's
/// name. A bad flag or variable is an error that names it.
fn resolve_device(
    flags: &Flags,
    env: Env,
    file_device: Option<Device>,
    path: &Path,
) -> Result<Setting<String>> {
    let flag_device = match &flags.device {
        Some(d) => Some((
            check_device(d).map_err(|m| Error::invalid("device", format!("--device: {m}")))?,
            "--device",
        )),
        None => None,
    };
    let env_device = match var(env, "MEMDIR_DEVICE").filter(|d| !d.trim().is_empty()) {
        Some(d) => Some((
            check_device(&d)
                .map_err(|m| Error::invalid("MEMDIR_DEVICE", format!("MEMDIR_DEVICE: {m}")))?,
            "MEMDIR_DEVICE",
        )),
        None => None,
    };
    let device = pick(
        flag_device,
        env_device,
        file_device.map(|d| d.0),
        path,
        String::new(),
    );
    Ok(if device.source == Source::Default {
        Setting {
            value: service::host_name(),
            source: Source::Default,
        }
    } else {
        device
    })
}

/// `MEMDIR_ANALYZER`, checked and lowercased, as [`pick`] takes it; `None` when unset or
/// blank.
fn env_analyzer(env: Env) -> Result<Option<(String, &'static str)>> {
    match var(env, "MEMDIR_ANALYZER").filter(|a| !a.trim().is_empty()) {
        Some(a) => {
            AnalyzerConfig::parse(&a).map_err(|e| {
                Error::invalid(
                    "MEMDIR_ANALYZER",
                    format!("MEMDIR_ANALYZER: {}", with_hints(&e)),
                )
            })?;
            Ok(Some((a.trim().to_lowercase(), "MEMDIR_ANALYZER")))
        }
        None => Ok(None),
    }
}

/// The MCP tool profile: `--tools`, `MEMDIR_TOOLS`, `[mcp] tools`, else `default`. The
/// variable and the flag are both checked, the variable first, even when the flag wins.
fn resolve_tools(
    flags: &Flags,
    env: Env,
    file_tools: Option<Tools>,
    path: &Path,
) -> Result<Setting<String>> {
    let env_tools = match var(env, "MEMDIR_TOOLS") {
        Some(t) => {
            memdir_engine::ops::Profile::parse(&t).map_err(|e| {
                Error::invalid("MEMDIR_TOOLS", format!("MEMDIR_TOOLS: {}", e.message))
            })?;
            Some((t, "MEMDIR_TOOLS"))
        }
        None => None,
    };
    let flag_tools = match &flags.tools {
        Some(t) => {
            memdir_engine::ops::Profile::parse(t)?;
            Some((t.clone(), "--tools"))
        }
        None => None,
    };
    Ok(pick(
        flag_tools,
        env_tools,
        file_tools.map(|t| t.0),
        path,
        "default".to_string(),
    ))
}

/// The `[acl]` section as the engine's access-control policy.
fn acl_policy(a: FileAcl) -> std::sync::Arc<memdir_engine::acl::Acl> {
    std::sync::Arc::new(memdir_engine::acl::Acl {
        admin_devices: a.admin_devices.into_iter().map(|d| d.0).collect(),
        device_categories: a.device_categories.into_iter().map(|d| d.0).collect(),
        rules: a
            .rules
            .into_iter()
            .map(|r| memdir_engine::acl::Rule {
                device: r.device.0,
                read: r.read.map(|v| v.into_iter().map(|p| p.0).collect()),
                write: r.write.into_iter().map(|p| p.0).collect(),
                ingest: r.ingest.map(|v| v.into_iter().map(|p| p.0).collect()),
                delete: r.delete,
            })
            .collect(),
    })
}

/// `[[http.tokens]]` as entries: each names exactly one of `token_env` and `token_file`, and
/// neither is read here (the tokens are read when a server starts).
fn token_entries(
    tokens: Vec<FileToken>,
    home: Option<&str>,
    path: &Path,
) -> Result<Vec<TokenEntry>> {
    let mut entries = Vec::new();
    for (i, t) in tokens.into_iter().enumerate() {
        let key = format!("http.tokens[{i}]");
        let source = match (t.token_env, t.token_file) {
            (Some(e), None) => TokenSource::Env(e.0),
            (None, Some(FileDir(p))) => TokenSource::File(expand_home(&p, home, path)?),
            (a, _) => {
                return Err(Error::invalid(
                    &key,
                    format!(
                        "config key `{key}` in {}: give exactly one of token_env and token_file, {}",
                        path.display(),
                        if a.is_some() { "not both" } else { "not neither" }
                    ),
                )
                .detail("key", Value::from(key.clone()))
                .detail("file", Value::from(path.display().to_string()))
                .hint("the token itself never goes in the config file: name the environment variable or the file that holds it"));
            }
        };
        entries.push(TokenEntry {
            device: t.device.0,
            source,
        });
    }
    Ok(entries)
}

/// `[redaction]`, which only the file sets: on by default, with no extra patterns or
/// exceptions.
fn redaction_config(r: FileRedaction, path: &Path) -> RedactionConfig {
    RedactionConfig {
        enabled: pick(None, None, r.enabled, path, true),
        patterns: pick(
            None,
            None,
            r.patterns
                .map(|v| v.into_iter().map(|p| (p.kind.0, p.pattern.0)).collect()),
            path,
            Vec::new(),
        ),
        allow: pick(
            None,
            None,
            r.allow.map(|v| v.into_iter().map(|p| p.0).collect()),
            path,
            Vec::new(),
        ),
    }
}

/// An integer environment variable from `lo` to `hi`, with its name, as [`pick`] takes it.
fn env_setting(
    env: Env,
    name: &'static str,
    lo: u64,
    hi: u64,
) -> Result<Option<(u64, &'static str)>> {
    Ok(env_int(env, name, lo, hi)?.map(|n| (n, name)))
}

/// The `[http]` settings of the servers; `tokens` are its `[[http.tokens]]`, already resolved.
fn http_config(
    flags: &Flags,
    env: Env,
    h: FileHttp,
    tokens: Vec<TokenEntry>,
    path: &Path,
) -> Result<HttpConfig> {
    Ok(HttpConfig {
        host: pick(
            flags.host.clone().map(|x| (x, "--host")),
            None,
            h.host.map(|x| x.0),
            path,
            "127.0.0.1".to_string(),
        ),
        port: pick(
            flags.port.map(|p| (Some(p), "--port")),
            None,
            h.port.map(Some),
            path,
            None,
        ),
        body_limit: pick(
            flags.body_limit.map(|b| (b, "--body-limit")),
            None,
            h.body_limit.map(|r| r.0 as usize),
            path,
            http_defaults::BODY_LIMIT,
        ),
        header_timeout_ms: pick(
            None,
            env_setting(env, "MEMDIR_HTTP_HEADER_TIMEOUT_MS", 1, DAY_MS)?,
            h.header_timeout_ms.map(|r| r.0),
            path,
            http_defaults::HEADER_TIMEOUT_MS,
        ),
        idle_timeout_ms: pick(
            None,
            env_setting(env, "MEMDIR_HTTP_IDLE_TIMEOUT_MS", 1, DAY_MS)?,
            h.idle_timeout_ms.map(|r| r.0),
            path,
            http_defaults::IDLE_TIMEOUT_MS,
        ),
        body_timeout_ms: pick(
            None,
            env_setting(env, "MEMDIR_HTTP_BODY_TIMEOUT_MS", 1, DAY_MS)?,
            h.body_timeout_ms.map(|r| r.0),
            path,
            http_defaults::BODY_TIMEOUT_MS,
        ),
        max_connections: pick(
            None,
            env_setting(env, "MEMDIR_HTTP_MAX_CONNECTIONS", 1, DAY_MS)?,
            h.max_connections.map(|r| r.0),
            path,
            http_defaults::MAX_CONNECTIONS,
        ),
        max_sessions: pick(
            None,
            env_setting(env, "MEMDIR_HTTP_MAX_SESSIONS", 1, DAY_MS)?,
            h.max_sessions.map(|r| r.0),
            path,
            http_defaults::MAX_SESSIONS,
        ),
        session_idle_ms: pick(
            None,
            env_setting(env, "MEMDIR_HTTP_SESSION_IDLE_MS", 1, DAY_MS)?,
            h.session_idle_ms.map(|r| r.0),
            path,
            http_defaults::SESSION_IDLE_MS,
        ),
        tokens,
    })
}

/// The `[embeddings]` section as the engine takes it. Keys of the other provider are errors,
/// so a typo'd provider never silently drops a setting; the API key is read from the named
/// environment variable now (unset: searches say so and answer by keywords).
fn embeddings_spec(
    e: FileEmbeddings,
    env: Env,
    home: Option<&str>,
    path: &Path,
) -> Result<memdir_index::embed::Spec> {
    use memdir_index::embed::{LocalSpec, OpenAiSpec, Provider, Spec};
    let bad = |key: &str, why: String| {
        let key = format!("embeddings.{key}");
        Error::invalid(
            &key,
            format!("config key `{key}` in {}: {why}", path.display()),
        )
        .detail("key", Value::from(key.clone()))
        .detail("file", Value::from(path.display().to_string()))
    };
    let provider = match e.provider.0.as_str() {
        "openai" => {
            for (k, set) in [("model_dir", e.model_dir.is_some())] {
                if set {
                    return Err(bad(k, "applies to the local provider only".into()));
                }
            }
            let url = e.url.ok_or_else(|| {
                bad(
                    "url",
                    "the openai provider needs the endpoint's url (e.g. http://127.0.0.1:8080/v1)"
                        .into(),
                )
            })?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(bad(
                    "url",
                    format!("{url:?} is not an http:// or https:// URL"),
                ));
            }
            let model = e
                .model
                .ok_or_else(|| bad("model", "the openai provider needs the model's name".into()))?;
            let api_key_env = e.api_key_env.map(|n| n.0);
            let input_types = input_types(e.query_input_type, e.document_input_type, &bad)?;
            Provider::OpenAi(OpenAiSpec {
                input_types,
                url,
                model,
                api_key: api_key_env.as_deref().and_then(|n| var(env, n)),
                api_key_env,
                dimensions: e.dimensions.map(|d| d.0 as usize),
                timeout: Duration::from_millis(e.timeout_ms.map_or(30_000, |t| t.0)),
                retries: e.retries.map_or(2, |r| r.0 as u32),
            })
        }
        _ => {
            for (k, set) in [
                ("url", e.url.is_some()),
                ("api_key_env", e.api_key_env.is_some()),
                ("dimensions", e.dimensions.is_some()),
                ("timeout_ms", e.timeout_ms.is_some()),
                ("retries", e.retries.is_some()),
                ("query_input_type", e.query_input_type.is_some()),
                ("document_input_type", e.document_input_type.is_some()),
            ] {
                if set {
                    return Err(bad(k, "applies to the openai provider only".into()));
                }
            }
            let dir = match (e.model_dir, e.model) {
                (Some(FileDir(d)), None) => expand_home(&d, home, path)?,
                (None, Some(m)) => {
                    if !memdir_index::embed::fetch::valid_repo(&m) {
                        return Err(bad(
                            "model",
                            format!(
                                "{m:?} is not a model name like sentence-transformers/all-MiniLM-L6-v2"
                            ),
                        ));
                    }
                    let cache =
                        memdir_index::embed::cache_dir(var(env, "XDG_CACHE_HOME").as_deref(), home)
                            .ok_or_else(|| {
                                bad(
                                    "model",
                                    "no model cache: HOME is not set; give model_dir".into(),
                                )
                            })?;
                    memdir_index::embed::fetch::model_dir(&cache, &m)
                }
                (Some(_), Some(_)) => {
                    return Err(bad("model", "give model_dir or model, not both".into()));
                }
                (None, None) => {
                    return Err(bad("model_dir", "the local provider needs model_dir (a directory with config.json, tokenizer.json and model.safetensors) or model (a name fetched by `memdir models fetch`)".into()));
                }
            };
            Provider::Local(LocalSpec { dir })
        }
    };
    Ok(Spec {
        provider,
        batch_size: e.batch_size.map_or(EMBED_BATCH, |b| b.0 as usize),
        max_per_search: e.max_per_search.map_or(EMBED_PER_SEARCH, |m| m.0 as usize),
        query_prefix: e.query_prefix.unwrap_or_default(),
        document_prefix: e.document_prefix.unwrap_or_default(),
    })
}

/// The openai provider's `query_input_type` and `document_input_type`: both or neither, each
/// 1 to 64 printable characters.
fn input_types(
    query: Option<String>,
    document: Option<String>,
    bad: &dyn Fn(&str, String) -> Error,
) -> Result<Option<(String, String)>> {
    match (query, document) {
        (None, None) => Ok(None),
        (Some(q), Some(d)) => {
            for (k, v) in [("query_input_type", &q), ("document_input_type", &d)] {
                if v.is_empty() || v.len() > 64 || v.chars().any(char::is_control) {
                    return Err(bad(
                        k,
                        format!(
                            "{v:?} is not an input type: give 1 to 64 printable characters, such as \"query\" or \"passage\""
                        ),
                    ));
                }
            }
            Ok(Some((q, d)))
        }
        (q, _) => {
            let (k, other) = if q.is_some() {
                ("query_input_type", "document_input_type")
            } else {
                ("document_input_type", "query_input_type")
            };
            Err(bad(
                k,
                format!("{k} needs {other} too: a model is asked for both kinds"),
            ))
        }
    }
}

/// Reads a token file: a regular file that only its owner may read, one line.
fn read_secret(p: &Path) -> std::result::Result<String, String> {
    let shown = p.display();
    let meta = std::fs::metadata(p).map_err(|e| format!("the token file {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("the token file {shown} is not a regular file"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(format!(
                "the token file {shown} may be read by others (mode {:o}): `chmod 600` it",
                mode & 0o777
            ));
        }
    }
    if meta.len() > 4096 {
        return Err(format!("the token file {shown} is larger than 4096 bytes"));
    }
    let text = std::fs::read_to_string(p).map_err(|e| format!("the token file {shown}: {e}"))?;
    let token = text.strip_suffix('\n').unwrap_or(&text);
    let token = token.strip_suffix('\r').unwrap_or(token);
    if token.contains('\n') {
        return Err(format!("the token file {shown} holds more than one line"));
    }
    Ok(token.to_string())
}

/// Replaces a leading `~` with the home directory.
fn expand_home(d: &str, home: Option<&str>, file: &Path) -> Result<PathBuf> {
    let rest = match d.strip_prefix('~') {
        None => return Ok(PathBuf::from(d)),
        Some(r) => r.trim_start_matches('/'),
    };
    match home {
        Some(h) => Ok(PathBuf::from(h).join(rest)),
        None => Err(Error::invalid(
            "dir",
            format!(
                "config key `dir` in {} starts with ~, but HOME is not set",
                file.display()
            ),
        )),
    }
}

/// The defaults of the HTTP settings (`[http]`).
pub mod http_defaults {
    /// Largest request body, in bytes: 16 MiB.
    pub const BODY_LIMIT: usize = 16 * 1024 * 1024;
    /// A request head must arrive within this time.
    pub const HEADER_TIMEOUT_MS: u64 = 10_000;
    /// An idle connection is closed after this.
    pub const IDLE_TIMEOUT_MS: u64 = 60_000;
    /// A request body must arrive within this time.
    pub const BODY_TIMEOUT_MS: u64 = 30_000;
    /// Connections open at once.
    pub const MAX_CONNECTIONS: u64 = 512;
    /// MCP sessions alive at once.
    pub const MAX_SESSIONS: u64 = 128;
    /// An MCP session without requests for this long is closed.
    pub const SESSION_IDLE_MS: u64 = 30 * 60 * 1000;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_lines_and_characters_from_one() {
        assert_eq!(position("a = 1\nbé = 2\n", 0), (1, 1));
        assert_eq!(position("a = 1\nbé = 2\n", 6), (2, 1));
        assert_eq!(position("a = 1\nbé = 2\n", 10), (2, 4));
    }

    #[test]
    fn errors_name_the_key_path() {
        let p = Path::new("/etc/memdir.toml");
        let key = |text: &str| parse(p, text).unwrap_err().details["key"].clone();
        assert_eq!(key("x = 1"), "x");
        assert_eq!(key("[http]\nx = 1"), "http.x");
        assert_eq!(key("[http]\nport = true"), "http.port");
        assert_eq!(key("[logs]\nmax_entries = 1000000"), "logs.max_entries");
        assert_eq!(key("[redaction]\nx = 1"), "redaction.x");
        assert_eq!(
            key("[[redaction.patterns]]\nkind = \"k\"\npattern = \"(\""),
            "redaction.patterns[0].pattern"
        );
        assert_eq!(
            key("[[redaction.patterns]]\nkind = \"K K\"\npattern = \"x\""),
            "redaction.patterns[0].kind"
        );
        assert_eq!(key("[redaction]\nallow = [\"[\"]"), "redaction.allow[0]");
    }

    #[test]
    fn precedence_is_flag_then_environment_then_file_then_default() {
        let file = parse(Path::new("/c.toml"), "device = \"f\"\nlock_timeout_ms = 5").unwrap();
        let loc = FileLocation {
            path: Some(PathBuf::from("/c.toml")),
            source: Source::Default,
        };
        let env = |k: &str| match k {
            "MEMDIR_DEVICE" => Some("e".to_string()),
            "HOME" => Some("/home/u".to_string()),
            _ => None,
        };
        let flags = Flags {
            device: Some("g".into()),
            ..Flags::default()
        };
        let c = Config::resolve(&flags, &env, loc.clone(), true, false, file).unwrap();
        assert_eq!(c.device.value, "g");
        assert_eq!(c.device.source, Source::Flag("--device"));
        assert_eq!(c.lock_timeout_ms.value, 5);
        assert_eq!(
            c.lock_timeout_ms.source,
            Source::File(PathBuf::from("/c.toml"))
        );
        assert_eq!(c.scan_interval_ms.source, Source::Default);
        let dir = c.dir.unwrap();
        assert_eq!(dir.value, PathBuf::from("/home/u/.local/share/memdir"));
        assert_eq!(dir.source, Source::Default);
        let file = parse(Path::new("/c.toml"), "device = \"f\"").unwrap();
        let c = Config::resolve(&Flags::default(), &env, loc, true, false, file).unwrap();
        assert_eq!(c.device.value, "e");
    }
}
