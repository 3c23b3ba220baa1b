//! The gate: the one check between what a peer or a remote sent and what this replica writes.
//!
//! Everything a counterpart hands a replica (a git remote's tree, a page a client pushes, a
//! page a server answers) is "a replica's files", and is checked here to *be* memdir's files
//! before it becomes part of a transaction ([docs/design/replication.md]). Pure: [`Gate::admit`]
//! takes one incoming file and this replica's copy of it and returns a [`Verdict`]; the
//! transports read and write around it (`service::sync`, `service::sync_http`). The rules:
//!
//! - **Only the layout comes from outside** ([`Place::of`]): `history/<name>/<id>.json`,
//!   `conflicts/<name>/<hash>.json`, `sessions/<id>/<replica>[.<n>].jsonl` (and its seal
//!   `.head`) and
//!   `categories/<name>.json`, each name in its canonical encoding, as a regular file. Never
//!   `.gitignore`, `memdir.json`, a `..`, a link.
//! - **A segment grows only at its end, written by its own replica.** A copy is taken only as
//!   an extension of this replica's (the same lines, then new whole lines that continue its
//!   `seq` and `hlc`), or as the same lines with some replaced by their tombstones (a forget).
//!   A segment named by this replica's own id takes tombstones only.
//! - **Another replica's new lines need its seal** ([`seal`]): a line (live or tombstone) this
//!   replica takes into another replica's segment must be one that replica's seal vouches for;
//!   a seal is taken only if it verifies under the key this replica holds for that replica (the
//!   first one it saw) and its leaves agree with the seal held. Lines past the seal wait for
//!   the next one. Lines held within the seal that it does not vouch for (taken before seals)
//!   give way, line by line, to sealed ones.
//! - **History files and conflict records are write-once.** A new one is added; one this
//!   replica holds changes only by the withdrawal of its content (a forget), or by being
//!   written whole where this replica holds it as a patch (the same version, same hash).
//!   Anything else, a removal included, is refused.
//! - **Records are checked like local writes**: their shape (no unknown field, the names of
//!   their path), memdir's limits, and the redactor (a record it would change is refused,
//!   never rewritten: this replica would hold other bytes than the sender under the same
//!   name).
//! - **Access per op, and the actor**: a version needs the right its op needs locally (write;
//!   delete or restore; forget for a withdrawal), new chunks the right to ingest into their
//!   projects, tombstones the right to forget; over HTTP a device that is no admin pushes
//!   only versions that name it as their actor. A refused right is an error for the whole
//!   page (`forbidden`, before anything is written); every other refusal is a [`Problem`] for
//!   that file alone, which the transport reports while it takes the rest.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_json::Value;

use crate::redact::{Counts, Redactor};
use crate::sync::merge::is_sync_version;
use crate::sync::seal::{self, Seal, SealBook};
use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::{Problem, limits};
use memdir_store::clock::Hlc;
use memdir_store::model::{
    CategoryName, ChunkRecord, HistoryEntry, SessionId, TOMBSTONE_KEY, content_hash,
    decode_component, encode_component, validate_project,
};
use memdir_store::note::{self, NotePath};
use memdir_store::{codec, fsx, history, read_history_bytes};

/// Largest history entry or conflict record taken from outside: a category at its limit
/// inside an entry's envelope and indentation, with room to spare. A larger file is refused
/// unread.
pub const MAX_RECORD_FILE: u64 = 4 * limits::MAX_CATEGORY_BYTES as u64;

/// The actor of a version a sync writes (a resolution of several heads).
pub const SYNC_ACTOR: &str = "sync";

/// What a counterpart may do, decided by the access-control policy of the surface that calls
/// (the engine only asks). A git remote and a server answering its client pass every check.
pub struct SyncAccess<'a> {
    /// Whether the caller may read this category.
    pub read: &'a dyn Fn(&str) -> bool,
    /// Whether the caller may write this category (the error names the rule).
    pub write: &'a dyn Fn(&str) -> Result<()>,
    /// Whether the caller may ingest into these projects (`""`: no project).
    pub ingest: &'a dyn Fn(&[&str]) -> Result<()>,
    /// Whether the caller may forget session memory: a copy of a segment that turns a chunk
    /// this store holds into a tombstone is a forget.
    pub forget: &'a dyn Fn() -> Result<()>,
    /// Whether the caller may do `what` (delete categories, restore versions, forget
    /// versions) to this category.
    pub destroy: &'a dyn Fn(&str, &'static str) -> Result<()>,
    /// The device whose records these are: its versions must name it as their actor. `None`
    /// for a relay (an admin device, or this replica's own side of a sync), which may carry
    /// what other devices wrote.
    pub device: Option<&'a str>,
}

impl SyncAccess<'static> {
    /// Everything allowed: this replica's own side of a sync.
    pub fn all() -> SyncAccess<'static> {
        SyncAccess {
            read: &|_| true,
            write: &|_| Ok(()),
            ingest: &|_| Ok(()),
            forget: &|| Ok(()),
            destroy: &|_, _| Ok(()),
            device: None,
        }
    }
}

/// A place of the layout, parsed from a path a counterpart named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// `categories/<name>.json` (git only: over HTTP each side derives it).
    Category(CategoryName),
    /// `history/<name>/<id>.json`.
    History { category: CategoryName, id: String },
    /// `conflicts/<name>/<hash>.json`.
    Conflict { category: CategoryName, id: String },
    /// `sessions/<stem>/<replica>[.<n>].jsonl`.
    Segment(SegmentPlace),
    /// `sessions/<stem>/<replica>[.<n>].head`: the segment's seal.
    Seal(SegmentPlace),
    /// `notes/<path>` (git only: over HTTP each side derives it).
    Note(NotePath),
    /// `note-history/<encoded path>/<id>.json`.
    NoteHistory { path: NotePath, id: String },
}

/// Where a segment is: whose session, whose replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentPlace {
    /// The session directory's name (the encoded session id).
    pub session_dir: String,
    /// The replica that appends to it (the file name without `.<n>.jsonl`).
    pub replica: String,
    /// A rolled-over part (`<replica>.<n>.jsonl`): its first `seq` continues an earlier part.
    pub rolled: bool,
}

