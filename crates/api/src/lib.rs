//! The contract: every operation's typed request and response, with one default per
//! parameter.
//!
//! The engine ((`memdir_engine::service`)) takes these requests and returns these responses; the
//! operation table ((`memdir_engine::ops`)) names them per surface and derives the MCP tool schemas, the
//! REST routes and `schema/openapi.json` from them; the CLI parses its arguments into the same
//! types (clap), so a default lives in one place. Doc comments here are the descriptions every
//! surface shows.
//!
//! Input rules shared by every surface: unknown fields are refused; an integer may be sent as
//! a float without a fraction (`5.0`), anything else that is not an exact non-negative integer
//! is refused; a version may be a number or a history id, sent as a string or an integer; a
//! field list may be a comma-separated string or an array of strings.
//!
//! Architecture Invariant: this module holds types only: no I/O, no engine, no surface.

#![forbid(unsafe_code)]

pub mod cli;
pub mod error;
pub mod jsontext;
pub mod limits;
pub mod notes;
pub mod uri;

pub use error::{Error, ErrorKind, Result};
pub use notes::*;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Default values, shared by every surface.
pub mod defaults {
    /// Hits per search.
    pub const SEARCH_LIMIT: usize = 5;
    /// Chunks per fetched page.
    pub const FETCH_LIMIT: usize = 20;
    /// Sessions active within this many days are listed by `overview` (0: all).
    pub const OVERVIEW_DAYS: u64 = 7;
    /// Sessions per catalog page.
    pub const OVERVIEW_LIMIT: usize = 50;
    /// Versions per history page.
    pub const HISTORY_LIMIT: usize = 20;
    /// Versions `compact` keeps per category.
    pub const KEEP_VERSIONS: usize = 5;

    pub(crate) fn search_limit() -> usize {
        SEARCH_LIMIT
    }
    pub(crate) fn fetch_limit() -> usize {
        FETCH_LIMIT
    }
    pub(crate) fn overview_days() -> u64 {
        OVERVIEW_DAYS
    }
    pub(crate) fn overview_limit() -> usize {
        OVERVIEW_LIMIT
    }
    pub(crate) fn history_limit() -> usize {
        HISTORY_LIMIT
    }
    pub(crate) fn keep_versions() -> usize {
        KEEP_VERSIONS
    }
    pub(crate) fn export_format() -> String {
        "jsonl".to_string()
    }
}

/// Lenient number input: exact non-negative integers, also sent as floats without a fraction.
pub mod num {
    /// Writes an `f32` as its shortest decimal (`5.158992`), not as the `f64` it widens to in a
    /// JSON value (`5.158991813659668`): the same number, in half the characters an agent reads,
    /// and what a token budget estimated from the typed answer counted.
    pub fn short_f32<S: serde::Serializer>(x: &f32, s: S) -> Result<S::Ok, S::Error> {
        match format!("{x}").parse::<f64>() {
            Ok(v) if x.is_finite() => s.serialize_f64(v),
            _ => s.serialize_f32(*x),
        }
    }

    use serde::Deserializer;
    use serde::de::{Error, Visitor};

    /// The largest integer below which every integer has an exact float (2^53 - 1).
    const EXACT: f64 = 9_007_199_254_740_991.0;

    struct U64;

    impl Visitor<'_> for U64 {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a non-negative integer")
        }
        fn visit_u64<E: Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_i64<E: Error>(self, v: i64) -> Result<u64, E> {
            u64::try_from(v)
                .map_err(|_| E::custom(format!("expected a non-negative integer, got {v}")))
        }
        fn visit_f64<E: Error>(self, v: f64) -> Result<u64, E> {
            if v.is_finite() && v.fract() == 0.0 && (0.0..=EXACT).contains(&v) {
                Ok(v as u64)
            } else if v.is_finite() && v.fract() == 0.0 && v > EXACT {
                Err(E::custom(format!(
                    "{v} is too large to be an exact integer"
                )))
            } else {
                Err(E::custom(format!(
                    "expected a non-negative integer, got {v}"
                )))
            }
        }
    }

    pub fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        d.deserialize_any(U64)
    }

    pub fn usize<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
        let v = d.deserialize_any(U64)?;
        usize::try_from(v).map_err(|_| D::Error::custom(format!("{v} is too large")))
    }

    pub fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        struct Opt;
        impl<'de> Visitor<'de> for Opt {
            type Value = Option<u64>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a non-negative integer or null")
            }
            fn visit_none<E: Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                super::num::u64(d).map(Some)
            }
        }
        d.deserialize_option(Opt)
    }

    /// A command-line integer, by the same rules: `5` and `5.0` are 5; `5.5`, `-1` and numbers
    /// that are not exact are refused.
    pub fn parse_u64(s: &str) -> Result<u64, String> {
        let t = s.trim();
        if let Ok(v) = t.parse::<u64>() {
            return Ok(v);
        }
        match t.parse::<f64>() {
            Ok(v) if v.is_finite() && v.fract() == 0.0 && (0.0..=EXACT).contains(&v) => {
                Ok(v as u64)
            }
            Ok(v) if v.is_finite() && v.fract() == 0.0 && v > EXACT => {
                Err(format!("{t} is too large to be an exact integer"))
            }
            _ => Err(format!("expected a non-negative integer, got {t:?}")),
        }
    }

    /// [`parse_u64`] for sizes and counts.
    pub fn parse_usize(s: &str) -> Result<usize, String> {
        let v = parse_u64(s)?;
        usize::try_from(v).map_err(|_| format!("{v} is too large"))
    }

    pub fn opt_usize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
        opt_u64(d)?
            .map(|v| usize::try_from(v).map_err(|_| D::Error::custom(format!("{v} is too large"))))
            .transpose()
    }

    struct Time;

    impl Visitor<'_> for Time {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a time: RFC 3339 text, a date, or epoch milliseconds")
        }
        fn visit_str<E: Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_i64<E: Error>(self, v: i64) -> Result<Self::Value, E> {
            U64.visit_i64(v).map(|v: u64| Some(v.to_string()))
        }
        fn visit_f64<E: Error>(self, v: f64) -> Result<Self::Value, E> {
            U64.visit_f64(v).map(|v: u64| Some(v.to_string()))
        }
    }

    /// A time sent as text (RFC 3339 or a date) or as an integer of epoch milliseconds (what
    /// most logs and JavaScript's `Date.now()` give); kept as text for the engine to parse.
    pub fn opt_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(Time)
    }
}

/// The schema of an optional time argument: a string (RFC 3339 or a date), so strict clients
/// need no union type; epoch milliseconds are accepted as a number too (the description says
/// so), as a version is accepted as a number or a string.
fn opt_time_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string"})
}

/// A version of a category: its number (`3`) or its history id. Sent as a string or an
/// integer; its schema is a string, so strict clients need no union type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum VersionRef {
    Ordinal(u64),
    Id(String),
}

impl VersionRef {
    /// Digits are a version number, anything else a history id or a hash; 12 digits or more
    /// are a hash prefix (no version number is that long), kept as written.
    pub fn parse(s: &str) -> VersionRef {
        match s.trim().parse::<u64>() {
            Ok(n) if s.trim().len() < 12 => VersionRef::Ordinal(n),
            _ => VersionRef::Id(s.trim().to_string()),
        }
    }
}

impl std::str::FromStr for VersionRef {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(VersionRef::parse(s))
    }
}

