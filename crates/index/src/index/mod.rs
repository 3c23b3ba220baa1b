//! The search index: two tantivy indexes under `.memdir/index/`, derived from the files.
//!
//! - `chunks/`: one document per session chunk. Appends only add documents; a segment file
//!   changed behind memdir's back is re-read whole (its documents deleted and re-added).
//! - `categories/`: one document per leaf of a category document, or per log entry. Small and
//!   rewritten often; after deletions its tantivy segments are merged, so its BM25 statistics
//!   never count deleted documents.
//!
//! Each index records in its commit payload the ledger epoch and change-feed generation it has
//! absorbed, plus the analyzer and schema version. Anything that does not match is rebuilt.
//!
//! Architecture Invariant: nothing here is the only copy of anything. `rm -rf .memdir/index`
//! loses nothing; the next search or `memdir reindex` rebuilds it from the files.
//!
//! The pieces: `analyzer` (text to terms), `schema` (fields, payload, tie-break key),
//! `lazy_dir` (the directory commits go through: lazily, durably, or kept in memory) and `part`
//! (one index and its commits). This module holds both indexes ([`SearchIndex`]) and builds
//! their documents.

mod analyzer;
mod lazy_dir;
mod part;
mod schema;
mod store_file;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{TantivyDocument, Term};

use memdir_api::error::Result;

pub use analyzer::AnalyzerConfig;
pub use lazy_dir::{DURABLE_EVERY, OVERLAY_MAX};
pub use part::{MAX_SMALL_SEGMENTS, Part, SMALL_SEGMENT};
pub use schema::{
    CategoryFields, ChunkFields, INDEX_SCHEMA_VERSION, Payload, order_key, place_key, place_term,
    project_key, session_key,
};
use schema::{category_schema, chunk_schema};

#[cfg(doc)]
use lazy_dir::Overlay;

/// Both indexes.
pub struct SearchIndex {
    pub cfg: AnalyzerConfig,
    pub chunks: Part,
    pub chunk_fields: ChunkFields,
    pub categories: Part,
    pub category_fields: CategoryFields,
}

impl SearchIndex {
    /// Opens (creating if needed) the indexes under `dir`.
    pub fn open(dir: &Path, cfg: AnalyzerConfig) -> Result<SearchIndex> {
        Self::open_with(dir, cfg, false)
    }

    /// Opens (creating if needed) the indexes under `dir`; with `tail_in_memory` (a
    /// long-lived process), commits between durable ones stay in this process's memory (see
    /// [`Overlay`]).
    pub fn open_with(dir: &Path, cfg: AnalyzerConfig, tail_in_memory: bool) -> Result<SearchIndex> {
        let tok = cfg.tokenizer_name();
        let (cs, chunk_fields) = chunk_schema(&tok);
        let (gs, category_fields) = category_schema(&tok);
        let chunks = Part::open(&dir.join("chunks"), cs, &cfg, tail_in_memory)?;
        let categories = Part::open(&dir.join("categories"), gs, &cfg, tail_in_memory)?;
        Ok(SearchIndex {
            cfg,
            chunks,
            chunk_fields,
            categories,
            category_fields,
        })
    }

    /// [`Part::land_kept`] for both indexes, each tried whatever the other gives.
    pub fn land_kept(&self, timeout: Duration) -> Result<()> {
        let chunks = self.chunks.land_kept(timeout);
        self.categories.land_kept(timeout)?;
        chunks
    }

    /// [`Part::land_if_large`] for both indexes, each tried whatever the other gives.
    pub fn land_if_large(&self, timeout: Duration) -> Result<()> {
        let chunks = self.chunks.land_if_large(timeout);
        self.categories.land_if_large(timeout)?;
        chunks
    }

