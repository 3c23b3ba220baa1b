//! Errors.
//!
//! Lower layers return [`IoError`] (every I/O error names its path) or [`Error`] directly.
//! [`Error`] is the one boundary error every surface maps: a [`ErrorKind`], a message an agent
//! can act on, hints, and machine-readable details (`field`, `current_hash`, `available`,
//! `limit`, ...).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The class of a boundary error; each surface maps it once (CLI exit code, MCP code, HTTP
/// status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad input: malformed JSON, wrong type, bad name, out-of-range value.
    Invalid,
    /// Input over a documented size limit.
    TooLarge,
    /// The category, version or session does not exist.
    NotFound,
    /// A compare-and-swap precondition failed, or the operation does not fit the kind.
    Conflict,
    /// The store's write lock was not free before the deadline.
    Busy,
    /// A file on disk is malformed; nothing was changed.
    Corrupt,
    /// The store cannot be used right now (I/O error, disk full, read-only file system).
    Unavailable,
    /// The server refuses to run this way (a weak token, a foreign Host).
    Denied,
    /// The access-control list does not let this device do this; nothing was changed.
    Forbidden,
    /// A bug.
    Internal,
}

impl ErrorKind {
    /// The machine-readable code, as used in MCP and HTTP errors.
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::Invalid => "invalid",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Busy => "busy",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Denied => "denied",
            ErrorKind::Forbidden => "forbidden",
            ErrorKind::Internal => "internal",
        }
    }

    /// The CLI exit code (documented in `memdir --help`).
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Invalid => 3,
            ErrorKind::NotFound => 4,
            ErrorKind::Conflict => 5,
            ErrorKind::Busy => 6,
            ErrorKind::Corrupt => 7,
            ErrorKind::Unavailable => 8,
            ErrorKind::TooLarge => 9,
            ErrorKind::Denied => 11,
            ErrorKind::Forbidden => 12,
            ErrorKind::Internal => 10,
        }
    }
}

/// The boundary error.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub hints: Vec<String>,
    pub details: Map<String, Value>,
}

impl Error {
    /// A new error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            hints: Vec::new(),
            details: Map::new(),
        }
    }

    /// Bad input in `field`.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Invalid, message).field(field)
    }

    /// Input over a limit.
    pub fn too_large(field: &str, size: usize, limit: usize, unit: &str) -> Self {
        Error::new(
            ErrorKind::TooLarge,
            format!("{field} is {size} {unit}; the limit is {limit} {unit}"),
        )
        .field(field)
        .detail("limit", Value::from(limit))
        .detail("size", Value::from(size))
    }

    /// A bug: an invariant did not hold.
    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Internal, message)
    }

    /// Adds a hint for the caller.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }

    /// Names the offending input field.
    pub fn field(self, field: &str) -> Self {
        self.detail("field", Value::from(field))
    }

    /// Adds a machine-readable detail.
    pub fn detail(mut self, key: &str, value: Value) -> Self {
        self.details.insert(key.to_string(), value);
        self
    }

    /// Whether the error says memdir may not write here: no permission, a read-only file
    /// system, a full disk or quota. Reads then go on from the files alone.
    pub fn write_denied(&self) -> bool {
        if self.details.get("write_denied") == Some(&Value::Bool(true)) {
            return true;
        }
        if let Some(code) = self.details.get("os_error").and_then(Value::as_i64) {
            // EPERM, EACCES, ENOSPC, EROFS, EDQUOT.
            return matches!(code, 1 | 13 | 28 | 30 | 122);
        }
        // The search index reports its I/O errors as text.
        self.message.contains("Permission denied")
            || self.message.contains("Read-only file system")
            || self.message.contains("No space left")
    }

    /// The JSON shape shared by every surface: `{code, message, hints, ...details}`.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("code".into(), Value::from(self.kind.code()));
        m.insert("message".into(), Value::from(self.message.clone()));
        m.insert("hints".into(), Value::from(self.hints.clone()));
        for (k, v) in &self.details {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }
}

/// An I/O error that names its path.
#[derive(Debug, thiserror::Error)]
#[error("{op} {}: {source}", path.display())]
pub struct IoError {
    pub op: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Attaches an operation and a path to an `io::Result`.
pub trait IoContext<T> {
    /// Names the failed operation and its path.
    fn at(self, op: &'static str, path: &Path) -> Result<T, IoError>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, op: &'static str, path: &Path) -> Result<T, IoError> {
        self.map_err(|source| IoError {
            op,
            path: path.to_path_buf(),
            source,
        })
    }
}

impl From<IoError> for Error {
    fn from(e: IoError) -> Self {
        let raw = e.source.raw_os_error();
        // ENOSPC = 28, EDQUOT = 122, EROFS = 30 on Linux.
        let hint = match raw {
            Some(28) | Some(122) => {
                "the disk is full: free some space and retry; nothing was changed"
            }
            Some(30) => "the file system is read-only",
            _ => match e.source.kind() {
                std::io::ErrorKind::PermissionDenied => {
                    "check the permissions of the memory directory"
                }
                _ => "check the memory directory and retry; nothing acknowledged was lost",
            },
        };
        let mut err = Error::new(ErrorKind::Unavailable, e.to_string())
            .hint(hint)
            .detail("path", Value::from(e.path.display().to_string()));
        if let Some(code) = raw {
            err = err.detail("os_error", Value::from(code));
        }
        err
    }
}

/// The result type of memdir's library.
pub type Result<T, E = Error> = std::result::Result<T, E>;