impl<'de> Deserialize<'de> for VersionRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = VersionRef;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a version number or a history id")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<VersionRef, E> {
                Ok(VersionRef::parse(s))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<VersionRef, E> {
                Ok(VersionRef::Ordinal(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<VersionRef, E> {
                u64::try_from(v)
                    .map(VersionRef::Ordinal)
                    .map_err(|_| E::custom(format!("a version is at least 1, got {v}")))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<VersionRef, E> {
                if v.is_finite() && v.fract() == 0.0 && (0.0..=9_007_199_254_740_992.0).contains(&v)
                {
                    Ok(VersionRef::Ordinal(v as u64))
                } else {
                    Err(E::custom(format!("a version is a whole number, got {v}")))
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for VersionRef {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "VersionRef".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A version number (\"3\"; an integer is accepted too) or a history id."
        })
    }
    fn inline_schema() -> bool {
        true
    }
}

/// Top-level keys to return: comma-separated (`"a,b"`) or, also accepted, an array.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(into = "String")]
pub struct Fields(pub Vec<String>);

impl From<Fields> for String {
    fn from(f: Fields) -> String {
        f.0.join(",")
    }
}

impl Fields {
    /// Splits a comma-separated list; empty items are dropped.
    pub fn parse(s: &str) -> Fields {
        Fields(
            s.split(',')
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty())
                .collect(),
        )
    }
}

impl std::str::FromStr for Fields {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Fields::parse(s))
    }
}

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Csv(String),
            List(Vec<String>),
        }
        match Raw::deserialize(d).map_err(|_| {
            serde::de::Error::custom("expected a comma-separated string or an array of strings")
        })? {
            Raw::Csv(s) => Ok(Fields::parse(&s)),
            Raw::List(v) => Ok(Fields(v)),
        }
    }
}

impl JsonSchema for Fields {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Fields".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "Top-level keys, comma-separated (an array of strings is accepted too)."
        })
    }
    fn inline_schema() -> bool {
        true
    }
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

/// No parameters.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// Parameters of a search.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    /// Words, or an exact identifier, error message or path; double quotes for an exact
    /// phrase.
    // The CLI takes it as the rest of its words (the binary's `SearchArgs`); this doc comment
    // is the schema's description, so it says only what a caller needs.
    #[arg(skip)]
    pub query: String,
    /// auto (default): exact for identifiers and quoted phrases, else BM25 (hybrid with
    /// embeddings).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["auto", "bm25", "exact", "semantic", "hybrid"]))]
    pub mode: Option<String>,
    /// Hits to return.
    #[arg(long, default_value_t = defaults::SEARCH_LIMIT, value_parser = num::parse_usize, allow_negative_numbers = true)]
    #[serde(default = "defaults::search_limit", deserialize_with = "num::usize")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: usize,
    /// Only chunks of this project.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Only chunks of this session.
    #[arg(long = "session")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Only this category.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Only this kind: chunk, category or note.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["chunk", "category", "note"]))]
    pub kind: Option<String>,
    /// Only items at or after this time (RFC 3339, a date, epoch ms, 7d ago).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Only items at or before this time (a date: all of it).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Neighbours per side shown with each hit (default 3).
    #[arg(long, value_parser = num::parse_usize, allow_negative_numbers = true)]
    #[serde(
        default,
        deserialize_with = "num::opt_usize",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 20))]
    pub context: Option<usize>,
    /// Whole texts instead of excerpts.
    #[arg(long)]
    #[serde(default)]
    pub full: bool,
    /// Add each hit's score parts.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub explain: bool,
    /// Token budget of the answer; the best hit always stays.
    #[arg(long, value_parser = num::parse_usize, allow_negative_numbers = true)]
    #[serde(
        default,
        deserialize_with = "num::opt_usize",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 50))]
    pub max_tokens: Option<usize>,
    /// Keep corrected chunks at their own rank.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_superseded: bool,
    /// As it stood at this time.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
    /// Weight of a match in the previous turn; not a surface parameter: benchmarks set it to
    /// measure ranking.
    #[arg(skip)]
    #[serde(skip)]
    #[schemars(skip)]
    pub context_weight: Option<f32>,
}

impl SearchRequest {
    /// A request for `query` with every option at its default.
    pub fn new(query: &str) -> Self {
        SearchRequest {
            query: query.to_string(),
            mode: None,
            limit: defaults::SEARCH_LIMIT,
            project: None,
            session_id: None,
            category: None,
            kind: None,
            since: None,
            until: None,
            context: None,
            full: false,
            explain: false,
            max_tokens: None,
            include_superseded: false,
            as_of: None,
            context_weight: None,
        }
    }
}

/// `models`: list the embedding models configured and cached, or fetch one.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct ModelsRequest {
    /// Fetch this model (`owner/name` on Hugging Face, e.g.
    /// sentence-transformers/all-MiniLM-L6-v2) into the model cache.
    #[arg(long, value_name = "REPO")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch: Option<String>,
}

/// A model in the cache.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct CachedModel {
    /// `owner/name`.
    pub name: String,
    /// Its directory.
    pub dir: String,
    /// Files it lacks (empty: usable by the local provider).
    pub missing: Vec<String>,
}

/// `models`: what is configured and what is present.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ModelsResponse {
    /// The `[embeddings]` section as resolved (no secrets), or null.
    #[schemars(with = "Option<Map<String, Value>>")]
    pub configured: Option<Value>,
    /// Whether the configured model is usable here: a local model's files are present, an
    /// openai endpoint is configured (it is not contacted).
    pub ready: bool,
    /// Whether this memdir was built with the local provider.
    pub local_provider_built: bool,
    /// The model cache.
    pub cache_dir: Option<String>,
    /// Models in the cache.
    pub cached: Vec<CachedModel>,
    /// The model fetched by this call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched: Option<String>,
}

/// `embed`: what was embedded.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct EmbedResponse {
    /// The model's identity (vectors are stored under it).
    pub model_id: String,
    /// Texts embedded by this call.
    pub embedded: usize,
    /// Documents with a vector / documents indexed.
    pub coverage: String,
    /// Seconds spent.
    pub seconds: f64,
    /// Texts embedded per second.
    pub per_second: f64,
}

/// Parameters of a semantic search.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SemanticSearchRequest {
    /// What to look for, in natural words.
    pub query: String,
    /// Hits to return.
    #[serde(default = "defaults::search_limit", deserialize_with = "num::usize")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: usize,
}

/// One chunk to save.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewChunk {
    /// Its session.
    pub session_id: String,
    /// The text.
    pub content: String,
    /// Its project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// A JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub metadata: Option<Value>,
    /// Original time; default now.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "num::opt_time"
    )]
    #[schemars(schema_with = "opt_time_schema")]
    pub ts: Option<String>,
    /// Dedupe key in the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    /// Chunks it corrects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<Vec<String>>,
}

/// Parameters of an ingest: one chunk (`session_id`, `content`, ...) or a batch (`chunks`),
/// saved all or nothing.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IngestRequest {
    /// The session to append to (any string); with content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The text to remember; with session_id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// A project name, for filtering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Any JSON object, e.g. {"role": "user"}.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub metadata: Option<Value>,
    /// Original time (RFC 3339, date, epoch ms); default now.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "num::opt_time"
    )]
    #[schemars(schema_with = "opt_time_schema")]
    pub ts: Option<String>,
    /// Dedupe key within the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    /// Chunks it corrects: uri, chunk_id or source_id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<Vec<String>>,
    /// A batch instead of one chunk, saved all or nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<Vec<NewChunk>>,
}

