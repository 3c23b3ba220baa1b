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

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    AntiCallToken, Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, TerminatingWrite,
    WatchCallback, WatchHandle, WritePtr,
};
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter,
    TextAnalyzer, Token, TokenFilter, TokenStream, Tokenizer,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, TantivyError, Term};

use memdir_api::error::{Error, ErrorKind, IoContext, Result};

/// Bumped whenever the schema or the way documents are built changes.
pub const INDEX_SCHEMA_VERSION: u32 = 8;

/// How a character takes part in a word.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CharClass {
    /// Part of a word: letters, digits, and marks or letters of any script.
    Word,
    /// A word on its own: CJK ideographs and kana (so CJK substrings become phrases of
    /// characters) and emoji.
    Single,
    /// Separates words: white space, punctuation, symbols.
    Separator,
}

fn char_class(c: char) -> CharClass {
    if c.is_ascii() {
        return if c.is_ascii_alphanumeric() {
            CharClass::Word
        } else {
            CharClass::Separator
        };
    }
    let u = c as u32;
    let single = matches!(u,
        0x3040..=0x30FF | 0x31F0..=0x31FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF
        | 0x20000..=0x2FA1F
        | 0x1F000..=0x1FAFF | 0x2600..=0x27BF | 0x2B00..=0x2BFF | 0x2300..=0x23FF);
    if single {
        return CharClass::Single;
    }
    let separator = c.is_whitespace()
        || matches!(u,
            0x80..=0xBF | 0xD7 | 0xF7 | 0x2000..=0x206F | 0x20A0..=0x20CF | 0x2100..=0x22FF
            | 0x2400..=0x25FF | 0x27C0..=0x2AFF | 0x2E00..=0x2E7F | 0x3000..=0x303F
            | 0xFE10..=0xFE1F | 0xFE30..=0xFE6F | 0xFF00..=0xFF0F | 0xFF1A..=0xFF20
            | 0xFF3B..=0xFF40 | 0xFF5B..=0xFF65 | 0xFFF0..=0xFFFF);
    if separator {
        CharClass::Separator
    } else {
        CharClass::Word
    }
}

/// Splits text into words: runs of letters, digits and marks of any script; CJK ideographs,
/// kana and emoji one token each; everything else separates. A hand-written scanner, several
/// times faster than the equivalent regular expression.
#[derive(Clone, Default)]
struct WordTokenizer {
    token: Token,
}

struct WordStream<'a> {
    text: &'a str,
    pos: usize,
    token: &'a mut Token,
}

impl Tokenizer for WordTokenizer {
    type TokenStream<'a> = WordStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordStream<'a> {
        self.token.reset();
        self.token.position = usize::MAX;
        WordStream {
            text,
            pos: 0,
            token: &mut self.token,
        }
    }
}

impl TokenStream for WordStream<'_> {
    fn advance(&mut self) -> bool {
        let rest = &self.text[self.pos..];
        let mut start = None;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match (char_class(c), start) {
                (CharClass::Separator, None) => {}
                (CharClass::Separator, Some(_)) => {
                    end = i;
                    break;
                }
                (CharClass::Single, None) => {
                    start = Some(i);
                    end = i + c.len_utf8();
                    break;
                }
                (CharClass::Single, Some(_)) => {
                    end = i;
                    break;
                }
                (CharClass::Word, None) => start = Some(i),
                (CharClass::Word, Some(_)) => {}
            }
        }
        let Some(start) = start else {
            self.pos = self.text.len();
            return false;
        };
        let (from, to) = (self.pos + start, self.pos + end);
        self.pos = to;
        self.token.text.clear();
        self.token.text.push_str(&self.text[from..to]);
        self.token.offset_from = from;
        self.token.offset_to = to;
        self.token.position = self.token.position.wrapping_add(1);
        true
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}

/// Removes combining diacritical marks (U+0300..U+036F), so an accent typed as a separate
/// mark (`e` + U+0301, as some systems write `é`) folds like the precomposed letter. Marks of
/// other blocks, which carry vowels in Indic scripts, stay.
#[derive(Clone)]
struct StripMarks;

#[derive(Clone)]
struct StripMarksFilter<T> {
    inner: T,
}

struct StripMarksStream<T> {
    tail: T,
}

fn is_combining_diacritic(c: char) -> bool {
    ('\u{0300}'..='\u{036F}').contains(&c)
}

impl TokenFilter for StripMarks {
    type Tokenizer<T: Tokenizer> = StripMarksFilter<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> StripMarksFilter<T> {
        StripMarksFilter { inner: tokenizer }
    }
}

impl<T: Tokenizer> Tokenizer for StripMarksFilter<T> {
    type TokenStream<'a> = StripMarksStream<T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        StripMarksStream {
            tail: self.inner.token_stream(text),
        }
    }
}

impl<T: TokenStream> TokenStream for StripMarksStream<T> {
    fn advance(&mut self) -> bool {
        if !self.tail.advance() {
            return false;
        }
        let text = &mut self.tail.token_mut().text;
        if !text.is_ascii() && text.chars().any(is_combining_diacritic) {
            *text = text
                .chars()
                .filter(|c| !is_combining_diacritic(*c))
                .collect();
        }
        true
    }

    fn token(&self) -> &Token {
        self.tail.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.tail.token_mut()
    }
}

/// The text analyzer: a language's stemmer and stop words, or plain lower-cased words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnalyzerConfig {
    /// `english` (default), another Snowball language, or `none`.
    pub language: String,
    /// Whether stop words are removed (when the language has a list).
    pub stop_words: bool,
}

impl Default for AnalyzerConfig {
    fn default() -> Self {
        AnalyzerConfig {
            language: "english".into(),
            stop_words: true,
        }
    }
}

fn language(name: &str) -> Option<Language> {
    Some(match name {
        "arabic" => Language::Arabic,
        "danish" => Language::Danish,
        "dutch" => Language::Dutch,
        "english" => Language::English,
        "finnish" => Language::Finnish,
        "french" => Language::French,
        "german" => Language::German,
        "greek" => Language::Greek,
        "hungarian" => Language::Hungarian,
        "italian" => Language::Italian,
        "norwegian" => Language::Norwegian,
        "portuguese" => Language::Portuguese,
        "romanian" => Language::Romanian,
        "russian" => Language::Russian,
        "spanish" => Language::Spanish,
        "swedish" => Language::Swedish,
        "tamil" => Language::Tamil,
        "turkish" => Language::Turkish,
        _ => return None,
    })
}

impl AnalyzerConfig {
    /// Parses `english`, `none`, `german-nostop`, ...
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim().to_lowercase();
        let (lang, stop) = match s.strip_suffix("-nostop") {
            Some(l) => (l.to_string(), false),
            None => (s.clone(), true),
        };
        if lang != "none" && language(&lang).is_none() {
            return Err(Error::invalid("analyzer", format!("unknown analyzer language {lang:?}"))
                .hint("use english, french, german, spanish, italian, portuguese, dutch, swedish, norwegian, danish, finnish, russian, hungarian, romanian, turkish, greek, arabic, tamil, or none"));
        }
        Ok(AnalyzerConfig {
            language: lang,
            stop_words: stop && s != "none",
        })
    }

    /// The tokenizer name registered with tantivy; part of the schema, so a change of analyzer
    /// is a change of schema.
    pub fn tokenizer_name(&self) -> String {
        format!(
            "memdir_{}_{}_v{INDEX_SCHEMA_VERSION}",
            self.language,
            if self.stop_words { "stop" } else { "all" }
        )
    }

    /// The analyzer for indexed text and BM25 queries.
    pub fn build(&self) -> Result<TextAnalyzer> {
        let base = TextAnalyzer::builder(WordTokenizer::default())
            .filter(RemoveLongFilter::limit(512))
            .filter(LowerCaser)
            .filter(StripMarks)
            .filter(AsciiFoldingFilter);
        Ok(match language(&self.language) {
            None => base.build(),
            Some(lang) => match StopWordFilter::new(lang).filter(|_| self.stop_words) {
                Some(stop) => base.filter(stop).filter(Stemmer::new(lang)).build(),
                None => base.filter(Stemmer::new(lang)).build(),
            },
        })
    }
}

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
    /// what it is: its session (`s:`), segment file (`g:`), project (`p:`) and place (`l:`,
    /// session and position in one term, see [`place_key`], so a context window is a handful
    /// of exact terms instead of a range over a million-row column). One field instead of
    /// four: each indexed field costs every commit a term dictionary of its own.
    pub key: Field,
    pub ts: Field,
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

fn chunk_schema(tokenizer: &str) -> (Schema, ChunkFields) {
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
        order: sb.add_u64_field("order", FAST),
    };
    (sb.build(), f)
}