/// A file name of ours: `[A-Za-z0-9._-]`, not starting with a dot, with this suffix.
pub fn file_name_ok(name: &str, suffix: &str) -> bool {
    name.len() > suffix.len()
        && name.len() <= 200
        && name.ends_with(suffix)
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// A name component in its canonical encoding, decoded.
fn canonical(stem: &str) -> std::result::Result<String, String> {
    let decoded = decode_component(stem).ok_or("bad name encoding")?;
    if encode_component(&decoded) != stem {
        return Err("not the canonical encoding of its name".into());
    }
    Ok(decoded)
}

impl Place {
    /// Parses a path with the layout's grammar, as strictly as a local write names its files;
    /// `Err` says why the path is not a place of the layout.
    pub fn of(path: &str) -> std::result::Result<Place, String> {
        let parts: Vec<&str> = path.split('/').collect();
        match parts[..] {
            ["categories", file] => {
                let stem = file
                    .strip_suffix(".json")
                    .filter(|_| file_name_ok(file, ".json"))
                    .ok_or("not a category file name")?;
                let name = CategoryName::new(&canonical(stem)?).map_err(|e| e.message)?;
                Ok(Place::Category(name))
            }
            [top @ ("history" | "conflicts"), stem, file] => {
                let category = CategoryName::new(&canonical(stem)?).map_err(|e| e.message)?;
                if !file_name_ok(file, ".json") {
                    return Err("bad file name".into());
                }
                let id = file.trim_end_matches(".json").to_string();
                Ok(if top == "history" {
                    Place::History { category, id }
                } else {
                    Place::Conflict { category, id }
                })
            }
            ["sessions", stem, file] => {
                SessionId::new(&canonical(stem)?).map_err(|e| e.message)?;
                let is_seal = file_name_ok(file, seal::SUFFIX);
                if !file_name_ok(file, ".jsonl") && !is_seal {
                    return Err("bad segment name".into());
                }
                let base = file
                    .strip_suffix(".jsonl")
                    .or_else(|| file.strip_suffix(seal::SUFFIX))
                    .unwrap_or(file);
                let (replica, rolled) = match base.rsplit_once('.') {
                    Some((r, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                        (r, true)
                    }
                    _ => (base, false),
                };
                if replica.is_empty() || replica.contains('.') {
                    return Err("bad segment name".into());
                }
                let place = SegmentPlace {
                    session_dir: stem.to_string(),
                    replica: replica.to_string(),
                    rolled,
                };
                Ok(if is_seal {
                    Place::Seal(place)
                } else {
                    Place::Segment(place)
                })
            }
            ["note-history", stem, file] => {
                let path = NotePath::new(&canonical(stem)?).map_err(|e| e.message)?;
                if !file_name_ok(file, ".json") {
                    return Err("bad file name".into());
                }
                let id = file.trim_end_matches(".json").to_string();
                Ok(Place::NoteHistory { path, id })
            }
            ["notes", ..] if parts.len() > 1 => {
                let path = NotePath::new(&parts[1..].join("/")).map_err(|e| e.message)?;
                Ok(Place::Note(path))
            }
            [".gitignore" | ".gitattributes" | "memdir.json"] => {
                Err("memdir writes its own; a remote's copy is never taken".into())
            }
            _ => Err("not a place of memdir's layout".into()),
        }
    }

    /// The category a category file, history entry or conflict record belongs to.
    pub fn category(&self) -> Option<&CategoryName> {
        match self {
            Place::Category(c)
            | Place::History { category: c, .. }
            | Place::Conflict { category: c, .. } => Some(c),
            Place::Segment(_) | Place::Seal(_) | Place::Note(_) | Place::NoteHistory { .. } => None,
        }
    }

    /// The note a note file or a note's history entry belongs to.
    pub fn note(&self) -> Option<&NotePath> {
        match self {
            Place::Note(p) | Place::NoteHistory { path: p, .. } => Some(p),
            _ => None,
        }
    }

    /// The most bytes read of a file at this place.
    pub fn max_bytes(&self) -> u64 {
        match self {
            Place::Segment(_) | Place::Seal(_) => fsx::MAX_SEGMENT_FILE,
            Place::Category(_) => limits::MAX_CATEGORY_BYTES as u64,
            Place::History { .. } | Place::Conflict { .. } => MAX_RECORD_FILE,
            Place::Note(_) => note::MAX_NOTE_BYTES as u64,
            Place::NoteHistory { .. } => MAX_RECORD_FILE,
        }
    }
}

/// What kind of entry arrived (git says it with a mode; HTTP sends files only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    File,
    Link,
    /// A submodule, a tree where a file belongs, anything else.
    Other,
}

/// The incoming bytes of one place.
#[derive(Clone, Copy, Debug)]
pub enum Body<'a> {
    /// The counterpart's whole copy.
    Whole(&'a [u8]),
    /// A segment's bytes from `from`, after a prefix whose BLAKE3 is `prefix`.
    Tail {
        from: u64,
        prefix: &'a str,
        data: &'a [u8],
    },
    /// The counterpart no longer holds the file (a git remote removed it).
    Removed,
}

/// One file from outside.
#[derive(Clone, Copy, Debug)]
pub struct Incoming<'a> {
    pub path: &'a str,
    pub entry: Entry,
    pub body: Body<'a>,
}

impl<'a> Incoming<'a> {
    /// A regular file's whole copy.
    pub fn whole(path: &'a str, bytes: &'a [u8]) -> Incoming<'a> {
        Incoming {
            path,
            entry: Entry::File,
            body: Body::Whole(bytes),
        }
    }
}

/// What this replica does with an incoming file. The bytes are always the file's whole new
/// content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A new file of the layout, checked.
    Add(Vec<u8>),
    /// This replica's copy followed by new whole lines, checked.
    Extend(Vec<u8>),
    /// This replica's own bytes with content withdrawn by a forget (chunk lines replaced by
    /// their tombstones, a version's content gone), and any new lines after them.
    Withdraw(Vec<u8>),
    /// The same content in another form: a patch written whole, the earlier of two stamps
    /// of one forget. Nothing is added or taken away.
    Rewrite(Vec<u8>),
    /// Nothing to do: this replica holds it, or holds what wins over it.
    Same,
    /// Refused: reported, and this replica's copy stays.
    Refuse(Problem),
}

impl Verdict {
    /// The file's new content, when it changes.
    pub fn into_bytes(self) -> Option<Vec<u8>> {
        match self {
            Verdict::Add(b) | Verdict::Extend(b) | Verdict::Withdraw(b) | Verdict::Rewrite(b) => {
                Some(b)
            }
            Verdict::Same | Verdict::Refuse(_) => None,
        }
    }
}