/// Parameters of a session read.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct FetchRequest {
    /// The session to read.
    pub session_id: String,
    /// The first position to return.
    #[arg(long, default_value_t = 0, value_parser = num::parse_u64, allow_negative_numbers = true)]
    #[serde(default, deserialize_with = "num::u64")]
    pub position: u64,
    /// Chunks per page.
    #[arg(long, default_value_t = defaults::FETCH_LIMIT, value_parser = num::parse_usize, allow_negative_numbers = true)]
    #[serde(default = "defaults::fetch_limit", deserialize_with = "num::usize")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: usize,
    /// Token budget of the page (it keeps its first chunk).
    #[arg(long, value_parser = num::parse_usize, allow_negative_numbers = true)]
    #[serde(
        default,
        deserialize_with = "num::opt_usize",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 50))]
    pub max_tokens: Option<usize>,
    /// As it stood at this time.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// Parameters of the session catalog.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct OverviewRequest {
    /// Only sessions active in the last N days (0: all).
    #[arg(long, default_value_t = defaults::OVERVIEW_DAYS, value_parser = num::parse_u64, allow_negative_numbers = true)]
    #[serde(default = "defaults::overview_days", deserialize_with = "num::u64")]
    #[schemars(range(min = 0, max = 36500))]
    pub days: u64,
    /// Only this project.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Skip this many sessions.
    #[arg(long, default_value_t = 0, value_parser = num::parse_usize, allow_negative_numbers = true)]
    #[serde(default, deserialize_with = "num::usize")]
    pub offset: usize,
    /// Sessions per page.
    #[arg(long, default_value_t = defaults::OVERVIEW_LIMIT, value_parser = num::parse_usize, allow_negative_numbers = true)]
    #[serde(default = "defaults::overview_limit", deserialize_with = "num::usize")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: usize,
    /// As it stood at this time.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

impl Default for OverviewRequest {
    fn default() -> Self {
        OverviewRequest {
            days: defaults::OVERVIEW_DAYS,
            project: None,
            offset: 0,
            limit: defaults::OVERVIEW_LIMIT,
            as_of: None,
        }
    }
}

/// Parameters of the category listing.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct ListRequest {
    /// As it stood at this time.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// Parameters of a category read.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct ReadRequest {
    /// The category's name; `list` shows them.
    pub category: String,
    /// Top-level keys to return, comma-separated (default: all).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Fields>,
    /// An old version: its number, id or hash (12+ digits) from the history.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<VersionRef>,
    /// As it stood at this time.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// Parameters of a category write.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteRequest {
    /// The category's name.
    pub category: String,
    /// The JSON object, or with merge the keys to change (null deletes one).
    #[schemars(with = "Map<String, Value>")]
    pub data: Value,
    /// Why (kept in history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The hash it must have now (from a read), or "absent" to create only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_hash: Option<String>,
    /// Merge top-level keys instead of replacing all.
    #[serde(default)]
    pub merge: bool,
}

/// Parameters of a log append.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendRequest {
    /// The log's name (created if missing).
    pub category: String,
    /// The entry: a JSON object.
    #[schemars(with = "Map<String, Value>")]
    pub data: Value,
    /// Entries to keep (default 200).
    #[serde(
        default,
        deserialize_with = "num::opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 100000))]
    pub max_entries: Option<u64>,
    /// Drop entries this many days older than the newest.
    #[serde(
        default,
        deserialize_with = "num::opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 36500))]
    pub max_age_days: Option<u64>,
    /// Why (kept in history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Parameters of a delete.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct DeleteRequest {
    /// The category's name.
    pub category: String,
    /// Delete only if the category has this hash now.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_hash: Option<String>,
    /// Why (kept in history).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Parameters of a history listing.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct HistoryRequest {
    /// The category's name.
    pub category: String,
    /// Versions to list, newest first.
    #[arg(long, default_value_t = defaults::HISTORY_LIMIT, value_parser = num::parse_usize, allow_negative_numbers = true)]
    #[serde(default = "defaults::history_limit", deserialize_with = "num::usize")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: usize,
    /// Also diff from this version.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_from: Option<VersionRef>,
    /// Also diff to this version (default: the newest).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_to: Option<VersionRef>,
}

/// Parameters of a blame: which version set each key's current value.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct BlameRequest {
    /// The category's name.
    pub category: String,
    /// A nested object to blame instead of the top level, as a JSON Pointer (`/editor/theme`).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// The category that keeps reviews: one top-level key per thing reviewed (`category:NAME`,
/// `category:NAME/KEY`, `chunk:URI`), each `{at, by, note}`.
pub const REVIEWS_CATEGORY: &str = "_reviews";

/// Days after which a category neither written nor reviewed counts as stale in `status`.
pub const STALE_DAYS: u64 = 90;

/// Parameters of a review: a category, one of its keys, or a session chunk marked as checked
/// and still right; or, with `stale`, the list of what was not.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct ReviewRequest {
    /// The category reviewed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Only this top-level key of the category.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// A session chunk reviewed instead: its uri (memdir://sessions/ID/POSITION).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<String>,
    /// What was checked, kept with the review.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Instead: list the categories neither written nor reviewed in this many days.
    #[arg(long, value_name = "DAYS", value_parser = num::parse_u64, allow_negative_numbers = true)]
    #[serde(
        default,
        deserialize_with = "num::opt_u64",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 36500))]
    pub stale: Option<u64>,
}

/// `review`: the review recorded, or the stale categories.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ReviewResponse {
    /// The review recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewed: Option<Review>,
    /// With `stale`: the categories neither written nor reviewed in that many days, the
    /// longest untouched first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale: Option<Vec<StaleCategory>>,
}

/// One review.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Review {
    /// Its key in the reviews category (`category:NAME`, `category:NAME/KEY`, `chunk:URI`).
    pub target: String,
    /// When.
    pub reviewed_at: String,
    /// Who (the device).
    pub reviewed_by: String,
    /// What was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A category neither written nor reviewed for a while.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct StaleCategory {
    /// The category.
    pub category: String,
    /// Its last write.
    pub updated_at: String,
    /// Its last review of the whole category, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewed_at: Option<String>,
    /// Whole days since the later of the two.
    pub days: u64,
}

/// Parameters of a diff between two versions.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct DiffRequest {
    /// The category's name.
    pub category: String,
    /// From this version (default: the parent of `to`).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<VersionRef>,
    /// To this version (default: the newest).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<VersionRef>,
}

/// Parameters of a restore.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {
    /// The category's name.
    pub category: String,
    /// The version to restore: its number, id or hash (12+ digits) from the history.
    #[arg(long)]
    pub version: VersionRef,
    /// Restore only if the category has this hash now.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_hash: Option<String>,
    /// Why (kept in history).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Parameters of a history compaction.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct CompactRequest {
    /// One category (default: every category).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Versions to keep per category; current versions and delete tombstones always stay.
    #[arg(long = "keep", default_value_t = defaults::KEEP_VERSIONS, value_parser = num::parse_usize, allow_negative_numbers = true)]
    #[serde(default = "defaults::keep_versions", deserialize_with = "num::usize")]
    #[schemars(range(min = 1, max = 100000))]
    pub keep_versions: usize,
    /// Only report what would be removed.
    #[arg(long)]
    #[serde(default)]
    pub dry_run: bool,
}

