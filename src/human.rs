//! Output for people: what the CLI prints on a terminal instead of JSON.
//!
//! Each operation's JSON result becomes a compact text: search hits as a list with the
//! matching words highlighted and context lines dimmed, catalogs and lists as aligned tables,
//! diffs as coloured unified diffs, status as a short summary, writes as one line. An
//! operation without a renderer of its own prints its JSON, indented. Colour is ANSI, on or
//! off as the caller decides (`--color`, `NO_COLOR`, whether the stream is a terminal).
//!
//! This module turns values into strings; it reads nothing and prints nothing.

use serde_json::Value;

/// An import's summary: what came in, then what was left out and why, and the first bad
/// lines or files by name.
fn imported(v: &Value) -> String {
    let mut out = format!(
        "{}{} in {} from {} ({} already there){}{}\n",
        if v["dry_run"] == Value::Bool(true) {
            "would import "
        } else {
            "imported "
        },
        count_of(v, "chunks", "chunk", "chunks"),
        count_of(v, "sessions", "session", "sessions"),
        count_of(v, "files", "file", "files"),
        n(v, "existing"),
        match v["categories"].as_u64() {
            Some(c) if c > 0 => format!(", {}", count(c, "category version", "category versions")),
            _ => String::new(),
        },
        v["seconds"]
            .as_f64()
            .map(|x| format!(" in {x:.1} s"))
            .unwrap_or_default()
    );
    if let Some(skipped) = v["skipped"].as_object().filter(|m| !m.is_empty()) {
        let list: Vec<String> = skipped.iter().map(|(k, c)| format!("{k} {c}")).collect();
        out.push_str(&format!("left out: {}\n", list.join(", ")));
    }
    if let Some(flagged) = v["flagged"].as_object().filter(|m| !m.is_empty()) {
        let list: Vec<String> = flagged.iter().map(|(k, c)| format!("{k} {c}")).collect();
        out.push_str(&format!("kept, marked: {}\n", list.join(", ")));
    }
    if let Some(r) = v["replaced"].as_array().filter(|r| !r.is_empty()) {
        let names: Vec<&str> = r.iter().filter_map(Value::as_str).collect();
        out.push_str(&format!(
            "{} the current version of {} (the old one stays in history: memdir history {})\n",
            if v["dry_run"] == Value::Bool(true) {
                "would replace"
            } else {
                "replaced"
            },
            names.join(", "),
            names[0]
        ));
    }
    if let Some(bad) = v["bad_lines"].as_array().filter(|b| !b.is_empty()) {
        let list: Vec<&str> = bad.iter().filter_map(Value::as_str).collect();
        out.push_str(&format!("unreadable: {}\n", list.join(", ")));
    }
    out
}

/// ANSI styles, or none.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    pub color: bool,
}

