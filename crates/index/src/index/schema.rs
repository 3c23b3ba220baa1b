//! The two tantivy schemas (session chunks, category documents) and what is stored with them:
//! the fields, the exact-lookup terms of a chunk, the commit payload that says what an index
//! has absorbed, and the tie-break key that orders equal scores the same in every index built
//! from the same files.

use serde::{Deserialize, Serialize};
use tantivy::Term;
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};

/// Bumped whenever the schema or the way documents are built changes.
pub const INDEX_SCHEMA_VERSION: u32 = 10;

/// The fields of the chunk index.
#[derive(Clone, Copy)]
pub struct ChunkFields {
    pub content: Field,
    /// The previous chunk of the same session, indexed (not stored) so that a reply can match
    /// the words of the turn it answers.
    pub context: Field,
    /// Stored and a fast column (not indexed: see `key`).
    pub session: Field,
    /// Stored (not indexed: see `key`).
    pub project: Field,
    pub chunk_id: Field,
    pub position: Field,
    /// Every term a chunk is looked up by exactly, in one field, each behind a prefix naming
    /// what it is: its id (`i:`), the ids it corrects (`r:`, see `search::supersede`), its
    /// session (`s:`), segment file (`g:`), project (`p:`) and place (`l:`,
    /// session and position in one term, see [`place_key`], so a context window is a handful
    /// of exact terms instead of a range over a million-row column). One field instead of
    /// four: each indexed field costs every commit a term dictionary of its own.
    pub key: Field,
    pub ts: Field,
    /// When the chunk was saved: its clock stamp in ms (what memory as of a time keeps).
    pub clock: Field,
    pub order: Field,
}

/// The term naming the chunk at `position` of `session`.
pub fn place_key(session: &str, position: u64) -> String {
    format!("{session}\u{1}{position:012}")
}

/// The `key` term of a chunk's place.
pub fn place_term(f: &ChunkFields, session: &str, position: u64) -> Term {
    Term::from_field_text(f.key, &format!("l:{}", place_key(session, position)))
}

/// The `key` term of every chunk of a session.
pub fn session_key(f: &ChunkFields, session_id: &str) -> Term {
    Term::from_field_text(f.key, &format!("s:{session_id}"))
}

/// The `key` term of every chunk of a project.
pub fn project_key(f: &ChunkFields, project: &str) -> Term {
    Term::from_field_text(f.key, &format!("p:{project}"))
}

/// The fields of the category index.
#[derive(Clone, Copy)]
pub struct CategoryFields {
    pub content: Field,
    pub category: Field,
    pub key_path: Field,
    pub text: Field,
    pub hash: Field,
    pub updated_by: Field,
    pub ts: Field,
    pub order: Field,
}

fn text_options(tokenizer: &str) -> TextOptions {
    TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(tokenizer)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    )
}

pub(super) fn chunk_schema(tokenizer: &str) -> (Schema, ChunkFields) {
    let mut sb = Schema::builder();
    let f = ChunkFields {
        content: sb.add_text_field("content", text_options(tokenizer).set_stored()),
        // Frequencies only: the previous turn is scored, never searched as a phrase.
        context: sb.add_text_field(
            "context",
            TextOptions::default().set_indexing_options(
                TextFieldIndexing::default()
                    .set_tokenizer(tokenizer)
                    .set_index_option(IndexRecordOption::WithFreqs),
            ),
        ),
        session: sb.add_text_field("session", STORED | FAST),
        project: sb.add_text_field("project", STORED),
        // Fields nobody looks up by term are not indexed: each indexed field costs every
        // commit a term dictionary of its own (about a tenth of a small commit's time each).
        // Ranges over `position` and `ts` are answered from their fast columns.
        chunk_id: sb.add_text_field("chunk_id", STORED),
        position: sb.add_u64_field("position", FAST | STORED),
        key: sb.add_text_field("key", STRING),
        ts: sb.add_i64_field("ts", FAST | STORED),
        clock: sb.add_i64_field("clock", FAST),
        order: sb.add_u64_field("order", FAST),
    };
    (sb.build(), f)
}

pub(super) fn category_schema(tokenizer: &str) -> (Schema, CategoryFields) {
    let mut sb = Schema::builder();
    let f = CategoryFields {
        content: sb.add_text_field("content", text_options(tokenizer)),
        category: sb.add_text_field("category", STRING | STORED),
        key_path: sb.add_text_field("key_path", STORED),
        text: sb.add_text_field("text", STORED),
        hash: sb.add_text_field("hash", STORED),
        updated_by: sb.add_text_field("updated_by", STORED),
        ts: sb.add_i64_field("ts", FAST | STORED),
        order: sb.add_u64_field("order", FAST),
    };
    (sb.build(), f)
}

/// What an index has absorbed, stored as its commit payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    pub schema: u32,
    pub analyzer: String,
    /// The ledger epoch the generation counts in.
    pub epoch: String,
    /// The last change-feed generation applied.
    pub generation: i64,
    /// Fingerprint of the files at the last full build.
    pub fingerprint: String,
}

/// A deterministic tie-break key for equal scores.
pub fn order_key(parts: &[&str]) -> u64 {
    let mut h = blake3::Hasher::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update(&[0]);
    }
    let b = h.finalize();
    u64::from_be_bytes(
        b.as_bytes()[..8]
            .try_into()
            .expect("invariant: a blake3 hash has 32 bytes"),
    )
}