/// Why a file is refused: a problem kind and what is wrong.
type Why = (&'static str, String);

fn why(kind: &'static str, message: impl Into<String>) -> Why {
    (kind, message.into())
}

/// The rights an accepted file needs, checked after its content.
#[derive(Default, Debug)]
struct Needs {
    /// A category's name, or `notes/<path>` for a note (as access rules name them).
    write: Option<String>,
    destroy: Option<(String, &'static str)>,
    ingest: BTreeSet<String>,
    forget_sessions: bool,
    /// The actor a new version names (checked against the pushing device).
    actor: Option<(String, bool)>,
}

/// The gate of one replica, for one counterpart.
pub struct Gate<'a> {
    replica: &'a str,
    access: &'a SyncAccess<'a>,
    redactor: &'a Redactor,
    /// The seals held and taken in this sync; without them (pure tests) segments are checked
    /// without seals.
    seals: Option<&'a SealBook<'a>>,
}

impl<'a> Gate<'a> {
    /// The gate of replica `replica` for a counterpart with `access`, checking records with
    /// `redactor` as this replica's own writes are.
    pub fn new(replica: &'a str, access: &'a SyncAccess<'a>, redactor: &'a Redactor) -> Gate<'a> {
        Gate {
            replica,
            access,
            redactor,
            seals: None,
        }
    }

    /// The same gate, checking other replicas' lines against their seals in `book`.
    pub fn with_seals(self, book: &'a SealBook<'a>) -> Gate<'a> {
        Gate {
            seals: Some(book),
            ..self
        }
    }

    /// Decides what this replica does with `incoming`, given its own copy (`local`, `None`
    /// when it holds none). `Err` only when the counterpart lacks a right the file needs:
    /// the caller refuses its whole page.
    pub fn admit(&self, incoming: &Incoming<'_>, local: Option<&[u8]>) -> Result<Verdict> {
        let refuse = |(kind, message): Why| {
            Ok(Verdict::Refuse(Problem {
                kind: kind.to_string(),
                path: incoming.path.to_string(),
                message,
            }))
        };
        let place = match Place::of(incoming.path) {
            Ok(p) => p,
            Err(w) => return refuse(why("outside_layout", w)),
        };
        match incoming.entry {
            Entry::File => {}
            Entry::Link => {
                return refuse(why(
                    "link",
                    "a symbolic link: memdir never takes one into the memory directory",
                ));
            }
            Entry::Other => {
                return refuse(why(
                    "outside_layout",
                    "not a regular file (a submodule or a tree where a file belongs)",
                ));
            }
        }
        let decided = match &place {
            Place::Segment(s) => self.segment(s, incoming.path, incoming.body, local),
            Place::Seal(s) => self.seal(s, incoming.path, whole_body(incoming.body)?, local),
            Place::History { category, id } => {
                self.history(category, id, whole_body(incoming.body)?, local)
            }
            Place::Conflict { category, id } => {
                self.conflict(category, id, whole_body(incoming.body)?, local)
            }
            Place::Category(c) => self.category(c, whole_body(incoming.body)?),
            Place::NoteHistory { path, id } => {
                self.note_history(path, id, whole_body(incoming.body)?, local)
            }
            Place::Note(path) => self.note_file(path, whole_body(incoming.body)?),
        };
        match decided {
            Err(w) => refuse(w),
            Ok((verdict, needs)) => {
                if let Verdict::Refuse(_) = verdict {
                    return Ok(verdict);
                }
                self.check_rights(&needs)?;
                Ok(verdict)
            }
        }
    }

    fn check_rights(&self, needs: &Needs) -> Result<()> {
        if let Some(c) = &needs.write {
            (self.access.write)(c.as_str())?;
        }
        if let Some((c, what)) = &needs.destroy {
            (self.access.destroy)(c.as_str(), what)?;
        }
        if !needs.ingest.is_empty() {
            let ps: Vec<&str> = needs.ingest.iter().map(String::as_str).collect();
            (self.access.ingest)(&ps)?;
        }
        if needs.forget_sessions {
            (self.access.forget)()?;
        }
        if let (Some(device), Some((actor, by_sync))) = (self.access.device, &needs.actor) {
            let expected = if *by_sync { SYNC_ACTOR } else { device };
            if actor != expected {
                return Err(Error::new(
                    ErrorKind::Forbidden,
                    format!(
                        "a pushed version names {actor:?} as its actor; device {device:?} pushes only versions it wrote (or a sync's resolutions, by {SYNC_ACTOR:?})"
                    ),
                )
                .detail("device", Value::from(device))
                .detail("rule", Value::from("sync.actor")));
            }
        }
        Ok(())
    }

    /// Whether the redactor leaves a text as it is.
    fn clean_text(&self, s: &str) -> bool {
        let mut c = Counts::new();
        self.redactor.text(s, &mut c) == s
    }

    /// Whether the redactor leaves every string (and key) of a value as it is.
    fn clean_value(&self, v: &Value) -> bool {
        let mut c = Counts::new();
        self.redactor.value(v, &mut c).is_none_or(|r| &r == v)
    }

    /// A segment: an extension of this replica's copy, a forget of lines it holds, or
    /// refused.
    fn segment(
        &self,
        place: &SegmentPlace,
        path: &str,
        body: Body<'_>,
        local: Option<&[u8]>,
    ) -> std::result::Result<(Verdict, Needs), Why> {
        let own = place.replica == self.replica;
        let have = whole_lines(local.unwrap_or_default());
        // Every replica seals its segments before it sends them: a copy without a seal that
        // verifies (none came, or the one that came was refused) vouches for no line.
        let seals = match self.seals {
            Some(book) if !own => Some(book.seals(path)),
            _ => None,
        };
        if let (Some(seals), Body::Whole(b)) = (&seals, body)
            && let Some(out) = replace_unsealed(seals, have, b)
        {
            // This replica holds lines its replica did not seal (taken before seals, from a
            // remote that rewrote them): the sealed lines replace them, line by line, and what
            // they said leaves the index as a forget's text does. Every line a seal vouches
            // for stays, and a tombstone that replaces one is a forget like any other.
            let fresh = SegmentMerge::run(self, place, own, (b"", 0), &out.bytes)?;
            let (_, mut needs) = fresh.verdict(b"", 0, true)?;
            needs.forget_sessions |= out.forgets;
            return Ok((Verdict::Withdraw(out.bytes), needs));
        }
        let (verdict, needs) = self.segment_merge(place, body, local, have)?;
        let Some(seals) = &seals else {
            return Ok((verdict, needs));
        };
        let Some(bytes) = verdict_bytes(&verdict) else {
            return Ok((verdict, needs));
        };
        let all = lines(bytes);
        let held = lines(have).len();
        let Some(n) = (held..all.len()).find(|&i| !seal::vouched(seals, i, bare(all[i]))) else {
            return Ok((verdict, needs));
        };
        let sealed = seal::sealed_lines(seals);
        if n < sealed || seals.is_empty() {
            return Err(why(
                "unsealed",
                format!(
                    "line {} is not one replica {} sealed (its seal vouches for {sealed} lines); a remote may have rewritten it, this replica's copy stays",
                    n + 1,
                    place.replica,
                ),
            ));
        }
        // Lines past the seal are not sealed yet (written after the sealing, or made up):
        // the sealed ones are taken, the rest waits for the seal that covers it.
        let cut: usize = all[..n].iter().map(|l| l.len()).sum();
        let bytes = bytes[..cut].to_vec();
        let verdict = match verdict {
            _ if bytes == have => return Ok((Verdict::Same, Needs::default())),
            _ if have.is_empty() => Verdict::Add(bytes),
            Verdict::Withdraw(_) => Verdict::Withdraw(bytes),
            Verdict::Rewrite(_) => Verdict::Rewrite(bytes),
            _ => Verdict::Extend(bytes),
        };
        Ok((verdict, needs))
    }

    /// A seal from outside: never this replica's own (it writes its own), taken only if it
    /// verifies under the key the segment's replica id names (for an id from before keys, the
    /// key this replica holds for it, the first one seen) and agrees with the seals held.
    fn seal(
        &self,
        place: &SegmentPlace,
        path: &str,
        body: Option<&[u8]>,
        local: Option<&[u8]>,
    ) -> std::result::Result<(Verdict, Needs), Why> {
        let same = Ok((Verdict::Same, Needs::default()));
        let Some(bytes) = body else {
            return match local {
                None => same,
                Some(_) => Err(why(
                    "not_an_extension",
                    "removed on the other side; a seal is never removed by a sync, this replica's copy stays",
                )),
            };
        };
        if place.replica == self.replica || local == Some(bytes) {
            return same;
        }
        let theirs = Seal::parse(bytes).map_err(|e| why("malformed", e))?;
        let forged = |m: String| Err(why("forged", m));
        if theirs.replica != place.replica {
            return forged(format!(
                "a seal of replica {:?} beside replica {:?}'s segment",
                theirs.replica, place.replica
            ));
        }
        if !theirs.verifies(path) {
            return forged(
                "its signature does not verify: not made by the segment's replica".into(),
            );
        }
        if seal::named_key_id(&place.replica).is_some_and(|k| k != seal::key_id(&theirs.key)) {
            return forged(format!(
                "signed by a key replica {} does not name (its id ends in its key's id)",
                place.replica
            ));
        }
        if let Some(book) = self.seals
            && book.key(&place.replica).is_some_and(|k| k != theirs.key)
        {
            return forged(format!(
                "signed by another key than the one this replica holds for {}",
                place.replica
            ));
        }
        let held = local
            .and_then(|b| Seal::parse(b).ok())
            .filter(|s| s.verifies(path));
        let disagrees = || {
            why(
                "not_an_extension",
                "its leaves are not an extension of the seal this replica holds",
            )
        };
        if let Some(book) = self.seals
            && book.seals(path).iter().any(|s| !s.agrees(&theirs))
        {
            return Err(disagrees());
        }
        let merged = match &held {
            None => theirs.clone(),
            Some(h) => h.merge(&theirs).ok_or_else(disagrees)?,
        };
        if let Some(book) = self.seals {
            // Its proofs join those of the seal held; `seal::settle` keeps the ones that
            // prove the lines this replica ends up holding.
            book.take(path, theirs);
        }
        let out = merged.to_bytes();
        let verdict = match &held {
            _ if local == Some(out.as_slice()) => Verdict::Same,
            None => Verdict::Add(out),
            Some(h) if merged.leaves.len() > h.leaves.len() => Verdict::Extend(out),
            Some(_) => Verdict::Rewrite(out),
        };
        Ok((verdict, Needs::default()))
    }

    /// A segment by its lines: an extension, a forget, or refused.
    fn segment_merge(
        &self,
        place: &SegmentPlace,
        body: Body<'_>,
        local: Option<&[u8]>,
        have: &[u8],
    ) -> std::result::Result<(Verdict, Needs), Why> {
        let own = place.replica == self.replica;
        // The incoming copy is `have[..common]` followed by `data`.
        let (common, data) = match body {
            Body::Removed if local.is_none() => return Ok((Verdict::Same, Needs::default())),
            Body::Removed => {
                return Err(why(
                    "not_an_extension",
                    "removed on the other side; a segment is never removed by a sync, this replica's copy stays",
                ));
            }
            Body::Whole(b) => (0, b),
            Body::Tail { from, prefix, data } => {
                let from = usize::try_from(from).unwrap_or(usize::MAX);
                if from > have.len() || content_hash(&have[..from]) != prefix {
                    return Err(why(
                        "not_an_extension",
                        "the tail does not continue this replica's copy of the segment; it stays as it is",
                    ));
                }
                (from, data)
            }
        };
        if !data.is_empty() && !data.ends_with(b"\n") {
            return Err(why(
                "malformed",
                "a segment travels as whole lines; this one ends in the middle of a line",
            ));
        }
        if own && local.is_none() && !data.is_empty() {
            return Err(why(
                "own_segment",
                "a segment of this replica's own id: only this replica appends to it, and it holds no such segment",
            ));
        }
        let merged = SegmentMerge::run(self, place, own, (have, common), data)?;
        let whole = matches!(body, Body::Whole(_));
        merged.verdict(have, common, whole)
    }

    /// One new chunk line of `place`, after the line `prev` (`seq`, `hlc`), checked as an
    /// ingest checks it. Returns the record.
    fn new_line(
        &self,
        place: &SegmentPlace,
        line: &[u8],
        prev: Option<&(u64, String)>,
    ) -> std::result::Result<ChunkRecord, Why> {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let c = codec::parse_chunk_line(body)
            .map_err(|e| why("malformed", format!("not a chunk line: {e}")))?;
        if SessionId::new(&c.session_id).is_err()
            || encode_component(&c.session_id) != place.session_dir
        {
            return Err(why(
                "malformed",
                format!("chunk {} names another session", c.seq),
            ));
        }
        if c.replica != place.replica {
            return Err(why(
                "malformed",
                format!(
                    "chunk {} names replica {:?}, not the segment's",
                    c.seq, c.replica
                ),
            ));
        }
        match prev {
            Some((seq, _)) if c.seq != seq + 1 => {
                return Err(why(
                    "malformed",
                    format!("seq {} follows {seq} (expected {})", c.seq, seq + 1),
                ));
            }
            None if !place.rolled && c.seq != 0 => {
                return Err(why(
                    "malformed",
                    format!("the first seq is {}, not 0", c.seq),
                ));
            }
            Some((_, hlc)) if c.hlc.as_str() <= hlc.as_str() => {
                return Err(why(
                    "malformed",
                    format!("hlc {} of seq {} does not increase", c.hlc, c.seq),
                ));
            }
            _ => {}
        }
        if c.is_tombstone() {
            check_tombstone(&c)?;
        } else {
            self.check_chunk(&c)?;
        }
        Ok(c)
    }

    /// A live chunk's limits and redaction, as an ingest checks them.
    fn check_chunk(&self, c: &ChunkRecord) -> std::result::Result<(), Why> {
        if c.content.trim().is_empty() {
            return Err(why("malformed", format!("chunk {} has no content", c.seq)));
        }
        if c.content.len() > limits::MAX_CHUNK_BYTES {
            return Err(why(
                "over_limit",
                format!(
                    "chunk {} holds {} bytes of content; a chunk holds at most {}",
                    c.seq,
                    c.content.len(),
                    limits::MAX_CHUNK_BYTES
                ),
            ));
        }
        validate_project(&c.project).map_err(|e| why("malformed", e.message))?;
        let meta = codec::to_compact(&c.metadata).len();
        if meta > limits::MAX_METADATA_BYTES || codec::depth(&c.metadata) > limits::MAX_DATA_DEPTH {
            return Err(why(
                "over_limit",
                format!("chunk {}'s metadata is over memdir's limits", c.seq),
            ));
        }
        if !self.clean_text(&c.content) || !self.clean_value(&c.metadata) {
            return Err(why(
                "unredacted",
                format!(
                    "chunk {} holds text the redactor would change (a secret or a private span); refused, not rewritten",
                    c.seq
                ),
            ));
        }
        Ok(())
    }

    /// A history entry: a new one checked like a local write, one held here changed only by
    /// a forget or by being written whole.
    fn history(
        &self,
        category: &CategoryName,
        id: &str,
        body: Option<&[u8]>,
        local: Option<&[u8]>,
    ) -> std::result::Result<(Verdict, Needs), Why> {
        let check = |e: &HistoryEntry| self.check_entry(e);
        self.version(
            category.as_str(),
            "delete categories",
            id,
            body,
            local,
            &check,
        )
    }

    /// A version of a category or a note (`name` as access rules name it): write-once; a new
    /// one passes `check` and needs the right its op needs locally (`deletes`: what a delete
    /// is called), one held here changes only by a forget or by being written whole.
    fn version(
        &self,
        name: &str,
        deletes: &'static str,
        id: &str,
        body: Option<&[u8]>,
        local: Option<&[u8]>,
        check: &dyn Fn(&HistoryEntry) -> std::result::Result<(), Why>,
    ) -> std::result::Result<(Verdict, Needs), Why> {
        let Some(bytes) = body.filter(|b| local != Some(*b)) else {
            return unchanged_or_removed(body, local);
        };
        let e = read_history_bytes(bytes)
            .map_err(|w| why("malformed", format!("not a history entry: {w}")))?;
        if e.id != id {
            return Err(why(
                "malformed",
                format!("the entry's id is {:?}, not its file name", e.id),
            ));
        }
        check(&e)?;
        let mut needs = Needs::default();
        let Some(local) = local else {
            // A new version: the right its op needs locally, and its actor.
            needs.actor = Some((e.actor.clone(), is_sync_version(&e.id)));
            match e.op.as_str() {
                "delete" => needs.destroy = Some((name.to_string(), deletes)),
                "restore" => needs.destroy = Some((name.to_string(), "restore versions")),
                _ => needs.write = Some(name.to_string()),
            }
            return Ok((Verdict::Add(bytes.to_vec()), needs));
        };
        let mine = read_history_bytes(local).map_err(|w| {
            why(
                "write_once",
                format!("this replica's copy does not parse ({w}); it stays as it is"),
            )
        })?;
        let verdict = compare_versions(mine, e, bytes)?;
        if let Verdict::Withdraw(_) = verdict {
            needs.destroy = Some((name.to_string(), "forget versions"));
        }
        Ok((verdict, needs))
    }

    /// A version's shape, limits, redaction and actor.
    fn check_entry(&self, e: &HistoryEntry) -> std::result::Result<(), Why> {
        check_id_and_reason(e)?;
        let content = codec::to_pretty(&e.content);
        let patch = e.patch.as_ref().map(|p| Value::Object(p.set.clone()));
        let set = patch.as_ref().map(codec::to_pretty).unwrap_or_default();
        if content.len().max(set.len()) > limits::MAX_CATEGORY_BYTES
            || codec::depth(&e.content) > limits::MAX_DATA_DEPTH
            || patch
                .as_ref()
                .is_some_and(|p| codec::depth(p) > limits::MAX_DATA_DEPTH)
        {
            return Err(why(
                "over_limit",
                format!(
                    "the version holds {} bytes; a category holds at most {}",
                    content.len().max(set.len()),
                    limits::MAX_CATEGORY_BYTES
                ),
            ));
        }
        let whole = e.patch.is_none() && e.forgotten.is_none() && !e.content.is_null();
        if whole && e.op != "external" && e.hash.as_deref() != Some(&content_hash(&content)) {
            return Err(why(
                "malformed",
                "the entry's hash is not the BLAKE3 of its content",
            ));
        }
        if !self.clean_value(&e.content)
            || patch.as_ref().is_some_and(|p| !self.clean_value(p))
            || e.reason.as_deref().is_some_and(|r| !self.clean_text(r))
        {
            return Err(why(
                "unredacted",
                "the version holds text the redactor would change (a secret or a private span); refused, not rewritten",
            ));
        }
        Ok(())
    }

    /// A version of a note: write-once like a category's, its text checked as a note write
    /// checks it.
    fn note_history(
        &self,
        path: &NotePath,
        id: &str,
        body: Option<&[u8]>,
        local: Option<&[u8]>,
    ) -> std::result::Result<(Verdict, Needs), Why> {
        let check = |e: &HistoryEntry| self.check_note_entry(e);
        self.version(
            &format!("notes/{path}"),
            "delete notes",
            id,
            body,
            local,
            &check,
        )
    }

    /// A note version's shape: its id, a text (or none, for a tombstone or a forgotten
    /// version) within a note's limit whose BLAKE3 is its hash, and nothing the redactor
    /// would change.
    fn check_note_entry(&self, e: &HistoryEntry) -> std::result::Result<(), Why> {
        check_id_and_reason(e)?;
        if e.patch.is_some() {
            return Err(why("malformed", "a note's version is never a patch"));
        }
        let text = match &e.content {
            Value::Null => None,
            Value::String(t) => Some(t.as_str()),
            _ => return Err(why("malformed", "a note's version holds text or nothing")),
        };
        if let Some(t) = text {
            if t.len() > note::MAX_NOTE_BYTES {
                return Err(why(
                    "over_limit",
                    format!(
                        "the version holds {} bytes; a note holds at most {}",
                        t.len(),
                        note::MAX_NOTE_BYTES
                    ),
                ));
            }
            if e.hash.as_deref() != Some(&content_hash(t.as_bytes())) {
                return Err(why(
                    "malformed",
                    "the entry's hash is not the BLAKE3 of its text",
                ));
            }
            if !self.clean_text(t) {
                return Err(why(
                    "unredacted",
                    "the version holds text the redactor would change (a secret or a private span); refused, not rewritten",
                ));
            }
        } else if e.forgotten.is_none() && !e.is_tombstone() {
            return Err(why(
                "malformed",
                "a version without text must be a delete or forgotten",
            ));
        }
        if e.reason.as_deref().is_some_and(|r| !self.clean_text(r)) {
            return Err(why(
                "unredacted",
                "the reason holds text the redactor would change",
            ));
        }
        Ok(())
    }

    /// A note file a git remote changed without a version (a plain commit): taken as a hand
    /// edit is, when it is text memdir could have written.
    fn note_file(
        &self,
        path: &NotePath,
        body: Option<&[u8]>,
    ) -> std::result::Result<(Verdict, Needs), Why> {
        let Some(bytes) = body else {
            // Its absence follows from history.
            return Ok((Verdict::Same, Needs::default()));
        };
        let text = std::str::from_utf8(bytes).map_err(|_| why("malformed", "not UTF-8 text"))?;
        if !self.clean_text(text) {
            return Err(why(
                "unredacted",
                "the file holds text the redactor would change; refused, not rewritten",
            ));
        }
        let needs = Needs {
            write: Some(format!("notes/{path}")),
            ..Needs::default()
        };
        Ok((Verdict::Add(bytes.to_vec()), needs))
    }

    /// A conflict record: write-once, named by its hash.
    fn conflict(
        &self,
        category: &CategoryName,
        id: &str,
        body: Option<&[u8]>,
        local: Option<&[u8]>,
    ) -> std::result::Result<(Verdict, Needs), Why> {
        let Some(bytes) = body.filter(|b| local != Some(*b)) else {
            return unchanged_or_removed(body, local);
        };
        if local.is_some() {
            return Err(why(
                "write_once",
                "another content under the same name; a conflict record is write-once, this replica's copy stays",
            ));
        }
        let v: Value = serde_json::from_slice(bytes)
            .map_err(|e| why("malformed", format!("not JSON: {e}")))?;
        if !v.is_object() || !content_hash(bytes).starts_with(id) {
            return Err(why("malformed", "not a conflict record named by its hash"));
        }
        if !self.clean_value(&v) {
            return Err(why(
                "unredacted",
                "the record holds text the redactor would change; refused, not rewritten",
            ));
        }
        let needs = Needs {
            write: Some(category.to_string()),
            ..Needs::default()
        };
        Ok((Verdict::Add(bytes.to_vec()), needs))
    }

    /// A category file a git remote changed without a version (a plain commit): adopted as a
    /// hand edit is, when it is one memdir could have written.
    fn category(
        &self,
        name: &CategoryName,
        body: Option<&[u8]>,
    ) -> std::result::Result<(Verdict, Needs), Why> {
        let Some(bytes) = body else {
            // Its absence follows from history, like any category file.
            return Ok((Verdict::Same, Needs::default()));
        };
        let content = memdir_store::parse_category(bytes.to_vec())
            .content
            .map_err(|w| why("malformed", w))?;
        if codec::depth(&content) > limits::MAX_DATA_DEPTH {
            return Err(why("over_limit", "nested deeper than memdir's limit"));
        }
        if !self.clean_value(&content) {
            return Err(why(
                "unredacted",
                "the file holds text the redactor would change; refused, not rewritten",
            ));
        }
        let needs = Needs {
            write: Some(name.to_string()),
            ..Needs::default()
        };
        Ok((Verdict::Add(bytes.to_vec()), needs))
    }
}