fn category_schema(tokenizer: &str) -> (Schema, CategoryFields) {
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

/// One tantivy index with its reader.
pub struct Part {
    pub index: Index,
    pub reader: IndexReader,
    pub dir: PathBuf,
    /// The commit opstamp the reader was last reloaded at.
    loaded: std::sync::atomic::AtomicU64,
    /// Its directory (see [`LazyDir`]); `None` for an index in memory.
    lazy: Option<LazyDir>,
    /// Whether commits between durable ones stay in this process's memory (see [`Overlay`]).
    tail_in_memory: bool,
    /// The payload of the last commit read, with the stamp of the `meta.json` it came from.
    seen: std::sync::Mutex<Option<(MetaStamp, Option<Payload>)>>,
}

/// What identifies one version of `meta.json`: every commit (by any process) writes it to a
/// new file and renames that into place, so the inode changes with each commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MetaStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
    /// The mtime was [`SETTLED`] old when the stamp was taken: any later commit gets a later
    /// mtime, so the stamp cannot recur.
    settled: bool,
}

/// How old `meta.json` must be before its stamp stands for its content (several ticks of the
/// coarse clock file times come from).
const SETTLED: Duration = Duration::from_millis(50);

// ---------------------------------------------------------------------------------------------
// Commits without fsync
// ---------------------------------------------------------------------------------------------
//
// A catch-up commits the index so that the next search sees a write; fsyncing every commit
// (each segment file, meta.json, the directory) cost 50-125 ms per search after a write. The
// index is derived, so most commits are *lazy*: written to the page cache, not fsynced. Only
// a crash of the machine (power loss, kernel panic) can lose page-cache data; a killed process
// cannot. So:
//
// - Before the first lazy commit of a window, a marker `<part>.lazy` holding the boot id is
//   written durably. A *durable* commit (every [`DURABLE_EVERY`] of lazy commits, and every
//   rebuild) fsyncs every file of the part first, then meta.json and the directory, and removes
//   the marker.
// - Opening a part whose marker names another boot id (the machine went down inside a lazy
//   window) checks every file's checksum and opens every segment; anything torn or missing
//   discards the part, which is then rebuilt from the files.
// - The ledger's change feed is pruned only up to what durable commits absorbed (the indexer
//   records that mark after each durable commit), so a part that came back older than its last
//   lazy commit still finds every change it lacks in the feed.
//
// Where the boot id cannot be read (not Linux), every commit is durable.

/// How long a window of lazy commits lasts before a commit is made durable.
pub const DURABLE_EVERY: Duration = Duration::from_secs(10);

/// The id of this boot of the machine, where the system tells it.
fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// An `MmapDirectory` whose writes skip fsync while `durable` is false, and which, when it is
/// true, fsyncs every file of the directory before the new meta.json is written.
///
/// While lazy it also holds back tantivy's list of the files it manages (`.managed.json`,
/// rewritten whole for every file a segment adds: six per segment) and writes only the
/// newest list, just before the next `meta.json`. Nothing is lost by that: a file is named
/// by `meta.json` only after it is in a list written before it, and a list on disk that is
/// behind only names files since deleted (garbage collection forgets those) or lacks files no
/// `meta.json` names yet (left on disk, never read).
///
/// While `memory` is set, what a commit writes stays in this process (see [`Overlay`]).
#[derive(Clone)]
struct LazyDir {
    inner: MmapDirectory,
    root: PathBuf,
    /// How the files written now are kept ([`Keep`], as a `u8`).
    keep: Arc<AtomicU8>,
    managed: Arc<std::sync::Mutex<Option<Vec<u8>>>>,
    overlay: Arc<std::sync::Mutex<Option<Overlay>>>,
}

impl std::fmt::Debug for LazyDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyDir").field("root", &self.root).finish()
    }
}

/// How a commit's files are kept (see [`LazyDir`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// fsynced before the `meta.json` that names them.
    Durable,
    /// In the page cache, inside a window of lazy commits.
    Lazy,
    /// In this process's memory ([`Overlay`]).
    Memory,
}

/// tantivy's list of the files it manages (see [`LazyDir`]).
const MANAGED_LIST: &str = ".managed.json";

/// tantivy's commit point.
const META: &str = "meta.json";

// ---------------------------------------------------------------------------------------------
// Segments in memory
// ---------------------------------------------------------------------------------------------
//
// A long-lived process (a server) catches the index up for nearly every search that follows a
// write. Written to disk, even lazily, each such commit creates a segment's files and renames a
// new `meta.json` into place: under 8 REST clients about a third of the server's time, most of
// it creating inodes. In a server the commits between two durable ones therefore stay in its
// memory: their segment files and their `meta.json` live in an [`Overlay`] on top of the
// `meta.json` on disk, and this process's reader reads through it. The next durable commit
// (every [`DURABLE_EVERY`], or once the overlay holds [`OVERLAY_MAX`] bytes) writes the files
// the overlay holds, fsynced, before the `meta.json` that names them: a `meta.json` on disk
// never names a file that is not on disk.
//
// Other processes see only the disk: one that needs the newer changes indexes them itself
// (from the feed, which keeps every change after the last durable commit), and its commit
// changes `meta.json` on disk. This process notices when it next reads the metas (the disk no
// longer holds the overlay's base) and drops the overlay: its reader then reads the disk's
// state, and its own catch-up goes on from that. Commits are made under the index's writer
// lock, so no other process commits between reading the metas and writing them. A killed
// server loses only its overlay; the disk and the feed still hold everything.

/// The commits of this process not yet on disk, on top of one `meta.json` on disk.
struct Overlay {
    /// The `meta.json` on disk these commits build on.
    base: Vec<u8>,
    /// The newest `meta.json` of this process (`None`: only files written yet).
    meta: Option<Vec<u8>>,
    /// Files written by those commits and not deleted since.
    files: std::collections::HashMap<PathBuf, tantivy::directory::OwnedBytes>,
    /// Files on disk that this process's commits no longer use; deleted once a `meta.json`
    /// on disk stops naming them (the overlay lands), forgotten if it is dropped.
    doomed: Vec<PathBuf>,
    /// The size of `files`.
    bytes: usize,
    /// When the overlay began.
    since: Instant,
}

/// The overlay's size beyond which a catch-up lands it at once ([`Part::land_if_large`]).
pub const OVERLAY_MAX: usize = 16 << 20;