/// Parameters of a multi-category read.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct ContextRequest {
    /// The categories to read.
    #[arg(required = true)]
    pub categories: Vec<String>,
    /// Top-level keys to return from each, comma-separated (default: all).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Fields>,
    /// Token budget of the answer: categories from the end of the list are left out whole, and
    /// the first keeps what fits of its keys.
    #[arg(long, value_parser = num::parse_usize, allow_negative_numbers = true)]
    #[serde(
        default,
        deserialize_with = "num::opt_usize",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 50))]
    pub max_tokens: Option<usize>,
    /// As it stood at this time.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// Parameters of a change check.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct DeltaRequest {
    /// The category's name.
    pub category: String,
    /// The hash you last saw.
    #[arg(long)]
    pub since_hash: String,
}

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

/// `init`: the directory and whether anything was created.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct InitResponse {
    /// The memory directory.
    pub dir: String,
    /// Whether the directory skeleton was new.
    pub created: bool,
}

/// One saved chunk.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Ingested {
    /// The chunk's session.
    pub session_id: String,
    /// Its position in the session.
    pub position: u64,
    /// Its stable handle, `<replica>:<seq>`.
    pub chunk_id: String,
    /// Its logical clock stamp.
    pub hlc: String,
    /// When it was saved (RFC 3339).
    pub ts: String,
    /// Always true.
    pub ok: bool,
    /// Its source_id was in the session: nothing saved; fields name the chunk holding it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
    /// Spans redacted before saving, by kind (absent when none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub redacted: BTreeMap<String, u64>,
}

/// A batch chunk not saved: its source_id was in its session.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct SkippedChunk {
    /// Index in chunks.
    pub index: usize,
    pub session_id: String,
    pub source_id: String,
    /// The chunk holding the key.
    pub chunk_id: String,
}

/// A saved batch.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct IngestedBatch {
    /// Always true.
    pub ok: bool,
    /// Chunks saved.
    pub count: usize,
    /// Each saved chunk, in request order.
    pub chunks: Vec<Ingested>,
    /// Chunks not saved: source_id already there.
    #[serde(default)]
    pub skipped: usize,
    /// Which.
    #[serde(default)]
    pub skipped_chunks: Vec<SkippedChunk>,
    /// Spans redacted before saving, by kind, over the batch (absent when none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub redacted: BTreeMap<String, u64>,
}

/// `ingest`: one chunk, or a batch.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum IngestResponse {
    One(Ingested),
    Batch(IngestedBatch),
}

/// A chunk read back from a session.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct FetchedChunk {
    /// Its position in the session.
    pub position: u64,
    /// Its stable handle.
    pub chunk_id: String,
    /// The text.
    pub content: String,
    /// When it was saved.
    pub ts: String,
    /// Its logical clock stamp.
    pub hlc: String,
    /// Its project ("" for none).
    pub project: String,
    /// Its metadata.
    #[schemars(with = "Map<String, Value>")]
    pub metadata: Value,
    /// The chunks that correct this one (`supersedes`), when any does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<Vec<String>>,
}

/// `fetch`: a page of a session.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct FetchResponse {
    /// The session.
    pub session_id: String,
    /// Chunks in the session.
    pub total: u64,
    /// The first position of this page.
    pub position: u64,
    /// Where the next page starts; null at the end.
    pub next_position: Option<u64>,
    /// The page.
    pub chunks: Vec<FetchedChunk>,
    /// The session's resource URI; a chunk's is this URI, `/` and its position.
    #[serde(default)]
    pub uri: String,
    /// What was left out to fit max_tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted: Option<Omitted>,
}

/// A session in the catalog.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct SessionSummary {
    /// The session id (what `fetch` and `search --session` take as `session_id`).
    pub id: String,
    /// Its title: the metadata title of its first chunk, or its first line.
    pub title: String,
    /// Its project ("" for none).
    pub project: String,
    /// Chunks in the session.
    pub message_count: i64,
    /// When its first chunk was saved.
    pub start_time: String,
    /// When its last chunk was saved.
    pub last_active: String,
}

/// `overview`: a page of the session catalog, newest first.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct OverviewResponse {
    /// The page.
    pub sessions: Vec<SessionSummary>,
    /// Sessions matching the filters.
    pub total: usize,
    /// Where the next page starts; null at the end.
    pub next_offset: Option<usize>,
}

/// Metadata of a category as read.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct CategoryMeta {
    /// Hash of the category file (pass it as expected_hash).
    pub hash: Option<String>,
    /// The version number.
    pub version: u64,
    /// The version's history id.
    pub version_id: Option<String>,
    /// When this version was written.
    pub updated_at: String,
    /// Who wrote it.
    pub updated_by: String,
    /// Size of the file in bytes (current versions only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// document or log.
    pub kind: String,
    /// The operation that wrote an old version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// Whether this is the current version.
    pub current: bool,
}

/// `read`: a category's data and metadata.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ReadResponse {
    /// The category.
    pub category: String,
    /// Its content (or the requested fields of it).
    #[schemars(with = "Map<String, Value>")]
    pub data: Value,
    /// Requested fields the category lacks.
    pub missing_fields: Vec<String>,
    /// Its metadata.
    pub meta: CategoryMeta,
}

/// `write`: what changed.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct WriteResponse {
    /// The category.
    pub category: String,
    /// True when the result equals the current content: nothing was recorded.
    pub unchanged: bool,
    /// The hash before the write (null if the category did not exist).
    pub previous_hash: Option<String>,
    /// The hash after it.
    pub new_hash: Option<String>,
    /// The version number after it.
    pub version: u64,
    /// The new version's history id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    /// When it was written.
    pub timestamp: String,
    /// write or merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// Spans redacted before saving, by kind (absent when none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub redacted: BTreeMap<String, u64>,
}

/// `append`: the new entry and the log after retention.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct AppendResponse {
    /// The log.
    pub category: String,
    /// The new entry's id.
    pub id: String,
    /// The new entry's time.
    pub ts: String,
    /// Entries in the log now.
    pub entries: usize,
    /// Entries retention dropped.
    pub dropped: usize,
    /// The hash before.
    pub previous_hash: Option<String>,
    /// The hash after.
    pub new_hash: Option<String>,
    /// The version number after.
    pub version: u64,
    /// When it was written.
    pub timestamp: String,
    /// Spans redacted before saving, by kind (absent when none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub redacted: BTreeMap<String, u64>,
}

/// A category in the list.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct CategorySummary {
    /// Its name.
    pub name: String,
    /// document or log.
    pub kind: String,
    /// ok, or malformed when the file does not parse.
    pub status: String,
    /// Hash of its file.
    pub hash: Option<String>,
    /// Its version number.
    pub version: u64,
    /// Size of its file in bytes.
    pub size_bytes: i64,
    /// When it was last written.
    pub updated_at: String,
    /// Who wrote it last.
    pub updated_by: String,
}

/// `list`: every category with a current file.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ListResponse {
    /// How many.
    pub count: usize,
    /// The categories, by name.
    pub categories: Vec<CategorySummary>,
}

/// `delete`: the tombstone recorded.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct DeleteResponse {
    /// The category.
    pub category: String,
    /// Always true.
    pub deleted: bool,
    /// The hash of the deleted content.
    pub previous_hash: Option<String>,
    /// The tombstone's version number.
    pub version: u64,
    /// The tombstone's history id.
    pub version_id: String,
    /// When it was deleted.
    pub timestamp: String,
    /// The version holding the deleted content, to restore it.
    pub restore_version: u64,
}