    /// Both indexes in memory, for a store memdir may only read.
    pub fn open_ram(cfg: AnalyzerConfig) -> Result<SearchIndex> {
        let tok = cfg.tokenizer_name();
        let (cs, chunk_fields) = chunk_schema(&tok);
        let (gs, category_fields) = category_schema(&tok);
        Ok(SearchIndex {
            chunks: Part::open_ram(cs, &cfg)?,
            categories: Part::open_ram(gs, &cfg)?,
            cfg,
            chunk_fields,
            category_fields,
        })
    }

    /// A searcher over `docs` (category documents, [`SearchIndex::category_docs`]) in an index
    /// of their own in memory: the categories as they stood at some time, for a search as of
    /// then.
    pub fn categories_then(&self, docs: Vec<TantivyDocument>) -> Result<tantivy::Searcher> {
        let part = Part::open_ram(self.categories.index.schema(), &self.cfg)?;
        let ix = |e: tantivy::TantivyError| {
            memdir_api::error::Error::internal(format!("categories as of: {e}"))
        };
        let mut w = part
            .index
            .writer_with_num_threads::<TantivyDocument>(1, 15_000_000)
            .map_err(ix)?;
        for d in docs {
            w.add_document(d).map_err(ix)?;
        }
        w.commit().map_err(ix)?;
        part.reader.reload().map_err(ix)?;
        Ok(part.reader.searcher())
    }

    /// Whether both indexes' directories still exist (someone may `rm -rf` them); an index in
    /// memory is always there.
    pub fn present(&self) -> bool {
        if self.chunks.dir.as_os_str().is_empty() {
            return true;
        }
        self.chunks.dir.join("meta.json").exists() && self.categories.dir.join("meta.json").exists()
    }

    /// The analyzer with which queries are tokenized.
    pub fn analyzer(&self) -> Result<TextAnalyzer> {
        self.cfg.build()
    }

    /// A chunk document.
    pub fn chunk_doc(
        &self,
        rel: &str,
        c: &memdir_store::model::ChunkRecord,
        position: u64,
        prev: Option<&str>,
    ) -> TantivyDocument {
        let f = &self.chunk_fields;
        let mut d = TantivyDocument::default();
        // A forgotten chunk keeps its place (position, identity) and no text: nothing finds it.
        if !c.is_tombstone() {
            d.add_text(f.content, &c.content);
            if let Some(p) = prev {
                d.add_text(f.context, p);
            }
        }
        d.add_text(f.session, &c.session_id);
        d.add_text(f.project, &c.project);
        d.add_text(f.chunk_id, c.chunk_id());
        d.add_u64(f.position, position);
        let id = c.chunk_id();
        for (prefix, text) in [
            ("s:", c.session_id.as_str()),
            ("g:", rel),
            ("p:", c.project.as_str()),
            ("l:", place_key(&c.session_id, position).as_str()),
            ("i:", id.as_str()),
        ] {
            d.add_text(f.key, format!("{prefix}{text}"));
        }
        // The chunks this one corrects (see `search::supersede`); a forgotten correction
        // corrects nothing.
        if !c.is_tombstone() {
            for (session, position) in corrected_places(&c.metadata) {
                d.add_text(f.key, format!("r:{}", place_key(&session, position)));
            }
        }
        d.add_i64(f.ts, memdir_store::clock::parse_time(&c.ts).unwrap_or(0));
        d.add_i64(
            f.clock,
            memdir_store::clock::Hlc::parse(&c.hlc).map_or(0, |h| h.ms),
        );
        d.add_u64(f.order, order_key(&[&c.session_id, &c.chunk_id()]));
        d
    }