/// A version's id (`<hlc>_<replica>`, newer than its parents) and the length of its reason.
fn check_id_and_reason(e: &HistoryEntry) -> std::result::Result<(), Why> {
    let stamp_ok = e.id.get(..24).and_then(Hlc::parse).is_some()
        && e.id.as_bytes().get(24) == Some(&b'_')
        && e.id.len() > 25;
    if !stamp_ok || e.parents.iter().any(|p| p.as_str() >= e.id.as_str()) {
        return Err(why(
            "malformed",
            "the id is not <hlc>_<replica> newer than its parents",
        ));
    }
    if e.reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > limits::MAX_REASON_CHARS)
    {
        return Err(why("over_limit", "the reason is over memdir's limit"));
    }
    Ok(())
}

/// The bytes of a whole-file body (`None`: removed). A tail is only for segments.
fn whole_body(body: Body<'_>) -> Result<Option<&[u8]>> {
    match body {
        Body::Whole(b) => Ok(Some(b)),
        Body::Removed => Ok(None),
        Body::Tail { .. } => Err(Error::invalid("from", "only a segment travels as a tail")),
    }
}

/// A write-once file the other side holds as this replica does (`Same`), or removed: refused,
/// this replica keeps it and the next sync carries it back.
fn unchanged_or_removed(
    body: Option<&[u8]>,
    local: Option<&[u8]>,
) -> std::result::Result<(Verdict, Needs), Why> {
    match (body, local) {
        (None, Some(_)) => Err(why(
            "write_once",
            "removed on the other side; a write-once file stays here and the next sync carries it back",
        )),
        _ => Ok((Verdict::Same, Needs::default())),
    }
}

