//! `memdir ingest`: one chunk from a flag, a file or stdin, or many from a JSONL file sent in
//! bounded batches, each line checked and reported by its line number.

use super::*;

/// The ingest request of the CLI's arguments: one chunk from --text, --file or stdin.
pub(super) fn ingest_request(a: &IngestArgs) -> Result<IngestRequest> {
    let metadata = a
        .metadata
        .as_deref()
        .map(|s| parse_json(s, "metadata"))
        .transpose()?;
    let Some(session_id) = a.session_id.clone() else {
        return Err(Error::invalid(
            "session_id",
            "--session-id is required (or use --jsonl with session_id in each line)",
        ));
    };
    let content = match (&a.text, &a.file) {
        (Some(t), _) => t.clone(),
        (None, f) => read_source(f.as_ref(), "content")?,
    };
    // A long document from a file or stdin is a note of many paragraphs, not one message: it
    // becomes one chunk per section, so a search finds the paragraph, not the whole file.
    let parts = if a.text.is_none() {
        split_document(&content)
    } else {
        vec![content.clone()]
    };
    if parts.len() > 1 {
        let chunks = parts
            .into_iter()
            .enumerate()
            .map(|(i, content)| NewChunk {
                session_id: session_id.clone(),
                content,
                project: a.project.clone(),
                metadata: metadata.clone(),
                ts: a.ts.clone(),
                source_id: a.source_id.as_ref().map(|s| format!("{s}#{i}")),
                // A long document split in sections: its first section carries the link.
                supersedes: (i == 0 && !a.supersedes.is_empty()).then(|| a.supersedes.clone()),
            })
            .collect();
        return Ok(IngestRequest {
            chunks: Some(chunks),
            ..IngestRequest::default()
        });
    }
    Ok(IngestRequest {
        session_id: Some(session_id),
        content: Some(content),
        project: a.project.clone(),
        metadata,
        ts: a.ts.clone(),
        source_id: a.source_id.clone(),
        supersedes: (!a.supersedes.is_empty()).then(|| a.supersedes.clone()),
        chunks: None,
    })
}

/// A document longer than this many characters is split by [`split_document`].
pub(super) const SPLIT_OVER_CHARS: usize = 4_000;

/// The size sections are packed up to: paragraphs are joined until the next would pass it.
pub(super) const SECTION_CHARS: usize = 1_500;