/// The segments a `meta.json` names, as their files are named (the uuid without dashes).
fn named_segments(meta: &[u8]) -> std::io::Result<std::collections::HashSet<String>> {
    let v: Value = serde_json::from_slice(meta).map_err(std::io::Error::other)?;
    Ok(v.get("segments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("segment_id").and_then(Value::as_str))
        .map(|id| id.replace('-', ""))
        .collect())
}

/// A file written into the overlay.
struct MemFile {
    path: PathBuf,
    data: Vec<u8>,
    dir: LazyDir,
}

impl std::io::Write for MemFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.data.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl TerminatingWrite for MemFile {
    fn terminate_ref(&mut self, _: AntiCallToken) -> std::io::Result<()> {
        let data = std::mem::take(&mut self.data);
        let mut g = self.dir.overlay()?;
        let o = self.dir.overlay_in(&mut g)?;
        o.bytes += data.len();
        o.files
            .insert(self.path.clone(), tantivy::directory::OwnedBytes::new(data));
        Ok(())
    }
}

/// A file written without fsync.
struct LazyFile(std::fs::File);

impl std::io::Write for LazyFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl TerminatingWrite for LazyFile {
    fn terminate_ref(&mut self, _: AntiCallToken) -> std::io::Result<()> {
        std::io::Write::flush(&mut self.0)
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Writes a small file and its directory entry durably.
fn write_durable(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    std::io::Write::write_all(&mut f, data)?;
    f.sync_all()?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

impl LazyDir {
    fn new(inner: MmapDirectory, root: &Path) -> LazyDir {
        LazyDir {
            inner,
            root: root.to_path_buf(),
            keep: Arc::new(AtomicU8::new(Keep::Durable as u8)),
            managed: Default::default(),
            overlay: Default::default(),
        }
    }

    fn durable(&self) -> bool {
        self.keep.load(Ordering::Acquire) == Keep::Durable as u8
    }

    fn memory(&self) -> bool {
        self.keep.load(Ordering::Acquire) == Keep::Memory as u8
    }

    /// How the files written from now on are kept.
    fn set_keep(&self, keep: Keep) {
        self.keep.store(keep as u8, Ordering::Release);
    }

    fn overlay(&self) -> std::io::Result<std::sync::MutexGuard<'_, Option<Overlay>>> {
        self.overlay
            .lock()
            .map_err(|_| std::io::Error::other("index overlay poisoned"))
    }

    /// The overlay in `g`, begun on the `meta.json` on disk now if there is none.
    fn overlay_in<'a>(&self, g: &'a mut Option<Overlay>) -> std::io::Result<&'a mut Overlay> {
        if g.is_none() {
            let base = self.disk_meta()?;
            *g = Some(Overlay {
                base,
                meta: None,
                files: Default::default(),
                doomed: Vec::new(),
                bytes: 0,
                since: Instant::now(),
            });
        }
        Ok(g.as_mut().expect("invariant: the overlay was just begun"))
    }

    fn disk_meta(&self) -> std::io::Result<Vec<u8>> {
        self.inner
            .atomic_read(Path::new(META))
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    /// Whether the overlay is old enough that the next commit should land it.
    fn overlay_due(&self) -> bool {
        self.overlay().is_ok_and(|g| {
            g.as_ref()
                .is_some_and(|o| o.since.elapsed() >= DURABLE_EVERY)
        })
    }

    /// The size of the overlay's files, and whether there is one.
    fn overlay_size(&self) -> Option<usize> {
        self.overlay().ok()?.as_ref().map(|o| o.bytes)
    }

    /// Writes the overlay's files of the segments `meta` names to disk (fsynced when
    /// durable), before that `meta.json` is written; the files of other segments (merged
    /// away, or emptied by a forget) never reach the disk. The overlay keeps every file until
    /// that `meta.json` is in place ([`LazyDir::landed`]): if writing it fails, the overlay
    /// still holds what its own `meta.json` names.
    fn land(&self, meta: &[u8]) -> std::io::Result<()> {
        let mut g = self.overlay()?;
        let Some(o) = g.as_mut() else {
            return Ok(());
        };
        if self.disk_meta()? != o.base {
            // Only possible if a commit were made without the writer lock: nothing lands on
            // a state this overlay was not built on.
            *g = None;
            return Err(std::io::Error::other(
                "the index on disk changed during a commit; the next search catches up again",
            ));
        }
        let named = named_segments(meta)?;
        let durable = self.durable();
        for (path, data) in &o.files {
            let stem = path
                .to_str()
                .and_then(|p| p.split('.').next())
                .unwrap_or_default();
            if named.contains(stem) {
                let mut f = std::fs::File::create(self.root.join(path))?;
                std::io::Write::write_all(&mut f, data.as_slice())?;
                if durable {
                    f.sync_data()?;
                }
            }
        }
        if durable {
            sync_dir(&self.root)?;
        }
        // Tests: the `meta.json` that would follow cannot be written (a full disk).
        memdir_store::failpoint::fault("index.land_meta")
    }

    /// A `meta.json` on disk was written: the overlay has landed, and the disk files it no
    /// longer used go, under the lock with which tantivy's readers (of any process) read the
    /// metas and open their segments. The commit has happened whatever follows: a file that
    /// cannot be deleted now stays in tantivy's list of managed files (see
    /// [`LazyDir::delete`]), and a later garbage collection removes it.
    fn landed(&self) {
        let gone = self.overlay().ok().and_then(|mut g| g.take());
        let doomed = gone.map(|o| o.doomed).unwrap_or_default();
        if doomed.is_empty() {
            return;
        }
        let Ok(_meta_lock) = self.inner.acquire_lock(&tantivy::directory::META_LOCK) else {
            return;
        };
        for p in doomed {
            let _ = self.inner.delete(&p);
        }
    }

    /// Writes `data` to `path` by a rename, without fsync.
    fn replace_lazily(&self, path: &Path, data: &[u8]) -> std::io::Result<()> {
        // A name of this writer's own: meta.json is written without tantivy's writer lock
        // when an index is created, so two processes may write it at once.
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let tmp = self.root.join(
            format!(
                ".{}.{}.{}.tmp",
                path.display(),
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            )
            .replace('/', "_"),
        );
        std::fs::write(&tmp, data)?;
        std::fs::rename(&tmp, self.root.join(path))
    }

    /// Writes the file list held back, if any (durably when the directory is).
    fn flush_managed(&self) -> std::io::Result<()> {
        let mut held = self
            .managed
            .lock()
            .map_err(|_| std::io::Error::other("managed file list poisoned"))?;
        if let Some(data) = held.take() {
            let r = if self.durable() {
                self.inner.atomic_write(Path::new(MANAGED_LIST), &data)
            } else {
                self.replace_lazily(Path::new(MANAGED_LIST), &data)
            };
            if r.is_err() {
                *held = Some(data);
            }
            r?;
        }
        Ok(())
    }
}

impl Directory for LazyDir {
    fn get_file_handle(
        &self,
        path: &Path,
    ) -> std::result::Result<Arc<dyn FileHandle>, OpenReadError> {
        if let Ok(g) = self.overlay()
            && let Some(b) = g.as_ref().and_then(|o| o.files.get(path))
        {
            return Ok(Arc::new(b.clone()));
        }
        self.inner.get_file_handle(path)
    }
    fn delete(&self, path: &Path) -> std::result::Result<(), DeleteError> {
        let io = |e: std::io::Error| DeleteError::IoError {
            io_error: Arc::new(e),
            filepath: path.to_path_buf(),
        };
        let mut g = self.overlay().map_err(io)?;
        if let Some(o) = g.as_mut() {
            if let Some(b) = o.files.remove(path) {
                o.bytes -= b.len();
                // A landing that failed before its `meta.json` may have written it to disk
                // (never named there: the disk still holds the overlay's base).
                return match self.inner.delete(path) {
                    Ok(()) | Err(DeleteError::FileDoesNotExist(_)) => Ok(()),
                    Err(e) => Err(e),
                };
            }
            // The `meta.json` on disk may still name it: it goes once the overlay lands. Until
            // then tantivy is told it could not be deleted, so the file stays in its list of
            // managed files (and in `.managed.json` for other processes): if the overlay is
            // dropped instead of landing, a later garbage collection still removes it.
            if self.root.join(path).exists() {
                if !o.doomed.iter().any(|d| d == path) {
                    o.doomed.push(path.to_path_buf());
                }
                return Err(io(std::io::Error::other(
                    "still named by meta.json on disk; deleted once this process's commits land",
                )));
            }
        }
        drop(g);
        self.inner.delete(path)
    }
    fn exists(&self, path: &Path) -> std::result::Result<bool, OpenReadError> {
        if let Ok(g) = self.overlay()
            && g.as_ref().is_some_and(|o| o.files.contains_key(path))
        {
            return Ok(true);
        }
        self.inner.exists(path)
    }
    fn open_write(&self, path: &Path) -> std::result::Result<WritePtr, OpenWriteError> {
        if self.memory() {
            let taken = self
                .overlay()
                .map_err(|e| OpenWriteError::wrap_io_error(e, path.to_path_buf()))?
                .as_ref()
                .is_some_and(|o| o.files.contains_key(path));
            if taken {
                return Err(OpenWriteError::FileAlreadyExists(path.to_path_buf()));
            }
            return Ok(std::io::BufWriter::new(Box::new(MemFile {
                path: path.to_path_buf(),
                data: Vec::new(),
                dir: self.clone(),
            })));
        }
        if self.durable() {
            return self.inner.open_write(path);
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(self.root.join(path))
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    OpenWriteError::FileAlreadyExists(path.to_path_buf())
                } else {
                    OpenWriteError::wrap_io_error(e, path.to_path_buf())
                }
            })?;
        Ok(std::io::BufWriter::new(Box::new(LazyFile(file))))
    }
    fn atomic_read(&self, path: &Path) -> std::result::Result<Vec<u8>, OpenReadError> {
        if path == Path::new(META) {
            let io = |e: std::io::Error| OpenReadError::wrap_io_error(e, path.to_path_buf());
            let mut g = self.overlay().map_err(io)?;
            if let Some(o) = g.as_ref() {
                let disk = self.inner.atomic_read(path)?;
                if disk == o.base {
                    return Ok(o.meta.clone().unwrap_or(disk));
                }
                // Another process committed: its state replaces this process's own.
                *g = None;
                return Ok(disk);
            }
        }
        if path == Path::new(MANAGED_LIST)
            && let Ok(held) = self.managed.lock()
            && let Some(data) = held.as_ref()
        {
            return Ok(data.clone());
        }
        self.inner.atomic_read(path)
    }
    fn atomic_write(&self, path: &Path, data: &[u8]) -> std::io::Result<()> {
        if path == Path::new(MANAGED_LIST) {
            let mut held = self
                .managed
                .lock()
                .map_err(|_| std::io::Error::other("managed file list poisoned"))?;
            if !self.durable() {
                *held = Some(data.to_vec());
                return Ok(());
            }
            // Written durably below, superseding any list held back.
            *held = None;
        } else if path == Path::new(META) && self.memory() {
            let mut g = self.overlay()?;
            self.overlay_in(&mut g)?.meta = Some(data.to_vec());
            return Ok(());
        } else {
            if path == Path::new(META) {
                self.land(data)?;
            }
            self.flush_managed()?;
        }
        if self.durable() {
            self.inner.atomic_write(path, data)?;
            sync_dir(&self.root)?;
        } else {
            self.replace_lazily(path, data)?;
        }
        if path == Path::new(META) {
            self.landed();
        }
        Ok(())
    }
    fn sync_directory(&self) -> std::io::Result<()> {
        if !self.durable() {
            return Ok(());
        }
        self.flush_managed()?;
        // Files written by earlier lazy commits (of any process) become durable before the
        // meta.json that is about to name them.
        for e in std::fs::read_dir(&self.root)? {
            let e = e?;
            if e.file_type()?.is_file() {
                std::fs::File::open(e.path())?.sync_data()?;
            }
        }
        sync_dir(&self.root)
    }
    fn acquire_lock(&self, lock: &Lock) -> std::result::Result<DirectoryLock, LockError> {
        self.inner.acquire_lock(lock)
    }
    fn watch(&self, cb: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.inner.watch(cb)
    }
}

/// A file beside the part in `dir`: `<part>.<ext>`.
fn part_sidecar(dir: &Path, ext: &str) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(ext);
    dir.with_file_name(name)
}

/// The marker of a window of lazy commits of the part in `dir`.
fn lazy_marker(dir: &Path) -> PathBuf {
    part_sidecar(dir, "lazy")
}

