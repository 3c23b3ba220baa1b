//! `verify-store`: a read-only check that files, history and ledger agree.
use crate::service::Upkeep;

use serde_json::{Value, json};

use crate::ledger::Ledger;
use crate::service::categories::log::check_log_shape;
use memdir_api::error::{Error, Result};
use memdir_store::clock::Hlc;
use memdir_store::model::{
    CategoryKind, CategoryName, ChunkRecord, HistoryEntry, SessionId, content_hash,
    encode_component,
};
use memdir_store::{self as store, CategoryFile, Layout, SegmentFile, codec, fsx, segment};

struct Problems(Vec<Value>);

impl Problems {
    fn add(&mut self, kind: &str, path: impl AsRef<std::path::Path>, message: impl Into<String>) {
        self.0.push(json!({"kind": kind, "path": path.as_ref().display().to_string(), "message": message.into()}));
    }
}

impl Upkeep<'_> {
    /// Compares files, history and ledger without changing anything. `ok` is true when clean.
    pub fn verify(&self) -> Result<memdir_api::VerifyResponse> {
        let report = self.verify_report()?;
        serde_json::from_value(report)
            .map_err(|e| Error::internal(format!("verify-store report: {e}")))
    }

    /// The verify-store report as JSON: every problem found, what was checked, and the
    /// index's state.
    fn verify_report(&self) -> Result<Value> {
        let layout = self.layout();
        let now = memdir_store::clock::now_ms();
        let mut p = Problems(Vec::new());
        if !layout.exists() {
            return Ok(json!({"ok": true, "exists": false, "problems": [], "checked": {}}));
        }
        // A store of a newer format is not judged by rules it does not follow.
        self.check_format()?;
        for name in memdir_store::recovery::pending(&layout.staging()) {
            p.add(
                "pending_staging",
                layout.staging().join(&name),
                "staged work not yet recovered (the next write or open recovers it)",
            );
        }
        let ledger = if layout.ledger_path().exists() {
            Ledger::open(&layout.ledger_path(), self.settings.lock_timeout)
                .ok()
                .map(|(l, _)| l)
        } else {
            None
        };
        let (names, strays) = store::list_category_files(layout)?;
        for s in strays {
            p.add(
                "stray_file",
                s,
                "not a canonical category file name; memdir ignores it",
            );
        }
        let n_history = check_categories(layout, &names, ledger.as_ref(), now, &mut p)?;
        let (n_segments, n_chunks) = check_sessions(layout, ledger.as_ref(), now, &mut p)?;
        let (n_notes, n_note_versions) = check_notes(layout, now, &mut p)?;
        check_special_files(layout, &mut p);
        let mut report = json!({
            "ok": p.0.is_empty(),
            "exists": true,
            "problems": p.0,
            "checked": {
                "categories": names.len(), "history_entries": n_history,
                "segments": n_segments, "chunks": n_chunks, "ledger": ledger.is_some(),
                "notes": n_notes, "note_versions": n_note_versions,
            },
            "files_hash": files_fingerprint(layout)?,
            "conflicts": self.replication().open_conflicts()?,
        });
        // A damaged index is a finding, not a failure of verify-store.
        if let Err(e) = self.indexing().verify_index(&mut report) {
            report["index"] = json!({"state": "damaged", "error": e.message});
            report["ok"] = json!(false);
            if let Some(problems) = report["problems"].as_array_mut() {
                problems.push(json!({
                    "kind": "index",
                    "path": ".memdir/index",
                    "message": format!("the search index cannot be read ({}); a reindex rebuilds it from the files", e.message),
                }));
            }
        }
        Ok(report)
    }
}

/// Checks every category that has a file or a history (`names` are those with a file):
/// its history entries, and its file against its newest entry and the ledger. Returns how
/// many history entries there are.
fn check_categories(
    layout: &Layout,
    names: &[CategoryName],
    ledger: Option<&Ledger>,
    now: i64,
    p: &mut Problems,
) -> Result<usize> {
    let mut n_history = 0usize;
    let mut all_names = names.to_vec();
    all_names.extend(store::list_history_names(layout)?);
    all_names.sort();
    all_names.dedup();
    for name in &all_names {
        let rel = Layout::category_rel(name);
        let file = store::read_category(layout, name)?;
        let (n, head) = check_history(layout, name, now, p)?;
        n_history += n;
        check_category_file(name, &rel, file.as_ref(), head.as_ref(), ledger, p)?;
    }
    Ok(n_history)
}

