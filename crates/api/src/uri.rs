//! Resource URIs: the one address of each memory, on every surface that names one.
//!
//! `memdir://sessions/{session_id}` is a session (read a page at a time; `?position=N` starts
//! the page at N), `memdir://sessions/{session_id}/{position}` one of its chunks,
//! `memdir://categories/{name}` a category's current content,
//! `memdir://categories/{name}/versions/{n}` one of its versions, `memdir://status` the store's
//! status. Session ids and category names are percent-encoded as one path segment each
//! (everything but `A-Z a-z 0-9 - . _ ~`), so any name round-trips.

/// The scheme and authority-less prefix of every memdir resource.
pub const PREFIX: &str = "memdir://";

/// The store's status.
pub const STATUS: &str = "memdir://status";

/// A memory a resource URI names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resource {
    /// A session, read from `position`.
    Session { session_id: String, position: u64 },
    /// One chunk of a session.
    Chunk { session_id: String, position: u64 },
    /// A category's current content.
    Category { name: String },
    /// An old (or the current) version of a category, by number.
    Version { name: String, version: u64 },
    /// A note's current text (its path below `notes/`).
    Note { path: String },
    /// The store's status.
    Status,
}

/// The URI of a session.
pub fn session(session_id: &str) -> String {
    format!("{PREFIX}sessions/{}", encode(session_id))
}

/// The URI of one chunk of a session.
pub fn chunk(session_id: &str, position: u64) -> String {
    format!("{}/{position}", session(session_id))
}

/// The URI of a category's current content.
pub fn category(name: &str) -> String {
    format!("{PREFIX}categories/{}", encode(name))
}

/// The URI of a note (its path's components percent-encoded one by one).
pub fn note(path: &str) -> String {
    let parts: Vec<String> = path.split('/').map(encode).collect();
    format!("{PREFIX}notes/{}", parts.join("/"))
}

/// The URI of a version of a category.
pub fn version(name: &str, version: u64) -> String {
    format!("{}/versions/{version}", category(name))
}

/// Percent-encodes one path segment.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes a percent-encoded path segment; `None` for a bad escape or bytes that are not
/// UTF-8.
pub fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Parses a memdir resource URI; `None` when it names no memdir resource.
pub fn parse(uri: &str) -> Option<Resource> {
    let rest = uri.strip_prefix(PREFIX)?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let parts: Vec<&str> = path.split('/').collect();
    let number = |s: &str| s.parse::<u64>().ok();
    let position = match query {
        "" => 0,
        q => number(q.strip_prefix("position=")?)?,
    };
    let whole = |r: Resource| (position == 0 || matches!(r, Resource::Session { .. })).then_some(r);
    match parts.as_slice() {
        ["status"] => whole(Resource::Status),
        ["sessions", id] if !id.is_empty() => whole(Resource::Session {
            session_id: decode(id)?,
            position,
        }),
        ["sessions", id, p] if !id.is_empty() => whole(Resource::Chunk {
            session_id: decode(id)?,
            position: number(p)?,
        }),
        ["categories", name] if !name.is_empty() => whole(Resource::Category {
            name: decode(name)?,
        }),
        ["categories", name, "versions", n] if !name.is_empty() => whole(Resource::Version {
            name: decode(name)?,
            version: number(n)?,
        }),
        ["notes", rest @ ..] if !rest.is_empty() && rest.iter().all(|p| !p.is_empty()) => {
            let parts: Option<Vec<String>> = rest.iter().map(|p| decode(p)).collect();
            whole(Resource::Note {
                path: parts?.join("/"),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_path_round_trips_through_its_uri() {
        for path in ["MEMORY.md", "projects/orbital.md", "a b/ü?#.md"] {
            assert_eq!(
                parse(&note(path)),
                Some(Resource::Note { path: path.into() })
            );
        }
        assert_eq!(note("a b/c.md"), "memdir://notes/a%20b/c.md");
        assert_eq!(parse("memdir://notes/"), None);
        assert_eq!(parse("memdir://notes/a//b"), None);
    }

    #[test]
    fn every_name_round_trips_through_its_uri() {
        for name in ["base", "a b/c", "ünï?%#", "x.y_z~-1"] {
            assert_eq!(
                parse(&category(name)),
                Some(Resource::Category { name: name.into() })
            );
            assert_eq!(
                parse(&chunk(name, 7)),
                Some(Resource::Chunk {
                    session_id: name.into(),
                    position: 7
                })
            );
            assert_eq!(
                parse(&version(name, 3)),
                Some(Resource::Version {
                    name: name.into(),
                    version: 3
                })
            );
        }
        assert_eq!(category("a b/c"), "memdir://categories/a%20b%2Fc");
        assert_eq!(
            parse("memdir://sessions/s1?position=20"),
            Some(Resource::Session {
                session_id: "s1".into(),
                position: 20
            })
        );
        assert_eq!(parse(STATUS), Some(Resource::Status));
    }

    #[test]
    fn uris_that_name_nothing_are_refused() {
        for bad in [
            "file:///etc/passwd",
            "memdir://",
            "memdir://sessions/",
            "memdir://sessions/s/x",
            "memdir://categories/a/versions/",
            "memdir://categories/%zz",
            "memdir://categories/%ff",
            "memdir://status?position=1",
            "memdir://sessions/s?limit=1",
            "memdir://other/x",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