    /// The documents of one category: a leaf each, or an entry each for a log.
    pub fn category_docs(
        &self,
        name: &str,
        content: &Value,
        hash: &str,
        updated_at: &str,
        updated_by: &str,
    ) -> Vec<TantivyDocument> {
        let f = &self.category_fields;
        let ts = memdir_store::clock::parse_time(updated_at).unwrap_or(0);
        let mut out = Vec::new();
        let mut push = |key_path: String, text: String, ts: i64| {
            if text.trim().is_empty() {
                return;
            }
            let mut d = TantivyDocument::default();
            let words = key_path.replace(['.', '[', ']', '_', '-'], " ");
            d.add_text(f.content, format!("{name} {words}\n{text}"));
            d.add_text(f.category, name);
            d.add_text(f.key_path, &key_path);
            d.add_text(f.text, &text);
            d.add_text(f.hash, hash);
            d.add_text(f.updated_by, updated_by);
            d.add_i64(f.ts, ts);
            d.add_u64(f.order, order_key(&[name, &key_path]));
            out.push(d);
        };
        if memdir_store::model::CategoryKind::of(content) == memdir_store::model::CategoryKind::Log
        {
            for e in content
                .get("entries")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let id = e.get("id").and_then(Value::as_str).unwrap_or("");
                let ets = e
                    .get("ts")
                    .and_then(Value::as_str)
                    .and_then(memdir_store::clock::parse_time)
                    .unwrap_or(ts);
                let mut lines = Vec::new();
                flatten("", e.get("data").unwrap_or(&Value::Null), &mut |k, v| {
                    lines.push(if k.is_empty() { v } else { format!("{k}: {v}") })
                });
                push(format!("entries[{id}]"), lines.join("\n"), ets);
            }
        } else {
            flatten("", content, &mut |k, v| push(k, v, ts));
        }
        out
    }
}

/// The term every note document of the category index carries beside its path, in the
/// `category` field: no category name is a control character, so `kind` filters by it.
pub const NOTE_MARK: &str = "\u{1}note";

/// The `category` value of a note's documents: its path after a `/`, which no category name
/// holds.
pub fn note_key(path: &str) -> String {
    format!("/{path}")
}

/// A note section's `key_path`: its line range and its headings (`"12-30\u{1}Deploys > Staging"`).
pub fn note_key_path(lines: [u64; 2], heading: &str) -> String {
    format!("{}-{}\u{1}{heading}", lines[0], lines[1])
}

/// The line range and headings a note section's `key_path` holds.
pub fn parse_note_key_path(k: &str) -> ([u64; 2], String) {
    let (range, heading) = k.split_once('\u{1}').unwrap_or((k, ""));
    let (a, b) = range.split_once('-').unwrap_or((range, range));
    (
        [a.parse().unwrap_or(0), b.parse().unwrap_or(0)],
        heading.to_string(),
    )
}

/// One section of a note: the text under one heading, until the next heading of any level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// The headings it lies under, outermost first (its own last).
    pub headings: Vec<String>,
    /// Its first and last line (from 1).
    pub lines: [u64; 2],
    pub text: String,
}

/// The sections of a Markdown text: a section per ATX heading (`#` to `######`, outside
/// fenced code), and one for the text before the first heading.
pub fn note_sections(text: &str) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut cur = Section {
        headings: Vec::new(),
        lines: [1, 0],
        text: String::new(),
    };
    let mut fence: Option<&str> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i as u64 + 1;
        let trimmed = line.trim_start();
        let fence_mark = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        if let Some(m) = fence_mark {
            fence = match fence {
                Some(open) if open == m => None,
                None => Some(m),
                other => other,
            };
        }
        let level = trimmed.bytes().take_while(|b| *b == b'#').count();
        let heading = fence.is_none()
            && fence_mark.is_none()
            && (1..=6).contains(&level)
            && line.len() - trimmed.len() < 4
            && trimmed[level..]
                .chars()
                .next()
                .is_none_or(|c| c == ' ' || c == '\t');
        if heading {
            if !cur.text.trim().is_empty() {
                out.push(cur);
            }
            let title = trimmed[level..]
                .trim()
                .trim_end_matches('#')
                .trim()
                .to_string();
            stack.retain(|(l, _)| *l < level);
            stack.push((level, title));
            cur = Section {
                headings: stack.iter().map(|(_, t)| t.clone()).collect(),
                lines: [n, n],
                text: String::new(),
            };
        }
        cur.lines[1] = n;
        cur.text.push_str(line);
        cur.text.push('\n');
    }
    if !cur.text.trim().is_empty() {
        out.push(cur);
    }
    out
}