/// Whether the index in `dir` survived a crash of the machine inside a window of lazy commits
/// intact: every file's checksum, and every segment opens.
fn intact(index: &Index) -> bool {
    let damaged = match index.validate_checksum() {
        Ok(d) => d,
        Err(_) => return false,
    };
    damaged.is_empty()
        && index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .is_ok_and(|r: IndexReader| r.searcher().segment_readers().len() < usize::MAX)
}

fn tantivy_err(what: &str, e: TantivyError) -> Error {
    Error::new(
        ErrorKind::Unavailable,
        format!("search index ({what}): {e}"),
    )
    .hint("the index is derived state: {op:reindex} rebuilds it from the files")
}

impl Part {
    fn open(
        dir: &Path,
        schema: Schema,
        cfg: &AnalyzerConfig,
        tail_in_memory: bool,
    ) -> Result<Part> {
        std::fs::create_dir_all(dir).at("create directory", dir)?;
        let mut lazy = None;
        let mut open = |schema: Schema| -> std::result::Result<Index, TantivyError> {
            let d =
                MmapDirectory::open(dir).map_err(|e| TantivyError::SystemError(e.to_string()))?;
            let d = LazyDir::new(d, dir);
            lazy = Some(d.clone());
            Index::open_or_create(d, schema)
        };
        // Opening creates the index when it is missing and discards one that is stale or
        // torn; two processes doing that at once would see each other's half-made index as
        // damaged and remove it under the other. One opener at a time, across processes.
        let gate_path = part_sidecar(dir, "open");
        let gate = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&gate_path)
            .at("open index gate", &gate_path)?;
        gate.lock().at("lock index gate", &gate_path)?;
        // The machine went down inside a window of lazy commits: what survived may be torn.
        let marker = lazy_marker(dir);
        let crashed = match std::fs::read_to_string(&marker) {
            Ok(boot) => Some(boot.trim().to_string()) != boot_id(),
            Err(_) => false,
        };
        let index = match open(schema.clone()) {
            Ok(i) if !crashed || intact(&i) => i,
            _ => {
                // A different schema, a damaged index, or one torn by a crash: it is derived,
                // so start it afresh.
                std::fs::remove_dir_all(dir).at("remove stale index", dir)?;
                std::fs::create_dir_all(dir).at("create directory", dir)?;
                open(schema).map_err(|e| tantivy_err("create", e))?
            }
        };
        if crashed {
            // Whatever is on disk now survived the crash.
            std::fs::remove_file(&marker).at("remove index marker", &marker)?;
        }
        let mut part = Self::with_index(index, dir, cfg)?;
        part.lazy = lazy;
        part.tail_in_memory = tail_in_memory;
        Ok(part)
    }

    /// An index in memory, for a store memdir may only read.
    fn open_ram(schema: Schema, cfg: &AnalyzerConfig) -> Result<Part> {
        let index = Index::create_in_ram(schema);
        Self::with_index(index, Path::new(""), cfg)
    }

    fn with_index(index: Index, dir: &Path, cfg: &AnalyzerConfig) -> Result<Part> {
        index
            .tokenizers()
            .register(&cfg.tokenizer_name(), cfg.build()?);
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| tantivy_err("reader", e))?;
        Ok(Part {
            index,
            reader,
            dir: dir.to_path_buf(),
            loaded: std::sync::atomic::AtomicU64::new(u64::MAX),
            lazy: None,
            tail_in_memory: false,
            seen: std::sync::Mutex::new(None),
        })
    }

    /// The payload of the last commit.
    pub fn payload(&self) -> Option<Payload> {
        let metas = self.index.load_metas().ok()?;
        serde_json::from_str(metas.payload.as_deref()?).ok()
    }

    /// Reloads the reader if another commit (by any process) happened since it last loaded;
    /// returns the payload of the newest commit.
    ///
    /// Every search asks this first, and most find nothing new: when `meta.json` is the very
    /// file read last time (same inode, length and mtime), the reader is current and the
    /// payload is the one read then, so one `stat` replaces reading and parsing the metas.
    /// A stamp is remembered only once its mtime is [`SETTLED`] old: file times come from a
    /// coarse clock, and a freed inode may be reused, so two commits in one tick could
    /// otherwise leave a stamp equal to an older one.
    pub fn refresh(&self) -> Result<Option<Payload>> {
        use std::sync::atomic::Ordering;
        // Taken before the metas are read: a commit in between leaves an older stamp, so the
        // next call reads again.
        let stamp = self.meta_stamp();
        if let Some(stamp) = stamp
            && let Ok(seen) = self.seen.lock()
            && let Some((s, payload)) = seen.as_ref()
            && *s == stamp
        {
            return Ok(payload.clone());
        }
        let metas = self
            .index
            .load_metas()
            .map_err(|e| tantivy_err("metas", e))?;
        let key = segments_key(metas.segments.iter().map(|m| (m.id(), m.delete_opstamp())));
        if self.loaded.load(Ordering::Acquire) != key {
            self.reload()?;
        }
        let payload: Option<Payload> = metas
            .payload
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok());
        if let Ok(mut seen) = self.seen.lock() {
            *seen = stamp.filter(|s| s.settled).map(|s| (s, payload.clone()));
        }
        Ok(payload)
    }

    /// Reloads the reader, and remembers which segments it holds.
    fn reload(&self) -> Result<()> {
        self.reader.reload().map_err(|e| tantivy_err("reload", e))?;
        let s = self.reader.searcher();
        let key = segments_key(
            s.segment_readers()
                .iter()
                .map(|r| (r.segment_id(), r.delete_opstamp())),
        );
        self.loaded.store(key, Ordering::Release);
        Ok(())
    }

    /// The stamp of `meta.json` on disk; `None` in memory or when it cannot be read.
    fn meta_stamp(&self) -> Option<MetaStamp> {
        self.lazy.as_ref()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as i128)
                .unwrap_or(0);
            let m = std::fs::symlink_metadata(self.dir.join("meta.json")).ok()?;
            let mtime_ns = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
            Some(MetaStamp {
                dev: m.dev(),
                ino: m.ino(),
                len: m.len(),
                mtime_ns,
                settled: now - mtime_ns >= SETTLED.as_nanos() as i128,
            })
        }
        #[cfg(not(unix))]
        {
            None
        }
    }

    /// A writer, waiting (bounded) while another process holds the index's writer lock.
    pub fn writer(&self, threads: usize, budget: usize, timeout: Duration) -> Result<IndexWriter> {
        let w = until_free(timeout, || {
            match self
                .index
                .writer_with_num_threads::<TantivyDocument>(threads, budget)
            {
                Ok(w) => Ok(Some(w)),
                Err(TantivyError::LockFailure(LockError::LockBusy, _)) => Ok(None),
                Err(e) => Err(tantivy_err("writer", e)),
            }
        })?;
        w.set_merge_policy(Box::new(catch_up_merge_policy()));
        Ok(w)
    }

    /// Whether the next commit should be durable: always in memory or where lazy commits
    /// cannot be told from a crash, else once a window of lazy commits is [`DURABLE_EVERY`]
    /// old; where commits stay in memory, also once the overlay is that old.
    pub fn commit_due_durable(&self) -> bool {
        let Some(dir) = &self.lazy else {
            return true;
        };
        if self.tail_in_memory && dir.overlay_due() {
            return true;
        }
        if boot_id().is_none() {
            // Commits in memory need no boot id: nothing of them is on disk.
            return !self.tail_in_memory;
        }
        match std::fs::metadata(lazy_marker(&self.dir)).and_then(|m| m.modified()) {
            Ok(t) => t.elapsed().map_or(true, |age| age >= DURABLE_EVERY),
            Err(_) => false,
        }
    }

    /// Commits with `payload` (fsynced when `durable`, see [`LazyDir`]), merges segments
    /// holding deletions when that is cheap, and reloads the reader.
    pub fn commit(
        &self,
        writer: IndexWriter,
        payload: &Payload,
        merge_deletes_up_to: u32,
        durable: bool,
    ) -> Result<()> {
        self.committing(durable, || {
            self.commit_with(writer, payload, merge_deletes_up_to)
        })
    }

    /// Only the writer lock of this part (what an [`IndexWriter`] takes), waiting (bounded)
    /// while another process holds it: enough for [`Part::append_segment`].
    pub fn lock_writer(&self, timeout: Duration) -> Result<DirectoryLock> {
        until_free(timeout, || {
            match self
                .index
                .directory()
                .acquire_lock(&tantivy::directory::INDEX_WRITER_LOCK)
            {
                Ok(l) => Ok(Some(l)),
                Err(LockError::LockBusy) => Ok(None),
                Err(e) => Err(Error::internal(format!("index lock: {e}"))),
            }
        })
    }

    /// Whether the part lives on disk (not an index in memory for a read-only store).
    pub fn on_disk(&self) -> bool {
        self.lazy.is_some()
    }

    /// The size of the segment files this process holds in memory (see [`Overlay`]), when
    /// it holds any commit there.
    pub fn in_memory(&self) -> Option<usize> {
        self.lazy.as_ref()?.overlay_size()
    }

    /// How many segments of at most [`SMALL_SEGMENT`] documents the reader sees.
    pub fn small_segments(&self) -> usize {
        self.reader
            .searcher()
            .segment_readers()
            .iter()
            .filter(|r| r.max_doc() <= SMALL_SEGMENT)
            .count()
    }

    /// Commits `docs` as one new segment with `payload`, under the writer `lock` (released
    /// afterwards), without an [`IndexWriter`]: the commit of a few appended chunks.
    ///
    /// An `IndexWriter` gives every segment a 2^19-slot term table (zeroed, then scanned
    /// whole to serialise: the size tantivy derives from any memory budget it accepts) and
    /// starts six threads; a segment written here gets a table sized for a few documents
    /// (it grows if needed). Nothing is deleted and nothing merged: the caller takes an
    /// `IndexWriter` for deletions, and folds small segments once too many wait
    /// ([`Part::fold_small_segments`]).
    pub fn append_segment(
        &self,
        lock: DirectoryLock,
        docs: Vec<TantivyDocument>,
        payload: &Payload,
        durable: bool,
    ) -> Result<()> {
        let r = self.committing(durable, || {
            let err = |e: TantivyError| tantivy_err("append", e);
            let metas = self.index.load_metas().map_err(err)?;
            let mut next = metas.clone();
            let mut opstamp = metas.opstamp;
            if !docs.is_empty() {
                let segment = self.index.new_segment();
                let mut sw = tantivy::indexer::SegmentWriter::for_segment(
                    APPEND_TABLE_BUDGET,
                    segment.clone(),
                )
                .map_err(err)?;
                for document in docs {
                    opstamp += 1;
                    sw.add_document(tantivy::indexer::AddOperation { opstamp, document })
                        .map_err(err)?;
                }
                let max_doc = sw.max_doc();
                sw.finalize().map_err(err)?;
                let meta = segment.with_max_doc(max_doc).meta().clone();
                meta.untrack_temp_docstore();
                next.segments.push(meta);
            }
            next.opstamp = opstamp + 1;
            next.payload =
                Some(serde_json::to_string(payload).expect("invariant: payload serializes"));
            let mut bytes =
                serde_json::to_vec_pretty(&next).expect("invariant: index metas serialize");
            bytes.push(b'\n');
            self.write_metas(&bytes)
        });
        drop(lock);
        r
    }

    /// Commits `bytes` as `meta.json` the way an `IndexWriter` does (the files it names
    /// first, fsynced when durable, see [`LazyDir`]; then `meta.json`, atomically) and
    /// reloads the reader.
    fn write_metas(&self, bytes: &[u8]) -> Result<()> {
        let dir = self.index.directory();
        dir.sync_directory()
            .map_err(|e| Error::internal(format!("index sync: {e}")))?;
        dir.atomic_write(Path::new(META), bytes)
            .map_err(|e| Error::internal(format!("index metas: {e}")))?;
        self.reload()
    }

    /// Merges the small segments catch-ups leave (see [`Part::append_segment`]) into one once
    /// more than [`MAX_SMALL_SEGMENTS`] wait, fsynced when `durable`, and reloads the reader.
    ///
    /// The merge goes through an `IndexWriter` that indexes nothing, so it never allocates a
    /// segment writer (a 2^19-slot term table to zero and scan) for the few documents of a
    /// catch-up: those went into a segment of their own first. When another process holds the
    /// writer lock, nothing is merged now (`Ok(false)`); a later catch-up folds them.
    pub fn fold_small_segments(&self, durable: bool) -> Result<bool> {
        if self.small_segments() <= MAX_SMALL_SEGMENTS {
            return Ok(false);
        }
        let writer = match self.writer(1, 32_000_000, Duration::ZERO) {
            Ok(w) => w,
            Err(e) if e.kind == ErrorKind::Busy => return Ok(false),
            Err(e) => return Err(e),
        };
        self.committing(durable, || {
            // The segments as committed now, under the writer lock: the reader may be older.
            let ids: Vec<_> = self
                .index
                .searchable_segment_metas()
                .map_err(|e| tantivy_err("segments", e))?
                .iter()
                .filter(|m| m.max_doc() <= SMALL_SEGMENT)
                .map(|m| m.id())
                .collect();
            self.merge_then_reload(writer, if ids.len() > 1 { &ids } else { &[] })
        })?;
        Ok(true)
    }

    /// Merges the segments `ids` (none: nothing), waits for every merge the writer's policy
    /// started, lets the writer go and reloads the reader.
    fn merge_then_reload(
        &self,
        mut writer: IndexWriter,
        ids: &[tantivy::index::SegmentId],
    ) -> Result<()> {
        if !ids.is_empty() {
            writer
                .merge(ids)
                .wait()
                .map_err(|e| tantivy_err("merge", e))?;
        }
        writer
            .wait_merging_threads()
            .map_err(|e| tantivy_err("merge", e))?;
        self.reload()
    }

    /// Runs a commit `f`, fsynced when `durable`, else in this process's memory where the
    /// part keeps its tail there (see [`Overlay`]), else inside a window of lazy commits (see
    /// [`LazyDir`]).
    fn committing(&self, durable: bool, f: impl FnOnce() -> Result<()>) -> Result<()> {
        let Some(dir) = &self.lazy else {
            return f();
        };
        let marker = lazy_marker(&self.dir);
        let memory = !durable && self.tail_in_memory;
        let durable = durable || (!memory && boot_id().is_none());
        if !durable && !memory && !marker.exists() {
            // The window opens: a crash of the machine from here on is detected on open.
            let boot = boot_id().unwrap_or_default();
            write_durable(&marker, boot.as_bytes()).at("write index marker", &marker)?;
        }
        dir.set_keep(if durable {
            Keep::Durable
        } else if memory {
            Keep::Memory
        } else {
            Keep::Lazy
        });
        let r = f();
        dir.set_keep(Keep::Durable);
        // A commit in memory leaves `meta.json` on disk as it was: its stamp no longer tells
        // the payload.
        if let Ok(mut seen) = self.seen.lock() {
            *seen = None;
        }
        r?;
        if durable {
            match std::fs::remove_file(&marker) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => Err::<(), _>(e).at("remove index marker", &marker)?,
            }
        } else {
            memdir_store::failpoint::hit("index.after_lazy_commit");
        }
        Ok(())
    }

    fn commit_with(
        &self,
        mut writer: IndexWriter,
        payload: &Payload,
        merge_deletes_up_to: u32,
    ) -> Result<()> {
        let mut prepared = writer
            .prepare_commit()
            .map_err(|e| tantivy_err("commit", e))?;
        prepared
            .set_payload(&serde_json::to_string(payload).expect("invariant: payload serializes"));
        prepared.commit().map_err(|e| tantivy_err("commit", e))?;
        let metas = self
            .index
            .searchable_segment_metas()
            .map_err(|e| tantivy_err("segments", e))?;
        let with_deletes: Vec<_> = metas
            .iter()
            .filter(|m| m.num_deleted_docs() > 0)
            .map(|m| (m.id(), m.max_doc()))
            .collect();
        let docs: u32 = with_deletes.iter().map(|(_, n)| n).sum();
        // BM25 statistics count deleted documents until a merge drops them; merging keeps
        // scores identical to those of a clean rebuild.
        let ids: Vec<_> = if docs <= merge_deletes_up_to {
            with_deletes.iter().map(|(id, _)| *id).collect()
        } else {
            Vec::new()
        };
        self.merge_then_reload(writer, &ids)
    }
}