/// One version in a history listing.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct HistoryVersion {
    /// The history id.
    pub id: String,
    /// The version number (absent for a malformed entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// The content hash (null for a delete tombstone).
    #[serde(default)]
    pub hash: Option<String>,
    /// write, merge, append, delete, restore or external.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// Who wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// Why (null when no reason was given).
    #[serde(default)]
    pub reason: Option<String>,
    /// When.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// The versions it follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parents: Option<Vec<String>>,
    /// Why the entry could not be read, for a malformed entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub malformed: Option<String>,
}

impl HistoryVersion {
    /// A history file that could not be read: its id and why.
    pub fn malformed(id: &str, why: &str) -> HistoryVersion {
        HistoryVersion {
            id: id.to_string(),
            version: None,
            hash: None,
            op: None,
            actor: None,
            reason: None,
            timestamp: None,
            parents: None,
            malformed: Some(why.to_string()),
        }
    }
}

/// `blame`: for each key of the current content (or of the object at `path`), the version that
/// set its current value.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct BlameResponse {
    /// The category.
    pub category: String,
    /// The object blamed (absent: the top level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The current version.
    pub version: u64,
    /// One line per key, in key order.
    pub keys: Vec<BlameLine>,
}

/// Who set one key's current value, and when.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct BlameLine {
    /// The key.
    pub key: String,
    /// Its current value.
    pub value: Value,
    /// The version that set it.
    pub version: u64,
    /// That version's history id.
    pub id: String,
    /// What made that version (write, merge, append, restore, external, ...).
    pub op: String,
    /// Who wrote it.
    pub actor: String,
    /// Why (null when no reason was given).
    #[serde(default)]
    pub reason: Option<String>,
    /// When.
    pub timestamp: String,
    /// True when an older version this one follows has had its content forgotten, so the
    /// value may be older than this version says.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_least: bool,
}

/// `diff`: a unified diff between two versions.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct DiffResponse {
    /// The category.
    pub category: String,
    /// The older version (null: nothing before).
    pub from: Option<u64>,
    /// The newer version.
    pub to: u64,
    /// The unified diff of the pretty JSON.
    pub diff: String,
}

/// `history`: versions, newest first, and an optional diff.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct HistoryResponse {
    /// The category.
    pub category: String,
    /// ok, malformed or deleted.
    pub status: String,
    /// History entries in all.
    pub total: usize,
    /// The newest `limit` of them.
    pub versions: Vec<HistoryVersion>,
    /// The diff asked for with diff_from or diff_to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<DiffResponse>,
}

/// `restore`: the new version.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct RestoreResponse {
    /// The category.
    pub category: String,
    /// The version restored.
    pub restored_from: u64,
    /// The hash before.
    pub previous_hash: Option<String>,
    /// The hash after.
    pub new_hash: Option<String>,
    /// The new version number.
    pub version: u64,
    /// The new version's history id.
    pub version_id: String,
    /// When.
    pub timestamp: String,
}

/// What compaction did to one category.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Compacted {
    /// The category.
    pub category: String,
    /// History entries removed.
    pub removed: usize,
    /// History entries kept.
    pub kept: usize,
}

/// `compact`: history entries removed.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct CompactResponse {
    /// Nothing was removed: `removed` counts what would be.
    #[serde(default)]
    pub dry_run: bool,
    /// Entries removed in all.
    pub removed: usize,
    /// The versions kept per category.
    pub keep_versions: usize,
    /// Per category that lost entries.
    pub categories: Vec<Compacted>,
}

/// `context`: several categories at once.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ContextResponse {
    /// The categories found, by name.
    pub categories: BTreeMap<String, ReadResponse>,
    /// The names that do not exist.
    pub missing: Vec<String>,
    /// The names that could not be read, with the error.
    #[schemars(with = "Map<String, Value>")]
    pub errors: Map<String, Value>,
    /// What was left out to fit max_tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted: Option<Omitted>,
}

/// `delta`: whether a category changed since a hash.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct DeltaResponse {
    /// The category.
    pub category: String,
    /// unchanged, changed or deleted.
    pub status: String,
    /// The current hash (null when deleted).
    pub hash: Option<String>,
    /// The current data, when changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub data: Option<Value>,
    /// The current metadata, when changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<CategoryMeta>,
}

/// A neighbouring chunk in a hit's context window: only what differs from the hit (its
/// position and content, as `{position, content}` the way session-memory tools give it);
/// the hit itself is not repeated.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ContextChunk {
    /// Its position in the hit's session (`fetch` returns it whole).
    pub position: u64,
    /// An excerpt of its text, centred on the query's words when it has any, with `…` where
    /// cut (the whole text when `full`).
    pub content: String,
}

/// What an answer left out to fit `max_tokens`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Omitted {
    /// The budget, in estimated tokens (characters of the JSON / 4).
    pub max_tokens: usize,
    /// Hits left out, from the end.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hits: usize,
    /// Context lines left out, farthest from their hit first.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub context_lines: usize,
    /// Chunks left out of a page (its next_position says where to go on).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub chunks: usize,
    /// The first item's text was cut with `…` to fit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
    /// Categories left out whole, from the end of the requested list (read them on their own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// Top-level keys left out of the first category, largest first (read them with `fields`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// How a hit's score was made (`explain`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Explain {
    /// BM25 of the text itself (for a chunk, with a match in the previous turn at half
    /// weight); 0 for a turn lifted only by its neighbours.
    pub bm25: f32,
    /// BM25 divided by the best BM25 among the candidates.
    pub normalised: f32,
    /// Share lent by the turns just before and after (0.25 × the larger BM25 beside it).
    #[serde(default)]
    pub neighbour: f32,
    /// Share lent by the session (0.5 × the best BM25 in it).
    #[serde(default)]
    pub session: f32,
    /// Similarity by meaning, when embeddings took part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense: Option<f32>,
    /// The fused score of keyword and meaning, when both took part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fused: Option<f32>,
    /// What a period the question names gave a turn saved in it (a quarter of its own score).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<f32>,
    /// For a turn of fewer than 12 words (stop words not counted): the factor its `bm25` was
    /// multiplied by ((words / 12) ^ 0.75), so a chat's shortest turns do not outrank the one
    /// that answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short: Option<f32>,
    /// How the score was made: `bm25 + neighbour + session over 1.5`, `bm25` or `exact`.
    pub formula: String,
}

/// A search hit.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SearchHit {
    /// A session chunk.
    Chunk {
        /// Its session.
        session_id: String,
        /// Its position in the session.
        position: u64,
        /// Its stable handle.
        chunk_id: String,
        /// Its project.
        project: String,
        /// When it was saved.
        ts: String,
        /// An excerpt of its text centred on the query's words, with `…` where cut (the whole
        /// text when `full`).
        content: String,
        /// The BM25 score (exact hits: the score of the phrase).
        #[serde(serialize_with = "num::short_f32")]
        score: f32,
        /// Its neighbours before and after it, in order.
        context: Vec<ContextChunk>,
        /// Its resource URI (`memdir://sessions/{session_id}/{position}`).
        #[serde(default)]
        uri: String,
        /// True when the content was cut.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        truncated: Option<bool>,
        /// The chunks that correct this one (`supersedes`), when any does.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        superseded_by: Option<Vec<String>>,
        /// When it was last reviewed (`review`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reviewed_at: Option<String>,
        /// Its score parts, with `explain`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        explain: Option<Explain>,
    },
    /// A leaf of a category.
    Category {
        /// The category.
        category: String,
        /// The path of the matching value inside it.
        key_path: String,
        /// The matching text, cut around the query's words like a chunk's.
        content: String,
        /// The BM25 score.
        #[serde(serialize_with = "num::short_f32")]
        score: f32,
        /// The category's hash.
        hash: String,
        /// When the category was last written.
        updated_at: String,
        /// Who wrote it.
        updated_by: String,
        /// Its resource URI (`memdir://categories/{name}`).
        #[serde(default)]
        uri: String,
        /// When it (or its top-level key) was last reviewed (`review`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reviewed_at: Option<String>,
        /// True when the content was cut.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        truncated: Option<bool>,
        /// Its score parts, with `explain`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        explain: Option<Explain>,
    },
    /// A section of a note (the text under one heading).
    Note {
        /// The note's path below notes/.
        path: String,
        /// The section's headings, outermost first, joined by " > " ("" before the first).
        heading: String,
        /// The section's first and last line in the note (from 1).
        lines: [u64; 2],
        /// The matching text, cut around the query's words like a chunk's.
        content: String,
        /// The BM25 score.
        #[serde(serialize_with = "num::short_f32")]
        score: f32,
        /// The note's hash.
        hash: String,
        /// When the note was last written.
        updated_at: String,
        /// Who wrote it.
        updated_by: String,
        /// Its resource URI (`memdir://notes/{path}`).
        #[serde(default)]
        uri: String,
        /// True when the content was cut.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        truncated: Option<bool>,
        /// Its score parts, with `explain`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        explain: Option<Explain>,
    },
}