/// The bytes a verdict writes, if it writes.
fn verdict_bytes(v: &Verdict) -> Option<&[u8]> {
    match v {
        Verdict::Add(b) | Verdict::Extend(b) | Verdict::Withdraw(b) | Verdict::Rewrite(b) => {
            Some(b)
        }
        Verdict::Same | Verdict::Refuse(_) => None,
    }
}

/// A line without its newline.
fn bare(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\n").unwrap_or(line)
}

/// A copy whose sealed lines replace this replica's unsealed ones.
struct Replaced {
    bytes: Vec<u8>,
    /// A vouched live line here became its tombstone there: a forget.
    forgets: bool,
}

/// `incoming` (a whole copy) line by line over `have`, when `have` holds a line within the
/// seal that no copy of the seal vouches for and every line of `incoming` is vouched for: a
/// line of `have` the seal vouches for stays (or becomes the incoming tombstone of it), any
/// other takes the incoming line. Never shorter than `have`. `None` when there is nothing to
/// replace or `incoming` cannot replace it.
fn replace_unsealed(seals: &[Seal], have: &[u8], incoming: &[u8]) -> Option<Replaced> {
    if seals.is_empty() || !incoming.ends_with(b"\n") {
        return None;
    }
    let (mine, theirs) = (lines(have), lines(incoming));
    let sealed = seal::sealed_lines(seals);
    let ok = |i: usize, l: &[u8]| seal::vouched(seals, i, bare(l));
    let contradicted = mine.iter().enumerate().take(sealed).any(|(i, l)| !ok(i, l));
    if !contradicted
        || theirs.len() < mine.len()
        || !theirs.iter().enumerate().all(|(i, l)| ok(i, l))
    {
        return None;
    }
    let tomb = |l: &[u8]| codec::parse_chunk_line(bare(l)).is_ok_and(|c| c.is_tombstone());
    let mut out = Replaced {
        bytes: Vec::with_capacity(incoming.len()),
        forgets: false,
    };
    for (i, t) in theirs.iter().enumerate() {
        let line = match mine.get(i) {
            Some(m) if ok(i, m) => {
                if tomb(t) && !tomb(m) {
                    out.forgets = true;
                    t
                } else {
                    m
                }
            }
            _ => t,
        };
        out.bytes.extend_from_slice(line);
    }
    Some(out)
}

/// A forget's tombstone: empty content and project, metadata `{"forgotten": <time>}`.
fn check_tombstone(c: &ChunkRecord) -> std::result::Result<(), Why> {
    let meta_ok = c
        .metadata
        .as_object()
        .is_some_and(|m| m.len() == 1 && m.get(TOMBSTONE_KEY).is_some_and(Value::is_string));
    if !meta_ok || !c.project.is_empty() {
        return Err(why(
            "malformed",
            format!("chunk {} is not a forget's tombstone", c.seq),
        ));
    }
    Ok(())
}