impl Part {
    /// Merges away every deleted document now, whatever the segments' sizes, and removes the
    /// files no longer used: after a forget, no index file keeps the forgotten text.
    pub fn purge_deleted(&self, timeout: Duration) -> Result<()> {
        // What this process keeps in memory lands first (deleting the disk files its merges
        // replaced); the merge below then works on the disk alone.
        self.land_kept(timeout)?;
        let mut writer = self.writer(1, 32_000_000, timeout)?;
        let ids: Vec<_> = self
            .index
            .searchable_segment_metas()
            .map_err(|e| tantivy_err("segments", e))?
            .iter()
            .filter(|m| m.num_deleted_docs() > 0)
            .map(|m| m.id())
            .collect();
        if !ids.is_empty() {
            writer
                .merge(&ids)
                .wait()
                .map_err(|e| tantivy_err("merge", e))?;
        }
        writer
            .garbage_collect_files()
            .wait()
            .map_err(|e| tantivy_err("garbage collection", e))?;
        writer
            .wait_merging_threads()
            .map_err(|e| tantivy_err("merge", e))?;
        self.reload()
    }

    /// [`Part::land_kept`] once the commits kept in memory are [`OVERLAY_MAX`] large (a
    /// catch-up that merged or re-read much), so that memory stays bounded.
    pub fn land_if_large(&self, timeout: Duration) -> Result<()> {
        self.land_beyond(OVERLAY_MAX, timeout)
    }

    /// [`Part::land_kept`] once the commits kept in memory hold `bytes` or more.
    fn land_beyond(&self, bytes: usize, timeout: Duration) -> Result<()> {
        if self.in_memory().is_some_and(|b| b >= bytes) {
            self.land_kept(timeout)?;
        }
        Ok(())
    }