/// `search`: hits, best first, and the engine that answered.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct SearchResponse {
    /// The hits.
    pub results: Vec<SearchHit>,
    /// exact, bm25, semantic, hybrid, empty (an empty query), or keyword-fallback (semantic or
    /// hybrid answered by BM25; `note` says why).
    pub engine: String,
    /// Hits returned.
    pub count: usize,
    /// The query as understood.
    pub query: String,
    /// The mode asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Notes on how the query was answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
    /// Why a semantic or hybrid search was answered by keywords.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What was left out to fit max_tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted: Option<Omitted>,
    /// Semantic and hybrid: documents with a vector / documents indexed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<String>,
}

/// `status`: counts, sizes and health.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct StatusResponse {
    /// The memory directory.
    pub dir: String,
    /// Where that choice came from: `flag --dir`, `environment MEMDIR_DIR`, `file <path of
    /// the config file>` or `default`.
    #[serde(default)]
    pub dir_source: String,
    /// Whether it exists.
    pub exists: bool,
    /// This store's replica id on this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// The device name recorded on writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// Sessions.
    pub sessions: usize,
    /// Chunks.
    pub chunks: i64,
    /// Categories (logs included).
    pub categories: usize,
    /// Logs.
    pub logs: usize,
    /// Bytes under the memory directory.
    pub size_bytes: u64,
    /// Categories whose file does not parse.
    pub malformed: Vec<String>,
    /// Segments with lines that do not parse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<Map<String, Value>>>")]
    pub malformed_lines: Option<Vec<Value>>,
    /// Staged transactions not yet recovered.
    pub pending_staging: Vec<String>,
    /// The ledger's counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub ledger: Option<Value>,
    /// The search index's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub index: Option<Value>,
    /// Why the store is served read-only, if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<String>,
    /// What this process repaired on its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
    /// Access control as it applies to the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<AccessInfo>,
    /// Conflicts a sync decided that are still open (see `resolve`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<OpenConflict>,
    /// How the last sync of this memory directory ended (none yet: absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync: Option<LastSync>,
    /// Categories neither written nor reviewed in `STALE_DAYS` (90) days (`review` with
    /// `stale` lists them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale: Option<usize>,
}

/// How the last sync of a memory directory ended (`.memdir/last-sync.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LastSync {
    /// When it ended (RFC 3339).
    pub at: String,
    /// The remote: a git remote's name or an HTTP URL.
    pub remote: String,
    /// Whether the remote holds everything this store holds now.
    pub pushed: bool,
    /// Whether local changes still wait to reach the remote.
    pub push_pending: bool,
    /// Why the remote was not reached, or the error that stopped the sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How many problems the sync reported (see its answer).
    pub reported: usize,
    /// What ran it: `command` (sync, memory_sync, REST) or `periodic` (`memdir serve`).
    pub by: String,
}

/// Access control as it applies to a caller.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct AccessInfo {
    /// Whether the config file has an `[acl]` section (without one, everything is allowed).
    pub enabled: bool,
    /// The device the caller acts as.
    pub device: String,
    /// `open` (no policy), `admin`, `registered` or `unregistered`.
    pub role: String,
    /// One sentence on what the caller may do.
    pub summary: String,
}

/// One finding of verify-store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Problem {
    /// What kind of problem.
    pub kind: String,
    /// The file, relative to the memory directory.
    pub path: String,
    /// What is wrong and what happens next.
    pub message: String,
}

/// `verify-store`: whether files, history, ledger and index agree.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct VerifyResponse {
    /// True when nothing was found.
    pub ok: bool,
    /// Whether the memory directory exists.
    pub exists: bool,
    /// The findings.
    pub problems: Vec<Problem>,
    /// What was checked, with counts.
    #[schemars(with = "Map<String, Value>")]
    pub checked: Value,
    /// A hash over every truth file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_hash: Option<String>,
    /// The search index's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub index: Option<Value>,
    /// Conflicts a sync decided that are still open: the served value is the sync's pick,
    /// every other value is in history and in the record (see `resolve`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<OpenConflict>,
}

/// `doctor`: where the memory is, and a full check.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct DoctorResponse {
    /// The memory directory.
    pub dir: String,
    /// Where that choice came from (as in `status`).
    pub dir_source: String,
    /// The device name recorded on writes.
    pub actor: String,
    /// memdir's version.
    pub version: String,
    /// Counts and sizes.
    pub status: StatusResponse,
    /// The store check.
    pub checks: VerifyResponse,
}

/// `reindex`: the rebuilt index.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ReindexResponse {
    /// Chunk documents.
    pub chunks: u64,
    /// Category documents.
    pub category_docs: u64,
    /// The index fingerprint (files, analyzer, schema).
    pub fingerprint: Option<String>,
    /// The files' part of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_fingerprint: Option<String>,
    /// The analyzer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analyzer: Option<String>,
    /// The change-feed generation absorbed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Seconds taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Whether the old index could not be read and was thrown away.
    #[serde(default)]
    pub rebuilt_from_nothing: bool,
}

/// `health`: liveness.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct HealthResponse {
    /// Always true.
    pub ok: bool,
    /// memdir's version.
    pub version: String,
}

/// The import formats that write categories rather than sessions: the contract says so, since
/// access control asks more of them than of a session import.
pub const CATEGORY_IMPORT_FORMATS: &[&str] = &["mcp-memory-rs", "mcp-memory-jsonl"];

/// Parameters of an import of another tool's history.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct ImportRequest {
    /// The source: jsonl (memdir chunk lines), claude-code, codex, opencode, local-memory,
    /// mcp-memory-rs, mcp-memory-jsonl; as notes: claude-memory, codex-memories, cursor-rules.
    pub format: String,
    /// A file or directory of the source [default: where the tool keeps its data; jsonl:
    /// required, "-" for stdin; mcp-memory-jsonl: $MEMORY_FILE_PATH, else required].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Count what would be imported (sessions, chunks, skips) and write nothing.
    #[arg(long)]
    #[serde(default)]
    pub dry_run: bool,
}