/// Two copies of one version: what this replica keeps. The same entry may differ only by
/// the withdrawal of its content (the withdrawn copy wins, a forget is never undone), by
/// the stamp of that withdrawal (the earlier wins, so both sides end alike), or by the form
/// of its content (whole wins over a patch).
fn compare_versions(
    mine: HistoryEntry,
    theirs: HistoryEntry,
    bytes: &[u8],
) -> std::result::Result<Verdict, Why> {
    let same_entry = mine.id == theirs.id
        && mine.parents == theirs.parents
        && mine.vv == theirs.vv
        && mine.op == theirs.op
        && mine.hash == theirs.hash
        && mine.actor == theirs.actor
        && mine.reason == theirs.reason
        && mine.ts == theirs.ts;
    let withdrawn = |e: &HistoryEntry| e.forgotten.is_some();
    let differs = || {
        Err(why(
            "write_once",
            "another version under the same name; a history file is write-once, this replica's copy stays",
        ))
    };
    if !same_entry {
        return differs();
    }
    match (withdrawn(&mine), withdrawn(&theirs)) {
        (false, true) => {
            if !theirs.content.is_null() || theirs.patch.is_some() {
                return differs();
            }
            let mut out = mine;
            out.content = Value::Null;
            out.patch = None;
            out.forgotten = theirs.forgotten;
            Ok(Verdict::Withdraw(history::whole_bytes(&out)))
        }
        (true, false) => Ok(Verdict::Same),
        (true, true) => {
            if theirs.content.is_null()
                && theirs.patch.is_none()
                && theirs.forgotten < mine.forgotten
            {
                let mut out = mine;
                out.content = Value::Null;
                out.patch = None;
                out.forgotten = theirs.forgotten;
                Ok(Verdict::Rewrite(history::whole_bytes(&out)))
            } else {
                Ok(Verdict::Same)
            }
        }
        (false, false) => match (&mine.patch, &theirs.patch) {
            // A patch here, the same version whole there (its hash checked): written whole.
            (Some(_), None) if !theirs.content.is_null() && theirs.hash.is_some() => {
                Ok(Verdict::Rewrite(bytes.to_vec()))
            }
            (None, Some(_)) => Ok(Verdict::Same),
            _ if mine.content == theirs.content && mine.patch == theirs.patch => Ok(Verdict::Same),
            _ => differs(),
        },
    }
}

/// A segment's bytes up to its last line end (a torn tail is not exchanged).
pub fn whole_lines(b: &[u8]) -> &[u8] {
    let end = b.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1);
    &b[..end]
}

/// The lines of whole-line bytes, each with its newline.
fn lines(b: &[u8]) -> Vec<&[u8]> {
    b.split_inclusive(|&c| c == b'\n').collect()
}

/// The line-by-line comparison of an incoming segment with this replica's copy, past the
/// bytes both are known to share.
struct SegmentMerge<'b> {
    /// This replica's lines past the shared bytes, with what replaces them.
    out: Vec<Cow<'b, [u8]>>,
    /// Lines before `out`, for messages.
    before: usize,
    withdrawn: bool,
    appended: bool,
    rewritten: bool,
    /// The incoming copy ends before this replica's and is its prefix: a cut copy.
    shorter: bool,
    needs: Needs,
}

impl<'b> SegmentMerge<'b> {
    /// Compares `data` with `have` past its first `common` bytes (both copies hold those).
    fn run(
        gate: &Gate<'_>,
        place: &SegmentPlace,
        own: bool,
        (have, common): (&'b [u8], usize),
        data: &'b [u8],
    ) -> std::result::Result<SegmentMerge<'b>, Why> {
        let mine = lines(&have[common..]);
        let incoming = lines(data);
        let mut m = SegmentMerge {
            out: mine.iter().map(|l| Cow::Borrowed(*l)).collect(),
            before: 0,
            withdrawn: false,
            appended: false,
            rewritten: false,
            shorter: incoming.len() < mine.len(),
            needs: Needs::default(),
        };
        if incoming.iter().zip(&mine).any(|(t, l)| t != l) {
            m.before = have[..common].iter().filter(|&&b| b == b'\n').count();
            m.shorter = false;
            for (i, t) in incoming.iter().enumerate().take(mine.len()) {
                if mine[i] != *t {
                    m.compare_line(i, mine[i], t)?;
                }
            }
        }
        if incoming.len() <= mine.len() {
            return Ok(m);
        }
        let last = lines(have).last().copied();
        let mut prev = last
            .and_then(|l| codec::parse_chunk_line(l.strip_suffix(b"\n").unwrap_or(l)).ok())
            .map(|c| (c.seq, c.hlc));
        if last.is_some() && prev.is_none() {
            return Err(why(
                "not_an_extension",
                "this replica's copy ends in a line that does not parse; nothing is appended after it",
            ));
        }
        if own {
            return Err(why(
                "own_segment",
                "lines this replica never wrote in its own segment; only this replica appends to it",
            ));
        }
        for t in incoming.iter().skip(mine.len()) {
            let c = gate.new_line(place, t, prev.as_ref())?;
            if !c.is_tombstone() {
                m.needs.ingest.insert(c.project.clone());
            }
            prev = Some((c.seq, c.hlc));
            m.out.push(Cow::Borrowed(*t));
            m.appended = true;
        }
        Ok(m)
    }

    /// Line `i` past the shared bytes differs: a tombstone of this replica's line withdraws
    /// it; a live copy of a line this replica forgot leaves the tombstone; anything else is
    /// refused.
    fn compare_line(
        &mut self,
        i: usize,
        mine: &[u8],
        theirs: &'b [u8],
    ) -> std::result::Result<(), Why> {
        let n = self.before + i + 1;
        let parse = |l: &[u8]| codec::parse_chunk_line(l.strip_suffix(b"\n").unwrap_or(l)).ok();
        let differs = || {
            why(
                "not_an_extension",
                format!(
                    "line {n} differs from this replica's; a segment is only appended to, this replica's copy stays"
                ),
            )
        };
        let (Some(m), Some(t)) = (parse(mine), parse(theirs)) else {
            return Err(differs());
        };
        let same_chunk = m.session_id == t.session_id
            && m.replica == t.replica
            && m.seq == t.seq
            && m.hlc == t.hlc
            && m.ts == t.ts;
        if !same_chunk {
            return Err(differs());
        }
        match (m.is_tombstone(), t.is_tombstone()) {
            (false, true) => {
                check_tombstone(&t)?;
                self.out[i] = Cow::Borrowed(theirs);
                self.withdrawn = true;
                self.needs.forget_sessions = true;
            }
            (true, false) => {}
            (true, true) => {
                check_tombstone(&t)?;
                // Two forgets of one chunk: the smaller line on both sides.
                if theirs < mine {
                    self.out[i] = Cow::Borrowed(theirs);
                    self.rewritten = true;
                }
            }
            (false, false) => return Err(differs()),
        }
        Ok(())
    }