    /// Writes what this process keeps in memory (see [`Overlay`]) to disk in a durable
    /// commit of the same state: afterwards `meta.json` on disk names no segment that a
    /// merge in memory replaced, and those segments' files are gone.
    pub fn land_kept(&self, timeout: Duration) -> Result<()> {
        if self.in_memory().is_none() {
            return Ok(());
        }
        let lock = self.lock_writer(timeout)?;
        let r = self.committing(true, || {
            // The metas as this process sees them now (the disk's, if another process has
            // committed meanwhile: then nothing of this process's is left to land).
            let bytes = self
                .index
                .directory()
                .atomic_read(Path::new(META))
                .map_err(|e| Error::internal(format!("index metas: {e}")))?;
            self.write_metas(&bytes)
        });
        drop(lock);
        r
    }
}

/// What identifies the documents a reader sees: its segments and their deletions.
fn segments_key(segments: impl Iterator<Item = (tantivy::index::SegmentId, Option<u64>)>) -> u64 {
    let mut h = blake3::Hasher::new();
    for (id, deletes) in segments {
        h.update(id.uuid_string().as_bytes());
        h.update(&deletes.map_or(u64::MAX, |d| d).to_le_bytes());
    }
    u64::from_le_bytes(
        h.finalize().as_bytes()[..8]
            .try_into()
            .expect("invariant: a blake3 hash has 32 bytes"),
    )
}

/// Calls `take` until it gets an index's writer lock (`Some`), backing off while another
/// process holds it (`None`), for at most `timeout`.
fn until_free<T>(timeout: Duration, mut take: impl FnMut() -> Result<Option<T>>) -> Result<T> {
    let start = Instant::now();
    let mut wait = 1u64;
    loop {
        if let Some(t) = take()? {
            return Ok(t);
        }
        if start.elapsed() > timeout {
            return Err(Error::new(
                ErrorKind::Busy,
                "search index busy: another memdir process is updating it",
            )
            .hint("retry in a moment")
            .detail("retry_after_ms", Value::from(250)));
        }
        std::thread::sleep(Duration::from_millis(wait));
        wait = (wait * 2).min(20);
    }
}

/// A segment this small is one a catch-up made (see [`Part::append_segment`]).
pub const SMALL_SEGMENT: u32 = 256;

/// Small segments a catch-up may leave; one more, and the catch-up folds them into one
/// ([`Part::fold_small_segments`]).
pub const MAX_SMALL_SEGMENTS: usize = 7;

/// The memory budget a directly written segment's term table is sized from: 2^13 slots.
const APPEND_TABLE_BUDGET: usize = 300_000;

/// How segments are merged as commits add them.
///
/// Each catch-up commit adds a segment of a few documents, and the commit waits for the
/// merges it starts. tantivy's default lumps every segment under 10,000 documents into one
/// level, so every eighth commit merged the tiny segments together with whatever mid-sized
/// segment sat below that size (37 ms for one of 5,000 documents, at every eighth search
/// after a write). Here levels span a factor of eight from 32 documents up, and eight
/// segments of a level merge into one of the next: a merge costs in proportion to its level
/// and comes as often as the level fills (the bottom one about 4 ms every eighth commit).
/// Segments of 100,000 documents or more (what a rebuild makes) are left alone.
fn catch_up_merge_policy() -> tantivy::indexer::LogMergePolicy {
    let mut p = tantivy::indexer::LogMergePolicy::default();
    p.set_min_layer_size(32);
    p.set_level_log_size(3.0);
    p.set_min_num_segments(8);
    p.set_max_docs_before_merge(100_000);
    p
}

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
        for (prefix, text) in [
            ("s:", c.session_id.as_str()),
            ("g:", rel),
            ("p:", c.project.as_str()),
            ("l:", place_key(&c.session_id, position).as_str()),
        ] {
            d.add_text(f.key, format!("{prefix}{text}"));
        }
        d.add_i64(f.ts, memdir_store::clock::parse_time(&c.ts).unwrap_or(0));
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

#[cfg(test)]
mod tests {
    use super::*;
    use tantivy::tokenizer::TokenStream;

    /// Commits `n` documents to the chunk part as one segment, the way a catch-up does.
    fn commit_docs(idx: &SearchIndex, from: u64, n: u64) {
        let w = idx
            .chunks
            .writer(1, 32_000_000, Duration::from_secs(5))
            .unwrap();
        for i in from..from + n {
            w.add_document(doc_of(idx, i, &format!("turn {i}")))
                .unwrap();
        }
        let payload = payload_at(idx, (from + n) as i64);
        idx.chunks.commit(w, &payload, 0, false).unwrap();
    }

    fn segment_sizes(idx: &SearchIndex) -> Vec<(tantivy::index::SegmentId, u32)> {
        idx.chunks
            .index
            .searchable_segment_metas()
            .unwrap()
            .iter()
            .map(|m| (m.id(), m.max_doc()))
            .collect()
    }

    fn payload_at(idx: &SearchIndex, generation: i64) -> Payload {
        Payload {
            schema: INDEX_SCHEMA_VERSION,
            analyzer: idx.cfg.tokenizer_name(),
            epoch: "e".into(),
            generation,
            fingerprint: String::new(),
        }
    }

    fn doc_of(idx: &SearchIndex, i: u64, text: &str) -> TantivyDocument {
        let c = memdir_store::model::ChunkRecord {
            session_id: "s".into(),
            replica: "r".into(),
            seq: i,
            hlc: String::new(),
            ts: String::new(),
            project: String::new(),
            metadata: serde_json::json!({}),
            content: text.into(),
        };
        idx.chunk_doc("sessions/s/r.jsonl", &c, i, None)
    }

    fn hits(idx: &SearchIndex, word: &str) -> usize {
        let q = tantivy::query::TermQuery::new(
            Term::from_field_text(idx.chunk_fields.content, word),
            IndexRecordOption::Basic,
        );
        idx.chunks
            .reader
            .searcher()
            .search(&q, &tantivy::collector::Count)
            .unwrap()
    }

    #[test]
    fn small_segments_are_folded_into_one_once_too_many_wait_and_stay_searchable() {
        let dir = tempfile::tempdir().unwrap();
        let idx = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        let t = Duration::from_secs(5);
        let append = |i: u64| {
            let lock = idx.chunks.lock_writer(t).unwrap();
            idx.chunks
                .append_segment(
                    lock,
                    vec![doc_of(&idx, i, &format!("turn {i} apple"))],
                    &payload_at(&idx, i as i64 + 1),
                    false,
                )
                .unwrap();
        };
        for i in 0..MAX_SMALL_SEGMENTS as u64 {
            append(i);
            assert!(!idx.chunks.fold_small_segments(false).unwrap());
        }
        assert_eq!(idx.chunks.small_segments(), MAX_SMALL_SEGMENTS);
        append(MAX_SMALL_SEGMENTS as u64);
        // While another holder has the writer lock, nothing is folded and nothing fails.
        let lock = idx.chunks.lock_writer(t).unwrap();
        assert!(!idx.chunks.fold_small_segments(false).unwrap());
        drop(lock);
        assert_eq!(idx.chunks.small_segments(), MAX_SMALL_SEGMENTS + 1);
        assert!(idx.chunks.fold_small_segments(true).unwrap());
        assert_eq!(segment_sizes(&idx).len(), 1, "{:?}", segment_sizes(&idx));
        assert_eq!(hits(&idx, "appl"), MAX_SMALL_SEGMENTS + 1);
        // The payload of the last commit survives the merge, on disk too.
        let reopened = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert_eq!(
            reopened.chunks.refresh().unwrap().map(|p| p.generation),
            Some(MAX_SMALL_SEGMENTS as i64 + 1)
        );
        assert_eq!(hits(&reopened, "appl"), MAX_SMALL_SEGMENTS + 1);
    }

    #[test]
    fn segments_written_without_a_writer_are_searchable_and_reopen_with_their_payload() {
        let dir = tempfile::tempdir().unwrap();
        let idx = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        let t = Duration::from_secs(5);
        let lock = idx.chunks.lock_writer(t).unwrap();
        // While the lock is held, no writer (of this process or another) can be taken.
        let busy = idx.chunks.writer(1, 32_000_000, Duration::from_millis(50));
        assert_eq!(busy.err().map(|e| e.kind), Some(ErrorKind::Busy));
        let docs = vec![doc_of(&idx, 0, "apple pie"), doc_of(&idx, 1, "apple tart")];
        idx.chunks
            .append_segment(lock, docs, &payload_at(&idx, 1), false)
            .unwrap();
        assert_eq!(hits(&idx, "appl"), 2);
        let lock = idx.chunks.lock_writer(t).unwrap();
        idx.chunks
            .append_segment(
                lock,
                vec![doc_of(&idx, 2, "pear")],
                &payload_at(&idx, 2),
                true,
            )
            .unwrap();
        // Nothing to add still records the payload.
        let lock = idx.chunks.lock_writer(t).unwrap();
        idx.chunks
            .append_segment(lock, Vec::new(), &payload_at(&idx, 3), false)
            .unwrap();
        assert_eq!(idx.chunks.small_segments(), 2);
        // A writer afterwards sees them, and deletes among them.
        let w = idx.chunks.writer(1, 32_000_000, t).unwrap();
        w.delete_term(Term::from_field_text(idx.chunk_fields.content, "pear"));
        w.add_document(doc_of(&idx, 3, "plum")).unwrap();
        idx.chunks
            .commit(w, &payload_at(&idx, 4), 0, false)
            .unwrap();
        assert_eq!(hits(&idx, "pear"), 0);
        assert_eq!(hits(&idx, "plum"), 1);
        // The list of managed files (held back while lazy) names every file meta.json needs.
        let part = dir.path().join("chunks");
        let managed: Vec<String> =
            serde_json::from_slice(&std::fs::read(part.join(MANAGED_LIST)).unwrap()).unwrap();
        let metas = idx.chunks.index.load_metas().unwrap();
        assert!(!metas.segments.is_empty());
        for f in metas.list_segment_files() {
            let f = f.to_string_lossy().into_owned();
            // Candidates: a segment without deletions has no `.del` file.
            if part.join(&f).exists() {
                assert!(managed.contains(&f), "{f} not in {managed:?}");
            } else {
                assert!(f.ends_with(".del") || f.ends_with(".temp"), "{f} missing");
            }
        }
        drop(idx);
        let idx = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert_eq!(idx.chunks.payload(), Some(payload_at(&idx, 4)));
        assert_eq!(idx.chunks.reader.searcher().num_docs(), 3);
        assert_eq!(hits(&idx, "appl"), 2);
    }