/// Checks each history entry of one category: its stamp, and that its content, tombstone,
/// forget mark and hash agree. Returns how many entries there are and the newest readable
/// one.
fn check_history(
    layout: &Layout,
    name: &CategoryName,
    now: i64,
    p: &mut Problems,
) -> Result<(usize, Option<HistoryEntry>)> {
    let mut n = 0usize;
    let mut head = None;
    for h in store::history::read_all(layout, name)? {
        n += 1;
        let id = &h.id;
        if let Some(stamp) = id.get(..24).and_then(Hlc::parse)
            && !stamp.admissible(now)
        {
            p.add("future_stamp", Layout::history_rel(name).join(format!("{id}.json")), format!("stamp {stamp} is more than a day ahead of this machine's clock; memdir's clock does not follow it"));
        }
        match h.entry {
            Ok(e) => {
                if h.patched
                    && e.hash.as_deref()
                        != Some(content_hash(&codec::to_pretty(&e.content)).as_str())
                {
                    p.add(
                        "history",
                        &h.path,
                        "the version's patch, applied to its base, does not give its hash",
                    );
                }
                if e.forgotten.is_some() {
                    if !e.content.is_null() {
                        p.add(
                            "history",
                            &h.path,
                            "a forgotten version must have null content",
                        );
                    }
                } else if e.is_tombstone() != e.content.is_null() {
                    p.add(
                        "history",
                        &h.path,
                        "a delete tombstone must have null content, and only a tombstone may",
                    );
                }
                if !e.is_tombstone() && e.hash.is_none() {
                    p.add("history", &h.path, "a version with content needs a hash");
                }
                head = Some(e);
            }
            Err(why) => p.add(
                "history",
                &h.path,
                format!("malformed history entry: {why}"),
            ),
        }
    }
    Ok((n, head))
}

/// Checks one category file against its newest history entry `head`, its kind's shape, and
/// the ledger's cached hash.
fn check_category_file(
    name: &CategoryName,
    rel: &std::path::Path,
    file: Option<&CategoryFile>,
    head: Option<&HistoryEntry>,
    ledger: Option<&Ledger>,
    p: &mut Problems,
) -> Result<()> {
    match (file, head) {
        (Some(f), _) if f.content.is_err() => {
            p.add(
                "malformed",
                rel,
                f.content.as_ref().err().cloned().unwrap_or_default(),
            );
        }
        (Some(f), Some(h)) if h.hash.as_deref() != Some(&f.hash) => {
            p.add("unadopted_change", rel, "the file differs from its newest history entry (the next open adopts it as an external version)");
        }
        (Some(_), None) => p.add(
            "unadopted_change",
            rel,
            "the file has no history yet (the next open adopts it)",
        ),
        (None, Some(h)) if !h.is_tombstone() => p.add(
            "unadopted_change",
            rel,
            "the file is missing but its history has no delete tombstone",
        ),
        _ => {}
    }
    if let Some(f) = file
        && let Ok(c) = &f.content
    {
        if CategoryKind::of(c) == CategoryKind::Log
            && let Err(why) = check_log_shape(c)
        {
            p.add("schema", rel, why);
        }
        if let Some(l) = ledger
            && let Some(row) = l.category(name.as_str())?
            && row.file_hash.as_deref() != Some(f.hash.as_str())
        {
            p.add(
                "ledger",
                rel,
                "the ledger's cached hash differs from the file (the next open refreshes it)",
            );
        }
    }
    Ok(())
}