/// Splits a long document into sections: each Markdown heading (`#` at the start of a line)
/// starts one, and paragraphs (separated by blank lines) are packed into one up to
/// [`SECTION_CHARS`]; a paragraph is never cut, and nothing is lost or reordered (joining the
/// sections with blank lines gives back the paragraphs). A text of at most
/// [`SPLIT_OVER_CHARS`] characters stays one chunk. Fenced code blocks are kept whole.
pub(super) fn split_document(text: &str) -> Vec<String> {
    // A `<private>` span must reach the redactor whole: a document holding one stays one
    // chunk (a section boundary inside the span would leave its tail outside it).
    if text.chars().count() <= SPLIT_OVER_CHARS || memdir_engine::redact::holds_private_tag(text) {
        return vec![text.to_string()];
    }
    // Paragraphs, with blank lines inside a ``` fence kept in their paragraph.
    let mut paragraphs: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if !fenced && line.trim().is_empty() {
            if !cur.is_empty() {
                paragraphs.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if !fenced && line.starts_with('#') && !cur.is_empty() {
            paragraphs.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push('\n');
        }
        cur.push_str(line);
    }
    if !cur.is_empty() {
        paragraphs.push(cur);
    }
    let mut out: Vec<String> = Vec::new();
    for p in paragraphs {
        let starts_section = p.starts_with('#');
        match out.last_mut() {
            Some(last)
                if !starts_section
                    && last.chars().count() + 2 + p.chars().count() <= SECTION_CHARS =>
            {
                last.push_str("\n\n");
                last.push_str(&p);
            }
            _ => out.push(p),
        }
    }
    if out.is_empty() {
        out.push(text.to_string());
    }
    out
}

/// Chunks per batch of a streamed `ingest --jsonl` (each batch is all or nothing): the most a
/// batch may hold. A batch waits once for the disk per segment it touches, so a file whose
/// lines interleave many sessions pays that wait once per batch, not once per 1,000 chunks.
pub(super) const JSONL_BATCH_CHUNKS: usize = service::limits::MAX_BATCH_CHUNKS;

/// Content bytes after which a batch of a streamed `ingest --jsonl` is sent early.
pub(super) const JSONL_BATCH_BYTES: usize = 8 * 1024 * 1024;

/// Skipped chunks listed by name in a streamed ingest's result (all are counted).
pub(super) const LIST_SKIPPED_MAX: usize = 1_000;

/// One line of a JSONL input as a chunk: defaults from the flags, errors naming the line.
pub(super) fn jsonl_chunk(a: &IngestArgs, line: &[u8], n: usize) -> Result<NewChunk> {
    let at = |e: Error| {
        let msg = format!("line {n}: {}", e.message);
        Error { message: msg, ..e }.detail("line", Value::from(n))
    };
    let text = std::str::from_utf8(line)
        .map_err(|_| at(Error::invalid("jsonl", "jsonl is not valid UTF-8")))?;
    let mut v = parse_json(text, "jsonl").map_err(at)?;
    if let Some(obj) = v.as_object_mut() {
        if let Some(s) = &a.session_id {
            obj.entry("session_id").or_insert(Value::from(s.clone()));
        }
        if let Some(p) = &a.project {
            obj.entry("project").or_insert(Value::from(p.clone()));
        }
    }
    let chunk: NewChunk = service::from_args(v).map_err(at)?;
    service::check_chunk(&chunk).map_err(at)?;
    Ok(chunk)
}

/// Reads a JSONL input line by line (bounded: one line at most 64 MiB), calling `f` with each
/// non-blank line, its 1-based number and the bytes read so far.
pub(super) fn each_line(
    r: impl Read,
    mut f: impl FnMut(&[u8], usize, u64) -> Result<()>,
) -> Result<()> {
    use std::io::BufRead;
    let mut r = std::io::BufReader::with_capacity(1 << 16, r);
    let mut buf = Vec::new();
    let mut n = 0usize;
    let mut read = 0u64;
    loop {
        buf.clear();
        let got = r
            .by_ref()
            .take(MAX_INPUT_BYTES + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::new(ErrorKind::Unavailable, format!("reading jsonl: {e}")))?;
        if got == 0 {
            return Ok(());
        }
        n += 1;
        read += got as u64;
        if got as u64 > MAX_INPUT_BYTES {
            return Err(
                Error::too_large("jsonl", got, MAX_INPUT_BYTES as usize, "bytes")
                    .detail("line", Value::from(n)),
            );
        }
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        f(line, n, read)?;
    }
}

/// Adds the skipped chunks of a batch's answer to `list` (up to [`LIST_SKIPPED_MAX`]), each
/// named by its line of the input instead of its index in the batch.
fn list_skipped(list: &mut Vec<Value>, out: &Value, lines: &[usize]) {
    for s in out["skipped_chunks"].as_array().into_iter().flatten() {
        if list.len() < LIST_SKIPPED_MAX {
            let mut s = s.clone();
            let idx = s["index"].as_u64().unwrap_or(0) as usize;
            s["line"] = Value::from(lines.get(idx).copied().unwrap_or(0));
            if let Some(o) = s.as_object_mut() {
                o.remove("index");
            }
            list.push(s);
        }
    }
}

/// Adds the sessions of a batch's ingested chunks to `seen`.
fn note_sessions(seen: &mut std::collections::BTreeSet<String>, out: &Value) {
    for c in out["chunks"].as_array().into_iter().flatten() {
        if let Some(s) = c["session_id"].as_str()
            && !seen.contains(s)
        {
            seen.insert(s.to_string());
        }
    }
}

/// `ingest --jsonl`: streams the file in batches of bounded size, each saved all or nothing.
/// A regular file is read twice: first every line is checked, so a bad line anywhere changes
/// nothing; stdin is checked batch by batch, and an error names the lines already saved.
pub(super) fn ingest_jsonl(m: &Ctx, a: &IngestArgs, path: &std::path::Path) -> Result<Value> {
    let stdin = path.as_os_str() == "-";
    let open = || -> Result<Box<dyn Read>> {
        if stdin {
            if std::io::stdin().is_terminal() {
                return Err(Error::invalid(
                    "jsonl",
                    "no jsonl given: pass a file, or pipe it to stdin",
                ));
            }
            return Ok(Box::new(std::io::stdin()));
        }
        let f = std::fs::File::open(path)
            .map_err(|e| Error::invalid("jsonl", format!("cannot open {}: {e}", path.display())))?;
        Ok(Box::new(f))
    };
    let total = if stdin {
        0
    } else {
        std::fs::metadata(path).map(|md| md.len()).unwrap_or(0)
    };
    if !stdin {
        let check = crate::progress::Progress::new("checking");
        each_line(open()?, |line, n, read| {
            check.update(read, total);
            jsonl_chunk(a, line, n).map(|_| ())
        })?;
        check.finish();
    }
    let bar = crate::progress::Progress::new("ingest");
    let mut batch: Vec<NewChunk> = Vec::new();
    let mut lines: Vec<usize> = Vec::new();
    let mut bytes = 0usize;
    let mut saved_lines = 0usize;
    let mut batches = 0usize;
    let mut count = 0usize;
    let mut skipped = 0usize;
    let mut skipped_list: Vec<Value> = Vec::new();
    let mut sessions = std::collections::BTreeSet::new();
    let mut first: Option<Value> = None;
    let mut flush = |batch: &mut Vec<NewChunk>, lines: &mut Vec<usize>| -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let req = IngestRequest {
            chunks: Some(std::mem::take(batch)),
            ..IngestRequest::default()
        };
        let out = call(m, &req).map_err(|e| {
            let e = match e.details.get("index").and_then(Value::as_u64) {
                Some(idx) => {
                    let line = lines.get(idx as usize).copied().unwrap_or(0);
                    let msg = format!("line {line}: {}", e.message);
                    Error { message: msg, ..e }.detail("line", Value::from(line))
                }
                None => e,
            };
            if batches > 0 {
                e.detail("saved_batches", Value::from(batches))
                    .detail("saved_through_line", Value::from(saved_lines))
                    .hint("the batches before it are saved; with a source_id on each line, running the same input again adds only what is missing")
            } else {
                e
            }
        })?;
        batches += 1;
        count += out["count"].as_u64().unwrap_or(0) as usize;
        skipped += out["skipped"].as_u64().unwrap_or(0) as usize;
        note_sessions(&mut sessions, &out);
        list_skipped(&mut skipped_list, &out, lines);
        saved_lines = lines.last().copied().unwrap_or(saved_lines);
        lines.clear();
        if batches == 1 {
            first = Some(out);
        }
        Ok(())
    };
    each_line(open()?, |line, n, read| {
        let chunk = jsonl_chunk(a, line, n)?;
        bytes += chunk.content.len();
        batch.push(chunk);
        lines.push(n);
        if batch.len() >= JSONL_BATCH_CHUNKS || bytes >= JSONL_BATCH_BYTES {
            flush(&mut batch, &mut lines)?;
            bytes = 0;
        }
        bar.update(read, total);
        Ok(())
    })?;
    flush(&mut batch, &mut lines)?;
    bar.finish();
    if batches == 0 {
        return Err(Error::invalid(
            "chunks",
            "nothing to ingest: the jsonl input has no chunks",
        ));
    }
    if batches == 1 {
        // One batch: the engine's own answer, with every chunk.
        let mut out = first.unwrap_or(Value::Null);
        out["skipped_chunks"] = Value::from(skipped_list);
        return Ok(out);
    }
    Ok(json!({
        "ok": true,
        "count": count,
        "skipped": skipped,
        "skipped_chunks": skipped_list,
        "sessions": sessions.len(),
        "batches": batches,
        "lines": saved_lines,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_text_stays_one_chunk_whatever_its_paragraphs() {
        let t = "# Title\n\nfirst\n\nsecond";
        assert_eq!(split_document(t), vec![t.to_string()]);
    }

    #[test]
    fn a_long_document_splits_at_headings_and_packs_paragraphs_without_losing_any() {
        let para = |i: usize| format!("paragraph {i} {}", "word ".repeat(60));
        let mut doc = String::from("# Intro\n\n");
        for i in 0..10 {
            doc.push_str(&para(i));
            doc.push_str("\n\n");
        }
        doc.push_str("## Setup\n```sh\ncargo build\n\ncargo test\n```\n\n");
        for i in 10..20 {
            doc.push_str(&para(i));
            doc.push_str("\n\n");
        }
        let parts = split_document(&doc);
        assert!(parts.len() > 2, "{parts:#?}");
        assert!(parts[0].starts_with("# Intro"));
        assert!(parts.iter().any(|p| p.starts_with("## Setup")));
        // The fence is one piece with its blank line.
        assert!(
            parts
                .iter()
                .any(|p| p.contains("cargo build\n\ncargo test"))
        );
        for p in &parts {
            assert!(p.chars().count() <= SECTION_CHARS, "{}", p.len());
        }
        // Nothing lost, nothing reordered.
        let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(words(&parts.join("\n\n")), words(&doc));
    }

    #[test]
    fn a_document_with_a_private_span_is_never_cut() {
        for tag in ["<private>", "< PRIVATE >", "<private reason=\"x\">"] {
            let doc = format!(
                "{}\n\n{tag}\n## Credentials\nbank: hunter2\n</private>\n\n{}",
                "intro words ".repeat(400),
                "tail words ".repeat(400)
            );
            assert_eq!(split_document(&doc), vec![doc.clone()], "{tag}");
        }
    }

    #[test]
    fn a_paragraph_longer_than_a_section_is_kept_whole() {
        let long = "x".repeat(5_000);
        let doc = format!("{long}\n\nshort");
        assert_eq!(split_document(&doc), vec![long, "short".to_string()]);
    }
}