impl SearchIndex {
    /// The documents of one note: a section each, in the category index beside the
    /// categories' leaves.
    pub fn note_docs(
        &self,
        path: &str,
        text: &str,
        hash: &str,
        updated_at: &str,
        updated_by: &str,
    ) -> Vec<TantivyDocument> {
        let f = &self.category_fields;
        let ts = memdir_store::clock::parse_time(updated_at).unwrap_or(0);
        let key = note_key(path);
        let words = path.replace(['/', '.', '_', '-'], " ");
        note_sections(text)
            .into_iter()
            .map(|s| {
                let heading = s.headings.join(" > ");
                let key_path = note_key_path(s.lines, &heading);
                let mut d = TantivyDocument::default();
                d.add_text(f.content, format!("{words}\n{}", s.text));
                d.add_text(f.category, &key);
                d.add_text(f.category, NOTE_MARK);
                d.add_text(f.key_path, &key_path);
                d.add_text(f.text, s.text.trim_end());
                d.add_text(f.hash, hash);
                d.add_text(f.updated_by, updated_by);
                d.add_i64(f.ts, ts);
                d.add_u64(f.order, order_key(&[&key, &key_path]));
                d
            })
            .collect()
    }
}

/// Calls `f(key_path, text)` for every scalar leaf of `v`.
pub fn flatten(prefix: &str, v: &Value, f: &mut dyn FnMut(String, String)) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&p, x, f);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), x, f);
            }
        }
        Value::String(s) => f(prefix.to_string(), s.clone()),
        Value::Null => {}
        other => f(prefix.to_string(), other.to_string()),
    }
}

/// The term that names all documents of one segment file.
pub fn seg_term(idx: &SearchIndex, rel: &str) -> Term {
    Term::from_field_text(idx.chunk_fields.key, &format!("g:{rel}"))
}

/// The term that names all documents of one session.
pub fn session_term(idx: &SearchIndex, session_id: &str) -> Term {
    session_key(&idx.chunk_fields, session_id)
}

/// The term that names all documents of one category.
pub fn category_term(idx: &SearchIndex, name: &str) -> Term {
    Term::from_field_text(idx.category_fields.category, name)
}

/// The metadata key of a chunk's corrections: the URIs of the chunks it supersedes (see
/// `search::supersede`).
pub const SUPERSEDES_KEY: &str = "supersedes";

/// The places (session, position) a chunk's metadata says it corrects: the chunk URIs in
/// `supersedes` (anything else there corrects nothing).
pub fn corrected_places(metadata: &serde_json::Value) -> Vec<(String, u64)> {
    metadata
        .get(SUPERSEDES_KEY)
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| match memdir_api::uri::parse(v.as_str()?)? {
            memdir_api::uri::Resource::Chunk {
                session_id,
                position,
            } => Some((session_id, position)),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod note_tests {
    use super::*;

    #[test]
    fn a_note_is_cut_at_its_headings_outside_code() {
        let t = "intro line\n# Deploys\nhow we deploy\n## Staging\nstaging box\n```\n# not a heading\n```\n# Other\nx\n#hashtag\n";
        let s = note_sections(t);
        assert_eq!(s.len(), 4);
        assert_eq!(s[0].headings, Vec::<String>::new());
        assert_eq!(s[0].lines, [1, 1]);
        assert_eq!(s[1].headings, vec!["Deploys"]);
        assert_eq!(s[1].lines, [2, 3]);
        assert_eq!(s[2].headings, vec!["Deploys", "Staging"]);
        assert_eq!(s[2].lines, [4, 8]);
        assert!(s[2].text.contains("# not a heading"));
        assert_eq!(s[3].headings, vec!["Other"]);
        assert_eq!(s[3].lines, [9, 11]);
        let k = note_key_path([4, 8], "Deploys > Staging");
        assert_eq!(
            parse_note_key_path(&k),
            ([4, 8], "Deploys > Staging".to_string())
        );
    }
}