/// Checks every note that has a file or a history: each version (text and hash agree, a
/// tombstone has no text), and the file against its newest version. Returns how many notes
/// have a file and how many versions there are.
fn check_notes(layout: &Layout, now: i64, p: &mut Problems) -> Result<(usize, usize)> {
    use memdir_store::note::{self, NotePath};
    let (found, strays) = note::list(layout)?;
    for s in strays {
        p.add(
            "stray_file",
            s,
            "not a valid note path (or a link or special file); memdir ignores it",
        );
    }
    let mut paths: Vec<NotePath> = found
        .iter()
        .filter_map(|l| NotePath::new(&l.path).ok())
        .collect();
    paths.extend(note::history_paths(layout)?);
    paths.sort();
    paths.dedup();
    let mut versions = 0;
    for path in &paths {
        let mut head = None;
        for h in note::history(layout, path)? {
            versions += 1;
            if let Some(stamp) = h.id.get(..24).and_then(Hlc::parse)
                && !stamp.admissible(now)
            {
                p.add(
                    "future_stamp",
                    &h.path,
                    format!("stamp {stamp} is more than a day ahead of this machine's clock"),
                );
            }
            match h.entry {
                Ok(e) => {
                    let text = note::entry_text(&e);
                    if e.is_tombstone() != text.is_none() && e.forgotten.is_none() {
                        p.add(
                            "history",
                            &h.path,
                            "a delete tombstone must have no text, and only a tombstone may",
                        );
                    }
                    if let Some(t) = text
                        && e.hash.as_deref() != Some(content_hash(t.as_bytes()).as_str())
                    {
                        p.add(
                            "history",
                            &h.path,
                            "the version's text does not give its hash",
                        );
                    }
                    head = Some(e);
                }
                Err(why) => p.add(
                    "history",
                    &h.path,
                    format!("malformed history entry: {why}"),
                ),
            }
        }
        let rel = path.rel();
        match (note::read(layout, path)?, head) {
            (Some(f), _) if f.text.is_err() => {
                p.add("malformed", &rel, f.text.err().unwrap_or_default());
            }
            (Some(f), Some(h)) if h.hash.as_deref() != Some(f.hash.as_str()) => p.add(
                "unadopted_change",
                &rel,
                "the note differs from its newest version (its next change adopts it as an external version)",
            ),
            (Some(_), None) => p.add(
                "unadopted_change",
                &rel,
                "the note has no history yet (its first change adopts it)",
            ),
            (None, Some(h)) if !h.is_tombstone() => p.add(
                "unadopted_change",
                &rel,
                "the note is missing but its history has no delete tombstone",
            ),
            _ => {}
        }
    }
    Ok((found.len(), versions))
}

/// Checks every session directory: its seals, and each of its segments. Returns how many
/// segments and chunks there are.
fn check_sessions(
    layout: &Layout,
    ledger: Option<&Ledger>,
    now: i64,
    p: &mut Problems,
) -> Result<(usize, usize)> {
    let mut n_segments = 0usize;
    let mut n_chunks = 0usize;
    let mut sizes: std::collections::HashMap<String, usize> = Default::default();
    let mut links: Vec<Link> = Vec::new();
    for (id, dir) in store::list_session_dirs(layout)? {
        check_seals(layout, &dir, p);
        for f in store::list_segments(layout, &dir)? {
            n_segments += 1;
            let n = check_segment(layout, &id, &f, ledger, now, p, &mut links)?;
            n_chunks += n;
            *sizes.entry(id.clone()).or_default() += n;
        }
    }
    for l in links {
        let held = memdir_index::search::supersede::corrected_places(&serde_json::json!({
            memdir_index::search::supersede::SUPERSEDES_KEY: [l.target.clone()]
        }));
        match held.first() {
            None => p.add(
                "correction",
                &l.rel,
                format!("seq {}: supersedes holds {}, which is not a chunk uri (memdir://sessions/SESSION/POSITION): it corrects nothing", l.seq, l.target),
            ),
            Some((session, position)) if sizes.get(session).is_none_or(|n| *position >= *n as u64) => p.add(
                "correction",
                &l.rel,
                format!("seq {}: supersedes names {}, which is no chunk of this store", l.seq, l.target),
            ),
            Some(_) => {}
        }
    }
    Ok((n_segments, n_chunks))
}