impl Style {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.color && !s.is_empty() {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    pub fn bold(&self, s: &str) -> String {
        self.paint("1", s)
    }
    pub fn dim(&self, s: &str) -> String {
        self.paint("2", s)
    }
    pub fn red(&self, s: &str) -> String {
        self.paint("31", s)
    }
    pub fn green(&self, s: &str) -> String {
        self.paint("32", s)
    }
    pub fn yellow(&self, s: &str) -> String {
        self.paint("33", s)
    }
    pub fn cyan(&self, s: &str) -> String {
        self.paint("36", s)
    }
    /// A matching word.
    fn mark(&self, s: &str) -> String {
        if self.color {
            self.paint("1;33", s)
        } else {
            format!("[{s}]")
        }
    }
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `1 chunk`, `2 chunks`: a count and its noun, plural when it is not one (`word` is the
/// singular; `words` the plural).
fn count(x: u64, word: &str, words: &str) -> String {
    format!("{x} {}", if x == 1 { word } else { words })
}

/// [`count`] of a numeric field (0 when absent).
fn count_of(v: &Value, key: &str, word: &str, words: &str) -> String {
    count(v[key].as_u64().unwrap_or(0), word, words)
}

/// A size for people: `812 bytes`, `117 KiB`, `3.4 MiB`, `1.2 GiB`.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if bytes < 1024 {
        return count(bytes, "byte", "bytes");
    }
    let mut x = bytes as f64 / 1024.0;
    let mut unit = 0;
    while x >= 1024.0 && unit + 1 < UNITS.len() {
        x /= 1024.0;
        unit += 1;
    }
    if x < 10.0 {
        format!("{x:.1} {}", UNITS[unit])
    } else {
        format!("{x:.0} {}", UNITS[unit])
    }
}

fn n(v: &Value, key: &str) -> String {
    match v.get(key) {
        Some(Value::Number(x)) => x.to_string(),
        Some(Value::String(x)) => x.clone(),
        _ => String::new(),
    }
}

/// `2026-11-30T12:45:53.200Z` as `2026-11-30 12:45`.
fn when(ts: &str) -> String {
    if ts.len() >= 16 && ts.as_bytes().get(10) == Some(&b'T') {
        format!("{} {}", &ts[..10], &ts[11..16])
    } else {
        ts.to_string()
    }
}

fn short_hash(h: &str) -> &str {
    &h[..h.len().min(12)]
}

/// Text on one line: runs of whitespace become one space.
fn one_line(t: &str) -> String {
    t.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Cuts `t` to `max` characters, with an ellipsis.
fn cut(t: &str, max: usize) -> String {
    if t.chars().count() <= max {
        t.to_string()
    } else {
        let mut c: String = t.chars().take(max.saturating_sub(1)).collect();
        c.push('…');
        c
    }
}

/// The words of a query worth highlighting, lowercase.
fn query_terms(q: &str) -> Vec<String> {
    q.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
        .collect()
}

/// Whether `word` matches a query term: the same word, or one a stemmer would fold into it
/// (`timeouts` for `timeout`).
fn matches_term(word: &str, terms: &[String]) -> bool {
    let w = word.to_lowercase();
    terms.iter().any(|t| {
        w == *t
            || (t.chars().count() >= 3 && w.starts_with(t.as_str()) && w.len() <= t.len() + 3)
            || (w.chars().count() >= 4 && t.starts_with(w.as_str()) && t.len() <= w.len() + 3)
    })
}

/// `text` with the words matching `terms` highlighted.
pub fn highlight(text: &str, terms: &[String], st: Style) -> String {
    if terms.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if !word.is_empty() {
            if matches_term(word, terms) {
                out.push_str(&st.mark(word));
            } else {
                out.push_str(word);
            }
            word.clear();
        }
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Rows as columns aligned on their widths (in characters); the header bold.
pub fn table(header: &[&str], rows: &[Vec<String>], st: Style) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<String>| -> String {
        let last = cells.len().saturating_sub(1);
        let mut l = String::new();
        for (i, c) in cells.into_iter().enumerate() {
            let pad = widths[i].saturating_sub(c.chars().count());
            l.push_str(&c);
            if i < last {
                l.push_str(&" ".repeat(pad + 2));
            }
        }
        l.trim_end().to_string()
    };
    let mut out = st.bold(&line(header.iter().map(|h| h.to_string()).collect()));
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.clone()));
        out.push('\n');
    }
    out
}

/// A unified diff with removed lines red, added lines green and hunk heads cyan.
pub fn diff(text: &str, st: Style) -> String {
    let mut out = String::new();
    for l in text.lines() {
        let painted = if l.starts_with("+++") || l.starts_with("---") {
            st.bold(l)
        } else if l.starts_with('+') {
            st.green(l)
        } else if l.starts_with('-') {
            st.red(l)
        } else if l.starts_with("@@") {
            st.cyan(l)
        } else {
            l.to_string()
        };
        out.push_str(&painted);
        out.push('\n');
    }
    out
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}