    fn verdict(
        self,
        have: &[u8],
        common: usize,
        whole: bool,
    ) -> std::result::Result<(Verdict, Needs), Why> {
        let changed = self.withdrawn || self.appended || self.rewritten;
        if !changed {
            if self.shorter && whole {
                return Err(why(
                    "not_an_extension",
                    "shorter than this replica's copy; a segment is never cut, this replica's copy stays",
                ));
            }
            return Ok((Verdict::Same, self.needs));
        }
        let mut bytes =
            Vec::with_capacity(have.len() + self.out.iter().map(|l| l.len()).sum::<usize>());
        bytes.extend_from_slice(&have[..common]);
        for l in &self.out {
            bytes.extend_from_slice(l);
        }
        let verdict = if have.is_empty() {
            Verdict::Add(bytes)
        } else if self.withdrawn {
            Verdict::Withdraw(bytes)
        } else if self.appended && !self.rewritten {
            Verdict::Extend(bytes)
        } else {
            Verdict::Rewrite(bytes)
        };
        Ok((verdict, self.needs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ME: &str = "me-aaaa";
    const PEER: &str = "peer-bbbb";

    fn line(replica: &str, seq: u64, content: &str) -> String {
        codec::chunk_line(&ChunkRecord {
            session_id: "s".into(),
            replica: replica.into(),
            seq,
            hlc: format!("20260101T0000000{seq:02}Z-0000"),
            ts: "2026-01-01T00:00:00.000Z".into(),
            project: String::new(),
            metadata: json!({}),
            content: content.into(),
        })
    }

    fn tomb(replica: &str, seq: u64, at: &str) -> String {
        let mut c = codec::parse_chunk_line(line(replica, seq, "x").trim_end().as_bytes()).unwrap();
        c.content = String::new();
        c.metadata = json!({ TOMBSTONE_KEY: at });
        codec::chunk_line(&c)
    }

    fn seg(replica: &str) -> String {
        format!("sessions/s/{replica}.jsonl")
    }

    fn admit(path: &str, body: &str, local: Option<&str>) -> Verdict {
        admit_as(&SyncAccess::all(), path, body, local).unwrap()
    }

    fn admit_as(
        access: &SyncAccess<'_>,
        path: &str,
        body: &str,
        local: Option<&str>,
    ) -> Result<Verdict> {
        let r = Redactor::default();
        Gate::new(ME, access, &r).admit(
            &Incoming::whole(path, body.as_bytes()),
            local.map(str::as_bytes),
        )
    }

    fn kind(v: &Verdict) -> &str {
        match v {
            Verdict::Refuse(p) => &p.kind,
            _ => "",
        }
    }

    #[test]
    fn sealed_lines_replace_only_lines_no_seal_vouches_for() {
        use crate::sync::seal::Signer32;
        let at = "sessions/s/peer-bbbb.head";
        let genuine = [line(PEER, 0, "alpha"), line(PEER, 1, "beta")].concat();
        let good = Signer32::new(&[7; 32])
            .seal(at, PEER, genuine.as_bytes(), None)
            .unwrap();
        let mut tampered = good.clone();
        for p in &mut tampered.proofs {
            p.salt = [0; 12];
        }
        let forget = [
            tomb(PEER, 0, "2026-02-01T00:00:00.000Z"),
            line(PEER, 1, "beta"),
        ]
        .concat();
        // A held copy the held seal vouches for: proofs that prove nothing contradict nothing,
        // and its tombstone copy stays a forget for the forget rules to judge.
        assert!(
            replace_unsealed(
                &[good.clone(), tampered.clone()],
                genuine.as_bytes(),
                forget.as_bytes()
            )
            .is_none()
        );
        // Held lines from before seals, rewritten: the sealed ones replace them, a live line
        // the seal vouches for stays, and a tombstone of it is a forget.
        let planted = [line(PEER, 0, "PLANTED"), line(PEER, 1, "beta")].concat();
        let by_good = |have: &str, incoming: &str| {
            replace_unsealed(
                std::slice::from_ref(&good),
                have.as_bytes(),
                incoming.as_bytes(),
            )
        };
        let out = by_good(&planted, &genuine).unwrap();
        assert_eq!(out.bytes, genuine.as_bytes());
        assert!(!out.forgets);
        let both = [
            tomb(PEER, 0, "2026-02-01T00:00:00.000Z"),
            tomb(PEER, 1, "2026-02-01T00:00:00.000Z"),
        ]
        .concat();
        let out = by_good(&planted, &both).unwrap();
        assert_eq!(out.bytes, both.as_bytes());
        assert!(
            out.forgets,
            "line 1 was held and sealed: its tombstone is a forget"
        );
        // Never a shorter copy, and never on proofs alone.
        assert!(by_good(&planted, &line(PEER, 0, "alpha")).is_none());
        assert!(replace_unsealed(&[tampered], planted.as_bytes(), genuine.as_bytes()).is_none());
    }

    #[test]
    fn only_places_of_the_layout_come_from_outside() {
        for ok in [
            "history/plan/20260101T000000000Z-0000_a-b.json",
            "conflicts/plan/abcd.json",
            "sessions/s1/peer-aaaa.jsonl",
            "sessions/s1/peer-aaaa.3.jsonl",
            "categories/plan.json",
        ] {
            assert!(Place::of(ok).is_ok(), "{ok}");
        }
        for bad in [
            ".gitignore",
            ".gitattributes",
            "memdir.json",
            "sessions/..",
            "sessions/s1/..",
            "sessions/../x.jsonl",
            "history/plan/../../x.json",
            "sessions/s1/.hidden.jsonl",
            "sessions/s1/a/b.jsonl",
            "run-me.sh",
            "history/Plan%2F/x.json",
            "categories/a/b.json",
        ] {
            assert!(Place::of(bad).is_err(), "{bad}");
        }
        assert_eq!(kind(&admit(".gitignore", "*\n", None)), "outside_layout");
        let r = Redactor::default();
        let access = SyncAccess::all();
        let link = Incoming {
            path: "sessions/s/peer-bbbb.jsonl",
            entry: Entry::Link,
            body: Body::Whole(b"x"),
        };
        let v = Gate::new(ME, &access, &r).admit(&link, None).unwrap();
        assert_eq!(kind(&v), "link");
    }

    #[test]
    fn a_segment_is_taken_only_as_an_extension() {
        let a = line(PEER, 0, "one");
        let b = line(PEER, 1, "two");
        let longer = format!("{a}{b}");
        assert_eq!(
            admit(&seg(PEER), &a, None),
            Verdict::Add(a.clone().into_bytes())
        );
        assert_eq!(
            admit(&seg(PEER), &longer, Some(&a)),
            Verdict::Extend(longer.clone().into_bytes())
        );
        assert_eq!(admit(&seg(PEER), &longer, Some(&longer)), Verdict::Same);
        // Shorter, or a line rewritten: refused, this replica's copy stays.
        assert_eq!(
            kind(&admit(&seg(PEER), &a, Some(&longer))),
            "not_an_extension"
        );
        let rewritten = format!("{}{b}", line(PEER, 0, "ONE"));
        assert_eq!(
            kind(&admit(&seg(PEER), &rewritten, Some(&longer))),
            "not_an_extension"
        );
        // A tail must continue this replica's copy.
        let r = Redactor::default();
        let access = SyncAccess::all();
        let gate = Gate::new(ME, &access, &r);
        fn tail<'x>(prefix: &'x str, from: usize, data: &'x str) -> Incoming<'x> {
            Incoming {
                path: "sessions/s/peer-bbbb.jsonl",
                entry: Entry::File,
                body: Body::Tail {
                    from: from as u64,
                    prefix,
                    data: data.as_bytes(),
                },
            }
        }
        let good = content_hash(a.as_bytes());
        assert_eq!(
            gate.admit(&tail(&good, a.len(), &b), Some(a.as_bytes()))
                .unwrap(),
            Verdict::Extend(longer.clone().into_bytes())
        );
        assert_eq!(
            kind(
                &gate
                    .admit(&tail(&"0".repeat(64), a.len(), &b), Some(a.as_bytes()))
                    .unwrap()
            ),
            "not_an_extension"
        );
    }

    #[test]
    fn new_lines_are_checked_like_an_ingest() {
        let first = line(PEER, 0, "one");
        let cases = [
            ("another replica", line("zzzz-0000", 0, "x"), "malformed"),
            ("seq 7 first", line(PEER, 7, "x"), "malformed"),
            (
                "an unknown field",
                first.replace("\"content\"", "\"smuggled\":true,\"content\""),
                "malformed",
            ),
            ("no content", line(PEER, 0, " "), "malformed"),
            (
                "too long",
                line(PEER, 0, &"y".repeat(300 * 1024)),
                "over_limit",
            ),
            (
                "a secret",
                line(
                    PEER,
                    0,
                    &format!("key {}", ["AKIA", "QWERTYUIOP23ASDF"].concat()),
                ),
                "unredacted",
            ),
            (
                "private text",
                line(PEER, 0, "a <private>b</private>"),
                "unredacted",
            ),
        ];
        for (what, data, want) in cases {
            assert_eq!(kind(&admit(&seg(PEER), &data, None)), want, "{what}");
        }
        let other_session = first.replace("\"session_id\":\"s\"", "\"session_id\":\"t\"");
        assert_eq!(kind(&admit(&seg(PEER), &other_session, None)), "malformed");
        // A gap after this replica's copy, and a stamp going back.
        let gap = format!("{first}{}", line(PEER, 2, "x"));
        assert_eq!(kind(&admit(&seg(PEER), &gap, Some(&first))), "malformed");
        let back = format!(
            "{}{}",
            line(PEER, 1, "x"),
            line(PEER, 2, "y").replace("002Z", "000Z")
        );
        let base = line(PEER, 0, "z");
        assert_eq!(
            kind(&admit(&seg(PEER), &format!("{base}{back}"), Some(&base))),
            "malformed"
        );
    }

    #[test]
    fn this_replicas_own_segment_takes_tombstones_only() {
        let mine = format!("{}{}", line(ME, 0, "one"), line(ME, 1, "two"));
        let longer = format!("{mine}{}", line(ME, 2, "three"));
        assert_eq!(kind(&admit(&seg(ME), &longer, Some(&mine))), "own_segment");
        assert_eq!(kind(&admit(&seg(ME), &mine, None)), "own_segment");
        let forgot = format!("{}{}", line(ME, 0, "one"), tomb(ME, 1, "t1"));
        assert_eq!(
            admit(&seg(ME), &forgot, Some(&mine)),
            Verdict::Withdraw(forgot.clone().into_bytes())
        );
        // A forget on the other side of an older copy: the appended line stays.
        let appended = format!("{mine}{}", line(ME, 2, "three"));
        let want = format!(
            "{}{}{}",
            line(ME, 0, "one"),
            tomb(ME, 1, "t1"),
            line(ME, 2, "three")
        );
        assert_eq!(
            admit(&seg(ME), &forgot, Some(&appended)),
            Verdict::Withdraw(want.into_bytes())
        );
    }

    #[test]
    fn a_forget_travels_both_ways_and_two_forgets_of_a_chunk_end_alike() {
        let a = line(PEER, 0, "one");
        let b = line(PEER, 1, "two");
        let c = line(PEER, 2, "three");
        // Here: forgot line 1. There: appended line 2. Both sides end with the same bytes.
        let here = format!("{a}{}", tomb(PEER, 1, "t1"));
        let there = format!("{a}{b}{c}");
        let both = format!("{a}{}{c}", tomb(PEER, 1, "t1"));
        assert_eq!(
            admit(&seg(PEER), &there, Some(&here)),
            Verdict::Extend(both.clone().into_bytes())
        );
        assert_eq!(
            admit(&seg(PEER), &here, Some(&there)),
            Verdict::Withdraw(both.clone().into_bytes())
        );
        // An older copy of a segment this replica forgot a line of and appended to: nothing
        // to take, nothing to report.
        let older = format!("{a}{b}");
        assert_eq!(admit(&seg(PEER), &older, Some(&both)), Verdict::Same);
        // Two stamps of one forget: the smaller line wins on both sides.
        let early = format!("{a}{}", tomb(PEER, 1, "t1"));
        let late = format!("{a}{}", tomb(PEER, 1, "t2"));
        assert_eq!(
            admit(&seg(PEER), &early, Some(&late)),
            Verdict::Rewrite(early.clone().into_bytes())
        );
        assert_eq!(admit(&seg(PEER), &late, Some(&early)), Verdict::Same);
        // Forgets of different chunks on the two sides: both stay, whichever side merges.
        let other = format!("{}{b}", tomb(PEER, 0, "t3"));
        let forgot_both = format!("{}{}", tomb(PEER, 0, "t3"), tomb(PEER, 1, "t1"));
        assert_eq!(
            admit(&seg(PEER), &other, Some(&here)),
            Verdict::Withdraw(forgot_both.clone().into_bytes())
        );
        assert_eq!(
            admit(&seg(PEER), &here, Some(&other)),
            Verdict::Withdraw(forgot_both.into_bytes())
        );
        // Two writers under one replica id: refused both ways, each side keeps its own.
        let x = format!("{a}{}", line(PEER, 1, "x"));
        let y = format!("{a}{}{}", line(PEER, 1, "y"), line(PEER, 2, "z"));
        assert_eq!(kind(&admit(&seg(PEER), &x, Some(&y))), "not_an_extension");
        assert_eq!(kind(&admit(&seg(PEER), &y, Some(&x))), "not_an_extension");
        // The forget needs the right to forget.
        let access = SyncAccess {
            forget: &|| Err(memdir_api::error::Error::invalid("acl", "no")),
            ..SyncAccess::all()
        };
        assert!(admit_as(&access, &seg(PEER), &here, Some(&there)).is_err());
    }

    fn entry(id: &str, op: &str, content: Value, actor: &str) -> HistoryEntry {
        HistoryEntry {
            id: id.into(),
            parents: Vec::new(),
            vv: [("a-b".to_string(), 1)].into(),
            op: op.into(),
            hash: (!content.is_null()).then(|| content_hash(&codec::to_pretty(&content))),
            actor: actor.into(),
            reason: None,
            ts: "2026-01-01T00:00:00.000Z".into(),
            content,
            forgotten: None,
            patch: None,
        }
    }

    const ID: &str = "20260101T000000001Z-0000_a-b";

    fn hist() -> String {
        format!("history/plan/{ID}.json")
    }

    fn bytes(e: &HistoryEntry) -> String {
        String::from_utf8(history::whole_bytes(e)).unwrap()
    }

    #[test]
    fn history_is_write_once_but_for_a_forget() {
        let e = entry(ID, "write", json!({"k": 1}), "laptop");
        let b = bytes(&e);
        assert!(matches!(admit(&hist(), &b, None), Verdict::Add(_)));
        assert_eq!(admit(&hist(), &b, Some(&b)), Verdict::Same);
        let other = bytes(&entry(ID, "write", json!({"k": 2}), "laptop"));
        assert_eq!(kind(&admit(&hist(), &other, Some(&b))), "write_once");
        let r = Redactor::default();
        let access = SyncAccess::all();
        let removed = Incoming {
            path: &hist(),
            entry: Entry::File,
            body: Body::Removed,
        };
        let gate = Gate::new(ME, &access, &r);
        assert_eq!(
            kind(&gate.admit(&removed, Some(b.as_bytes())).unwrap()),
            "write_once"
        );
        // A forget: the withdrawn copy wins, and is never undone.
        let mut f = e.clone();
        f.content = Value::Null;
        f.forgotten = Some("2026-02-01T00:00:00.000Z".into());
        let fb = bytes(&f);
        assert_eq!(
            admit(&hist(), &fb, Some(&b)),
            Verdict::Withdraw(fb.clone().into_bytes())
        );
        assert_eq!(admit(&hist(), &b, Some(&fb)), Verdict::Same);
        let no_forget = SyncAccess {
            destroy: &|_, what| Err(memdir_api::error::Error::invalid("acl", what)),
            ..SyncAccess::all()
        };
        assert!(admit_as(&no_forget, &hist(), &fb, Some(&b)).is_err());
    }

    #[test]
    fn versions_are_checked_like_writes_and_each_op_needs_its_right() {
        let secret = ["ghp_", "Zx9Kq2Lm4Np6Rs8Tv0Wy1Ab3Cd5Ef7Gh9Ij1"].concat();
        let leaky = bytes(&entry(ID, "write", json!({"k": secret}), "laptop"));
        assert_eq!(kind(&admit(&hist(), &leaky, None)), "unredacted");
        let big = bytes(&entry(
            ID,
            "write",
            json!({"k": "x".repeat(2 << 20)}),
            "laptop",
        ));
        assert_eq!(kind(&admit(&hist(), &big, None)), "over_limit");
        let mut lying = entry(ID, "write", json!({"k": 1}), "laptop");
        lying.hash = Some("0".repeat(64));
        assert_eq!(kind(&admit(&hist(), &bytes(&lying), None)), "malformed");
        let phone = SyncAccess {
            destroy: &|_, what| Err(memdir_api::error::Error::invalid("acl", what)),
            device: Some("phone"),
            ..SyncAccess::all()
        };
        let by_laptop = bytes(&entry(ID, "write", json!({"k": 1}), "laptop"));
        assert!(admit_as(&phone, &hist(), &by_laptop, None).is_err());
        let by_phone = bytes(&entry(ID, "write", json!({"k": 1}), "phone"));
        assert!(matches!(
            admit_as(&phone, &hist(), &by_phone, None).unwrap(),
            Verdict::Add(_)
        ));
        let delete = bytes(&entry(ID, "delete", Value::Null, "phone"));
        assert!(admit_as(&phone, &hist(), &delete, None).is_err());
    }
}