/// A chunk's claim to correct another (`metadata.supersedes`), checked once every session is
/// counted.
struct Link {
    rel: std::path::PathBuf,
    seq: u64,
    /// One entry of the list, as written.
    target: Value,
}

/// Checks one segment of session `id`: its lines, its tail, its chunks, and the ledger's
/// chunk count. Returns how many chunks it holds (none when it cannot be read).
fn check_segment(
    layout: &Layout,
    id: &str,
    f: &SegmentFile,
    ledger: Option<&Ledger>,
    now: i64,
    p: &mut Problems,
    links: &mut Vec<Link>,
) -> Result<usize> {
    let path = layout.root.join(&f.rel);
    let bytes = match fsx::read(&path, fsx::MAX_SEGMENT_FILE) {
        Ok(b) => b.unwrap_or_default(),
        Err(e) => {
            p.add("unreadable", &f.rel, e.source.to_string());
            return Ok(0);
        }
    };
    let seg = segment::parse(&bytes);
    for (line, why) in &seg.bad_lines {
        p.add("malformed_line", &f.rel, format!("line {line}: {why}"));
    }
    if seg.tail_len > 0 {
        p.add(
            "torn_tail",
            &f.rel,
            format!(
                "{} bytes after the last newline (the next write repairs it)",
                seg.tail_len
            ),
        );
    }
    check_chunks(id, f, &seg.chunks, now, p);
    for c in seg.chunks.iter().filter(|c| !c.is_tombstone()) {
        match c
            .metadata
            .get(memdir_index::search::supersede::SUPERSEDES_KEY)
        {
            None => {}
            Some(Value::Array(a)) => links.extend(a.iter().map(|t| Link {
                rel: f.rel.clone(),
                seq: c.seq,
                target: t.clone(),
            })),
            Some(other) => p.add(
                "correction",
                &f.rel,
                format!(
                    "seq {}: supersedes is {other}, not a list of chunk uris",
                    c.seq
                ),
            ),
        }
    }
    if let Some(l) = ledger
        && let Some(row) = l.segment(&f.rel.to_string_lossy())?
        && row.chunks != seg.chunks.len() as i64
    {
        p.add(
            "ledger",
            &f.rel,
            format!(
                "the ledger counts {} chunks, the file holds {}",
                row.chunks,
                seg.chunks.len()
            ),
        );
    }
    Ok(seg.chunks.len())
}

/// Checks the chunks of one segment of session `id`: each names the segment's replica and
/// session, seqs run on from 0 (or from where a continued segment starts), and stamps
/// increase without running ahead of this machine's clock.
fn check_chunks(id: &str, f: &SegmentFile, chunks: &[ChunkRecord], now: i64, p: &mut Problems) {
    let mut expect_seq = None;
    let mut last_hlc = String::new();
    for c in chunks {
        if c.replica != f.replica {
            p.add(
                "segment",
                &f.rel,
                format!("chunk {} names replica {:?}", c.seq, c.replica),
            );
        }
        if SessionId::new(&c.session_id).is_err()
            || encode_component(&c.session_id) != encode_component(id)
        {
            p.add(
                "segment",
                &f.rel,
                format!("chunk {} names session {:?}", c.seq, c.session_id),
            );
        }
        if let Some(e) = expect_seq
            && c.seq != e
        {
            p.add(
                "segment",
                &f.rel,
                format!("seq {} follows {} (expected {e})", c.seq, e - 1),
            );
        }
        if expect_seq.is_none()
            && c.seq != 0
            && !f
                .rel
                .to_string_lossy()
                .trim_end_matches(".jsonl")
                .contains('.')
        {
            p.add(
                "segment",
                &f.rel,
                format!("the first seq is {}, not 0", c.seq),
            );
        }
        if let Some(h) = Hlc::parse(&c.hlc)
            && !h.admissible(now)
        {
            p.add("future_stamp", &f.rel, format!("seq {}: stamp {h} is more than a day ahead of this machine's clock; memdir's clock does not follow it", c.seq));
        }
        if c.hlc <= last_hlc {
            p.add(
                "segment",
                &f.rel,
                format!("hlc {} of seq {} does not increase", c.hlc, c.seq),
            );
        }
        last_hlc = c.hlc.clone();
        expect_seq = Some(c.seq + 1);
    }
}