/// Parameters of a forget: chunks of one session (`session_id` with `chunk_ids`), a whole
/// session (`session_id` alone), the chunk hits of a query (`query`), or one version of a
/// category (`category` with `version`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct ForgetRequest {
    /// The session: alone, every chunk of it; with chunk_ids, those chunks.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Chunk ids (`<replica>:<seq>`, as fetch and search show them) in session_id.
    #[arg(long = "chunk-id", value_name = "ID")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_ids: Option<Vec<String>>,
    /// Forget the chunk hits of this search query.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// With query: only hits in this project.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// With query: at most this many hits (default 20).
    #[arg(long, value_parser = num::parse_usize, allow_negative_numbers = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// A category whose old version to forget (with version).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// A note whose old version to forget (with version).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// With category or note: the version (number or history id); not the current one.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<VersionRef>,
    /// Only list what would be forgotten.
    #[arg(long)]
    #[serde(default)]
    pub dry_run: bool,
}

/// `import`: what was (or, with dry_run, would be) imported.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct ImportResponse {
    /// Always true.
    pub ok: bool,
    /// The source format.
    pub format: String,
    /// The file or directory read.
    pub path: String,
    /// Nothing was written.
    pub dry_run: bool,
    /// Files read.
    pub files: usize,
    /// Sessions with chunks in the source.
    pub sessions: usize,
    /// Chunks saved (with dry_run: that would be saved).
    pub chunks: usize,
    /// Chunks already imported (their source_id is in their session): not saved again.
    pub existing: usize,
    /// Categories written.
    pub categories: usize,
    /// Notes written (claude-memory, codex-memories, cursor-rules).
    #[serde(default)]
    pub notes: usize,
    /// Records left out, by reason (tool calls, thinking, harness text, malformed lines, ...).
    pub skipped: BTreeMap<String, u64>,
    /// Records kept but marked, by reason (e.g. a graph relation to a missing entity, kept with
    /// `dangling: true`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flagged: BTreeMap<String, u64>,
    /// The first malformed lines, as `file:line` (1-based).
    pub bad_lines: Vec<String>,
    /// Categories that held other data before this import and now have (with dry_run: would
    /// have) an imported version as their current one; their history keeps what they held.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<String>,
    /// Seconds taken.
    pub seconds: f64,
}

/// Parameters of a sync with the memory directory's git remote.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct SyncRequest {
    /// Make the memory directory a git work tree with this remote URL first (a bare
    /// repository path, ssh or https URL).
    #[arg(long = "init", value_name = "URL")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<String>,
    /// The git remote to sync with (default `origin`).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// How concurrent versions are resolved in this run: `last_write_wins`, `merge`,
    /// `manual`, `local_wins` or `remote_wins` (default: `[sync] conflict_strategy`).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// For an HTTP remote (`remote` is an `http://` or `https://` URL of a `memdir serve
    /// --transport http`): the environment variable holding its bearer token (default
    /// `[sync] token_env`, else none).
    #[arg(long = "token-env", value_name = "NAME")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
}

/// `sync`: what was committed, merged and pushed.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct SyncResponse {
    /// The remote.
    pub remote: String,
    /// The branch.
    pub branch: String,
    /// The strategy that resolved concurrent versions.
    pub strategy: String,
    /// Local commits made for local changes.
    pub committed: usize,
    /// Whether the remote's commits were merged (or fast-forwarded).
    pub merged: bool,
    /// Files taken from the remote.
    pub files_received: usize,
    /// Categories whose current file the merge changed.
    pub categories: Vec<String>,
    /// Conflict records opened by this sync (`conflicts/<name>/<file>`).
    pub conflicts: Vec<String>,
    /// The conflicts still open after this sync, with what each set aside (as `status`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_conflicts: Vec<OpenConflict>,
    /// Whether the remote now holds this replica's commit.
    pub pushed: bool,
    /// Commits not on the remote yet (offline, or the push failed).
    pub push_pending: bool,
    /// Why the remote could not be reached, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline: Option<String>,
    /// Fetch-merge-push rounds (a rejected push goes back to fetch).
    pub rounds: usize,
    /// Files left out of the commit or merged by a fallback rule, and why.
    pub reported: Vec<Problem>,
    /// The commit this replica is at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// Files (or segment tails) sent to an HTTP remote.
    #[serde(default)]
    pub files_sent: usize,
}

/// The format tag of the HTTP sync plane's messages.
pub const SYNC_FORMAT: &str = "memdir-sync/1";

/// One file of a sync manifest or diff: a history entry, a conflict record or a session
/// segment, by path relative to the memory directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncFile {
    /// `history/<category>/<id>.json`, `conflicts/<category>/<hash>.json` or
    /// `sessions/<session>/<replica>.jsonl` (names encoded as on disk).
    pub path: String,
    /// Its length in bytes.
    pub len: u64,
    /// The BLAKE3 of its bytes (64 hex digits).
    pub hash: String,
}

/// `sync_manifest`: a two-level hash tree of the files a sync exchanges.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct SyncManifestResponse {
    /// `memdir-sync/1`.
    pub format: String,
    /// BLAKE3 of the sorted `<bucket> <hash>` lines: equal roots mean nothing to sync.
    pub root: String,
    /// Per bucket (`history/<category>`, `conflicts/<category>`, `sessions/<session>`): the
    /// BLAKE3 of its sorted `<path> <len> <hash>` lines.
    pub buckets: BTreeMap<String, String>,
    /// How many files the buckets hold.
    pub files: usize,
}

/// Parameters of `sync_diff`: the caller's files in the buckets whose hashes differ.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncDiffRequest {
    /// Per differing bucket, the caller's files in it (an empty list: the caller has none).
    #[serde(default)]
    pub buckets: BTreeMap<String, Vec<SyncFile>>,
}

/// A file, or the tail of a segment from a byte offset, that one side lacks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncWant {
    /// The file, relative to the memory directory.
    pub path: String,
    /// The byte offset to send from (the receiver's length of a segment; 0 for a new file).
    #[serde(default)]
    pub from: u64,
    /// For a segment tail the server lacks: the BLAKE3 of the server's whole copy, which the
    /// sender checks against its own first `from` bytes. When they differ (a chunk forgotten
    /// on one side), the segment travels whole and the receiver merges it line by line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Send the whole segment in one item, never cut: both sides hold different copies (a
    /// forget rewrote one) and the receiver merges them line by line.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub whole: bool,
}

impl SyncWant {
    /// A file or a segment tail from `from`.
    pub fn at(path: impl Into<String>, from: u64) -> SyncWant {
        SyncWant {
            path: path.into(),
            from,
            prefix: None,
            whole: false,
        }
    }

    /// A whole segment, to be merged line by line with the receiver's copy.
    pub fn whole(path: impl Into<String>) -> SyncWant {
        SyncWant {
            whole: true,
            ..SyncWant::at(path, 0)
        }
    }
}

/// `sync_diff`: what each side lacks.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct SyncDiffResponse {
    /// What the server lacks: send it with `sync_push`.
    pub push: Vec<SyncWant>,
    /// What the caller lacks: fetch it with `sync_pull`.
    pub pull: Vec<SyncWant>,
    /// Files both sides hold with different contents where neither can be a prefix of the
    /// other (a broken invariant: a write-once file with two contents, a segment written by
    /// two machines under one replica id); left as they are on both sides.
    pub diverged: Vec<String>,
}

/// One file or segment tail in a sync page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncItem {
    /// The file, relative to the memory directory.
    pub path: String,
    /// Where `data` starts in the file (0 for a whole file).
    #[serde(default)]
    pub from: u64,
    /// For a segment tail (`from` > 0): the BLAKE3 of the sender's first `from` bytes, which
    /// must be the receiver's whole file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The BLAKE3 of `data`'s bytes, checked on arrival.
    pub hash: String,
    /// The bytes (memdir's files are UTF-8 text).
    pub data: String,
}