/// The text of operation `op`'s result `v`.
pub fn render(op: &str, v: &Value, st: Style) -> String {
    if v["declined"] == Value::Bool(true) {
        return format!("{}\n", s(v, "message"));
    }
    match op {
        "search" | "search_semantic" => search(v, st),
        "overview" => overview(v, st),
        "fetch" => fetch(v, st),
        "list" => list(v, st),
        "history" => history(v, st),
        "blame" => blame(v, st),
        "diff" => diff(s(v, "diff"), st),
        "status" => status(v, st),
        "read" => read(v, st),
        "write" | "append" | "delete" | "restore" => written(op, v, st),
        "ingest" => ingested(v, st),
        "compact" => compacted(v, st),
        "reindex" => reindexed(v, st),
        "verify_store" => verified(v, st),
        "doctor" => format!(
            "memdir {} at {} ({}), writing as {}\n{}{}",
            s(v, "version"),
            s(v, "dir"),
            s(v, "dir_source"),
            s(v, "actor"),
            status(&v["status"], st),
            verified(&v["checks"], st)
        ),
        "context" => context(v, st),
        "sync" => synced(v, st),
        "import" => imported(v),
        "forget" => forgot(v, st),
        "snapshot" => format!(
            "snapshot of {} files ({} bytes) in {}{}\n{}",
            n(v, "files"),
            n(v, "bytes"),
            s(v, "dest"),
            if v["verified"] == Value::Bool(true) {
                st.green(", verified")
            } else {
                String::new()
            },
            match v["skipped"].as_array().filter(|a| !a.is_empty()) {
                Some(a) => st.yellow(&format!(
                    "left out (links and special files are never copied): {}\n",
                    a.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                None => String::new(),
            }
        ),
        "restore_snapshot" => format!(
            "restored {} files from {}{}\n",
            n(v, "files"),
            s(v, "restored_from"),
            v["parked"]
                .as_str()
                .map(|p| format!("; the previous store is at {p}"))
                .unwrap_or_default()
        ),
        "delta" => delta(v, st),
        "resolve" => format!(
            "resolved {} as v{} {}{}\n",
            st.bold(s(v, "category")),
            n(v, "version"),
            st.dim(short_hash(v["hash"].as_str().unwrap_or("(deleted)"))),
            match v["resolved"].as_array().map_or(0, Vec::len) {
                0 => String::new(),
                k => format!(", closing {}", count(k as u64, "conflict", "conflicts")),
            }
        ),
        "export" => format!(
            "exported {} and {} to {}\n",
            count_of(v, "chunks", "chunk", "chunks"),
            count_of(v, "categories", "category", "categories"),
            s(v, "output")
        ),
        "config_show" => config_show(v, st),
        "models" => models(v, st),
        "init" => format!(
            "{} {}\n",
            if v["created"] == Value::Bool(true) {
                "created"
            } else {
                "already there:"
            },
            s(v, "dir")
        ),
        _ => pretty(v),
    }
}

fn search(v: &Value, st: Style) -> String {
    let hits = v["results"].as_array().cloned().unwrap_or_default();
    let terms = query_terms(s(v, "query"));
    let mut out = String::new();
    if hits.is_empty() {
        out.push_str(&format!("no hits for {:?}", s(v, "query")));
        out.push_str(&st.dim(&format!(" ({})", s(v, "engine"))));
        out.push('\n');
    }
    for (i, h) in hits.iter().enumerate() {
        let score = h["score"]
            .as_f64()
            .map(|x| format!("{x:.2}"))
            .unwrap_or_default();
        if s(h, "kind") == "category" {
            let head = format!(
                "{:>2}. {} {}",
                i + 1,
                st.bold(s(h, "category")),
                st.dim(&format!(
                    "{} · {} · score {score}",
                    s(h, "key_path"),
                    when(s(h, "updated_at"))
                ))
            );
            out.push_str(&head);
            out.push('\n');
            out.push_str(&format!(
                "    {}\n",
                highlight(&one_line(s(h, "content")), &terms, st)
            ));
            continue;
        }
        let project = s(h, "project");
        let head = format!(
            "{:>2}. {} {}",
            i + 1,
            st.bold(&format!("{}#{}", s(h, "session_id"), n(h, "position"))),
            st.dim(&format!(
                "{}{} · score {score}",
                when(s(h, "ts")),
                if project.is_empty() {
                    String::new()
                } else {
                    format!(" · {project}")
                }
            ))
        );
        out.push_str(&head);
        out.push('\n');
        explained(h, st, &mut out);
        let pos = h["position"].as_u64().unwrap_or(0);
        let context = h["context"].as_array().cloned().unwrap_or_default();
        let hit_line = format!(
            "  {} {}\n",
            st.bold("▶"),
            highlight(&one_line(s(h, "content")), &terms, st)
        );
        let mut shown_hit = false;
        for c in &context {
            let p = c["position"].as_u64().unwrap_or(0);
            if p == pos {
                continue;
            }
            if p > pos && !shown_hit {
                out.push_str(&hit_line);
                shown_hit = true;
            }
            let text = c
                .get("content")
                .or_else(|| c.get("content"))
                .and_then(Value::as_str)
                .unwrap_or("");
            out.push_str(&st.dim(&format!("    {p:>3} {}", cut(&one_line(text), 160))));
            out.push('\n');
        }
        if !shown_hit {
            out.push_str(&hit_line);
        }
    }
    if !hits.is_empty() {
        out.push_str(&st.dim(&format!(
            "{} hit{} · {}",
            hits.len(),
            if hits.len() == 1 { "" } else { "s" },
            s(v, "engine")
        )));
        out.push('\n');
    }
    if let Some(o) = v.get("omitted").filter(|o| o.is_object()) {
        out.push_str(&st.dim(&format!(
            "left out to fit {} tokens: {} hits, {} context lines{}",
            n(o, "max_tokens"),
            o["hits"].as_u64().unwrap_or(0),
            o["context_lines"].as_u64().unwrap_or(0),
            if o["cut"] == Value::Bool(true) {
                ", the best hit cut"
            } else {
                ""
            }
        )));
        out.push('\n');
    }
    search_notes(v, st, &mut out);
    out
}

/// A search's notes, and why keywords answered a semantic or hybrid search (no provider,
/// not embedded yet).
fn search_notes(v: &Value, st: Style, out: &mut String) {
    if let Some(notes) = v["notes"].as_array() {
        for note in notes {
            out.push_str(&st.dim(&format!("note: {}", note.as_str().unwrap_or(""))));
            out.push('\n');
        }
    }
    if let Some(note) = v["note"].as_str() {
        out.push_str(&st.yellow(&format!(
            "{}: {note}{}",
            s(v, "engine"),
            v["coverage"]
                .as_str()
                .map(|c| format!(" (coverage {c})"))
                .unwrap_or_default()
        )));
        out.push('\n');
    }
}

/// A hit's score parts (`--explain`), as one dimmed line.
fn explained(h: &Value, st: Style, out: &mut String) {
    let Some(e) = h.get("explain").filter(|e| e.is_object()) else {
        return;
    };
    let f = |k: &str| e[k].as_f64().map(|x| format!("{k} {x:.2}"));
    let parts: Vec<String> = [
        "bm25",
        "short",
        "period",
        "neighbour",
        "session",
        "dense",
        "fused",
    ]
    .iter()
    .filter_map(|k| f(k))
    .collect();
    out.push_str(&st.dim(&format!("    {} = {}", parts.join(" · "), s(e, "formula"))));
    out.push('\n');
}

fn overview(v: &Value, st: Style) -> String {
    let rows: Vec<Vec<String>> = v["sessions"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    vec![
                        s(x, "id").to_string(),
                        s(x, "project").to_string(),
                        n(x, "message_count"),
                        when(s(x, "last_active")),
                        cut(&one_line(s(x, "title")), 60),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    if rows.is_empty() {
        return "no sessions in this period (--days 0 lists all)\n".into();
    }
    let mut out = table(
        &["session", "project", "chunks", "last active", "title"],
        &rows,
        st,
    );
    out.push_str(&st.dim(&format!("{} of {} sessions", rows.len(), n(v, "total"))));
    out.push('\n');
    if let Some(next) = v["next_offset"].as_u64() {
        out.push_str(&st.dim(&format!("more: --offset {next}")));
        out.push('\n');
    }
    out
}

fn fetch(v: &Value, st: Style) -> String {
    let mut out = format!(
        "{} {}\n",
        st.bold(s(v, "session_id")),
        st.dim(&format!("({} chunks)", n(v, "total")))
    );
    for c in v["chunks"].as_array().into_iter().flatten() {
        let role = c["metadata"]["role"].as_str().unwrap_or("");
        // A forgotten chunk keeps its place with no text: say so instead of a blank line.
        let content = match s(c, "content") {
            "" if c["metadata"].get("forgotten").is_some() => st.dim("[forgotten]"),
            "" => st.dim("[empty]"),
            t => t.to_string(),
        };
        out.push_str(&format!(
            "{} {}{}\n",
            st.dim(&format!("{:>4} {}", n(c, "position"), when(s(c, "ts")))),
            if role.is_empty() {
                String::new()
            } else {
                st.cyan(&format!("{role}: "))
            },
            content
        ));
    }
    if let Some(next) = v["next_position"].as_u64() {
        out.push_str(&st.dim(&format!("more: --position {next}")));
        out.push('\n');
    }
    out
}

fn list(v: &Value, st: Style) -> String {
    let rows: Vec<Vec<String>> = v["categories"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    vec![
                        s(x, "name").to_string(),
                        s(x, "kind").to_string(),
                        n(x, "version"),
                        n(x, "size_bytes"),
                        when(s(x, "updated_at")),
                        s(x, "updated_by").to_string(),
                        if s(x, "status") == "ok" {
                            String::new()
                        } else {
                            st.red(s(x, "status"))
                        },
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    if rows.is_empty() {
        return "no categories yet (memdir write NAME --data '{...}')\n".into();
    }
    table(
        &["name", "kind", "version", "bytes", "updated", "by", ""],
        &rows,
        st,
    )
}

/// `blame`: one row per key, the version that set it; `>=` marks a value that may be older.
fn blame(v: &Value, st: Style) -> String {
    let rows: Vec<Vec<String>> = v["keys"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|x| {
            let at_least = if x["at_least"] == Value::Bool(true) {
                ">="
            } else {
                ""
            };
            vec![
                s(x, "key").to_string(),
                cut(&one_line(&x["value"].to_string()), 30),
                format!("{at_least}{}", n(x, "version")),
                when(s(x, "timestamp")),
                s(x, "actor").to_string(),
                cut(&one_line(s(x, "reason")), 40),
            ]
        })
        .collect();
    let path = v["path"]
        .as_str()
        .map(|p| format!(" {p}"))
        .unwrap_or_default();
    let mut out = format!(
        "{}{} {}\n",
        st.bold(s(v, "category")),
        path,
        st.dim(&format!("(version {})", n(v, "version")))
    );
    out.push_str(&table(
        &["key", "value", "version", "when", "by", "reason"],
        &rows,
        st,
    ));
    out
}

fn history(v: &Value, st: Style) -> String {
    // A number two devices both wrote before a sync is marked: pick such a version by hash.
    let mut seen = std::collections::HashMap::new();
    for x in v["versions"].as_array().into_iter().flatten() {
        *seen.entry(n(x, "version")).or_insert(0) += 1;
    }
    let twice = seen.values().any(|c| *c > 1);
    let rows: Vec<Vec<String>> = v["versions"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    let number = n(x, "version");
                    vec![
                        if seen.get(&number).is_some_and(|c| *c > 1) {
                            format!("{number}*")
                        } else {
                            number
                        },
                        s(x, "op").to_string(),
                        when(s(x, "timestamp")),
                        s(x, "actor").to_string(),
                        short_hash(s(x, "hash")).to_string(),
                        cut(&one_line(s(x, "reason")), 50),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    let mut out = format!(
        "{} {}\n",
        st.bold(s(v, "category")),
        st.dim(&format!("({}, {} versions)", s(v, "status"), n(v, "total")))
    );
    out.push_str(&table(
        &["version", "op", "when", "by", "hash", "reason"],
        &rows,
        st,
    ));
    if twice {
        out.push_str(&st.dim(
            "* one number, two devices: both wrote it before a sync; name such a version by its hash",
        ));
        out.push('\n');
    }
    if let Some(d) = v.get("diff").filter(|d| !d.is_null()) {
        out.push('\n');
        out.push_str(&diff(s(d, "diff"), st));
    }
    out
}

fn status(v: &Value, st: Style) -> String {
    let mut out = format!(
        "{} {}\n",
        st.bold(s(v, "dir")),
        st.dim(&format!("({})", s(v, "dir_source")))
    );
    if v["exists"] != Value::Bool(true) {
        out.push_str("no memory here yet: `memdir init` creates it\n");
        return out;
    }
    out.push_str(&format!(
        "{}, {} · {} ({}) · {}\n",
        count_of(v, "sessions", "session", "sessions"),
        count_of(v, "chunks", "chunk", "chunks"),
        count_of(v, "categories", "category", "categories"),
        count_of(v, "logs", "log", "logs"),
        size(v["size_bytes"].as_u64().unwrap_or(0))
    ));
    out.push_str(&format!(
        "device {} · replica {} · index {}\n",
        s(v, "actor"),
        match s(v, "replica") {
            "" => st.dim("(named by the first write)"),
            r => r.to_string(),
        },
        v["index"]["state"].as_str().unwrap_or("?")
    ));
    if let Some(a) = v.get("access").filter(|a| !a.is_null()) {
        out.push_str(&st.dim(&format!("access: {}", s(a, "summary"))));
        out.push('\n');
    }
    let malformed = v["malformed"].as_array().map_or(0, Vec::len);
    if malformed > 0 {
        out.push_str(&st.red(&format!(
            "{malformed} malformed categor{}: {}",
            if malformed == 1 { "y" } else { "ies" },
            v["malformed"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        )));
        out.push('\n');
    }
    if let Some(ro) = v["read_only"].as_str() {
        out.push_str(&st.yellow(&format!("read-only: {ro}")));
        out.push('\n');
    }
    for note in v["notices"].as_array().into_iter().flatten() {
        out.push_str(&st.yellow(&format!("notice: {}", note.as_str().unwrap_or(""))));
        out.push('\n');
    }
    out.push_str(&open_conflicts(
        v["conflicts"].as_array().map_or(&[], Vec::as_slice),
        st,
    ));
    out
}

fn read(v: &Value, st: Style) -> String {
    let m = &v["meta"];
    let mut out = format!(
        "{} {}\n",
        st.bold(s(v, "category")),
        st.dim(&format!(
            "v{} · {} · {} · {}",
            n(m, "version"),
            when(s(m, "updated_at")),
            s(m, "updated_by"),
            short_hash(s(m, "hash"))
        ))
    );
    out.push_str(&pretty(&v["data"]));
    out
}

fn written(op: &str, v: &Value, st: Style) -> String {
    let cat = st.bold(s(v, "category"));
    match op {
        "delete" => format!(
            "deleted {cat} {}\n",
            st.dim(&format!(
                "(history kept: `memdir restore {} --version {}`)",
                s(v, "category"),
                n(v, "restore_version")
            ))
        ),
        "restore" => format!(
            "restored {cat} from v{} as v{} {}\n",
            n(v, "restored_from"),
            n(v, "version"),
            st.dim(short_hash(s(v, "new_hash")))
        ),
        "append" => format!(
            "appended to {cat}: {} entries{} {}\n",
            n(v, "entries"),
            match v["dropped"].as_u64() {
                Some(d) if d > 0 => format!(", {d} dropped by retention"),
                _ => String::new(),
            },
            st.dim(&format!(
                "v{} {}",
                n(v, "version"),
                short_hash(s(v, "new_hash"))
            ))
        ),
        _ if v["unchanged"] == Value::Bool(true) => {
            format!(
                "{cat} unchanged {}\n",
                st.dim(&format!("v{}", n(v, "version")))
            )
        }
        _ => format!(
            "wrote {cat} v{} {}\n",
            n(v, "version"),
            st.dim(short_hash(s(v, "new_hash")))
        ),
    }
}

fn ingested(v: &Value, st: Style) -> String {
    // Many chunks: one batch answers with each chunk, several with their counts.
    if v.get("chunks").is_some_and(Value::is_array) || v.get("batches").is_some() {
        let sessions = match v["chunks"].as_array() {
            Some(chunks) => {
                let mut ids: Vec<&str> = chunks.iter().map(|c| s(c, "session_id")).collect();
                ids.sort();
                ids.dedup();
                ids.len() as u64
            }
            None => v["sessions"].as_u64().unwrap_or(0),
        };
        let skipped = v["skipped"].as_u64().unwrap_or(0);
        return format!(
            "ingested {} into {}{}\n",
            count_of(v, "count", "chunk", "chunks"),
            count(sessions, "session", "sessions"),
            if skipped > 0 {
                format!(" ({skipped} already there)")
            } else {
                String::new()
            }
        );
    }
    format!(
        "ingested into {} at position {} {}\n",
        st.bold(s(v, "session_id")),
        n(v, "position"),
        st.dim(s(v, "chunk_id"))
    )
}

/// A forget: the count, then each chunk (session, position, id, what it said) and version,
/// so a dry run shows what would go and which ids to pick with `--chunk-id`.
fn forgot(v: &Value, st: Style) -> String {
    let chunks = v["chunks"].as_array().cloned().unwrap_or_default();
    let versions = v["versions"].as_array().cloned().unwrap_or_default();
    let dry = v["dry_run"] == Value::Bool(true);
    let mut out = format!(
        "{} {} and {}\n",
        if dry { "would forget" } else { "forgot" },
        count(chunks.len() as u64, "chunk", "chunks"),
        count(versions.len() as u64, "version", "versions")
    );
    for c in &chunks {
        out.push_str(&format!(
            "  {} {} {}\n",
            st.bold(&format!("{}#{}", s(c, "session_id"), n(c, "position"))),
            st.dim(s(c, "chunk_id")),
            one_line(s(c, "preview"))
        ));
    }
    for x in &versions {
        out.push_str(&format!(
            "  {} v{} {}\n",
            st.bold(s(x, "category")),
            n(x, "version"),
            st.dim(s(x, "id"))
        ));
    }
    if dry && !chunks.is_empty() {
        out.push_str(&st.dim(
            "to forget only some: memdir forget --session-id SESSION --chunk-id ID [--chunk-id ID ...]",
        ));
        out.push('\n');
    }
    out
}

/// `config show`: where each setting comes from, the file, access rules and embeddings.
fn config_show(v: &Value, st: Style) -> String {
    let f = &v["file"];
    let mut out = format!(
        "config file {} {}\n",
        s(f, "path"),
        st.dim(&if f["found"] == Value::Bool(true) {
            format!("({})", s(f, "source"))
        } else {
            format!("(not there; {}: built-in defaults)", s(f, "source"))
        })
    );
    let rows: Vec<Vec<String>> = v["settings"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, x)| {
            let value = match &x["value"] {
                Value::String(t) if t.is_empty() => "\"\"".to_string(),
                Value::String(t) => t.clone(),
                Value::Null => "-".to_string(),
                other => other.to_string(),
            };
            vec![k.clone(), value, s(x, "source").to_string()]
        })
        .collect();
    out.push_str(&table(&["setting", "value", "from"], &rows, st));
    out.push_str(&format!("access rules: {}\n", s(&v["acl"], "summary")));
    out.push_str(&format!(
        "embeddings: {}\n",
        match &v["embeddings"] {
            Value::Null => "none (keyword search only)".to_string(),
            e => one_line(&e.to_string()),
        }
    ));
    let tokens = v["http_tokens"].as_array().map_or(0, Vec::len) as u64;
    out.push_str(&format!(
        "HTTP tokens: {}\n",
        count(tokens, "configured", "configured")
    ));
    out
}

/// `models`: the configured model, whether it is ready, and what the cache holds.
fn models(v: &Value, st: Style) -> String {
    let mut out = format!(
        "configured: {}{}\n",
        match &v["configured"] {
            Value::Null => "none (keyword search only; see docs/embeddings.md)".to_string(),
            Value::String(t) => t.clone(),
            other => one_line(&other.to_string()),
        },
        if v["ready"] == Value::Bool(true) {
            st.green(" (ready)")
        } else if v["configured"].is_null() {
            String::new()
        } else {
            st.yellow(" (not ready)")
        }
    );
    out.push_str(&format!(
        "cache: {} {}\n",
        s(v, "cache_dir"),
        st.dim(&format!(
            "({})",
            count(
                v["cached"].as_array().map_or(0, Vec::len) as u64,
                "model",
                "models"
            )
        ))
    ));
    for m in v["cached"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {}\n",
            match m {
                Value::String(t) => t.clone(),
                other => s(other, "name").to_string() + " " + &n(other, "bytes"),
            }
        ));
    }
    if v["local_provider_built"] == Value::Bool(false) {
        out.push_str(&st.dim("this build has no local provider (cargo feature local-embeddings)"));
        out.push('\n');
    }
    out
}

fn compacted(v: &Value, st: Style) -> String {
    let mut out = format!(
        "{} {}, keeping {} per category\n",
        if v["dry_run"] == Value::Bool(true) {
            "would remove"
        } else {
            "removed"
        },
        count_of(v, "removed", "old version", "old versions"),
        n(v, "keep_versions")
    );
    for c in v["categories"].as_array().into_iter().flatten() {
        if c["removed"].as_u64().unwrap_or(0) > 0 {
            out.push_str(&st.dim(&format!(
                "  {}: -{} (kept {})",
                s(c, "category"),
                n(c, "removed"),
                n(c, "kept")
            )));
            out.push('\n');
        }
    }
    out
}

fn reindexed(v: &Value, st: Style) -> String {
    format!(
        "reindexed {} chunks and {} category documents{} {}\n",
        n(v, "chunks"),
        n(v, "category_docs"),
        v["seconds"]
            .as_f64()
            .map(|x| format!(" in {x:.1} s"))
            .unwrap_or_default(),
        st.dim(if v["rebuilt_from_nothing"] == Value::Bool(true) {
            "(rebuilt from nothing)"
        } else {
            ""
        })
    )
}

fn verified(v: &Value, st: Style) -> String {
    let problems = v["problems"].as_array().cloned().unwrap_or_default();
    if v["ok"] == Value::Bool(true) {
        return format!(
            "{} files, history, ledger and index agree\n",
            st.green("ok:")
        );
    }
    let mut out = st.red(&format!(
        "{} problem{}:",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    ));
    out.push('\n');
    for p in &problems {
        out.push_str(&format!(
            "  {} {} {}\n",
            st.yellow(s(p, "kind")),
            s(p, "path"),
            st.dim(s(p, "message"))
        ));
    }
    out
}

fn context(v: &Value, st: Style) -> String {
    let mut out = String::new();
    if let Some(m) = v["categories"].as_object() {
        for (name, r) in m {
            out.push_str(&read(
                &serde_json::json!({"category": name, "data": r["data"], "meta": r["meta"]}),
                st,
            ));
        }
    }
    let missing: Vec<&str> = v["missing"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !missing.is_empty() {
        out.push_str(&st.dim(&format!("missing: {}", missing.join(", "))));
        out.push('\n');
    }
    if let Some(o) = v.get("omitted").filter(|o| o.is_object()) {
        let names = |k: &str| -> String {
            o[k].as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (cats, keys) = (names("categories"), names("keys"));
        let mut parts = Vec::new();
        if !cats.is_empty() {
            parts.push(format!("categories {cats}"));
        }
        if !keys.is_empty() {
            parts.push(format!("keys {keys}"));
        }
        out.push_str(&st.dim(&format!(
            "left out to fit {} tokens: {}",
            n(o, "max_tokens"),
            parts.join("; ")
        )));
        out.push('\n');
    }
    out
}

fn synced(v: &Value, st: Style) -> String {
    let mut out = format!(
        "synced with {} ({}): {} committed, {} received{}\n",
        s(v, "remote"),
        s(v, "branch"),
        n(v, "committed"),
        count_of(v, "files_received", "file", "files"),
        if v["pushed"] == Value::Bool(true) {
            ", pushed"
        } else {
            ""
        }
    );
    if v["push_pending"] == Value::Bool(true) {
        out.push_str(&st.yellow(&format!(
            "push pending: {}",
            v["offline"].as_str().unwrap_or("the remote could not be reached")
        )));
        out.push('\n');
    }
    let open = v["open_conflicts"].as_array().cloned().unwrap_or_default();
    if open.is_empty() {
        for c in v["conflicts"].as_array().into_iter().flatten() {
            out.push_str(&st.yellow(&format!(
                "conflict: {} (`memdir resolve`)",
                c.as_str().unwrap_or("")
            )));
            out.push('\n');
        }
    }
    out.push_str(&open_conflicts(&open, st));
    out
}

/// Open conflicts, each with what its pick set aside and the commands that settle it.
fn open_conflicts(open: &[Value], st: Style) -> String {
    let mut out = String::new();
    for c in open {
        let cat = s(c, "category");
        out.push_str(&st.yellow(&format!(
            "open conflict in {cat}: {} settled it by {}",
            s(c, "kind"),
            s(c, "strategy")
        )));
        out.push('\n');
        for a in c["set_aside"].as_array().into_iter().flatten() {
            let keys: Vec<&str> = a["keys"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            out.push_str(&format!(
                "  set aside: {}'s {} (version {})\n",
                s(a, "actor"),
                if keys.is_empty() {
                    "whole version".to_string()
                } else {
                    format!(
                        "change to {}",
                        keys.iter()
                            .map(|k| format!("{k:?}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                },
                s(a, "head")
            ));
        }
        out.push_str(&st.dim(&format!(
            "  keep what is served: memdir resolve {cat} --pick {}; take a set-aside version: --pick ID; or write the result: --data JSON",
            s(c, "merged")
        )));
        out.push('\n');
    }
    out
}

fn delta(v: &Value, st: Style) -> String {
    let mut out = format!("{} {}\n", st.bold(s(v, "category")), s(v, "status"));
    if let Some(d) = v.get("data").filter(|d| !d.is_null()) {
        out.push_str(&pretty(d));
    }
    out
}

/// An error for a person: one line, then its hints.
pub fn error(code: &str, message: &str, hints: &[String], st: Style) -> String {
    let mut out = format!("{} {message}", st.red(&format!("error ({code}):")));
    out.push('\n');
    for h in hints {
        out.push_str(&st.dim(&format!("  hint: {h}")));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PLAIN: Style = Style { color: false };
    const COLOR: Style = Style { color: true };

    #[test]
    fn matching_words_are_highlighted_and_stems_fold() {
        let terms = query_terms("pool timeout");
        assert_eq!(
            highlight("The pool timeouts, pooling.", &terms, PLAIN),
            "The [pool] [timeouts], [pooling]."
        );
        assert_eq!(highlight("nothing here", &terms, PLAIN), "nothing here");
        assert!(highlight("pool", &terms, COLOR).contains("\x1b[1;33mpool\x1b[0m"));
    }

    #[test]
    fn a_snapshot_names_what_it_left_out() {
        let v = json!({"dest": "/s", "files": 3, "bytes": 10, "verified": true, "skipped": ["sessions/x"]});
        assert_eq!(
            render("snapshot", &v, PLAIN),
            "snapshot of 3 files (10 bytes) in /s, verified\nleft out (links and special files are never copied): sessions/x\n"
        );
        let v = json!({"dest": "/s", "files": 3, "bytes": 10, "verified": true, "skipped": []});
        assert_eq!(
            render("snapshot", &v, PLAIN),
            "snapshot of 3 files (10 bytes) in /s, verified\n"
        );
    }

    #[test]
    fn tables_align_columns_on_the_widest_cell() {
        let t = table(
            &["a", "bb"],
            &[vec!["xxx".into(), "y".into()], vec!["z".into(), "w".into()]],
            PLAIN,
        );
        assert_eq!(t, "a    bb\nxxx  y\nz    w\n");
    }

    #[test]
    fn diffs_are_coloured_by_line_kind() {
        let d = diff("--- a\n+++ b\n@@ -1 +1 @@\n-old\n+new\n same", COLOR);
        assert!(d.contains("\x1b[31m-old\x1b[0m"));
        assert!(d.contains("\x1b[32m+new\x1b[0m"));
        assert!(d.contains("\x1b[36m@@ -1 +1 @@\x1b[0m"));
        assert!(d.contains("\n same\n"));
    }

    #[test]
    fn search_hits_show_place_time_score_and_dimmed_context() {
        let v = json!({"query": "pool", "engine": "bm25", "results": [{
            "kind": "chunk", "session_id": "s1", "position": 4, "project": "web",
            "ts": "2026-11-30T12:45:53.200Z", "score": 1.234, "content": "the pool\ntimed out",
            "context": [{"position": 3, "content": "before"}, {"position": 4, "content": "the pool", "hit": true}]
        }]});
        let out = render("search", &v, PLAIN);
        assert!(
            out.contains(" 1. s1#4 2026-11-30 12:45 · web · score 1.23"),
            "{out}"
        );
        assert!(out.contains("      3 before"), "{out}");
        assert!(out.contains("▶ the [pool] timed out"), "{out}");
        assert!(out.contains("1 hit · bm25"), "{out}");
    }

    #[test]
    fn unknown_operations_print_indented_json() {
        assert_eq!(
            render("nope", &json!({"a": 1}), PLAIN),
            "{\n  \"a\": 1\n}\n"
        );
    }
}