/// Reports links, special files and directories named like files in the truth directories.
fn check_special_files(layout: &Layout, p: &mut Problems) {
    // Links and special files in the truth directories: never followed, read or written.
    for e in walkdir::WalkDir::new(&layout.root)
        .min_depth(1)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".memdir" || e.depth() != 1)
        .filter_map(|e| e.ok())
    {
        let t = e.file_type();
        let rel = e.path().strip_prefix(&layout.root).unwrap_or(e.path());
        if t.is_symlink() {
            p.add(
                "link",
                rel,
                "a symbolic link inside the memory directory: memdir neither follows it nor writes through it",
            );
        } else if !t.is_file() && !t.is_dir() {
            p.add(
                "special_file",
                rel,
                "a FIFO, socket or device inside the memory directory: memdir never reads it",
            );
        } else if t.is_dir() && rel.extension().is_some_and(|x| x == "jsonl" || x == "json") {
            p.add(
                "stray_directory",
                rel,
                "a directory where memdir expects a file: it is ignored",
            );
        }
    }
}

/// A hash over every truth file's path and bytes, in path order.
pub fn files_fingerprint(layout: &Layout) -> Result<String> {
    let mut h = blake3::Hasher::new();
    let mut paths: Vec<_> = walkdir::WalkDir::new(&layout.root)
        .into_iter()
        // The git repository of a synced store is not memory: only its work tree is.
        .filter_entry(|e| e.file_name() != ".memdir" && e.file_name() != ".git")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    paths.sort();
    for path in paths {
        let rel = path
            .strip_prefix(&layout.root)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        // An unreadable file counts by its name and the reason.
        let digest = match fsx::read(&path, fsx::MAX_SEGMENT_FILE) {
            Ok(b) => content_hash(&b.unwrap_or_default()),
            Err(e) => format!("unreadable: {}", e.source),
        };
        h.update(rel.as_bytes());
        h.update(&[0]);
        h.update(digest.as_bytes());
    }
    Ok(h.finalize().to_hex()[..32].to_string())
}

/// The seals of one session directory: each must parse, verify under its key, name its
/// segment's replica, and vouch for every live line of its segment it covers (a line after
/// them is not sealed yet; the next sync of its replica seals it).
fn check_seals(layout: &Layout, dir: &std::path::Path, p: &mut Problems) {
    use crate::sync::seal::{self, Seal};
    for rel in crate::service::replication::seals::seal_files(&layout.root, dir) {
        let at = rel.to_string_lossy().into_owned();
        let seal = match fsx::read(&layout.root.join(&rel), fsx::MAX_SEGMENT_FILE) {
            Ok(Some(b)) => match Seal::parse(&b) {
                Ok(s) => s,
                Err(e) => {
                    p.add("seal", &rel, e);
                    continue;
                }
            },
            Ok(None) => continue,
            Err(e) => {
                p.add("unreadable", &rel, e.source.to_string());
                continue;
            }
        };
        let replica = rel
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let replica = replica.trim_end_matches(seal::SUFFIX);
        let replica = match replica.rsplit_once('.') {
            Some((r, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => r,
            _ => replica,
        };
        let named = seal::named_key_id(replica);
        if seal.replica != replica
            || !seal.verifies(&at)
            || named.is_some_and(|k| k != seal::key_id(&seal.key))
        {
            p.add(
                "seal",
                &rel,
                "its signature does not verify for this segment: not made by the segment's replica",
            );
            continue;
        }
        let segment = layout.root.join(seal::segment_path(&at));
        if let Ok(Some(bytes)) = fsx::read(&segment, fsx::MAX_SEGMENT_FILE)
            && seal.contradicts(&bytes)
        {
            p.add(
                "seal",
                &rel,
                "its segment holds a line its replica did not seal: the file was rewritten after the replica sealed it",
            );
        }
    }
}