/// Parameters of `sync_pull`: what to send, in one page.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncPullRequest {
    /// Files and segment tails, as `sync_diff` listed them under `pull`.
    #[serde(default)]
    pub want: Vec<SyncWant>,
    /// Largest page in bytes of data (default 1 MiB, at most 8 MiB); one item is always sent,
    /// and a long segment tail is cut at a line end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

/// A page of files: `sync_pull`'s answer, and `sync_push`'s argument.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct SyncPage {
    /// `memdir-sync/1`.
    pub format: String,
    /// The files and segment tails of this page.
    pub items: Vec<SyncItem>,
    /// What did not fit in this page: ask for it next.
    pub rest: Vec<SyncWant>,
}

/// Parameters of `sync_push`: a page of files the server lacks.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncPushRequest {
    /// `memdir-sync/1` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The files and segment tails of this page (as `sync_pull` answers them).
    #[serde(default)]
    pub items: Vec<SyncItem>,
    /// How the server resolves concurrent versions (default: its `[sync] conflict_strategy`;
    /// `local_wins` means the pushed side).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
}

/// `sync_push`: what was applied.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct SyncPushResponse {
    /// Items written (files created, segment tails appended).
    pub applied: usize,
    /// Items the server already held.
    pub present: usize,
    /// Categories whose current file changed.
    pub categories: Vec<String>,
    /// Conflict records opened (`conflicts/<name>/<file>`).
    pub conflicts: Vec<String>,
    /// Items left out, and why.
    pub reported: Vec<Problem>,
}

/// Parameters of a conflict resolution.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct ResolveRequest {
    /// The conflicted category.
    pub category: String,
    /// The version to keep: its number, id or hash (12+ digits); `status` lists every head.
    #[arg(long, conflicts_with = "data", required_unless_present = "data")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pick: Option<VersionRef>,
    /// The resolved content, a JSON object.
    #[arg(long, value_parser = parse_json_arg)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Why (kept in history).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `resolve`: the version that closed the conflict.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ResolveResponse {
    pub category: String,
    /// The conflict records it closed.
    pub resolved: Vec<String>,
    /// The new version's id.
    pub version_id: String,
    /// Its number.
    pub version: u64,
    /// Its hash (`null` when the pick was a delete).
    pub hash: Option<String>,
}

/// An open conflict: a category served by a sync's automatic pick.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct OpenConflict {
    pub category: String,
    /// `edit-edit`, `delete-edit` or `keys`.
    pub kind: String,
    pub strategy: String,
    /// The record, relative to the memory directory.
    pub record: String,
    /// The version served.
    pub merged: String,
    /// Every concurrent head, by id.
    pub heads: Vec<String>,
    /// Keys decided by last-write-wins (strategy `merge`).
    pub keys: Vec<String>,
    /// What each head that was not kept had changed and the served version does not hold:
    /// what a resolve may want back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside: Vec<SetAside>,
}

/// One head's changes a sync's pick left out of the served version.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct SetAside {
    /// The head's version id (`resolve --pick` takes it).
    pub head: String,
    /// The device that wrote it.
    pub actor: String,
    /// The top-level keys it had changed that the served version holds otherwise; empty when
    /// the head is not an object or was a delete (the whole of it was set aside).
    pub keys: Vec<String>,
}

/// A JSON value given as a command-line argument.
fn parse_json_arg(s: &str) -> std::result::Result<Value, String> {
    serde_json::from_str(s).map_err(|e| format!("not JSON: {e}"))
}

/// A chunk forgotten (or, in a dry run, to be forgotten).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ForgottenChunk {
    /// Its session.
    pub session_id: String,
    /// Its handle.
    pub chunk_id: String,
    /// Its position, which stays taken by the tombstone.
    pub position: u64,
    /// The first line of its text (dry runs only: a forget never echoes what it removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
}

/// A category version forgotten (or to be).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ForgottenVersion {
    /// The category.
    pub category: String,
    /// The version number.
    pub version: u64,
    /// Its history id.
    pub id: String,
}

/// `forget`: what was replaced by tombstones.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ForgetResponse {
    /// True when nothing was changed (a dry run).
    pub dry_run: bool,
    /// Chunks and versions forgotten (or to be).
    pub count: usize,
    /// The chunks.
    pub chunks: Vec<ForgottenChunk>,
    /// The category versions.
    pub versions: Vec<ForgottenVersion>,
}

/// Parameters of a snapshot.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRequest {
    /// Where to write it: a new or empty directory outside the store.
    pub dest: String,
}

/// `snapshot`: the verified copy.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct SnapshotResponse {
    /// The snapshot's directory.
    pub dest: String,
    /// Files copied.
    pub files: usize,
    /// Bytes copied.
    pub bytes: u64,
    /// When it was taken.
    pub created: String,
    /// Always true: every file was read back and matched its hash before this answer.
    pub verified: bool,
    /// Links and special files (FIFOs, sockets, devices) in memdir's places of the store,
    /// relative to it: never followed, never copied.
    #[serde(default)]
    pub skipped: Vec<String>,
}

/// Parameters of a restore from a snapshot.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct RestoreSnapshotRequest {
    /// The snapshot's directory (with its memdir-snapshot.json).
    pub src: String,
}

/// `restore-snapshot`: what replaced what.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct RestoreSnapshotResponse {
    /// The memory directory, now holding the snapshot's files.
    pub dir: String,
    /// The snapshot.
    pub restored_from: String,
    /// When the snapshot was taken.
    pub snapshot_created: String,
    /// Files restored.
    pub files: usize,
    /// Where the previous store was moved (kept; delete it when no longer needed); null when
    /// there was none.
    pub parked: Option<String>,
}

/// Parameters of an export.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct ExportRequest {
    /// jsonl (chunk lines that `memdir ingest --jsonl` loads) or markdown (sessions and
    /// categories for people).
    #[arg(long, default_value = "jsonl")]
    #[serde(default = "defaults::export_format")]
    #[schemars(extend("enum" = ["jsonl", "markdown"]))]
    pub format: String,
    /// Only sessions of this project (categories are left out).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Only chunks (and categories) from this time on: RFC 3339, a date, epoch ms, a time ago
    /// (7d, 12h) or today / yesterday.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Write to this file (which must not exist) instead of returning the text.
    #[arg(long, short = 'o')]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// `export`: what was written.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ExportResponse {
    /// jsonl or markdown.
    pub format: String,
    /// Sessions exported.
    pub sessions: usize,
    /// Chunks exported (forgotten ones are left out).
    pub chunks: usize,
    /// Categories exported (markdown only).
    pub categories: usize,
    /// The file written, when output was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The export, when no output was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_score_is_written_as_its_shortest_decimal_in_text_and_in_a_value() {
        let hit = SearchHit::Category {
            category: "c".into(),
            key_path: "k".into(),
            content: "x".into(),
            score: 5.158_992,
            hash: String::new(),
            updated_at: String::new(),
            updated_by: String::new(),
            uri: uri::category("c"),
            reviewed_at: None,
            truncated: None,
            explain: None,
        };
        let v = serde_json::to_value(&hit).unwrap();
        assert_eq!(v["score"].to_string(), "5.158992");
        assert!(
            serde_json::to_string(&hit)
                .unwrap()
                .contains(r#""score":5.158992,"#)
        );
    }
}