    /// The files of a part on disk, without tantivy's lock files.
    fn files_of(dir: &Path) -> std::collections::BTreeSet<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.ends_with(".lock"))
            .collect()
    }

    fn append(idx: &SearchIndex, docs: Vec<TantivyDocument>, generation: i64, durable: bool) {
        let lock = idx.chunks.lock_writer(Duration::from_secs(5)).unwrap();
        idx.chunks
            .append_segment(lock, docs, &payload_at(idx, generation), durable)
            .unwrap();
    }

    /// A part keeping its commits in memory, with "wallabysecret" and "pear" committed to
    /// disk as one segment.
    fn secret_on_disk() -> (tempfile::TempDir, PathBuf, SearchIndex) {
        let dir = tempfile::tempdir().unwrap();
        let part = dir.path().join("chunks");
        let idx = SearchIndex::open_with(dir.path(), AnalyzerConfig::default(), true).unwrap();
        let docs = vec![doc_of(&idx, 0, "wallabysecret"), doc_of(&idx, 1, "pear")];
        append(&idx, docs, 1, true);
        (dir, part, idx)
    }

    /// Deletes the documents holding `word` and commits (not durably), merging the deletion
    /// away, as a catch-up does.
    fn delete_word(idx: &SearchIndex, word: &str, generation: i64) {
        let t = Duration::from_secs(5);
        let w = idx.chunks.writer(1, 32_000_000, t).unwrap();
        w.delete_term(Term::from_field_text(idx.chunk_fields.content, word));
        let payload = payload_at(idx, generation);
        idx.chunks.commit(w, &payload, 200_000, false).unwrap();
    }

    #[test]
    fn commits_kept_in_memory_write_no_file_and_land_whole_with_the_next_durable_one() {
        let dir = tempfile::tempdir().unwrap();
        let part = dir.path().join("chunks");
        let idx = SearchIndex::open_with(dir.path(), AnalyzerConfig::default(), true).unwrap();
        append(
            &idx,
            vec![doc_of(&idx, 0, "apple"), doc_of(&idx, 1, "apple")],
            1,
            true,
        );
        let on_disk = files_of(&part);
        let meta = std::fs::read(part.join(META)).unwrap();
        // Commits in memory: searchable here, nothing written, not even a lazy marker.
        append(&idx, vec![doc_of(&idx, 2, "pear")], 2, false);
        append(&idx, vec![doc_of(&idx, 3, "plum")], 3, false);
        assert_eq!(files_of(&part), on_disk);
        assert_eq!(std::fs::read(part.join(META)).unwrap(), meta);
        assert!(!lazy_marker(&part).exists());
        assert_eq!((hits(&idx, "pear"), hits(&idx, "plum")), (1, 1));
        assert_eq!(idx.chunks.refresh().unwrap(), Some(payload_at(&idx, 3)));
        assert!(idx.chunks.in_memory().is_some_and(|b| b > 0));
        // Another process sees the disk.
        let other = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert_eq!(other.chunks.refresh().unwrap(), Some(payload_at(&other, 1)));
        assert_eq!((hits(&other, "appl"), hits(&other, "pear")), (2, 0));
        // Folding in memory takes the small segment on disk in too; the disk keeps it, named
        // by its `meta.json`, until a durable commit lands the fold.
        for i in 0..MAX_SMALL_SEGMENTS as u64 {
            append(
                &idx,
                vec![doc_of(&idx, 4 + i, "quince")],
                4 + i as i64,
                false,
            );
        }
        assert!(idx.chunks.fold_small_segments(false).unwrap());
        assert_eq!(segment_sizes(&idx).len(), 1);
        assert_eq!(files_of(&part), on_disk);
        let other = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert!(intact(&other.chunks.index));
        assert_eq!(hits(&other, "appl"), 2);
        // Old or large enough, the overlay makes the next commit durable.
        assert!(!idx.chunks.commit_due_durable());
        if let Some(o) = idx
            .chunks
            .lazy
            .as_ref()
            .unwrap()
            .overlay()
            .unwrap()
            .as_mut()
        {
            o.since -= DURABLE_EVERY;
        }
        assert!(idx.chunks.commit_due_durable());
        let g = 4 + MAX_SMALL_SEGMENTS as i64;
        append(&idx, vec![doc_of(&idx, 99, "fig")], g, true);
        assert_eq!(idx.chunks.in_memory(), None);
        assert!(!idx.chunks.commit_due_durable());
        // Landed: only the files the new `meta.json` names, the folded-away segment gone.
        let metas = idx.chunks.index.load_metas().unwrap();
        let named: std::collections::BTreeSet<String> = metas
            .list_segment_files()
            .into_iter()
            .map(|f| f.to_string_lossy().into_owned())
            .filter(|f| part.join(f).exists())
            .collect();
        let segment_files: std::collections::BTreeSet<String> = files_of(&part)
            .into_iter()
            .filter(|f| !f.starts_with('.') && f != META)
            .collect();
        assert_eq!(segment_files, named);
        drop(idx);
        let reopened = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert!(intact(&reopened.chunks.index));
        assert_eq!(
            reopened.chunks.refresh().unwrap(),
            Some(payload_at(&reopened, g))
        );
        assert_eq!(reopened.chunks.reader.searcher().num_docs(), 12);
        for (w, n) in [
            ("appl", 2),
            ("pear", 1),
            ("plum", 1),
            ("quinc", 7),
            ("fig", 1),
        ] {
            assert_eq!(hits(&reopened, w), n, "{w}");
        }
    }

    #[test]
    fn a_commit_by_another_process_replaces_the_commits_kept_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let idx = SearchIndex::open_with(dir.path(), AnalyzerConfig::default(), true).unwrap();
        append(&idx, vec![doc_of(&idx, 0, "apple")], 1, true);
        append(&idx, vec![doc_of(&idx, 1, "pear")], 2, false);
        // Another process indexes the same change itself, lazily.
        let other = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert_eq!(other.chunks.refresh().unwrap(), Some(payload_at(&other, 1)));
        append(&other, vec![doc_of(&other, 1, "pear")], 2, false);
        // This process now reads the disk: the change once, not twice.
        assert_eq!(idx.chunks.refresh().unwrap(), Some(payload_at(&idx, 2)));
        assert_eq!(idx.chunks.in_memory(), None);
        assert_eq!(hits(&idx, "pear"), 1);
        assert_eq!(idx.chunks.reader.searcher().num_docs(), 2);
        // And goes on in memory from there; a durable commit gives it to everyone.
        append(&idx, vec![doc_of(&idx, 2, "plum")], 3, false);
        assert_eq!(other.chunks.refresh().unwrap(), Some(payload_at(&other, 2)));
        assert_eq!(hits(&other, "plum"), 0);
        append(&idx, Vec::new(), 4, true);
        assert_eq!(other.chunks.refresh().unwrap(), Some(payload_at(&other, 4)));
        assert_eq!(hits(&other, "plum"), 1);
        assert_eq!(other.chunks.reader.searcher().num_docs(), 3);
    }

    #[test]
    fn a_purge_lands_what_is_kept_in_memory_and_removes_a_document_merged_away_there() {
        let (dir, part, idx) = secret_on_disk();
        let holding = |word: &str| {
            files_of(&part)
                .into_iter()
                .filter(|f| {
                    std::fs::read(part.join(f))
                        .unwrap()
                        .windows(word.len())
                        .any(|w| w == word.as_bytes())
                })
                .count()
        };
        assert!(holding("wallabysecret") > 0);
        // A forget's catch-up in memory deletes the document and merges its segment there.
        delete_word(&idx, "wallabysecret", 2);
        assert_eq!((hits(&idx, "wallabysecret"), hits(&idx, "pear")), (0, 1));
        // The disk still names the old segment until the merge lands.
        assert!(holding("wallabysecret") > 0);
        idx.chunks.purge_deleted(Duration::from_secs(5)).unwrap();
        assert_eq!(holding("wallabysecret"), 0);
        assert_eq!(idx.chunks.in_memory(), None);
        let reopened = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert_eq!(
            reopened.chunks.refresh().unwrap(),
            Some(payload_at(&reopened, 2))
        );
        assert_eq!(
            (hits(&reopened, "wallabysecret"), hits(&reopened, "pear")),
            (0, 1)
        );
    }

    #[test]
    fn a_landing_that_fails_before_its_meta_json_leaves_every_file_kept_in_memory_readable() {
        let dir = tempfile::tempdir().unwrap();
        let idx = SearchIndex::open_with(dir.path(), AnalyzerConfig::default(), true).unwrap();
        append(&idx, vec![doc_of(&idx, 0, "apple")], 1, true);
        append(&idx, vec![doc_of(&idx, 1, "pear")], 2, false);
        append(&idx, vec![doc_of(&idx, 2, "plum")], 3, false);
        let lazy = idx.chunks.lazy.as_ref().unwrap();
        // A durable commit whose `meta.json` no longer names the last segment (its documents
        // deleted, say) writes the files it names, then fails to write that `meta.json`.
        let mut meta: Value =
            serde_json::from_slice(&lazy.atomic_read(Path::new(META)).unwrap()).unwrap();
        meta["segments"].as_array_mut().unwrap().pop();
        lazy.land(&serde_json::to_vec(&meta).unwrap()).unwrap();
        // The overlay still names that segment, and still holds its files.
        idx.chunks.reload().unwrap();
        assert_eq!((hits(&idx, "pear"), hits(&idx, "plum")), (1, 1));
        // The segment that did reach the disk is merged away in memory next: its disk copy
        // (named by no `meta.json` on disk) goes with it, not left behind for good.
        delete_word(&idx, "pear", 4);
        delete_word(&idx, "nothing", 5);
        append(&idx, vec![doc_of(&idx, 3, "fig")], 6, true);
        let metas = idx.chunks.index.load_metas().unwrap();
        let named: std::collections::BTreeSet<String> = metas
            .list_segment_files()
            .into_iter()
            .map(|f| f.to_string_lossy().into_owned())
            .collect();
        let part = dir.path().join("chunks");
        for f in files_of(&part) {
            assert!(
                f.starts_with('.') || f == META || named.contains(&f),
                "{f} left"
            );
        }
        let reopened = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert!(intact(&reopened.chunks.index));
        assert_eq!(reopened.chunks.reader.searcher().num_docs(), 3);
        assert_eq!((hits(&reopened, "pear"), hits(&reopened, "plum")), (0, 1));
    }

    #[test]
    fn a_disk_file_replaced_in_memory_stays_managed_when_the_overlay_is_dropped() {
        let (dir, part, idx) = secret_on_disk();
        let old = files_of(&part);
        // In memory, the document is deleted and its segment merged away: the disk files are
        // kept while `meta.json` on disk names them.
        delete_word(&idx, "wallabysecret", 2);
        // The next commit's garbage collection (the reader no longer holds that segment)
        // finds those files unused.
        let w = idx
            .chunks
            .writer(1, 32_000_000, Duration::from_secs(5))
            .unwrap();
        w.add_document(doc_of(&idx, 2, "fig")).unwrap();
        idx.chunks
            .commit(w, &payload_at(&idx, 3), 200_000, false)
            .unwrap();
        assert!(old.is_subset(&files_of(&part)));
        // ... and stay in tantivy's list of managed files, so that whichever garbage
        // collection runs once nothing names them deletes them.
        let lazy = idx.chunks.lazy.as_ref().unwrap();
        let managed: Vec<String> =
            serde_json::from_slice(&lazy.atomic_read(Path::new(MANAGED_LIST)).unwrap()).unwrap();
        for f in old.iter().filter(|f| !f.starts_with('.') && *f != META) {
            assert!(managed.contains(f), "{f} not in {managed:?}");
        }
        // Another process applies the same change on disk before this one lands anything.
        let other = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        delete_word(&other, "wallabysecret", 2);
        // This process drops its overlay; the old files are still its to delete.
        assert_eq!(idx.chunks.refresh().unwrap(), Some(payload_at(&idx, 2)));
        assert_eq!(idx.chunks.in_memory(), None);
        idx.chunks.purge_deleted(Duration::from_secs(5)).unwrap();
        let left: Vec<String> = old
            .iter()
            .filter(|f| !f.starts_with('.') && *f != META)
            .filter(|f| part.join(f).exists())
            .cloned()
            .collect();
        assert_eq!(left, Vec::<String>::new());
        assert_eq!((hits(&idx, "wallabysecret"), hits(&idx, "pear")), (0, 1));
    }

    #[test]
    fn commits_kept_in_memory_land_once_they_are_large() {
        let dir = tempfile::tempdir().unwrap();
        let idx = SearchIndex::open_with(dir.path(), AnalyzerConfig::default(), true).unwrap();
        let t = Duration::from_secs(5);
        append(&idx, vec![doc_of(&idx, 0, "apple")], 1, true);
        append(&idx, vec![doc_of(&idx, 1, "pear")], 2, false);
        let held = idx.chunks.in_memory().unwrap();
        assert!(held > 0);
        // Below the bound nothing lands; at it, everything does.
        idx.chunks.land_beyond(held + 1, t).unwrap();
        assert_eq!(idx.chunks.in_memory(), Some(held));
        assert!(OVERLAY_MAX > held);
        idx.chunks.land_if_large(t).unwrap();
        assert_eq!(idx.chunks.in_memory(), Some(held));
        idx.chunks.land_beyond(held, t).unwrap();
        assert_eq!(idx.chunks.in_memory(), None);
        let other = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        assert_eq!(other.chunks.refresh().unwrap(), Some(payload_at(&other, 2)));
        assert_eq!(hits(&other, "pear"), 1);
    }

    #[test]
    fn small_commits_merge_among_themselves_not_into_a_mid_sized_segment() {
        let dir = tempfile::tempdir().unwrap();
        let idx = SearchIndex::open(dir.path(), AnalyzerConfig::default()).unwrap();
        commit_docs(&idx, 0, 5_000);
        let mid = segment_sizes(&idx)[0].0;
        for i in 0..40 {
            commit_docs(&idx, 5_000 + i, 1);
        }
        let sizes = segment_sizes(&idx);
        // tantivy's default policy merged the 5,000-document segment with every seventh small
        // one (all under 10,000 documents shared one level).
        assert!(
            sizes.contains(&(mid, 5_000)),
            "the mid-sized segment was merged: {sizes:?}"
        );
        // The small ones did merge: 40 commits, far fewer segments.
        assert!(sizes.len() <= 10, "{sizes:?}");
        let total: u32 = sizes.iter().map(|s| s.1).sum();
        assert_eq!(total, 5_040);
        assert_eq!(idx.chunks.reader.searcher().num_docs(), 5_040);
    }

    fn tokens(cfg: &AnalyzerConfig, s: &str) -> Vec<String> {
        let mut a = cfg.build().unwrap();
        let mut ts = a.token_stream(s);
        let mut out = Vec::new();
        while let Some(t) = ts.next() {
            out.push(t.text.clone());
        }
        out
    }

    #[test]
    fn english_stems_and_drops_stop_words() {
        let cfg = AnalyzerConfig::default();
        assert_eq!(
            tokens(&cfg, "The pools were timing out"),
            vec!["pool", "were", "time", "out"]
        );
        assert_eq!(
            tokens(&cfg, "max_size=10 at 127.0.0.1:5432"),
            vec!["max", "size", "10", "127", "0", "0", "1", "5432"]
        );
    }

    #[test]
    fn any_script_stays_findable() {
        let cfg = AnalyzerConfig::parse("none").unwrap();
        assert_eq!(tokens(&cfg, "東京大学"), vec!["東", "京", "大", "学"]);
        assert_eq!(tokens(&cfg, "café déjà vu"), vec!["cafe", "deja", "vu"]);
        assert_eq!(tokens(&cfg, "cafe\u{301}"), vec!["cafe"]);
        assert_eq!(
            tokens(&cfg, "ship it 🚀 now"),
            vec!["ship", "it", "🚀", "now"]
        );
        assert_eq!(tokens(&cfg, "Привет мир"), vec!["привет", "мир"]);
        assert_eq!(tokens(&cfg, "नमस्ते दुनिया"), vec!["नमस्ते", "दुनिया"]);
        assert_eq!(
            tokens(&cfg, "東京に行きました!"),
            vec!["東", "京", "に", "行", "き", "ま", "し", "た"]
        );
        assert_eq!(
            tokens(&cfg, "«quoted» — dash…end"),
            vec!["quoted", "dash", "end"]
        );
        assert_eq!(tokens(&cfg, "a🚀b"), vec!["a", "🚀", "b"]);
    }

    #[test]
    fn analyzer_config_parses() {
        assert_eq!(
            AnalyzerConfig::parse("English").unwrap(),
            AnalyzerConfig::default()
        );
        assert!(!AnalyzerConfig::parse("german-nostop").unwrap().stop_words);
        assert!(AnalyzerConfig::parse("klingon").is_err());
    }
}
