//! The operation table: every operation defined once.
//!
//! An [`Op`] names an operation on each surface (CLI subcommand, MCP tool and profile, REST
//! method and route), points at its typed request and response in [`memdir_api`] (their doc
//! comments are the descriptions every surface shows, their serde defaults the one default of
//! each parameter), carries its flags (read-only, destructive, idempotent), and runs it on the
//! engine. The MCP tool list and input schemas, the REST router and `schema/openapi.json`
//! (`memdir openapi`) are derived from this table; the CLI parses into the same request types
//! and calls [`call`] like every other surface.
//!
//! Adding an operation: one entry here, its request and response types in `api`, one method of
//! the subsystem it belongs to, its tests. The CLI finds it by its `cli` name; MCP, REST and
//! OpenAPI by the rest of the entry.
//!
//! Architecture Invariant: surfaces reach the engine only through [`call`] and [`call_with`]
//! (a long job's progress); no surface goes through another. Each operation runs on a
//! [`Cx`]: the engine and an explicit [`Call`] (the actor of its writes, the caller).

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::acl::{Caller, Need, Visible};
use crate::service::{Call, Cx, Memdir, Progress};
use memdir_api::error::{Error, Result};
use memdir_api::*;

/// Which MCP tools `tools/list` offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Profile {
    /// The small set agents need.
    Default,
    /// Every tool name of the designs memdir replaces, too.
    Full,
    /// The one tool of the memory-tool protocol (`memory`), on notes.
    MemoryTool,
}

impl Profile {
    /// Parses `default`, `full` or `memory-tool`.
    pub fn parse(s: &str) -> Result<Profile> {
        match s {
            "default" | "" => Ok(Profile::Default),
            "full" | "compat" | "all" => Ok(Profile::Full),
            "memory-tool" | "memory_tool" => Ok(Profile::MemoryTool),
            _ => Err(Error::invalid(
                "tools",
                format!("tool profile must be default, full or memory-tool; got {s:?}"),
            )),
        }
    }

    /// The profile's name, as `--tools` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::Full => "full",
            Profile::MemoryTool => "memory-tool",
        }
    }

    /// Whether this profile offers a tool whose smallest profile is `tool`: `full` offers
    /// every tool, `default` and `memory-tool` their own.
    pub fn offers(self, tool: Profile) -> bool {
        self == Profile::Full || self == tool
    }
}

/// An HTTP method of a REST route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Arguments in the query string.
    Get,
    /// Arguments in a JSON body.
    Post,
}

/// An MCP tool.
#[derive(Clone, Copy, Debug)]
pub struct Tool {
    /// The tool name.
    pub name: &'static str,
    /// A short human title.
    pub title: &'static str,
    /// The smallest profile that offers it.
    pub profile: Profile,
}

/// A REST route.
#[derive(Clone, Copy, Debug)]
pub struct Route {
    pub method: Method,
    pub path: &'static str,
    /// The OpenAPI operationId.
    pub operation_id: &'static str,
    /// OpenAPI tags.
    pub tags: &'static [&'static str],
    /// HTTP statuses this route can answer besides 200 and the guard's (401, 403).
    pub errors: &'static [u16],
}

/// One operation.
pub struct Op {
    /// The canonical name.
    pub name: &'static str,
    /// One line: what it does.
    pub summary: &'static str,
    /// One paragraph for agents and people: what it does, what it returns, how to use it.
    pub description: &'static str,
    /// The CLI subcommand and where its arguments come from.
    pub cli: Option<memdir_api::cli::Command>,
    /// The MCP tool.
    pub mcp: Option<Tool>,
    /// The REST route.
    pub rest: Option<Route>,
    /// Changes nothing.
    pub read_only: bool,
    /// May remove or overwrite memories.
    pub destructive: bool,
    /// Repeating it with the same arguments changes nothing more.
    pub idempotent: bool,
    /// Request examples (name, JSON), for documentation and the cross-surface tests.
    pub examples: fn() -> Vec<(&'static str, Value)>,
    /// The request's schema.
    pub request: fn(&mut SchemaGenerator) -> Schema,
    /// The response's schema.
    pub response: fn(&mut SchemaGenerator) -> Schema,
    /// The request's type name (its schema's name in OpenAPI).
    pub request_name: fn() -> String,
    /// The response's type name.
    pub response_name: fn() -> String,
    /// Whether a caller may run it with these arguments (the access check `run` makes first).
    pub admit: fn(&Memdir, &Caller, Value) -> Result<()>,
    /// Runs the operation for a caller: JSON arguments in, JSON result out.
    pub run: fn(Cx<'_>, Value) -> Result<Value>,
}

/// Deserializes arguments into a typed request; errors name the offending field.
pub fn from_args<T: serde::de::DeserializeOwned>(args: Value) -> Result<T> {
    crate::service::from_args(args)
}

fn to_json<T: serde::Serialize>(v: T) -> Result<Value> {
    serde_json::to_value(v)
        .map_err(|e| Error::internal(format!("a response did not serialize: {e}")))
}

macro_rules! typed {
    ($req:ty, $resp:ty, $need:expr, |$m:ident, $r:ident| $body:expr) => {
        typed!($req, $resp, $need, |$m, $r, _caller| $body)
    };
    ($req:ty, $resp:ty, $need:expr, |$m:ident, $r:ident, $c:ident| $body:expr) => {
        (
            (|g: &mut SchemaGenerator| g.subschema_for::<$req>())
                as fn(&mut SchemaGenerator) -> Schema,
            (|g: &mut SchemaGenerator| g.subschema_for::<$resp>())
                as fn(&mut SchemaGenerator) -> Schema,
            (|| <$req as JsonSchema>::schema_name().into_owned()) as fn() -> String,
            (|| <$resp as JsonSchema>::schema_name().into_owned()) as fn() -> String,
            (|m: &Memdir, c: &Caller, args: Value| -> Result<()> {
                let r: $req = from_args(args)?;
                let need: for<'r> fn(&'r $req) -> Need<'r> = $need;
                c.admit(&need(&r), &|| category_names(m))
            }) as fn(&Memdir, &Caller, Value) -> Result<()>,
            (|$m: Cx<'_>, args: Value| -> Result<Value> {
                let $c: &Caller = &$m.call().caller;
                let $r: $req = from_args(args)?;
                // Access control, before anything runs: the one place it is evaluated.
                let need: for<'r> fn(&'r $req) -> Need<'r> = $need;
                $c.admit(&need(&$r), &|| category_names(&$m))?;
                let out: $resp = $body?;
                to_json::<$resp>(out)
            }) as fn(Cx<'_>, Value) -> Result<Value>,
        )
    };
}

/// `out` as caller `c` may see it: the categories it may not read left out.
fn shown<T: Visible>(mut out: T, c: &Caller) -> T {
    out.hide(c);
    out
}

/// Every category of the store, by name.
fn category_names(m: &Memdir) -> Result<Vec<String>> {
    Ok(m.categories()
        .list()?
        .categories
        .into_iter()
        .map(|c| c.name)
        .collect())
}

/// The categories `c` may not read (none unless its reads are restricted).
fn hidden(m: &Memdir, c: &Caller) -> Result<Vec<String>> {
    if !c.restricts_reads() {
        return Ok(Vec::new());
    }
    Ok(category_names(m)?
        .into_iter()
        .filter(|n| !c.can_read(n))
        .collect())
}

/// The bearer token of a sync's HTTP remote: the variable the request or the config names.
///
/// A caller over the network may not choose where a secret of this process goes: it may name
/// no variable but the configured one (`[sync] token_env`), and the configured token goes to
/// the configured remote only (a request naming another remote syncs without a token).
pub fn sync_token(m: &Memdir, c: &Caller, r: &SyncRequest) -> Result<Option<String>> {
    let settings = m.settings();
    let configured = Some(settings.sync_token_env.clone()).filter(|e| !e.is_empty());
    if c.is_from_network() {
        if let Some(name) = &r.token_env
            && Some(name) != configured.as_ref()
        {
            return Err(Error::invalid(
                "token_env",
                format!(
                    "a sync requested over the network may not name the environment variable {name:?}: only the one the configuration's sync.token_env names is sent, and only to sync.remote"
                ),
            ));
        }
        let elsewhere = r
            .remote
            .as_deref()
            .is_some_and(|u| u != settings.sync_remote);
        if elsewhere {
            if r.token_env.is_some() {
                return Err(Error::invalid(
                    "token_env",
                    "a sync requested over the network sends the configured token to sync.remote only, not to another remote",
                ));
            }
            return Ok(None);
        }
    }
    match r.token_env.clone().or(configured) {
        None => Ok(None),
        Some(name) => memdir_store::env::process(&name).map(Some).ok_or_else(|| {
            Error::invalid(
                "token_env",
                format!("the environment variable {name:?} that should hold the remote's token is not set"),
            )
        }),
    }
}

/// What `c` may touch through the sync plane: the policy decides here, the engine asks.
fn with_sync_access<R>(
    m: &Memdir,
    c: &Caller,
    f: impl FnOnce(&crate::service::SyncAccess<'_>) -> Result<R>,
) -> Result<R> {
    let read = |n: &str| c.can_read(n);
    let write = |n: &str| c.admit(&Need::Write(n), &|| category_names(m));
    let ingest = |ps: &[&str]| c.admit(&Need::Ingest(ps.to_vec()), &|| category_names(m));
    let forget = || {
        c.admit(&Need::Privileged("forget session memory"), &|| {
            category_names(m)
        })
    };
    let destroy = |n: &str, what: &'static str| {
        c.admit(
            &Need::Destroy {
                what,
                category: Some(n),
            },
            &|| category_names(m),
        )
    };
    // An admin device relays what other devices wrote; any other pushes its own versions.
    let relay = matches!(c.role(), crate::acl::Role::Open | crate::acl::Role::Admin);
    f(&crate::service::SyncAccess {
        read: &read,
        write: &write,
        ingest: &ingest,
        forget: &forget,
        destroy: &destroy,
        device: (!relay).then_some(c.device.as_str()),
    })
}

macro_rules! op {
    (
        name: $name:literal,
        summary: $summary:literal,
        description: $desc:literal,
        cli: $cli:ident $(($cname:literal))?,
        mcp: $mcp:expr,
        rest: $rest:expr,
        flags: ($ro:expr, $destr:expr, $idem:expr),
        examples: $ex:expr,
        need: $need:expr,
        typed: typed!($req:ty, $resp:ty, $($run:tt)+) $(,)?
    ) => {{
        let (request, response, request_name, response_name, admit, run) =
            typed!($req, $resp, $need, $($run)+);
        Op {
            name: $name,
            summary: $summary,
            description: $desc,
            cli: cli_command!($cli $(($cname))?, $req),
            mcp: $mcp,
            rest: $rest,
            read_only: $ro,
            destructive: $destr,
            idempotent: $idem,
            examples: $ex,
            request,
            response,
            request_name,
            response_name,
            admit,
            run,
        }
    }};
}

/// An entry's CLI command: `None`; `Some("name")`, whose arguments are the request type's
/// (clap derives them from it); or `Own("name")`, whose arguments the binary gives.
macro_rules! cli_command {
    (None, $req:ty) => {
        None
    };
    (Some($name:literal), $req:ty) => {
        Some(memdir_api::cli::derived::<$req>($name))
    };
    (Own($name:literal), $req:ty) => {
        Some(memdir_api::cli::own($name))
    };
}

const fn tool(name: &'static str, title: &'static str, profile: Profile) -> Option<Tool> {
    Some(Tool {
        name,
        title,
        profile,
    })
}

const fn post(
    path: &'static str,
    operation_id: &'static str,
    tags: &'static [&'static str],
    errors: &'static [u16],
) -> Option<Route> {
    Some(Route {
        method: Method::Post,
        path,
        operation_id,
        tags,
        errors,
    })
}

const fn get(
    path: &'static str,
    operation_id: &'static str,
    tags: &'static [&'static str],
    errors: &'static [u16],
) -> Option<Route> {
    Some(Route {
        method: Method::Get,
        path,
        operation_id,
        tags,
        errors,
    })
}

fn no_examples() -> Vec<(&'static str, Value)> {
    vec![("empty", json!({}))]
}

/// Every operation, in the order surfaces list them.
pub fn table() -> &'static [Op] {
    static TABLE: std::sync::OnceLock<Vec<Op>> = std::sync::OnceLock::new();
    TABLE.get_or_init(build)
}

/// The table, in parts of a readable size.
fn build() -> Vec<Op> {
    [
        everyday(),
        categories_and_health(),
        versions(),
        upkeep(),
        sync_plane(),
        store(),
        notes(),
        note_versions(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The tools agents use most: search, sessions, categories, history.
fn everyday() -> Vec<Op> {
    vec![
        op! {
            name: "search",
            summary: "Search sessions and categories",
            description: "Search past sessions and categories. Each chunk hit has session_id, position, content, score and context (neighbouring chunks).",
            cli: Some("search"),
            mcp: tool("memory_search", "Search memory", Profile::Default),
            rest: post("/search", "search", &["sessions", "categories"], &[400, 413, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("keyword", json!({"query": "connection pool timeout", "limit": 5})), ("as_of", json!({"query": "pool timeout", "as_of": "2026-11-30"}))],
            need: |_| Need::Nothing,
            typed: typed!(SearchRequest, SearchResponse, |m, r, c| m.indexing().search_hiding(&r, hidden(&m, c)?).map(|o| shown(o, c))),
        },
        op! {
            name: "fetch",
            summary: "Read a session page by page",
            description: "Read one session's chunks in order, a page at a time. Use next_position from the result to continue.",
            cli: Some("fetch"),
            mcp: tool("memory_fetch", "Read a session", Profile::Default),
            rest: post("/fetch", "fetch", &["sessions"], &[400, 404, 413, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("example", json!({"session_id": "demo-session", "position": 0, "limit": 20}))],
            need: |_| Need::Nothing,
            typed: typed!(FetchRequest, FetchResponse, |m, r| m.sessions().fetch(&r)),
        },
        op! {
            name: "overview",
            summary: "List sessions, newest first",
            description: "The session catalog, newest first: id, title, project, message_count, start_time, last_active.",
            cli: Some("overview"),
            mcp: tool("memory_overview", "List sessions", Profile::Default),
            rest: get("/overview", "overview", &["sessions"], &[400, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("example", json!({"days": 30, "project": "web", "offset": 0, "limit": 20}))],
            need: |_| Need::Nothing,
            typed: typed!(OverviewRequest, OverviewResponse, |m, r| m.sessions().overview(&r)),
        },
        op! {
            name: "ingest",
            summary: "Save chunks to session memory",
            description: "Save a chunk (a message, note or paragraph) to a session: {session_id, content}, or many as chunks: [{session_id, content, ...}], all or nothing. Returns each position.",
            cli: Own("ingest"),
            mcp: tool("memory_ingest", "Save to session memory", Profile::Default),
            rest: post("/ingest", "ingest", &["sessions"], &[400, 413, 500, 503]),
            flags: (false, false, false),
            examples: || vec![
                ("single", json!({"session_id": "demo-session", "content": "The connection pool timeout is 30 seconds.", "project": "web", "metadata": {"role": "user", "title": "Pool settings"}})),
                ("batch", json!({"chunks": [{"session_id": "demo-session", "content": "We raised it to 60 seconds."}, {"session_id": "other-session", "content": "Editor: helix."}]})),
            ],
            need: |r| Need::Ingest(match &r.chunks {
                Some(chunks) => chunks.iter().map(|c| c.project.as_deref().unwrap_or("")).collect(),
                None => vec![r.project.as_deref().unwrap_or("")],
            }),
            typed: typed!(IngestRequest, IngestResponse, |m, r| m.sessions().ingest_request(r)),
        },
        op! {
            name: "read",
            summary: "Read a category (or an old version of it)",
            description: "Read a category by its name (not a key inside it). Returns {data, meta: {hash, version, updated_at, updated_by, size_bytes}}.",
            cli: Some("read"),
            mcp: tool("memory_read", "Read a category", Profile::Default),
            rest: post("/api/v1/read", "readCategory", &["categories"], &[400, 404, 413, 422, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("example", json!({"category": "base"}))],
            need: |r| Need::Read(&r.category),
            typed: typed!(ReadRequest, ReadResponse, |m, r| m.categories().read(&r)),
        },
        op! {
            name: "write",
            summary: "Create, replace or merge a category",
            description: "Create or change a category. merge: true updates only the given top-level keys (null deletes a key); otherwise data replaces the whole category. Pass expected_hash from the last read to fail instead of overwriting a concurrent change.",
            cli: Own("write"),
            mcp: tool("memory_write", "Write a category", Profile::Default),
            rest: post("/api/v1/write", "writeCategory", &["categories"], &[400, 409, 413, 422, 500, 503]),
            flags: (false, true, true),
            examples: || vec![("example", json!({"category": "base", "data": {"name": "Ada", "editor": "helix"}, "merge": true, "reason": "editor preference"}))],
            need: |r| Need::Write(&r.category),
            typed: typed!(WriteRequest, WriteResponse, |m, r| m.categories().write(&r)),
        },
        op! {
            name: "append",
            summary: "Append an entry to a log category",
            description: "Append an entry to a log category (created if missing), keeping the newest max_entries (default 200) and entries within max_age_days of the newest.",
            cli: Own("append"),
            mcp: tool("memory_append", "Append to a log", Profile::Default),
            rest: post("/api/v1/append", "appendLog", &["categories"], &[400, 409, 413, 422, 500, 503]),
            flags: (false, false, false),
            examples: || vec![("example", json!({"category": "journal", "data": {"event": "deployed v2"}, "max_entries": 200}))],
            need: |r| Need::Write(&r.category),
            typed: typed!(AppendRequest, AppendResponse, |m, r| m.categories().append(&r)),
        },
        op! {
            name: "list",
            summary: "List categories",
            description: "Every category with kind, hash, version, size, updated_at and updated_by.",
            cli: Some("list"),
            mcp: tool("memory_list", "List categories", Profile::Default),
            rest: get("/api/v1/list", "listCategories", &["categories"], &[400, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("as_of", json!({"as_of": "2026-11-30"}))],
            need: |_| Need::Nothing,
            typed: typed!(ListRequest, ListResponse, |m, r, c| m.categories().list_at(&r).map(|o| shown(o, c))),
        },
        op! {
            name: "history",
            summary: "Versions of a category",
            description: "Versions of a category, newest first (version, id, hash, op, actor, reason, timestamp). With diff_from and/or diff_to, also a unified diff between two versions.",
            cli: Some("history"),
            mcp: tool("memory_history", "Category history", Profile::Default),
            rest: post("/api/v1/history", "categoryHistory", &["categories"], &[400, 404, 413, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("example", json!({"category": "base", "limit": 20}))],
            need: |r| Need::Read(&r.category),
            typed: typed!(HistoryRequest, HistoryResponse, |m, r| m.categories().history(&r)),
        },
    ]
}

/// More of categories (diff, delete, context, delta), status and semantic search.
fn categories_and_health() -> Vec<Op> {
    vec![
        op! {
            name: "diff",
            summary: "Unified diff between two versions",
            description: "A unified diff between two versions of a category. Defaults: to is the newest version, from its parent.",
            cli: Some("diff"),
            mcp: None,
            rest: post("/api/v1/diff", "diffCategory", &["categories"], &[400, 404, 413, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("example", json!({"category": "base", "from": "1", "to": "2"}))],
            need: |r| Need::Read(&r.category),
            typed: typed!(DiffRequest, DiffResponse, |m, r| m.categories().diff(&r)),
        },
        op! {
            name: "delete",
            summary: "Delete a category (history is kept)",
            description: "Delete a category. Its history is kept and restore can bring it back.",
            cli: Some("delete"),
            mcp: tool("memory_delete", "Delete a category", Profile::Default),
            rest: post("/api/v1/delete", "deleteCategory", &["categories"], &[400, 404, 409, 413, 500, 503]),
            flags: (false, true, false),
            examples: || vec![("example", json!({"category": "scratch", "reason": "no longer needed"}))],
            need: |r| Need::Destroy { what: "delete categories", category: Some(&r.category) },
            typed: typed!(DeleteRequest, DeleteResponse, |m, r| m.categories().delete(&r)),
        },
        op! {
            name: "status",
            summary: "Counts, sizes and health of the store",
            description: "Counts of sessions, chunks and categories, sizes, and the health of store and index.",
            cli: Some("status"),
            mcp: tool("memory_status", "Memory status", Profile::Default),
            rest: get("/status", "status", &["meta"], &[500, 503]),
            flags: (true, false, true),
            examples: no_examples,
            need: |_| Need::Nothing,
            typed: typed!(Empty, StatusResponse, |m, _r, c| m.upkeep().status_as(&|n| c.can_read(n)).map(|mut s| {
                s.access = Some(c.describe());
                shown(s, c)
            })),
        },
        op! {
            name: "search_semantic",
            summary: "Search by meaning",
            description: "Search by meaning. Without a working embeddings provider this is keyword search, reported as engine keyword-fallback with the reason.",
            cli: None,
            mcp: tool("memory_search_semantic", "Semantic search", Profile::Full),
            rest: None,
            flags: (true, false, true),
            examples: || vec![("example", json!({"query": "what editor do I use", "limit": 3}))],
            need: |_| Need::Nothing,
            typed: typed!(SemanticSearchRequest, SearchResponse, |m, r, c| m.indexing().search_semantic(&r, hidden(&m, c)?).map(|o| shown(o, c))),
        },
        op! {
            name: "context",
            summary: "Read several categories at once",
            description: "Read several categories at once, for session warm-up. Missing ones are listed, not errors.",
            cli: Some("context"),
            mcp: tool("memory_context", "Read several categories", Profile::Full),
            rest: post("/api/v1/context", "readCategories", &["categories"], &[400, 413, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("example", json!({"categories": ["base", "projects"]}))],
            need: |_| Need::Nothing,
            typed: typed!(ContextRequest, ContextResponse, |m, r, c| m.categories().context_hiding(&r, &hidden(&m, c)?).map(|o| shown(o, c))),
        },
        op! {
            name: "delta",
            summary: "Whether a category changed since a hash",
            description: "Whether a category changed since a hash: unchanged, changed (with data) or deleted.",
            cli: Some("delta"),
            mcp: tool("memory_delta", "Changed since", Profile::Full),
            rest: post("/api/v1/delta", "categoryDelta", &["categories"], &[400, 404, 413, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("example", json!({"category": "base", "since_hash": "0000"}))],
            need: |r| Need::Read(&r.category),
            typed: typed!(DeltaRequest, DeltaResponse, |m, r| m.categories().delta(&r)),
        },
    ]
}

/// History kept short, restored, blamed; reviews.
fn versions() -> Vec<Op> {
    vec![
        op! {
            name: "compact",
            summary: "Trim history",
            description: "Trim history to the newest keep_versions versions per category (current versions and delete tombstones stay).",
            cli: Some("compact"),
            mcp: tool("memory_compact", "Compact history", Profile::Full),
            rest: None,
            flags: (false, true, true),
            examples: || vec![("example", json!({"category": "base", "keep_versions": 5}))],
            need: |r| Need::Destroy { what: "compact history", category: r.category.as_deref() },
            typed: typed!(CompactRequest, CompactResponse, |m, r| m.categories().compact(&r)),
        },
        op! {
            name: "restore",
            summary: "Restore an old version as a new version",
            description: "Restore an old version of a category (also after a delete) as a new version. Restoring over a malformed file needs expected_hash (the file's current_hash).",
            cli: Some("restore"),
            mcp: tool("memory_restore", "Restore a version", Profile::Full),
            rest: post("/api/v1/restore", "restoreCategory", &["categories"], &[400, 404, 409, 413, 422, 500, 503]),
            flags: (false, false, false),
            examples: || vec![("example", json!({"category": "base", "version": "1", "reason": "undo"}))],
            need: |r| Need::Destroy { what: "restore versions", category: Some(&r.category) },
            typed: typed!(RestoreRequest, RestoreResponse, |m, r| m.categories().restore(&r)),
        },
        op! {
            name: "blame",
            summary: "Who set each key of a category",
            description: "For each top-level key of a category (or of the nested object at path, a JSON Pointer like /editor/theme), the version that set its current value: version, id, op, actor, reason and timestamp. A key rewritten with an equal value keeps its first author; at_least marks a value that may be older than an unreadable (forgotten or compacted) version.",
            cli: Some("blame"),
            mcp: tool("memory_blame", "Who set each key", Profile::Full),
            rest: post("/api/v1/blame", "categoryBlame", &["categories"], &[400, 404, 413, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("example", json!({"category": "base"}))],
            need: |r| Need::Read(&r.category),
            typed: typed!(BlameRequest, BlameResponse, |m, r| m.categories().blame(&r)),
        },
        op! {
            name: "review",
            summary: "Mark a memory as checked, or list the stale",
            description: "Record that a category (or one top-level key of it, or a session chunk by its uri) was checked and is still right, with an optional note; search hits then carry reviewed_at. With stale (days): list the categories neither written nor reviewed in that many days instead. Reviews are kept in the category _reviews.",
            cli: Some("review"),
            mcp: tool("memory_review", "Mark as reviewed", Profile::Full),
            rest: post("/api/v1/review", "review", &["categories"], &[400, 404, 409, 413, 422, 500, 503]),
            flags: (false, false, false),
            examples: || vec![
                ("category", json!({"category": "base", "note": "still true"})),
                ("stale", json!({"stale": 90})),
            ],
            need: |r| match (&r.category, r.stale) {
                (_, Some(_)) => Need::Nothing,
                (Some(c), None) => Need::Write(c),
                (None, None) => Need::Write(REVIEWS_CATEGORY),
            },
            typed: typed!(ReviewRequest, ReviewResponse, |m, r, c| m.categories().review(&r, &|n| c.can_read(n))),
        },
    ]
}

/// Forget, health checks, reindex, import and git sync.
fn upkeep() -> Vec<Op> {
    vec![
        op! {
            name: "forget",
            summary: "Forget chunks or an old category version",
            description: "Replace chunks by tombstones (session_id with chunk_ids, a whole session, or the hits of query) or remove an old category version's content (category with version); positions and the version chain stay. dry_run lists what would go.",
            cli: Some("forget"),
            mcp: tool("memory_forget", "Forget memories", Profile::Full),
            rest: post("/api/v1/forget", "forget", &["sessions", "categories"], &[400, 404, 409, 413, 500, 503]),
            flags: (false, true, true),
            examples: || vec![("dry_run", json!({"query": "connection pool", "dry_run": true}))],
            need: |r| match (&r.category, &r.note) {
                (Some(c), _) => Need::Destroy { what: "forget versions", category: Some(c) },
                (None, Some(_)) => Need::Privileged("forget note versions"),
                (None, None) => Need::Privileged("forget session memory"),
            },
            typed: typed!(ForgetRequest, ForgetResponse, |m, r| m.upkeep().forget(&r)),
        },
        op! {
            name: "doctor",
            summary: "Health report",
            description: "Paths, configuration source, and a full check of files, history, ledger and index.",
            cli: Some("doctor"),
            mcp: tool("memory_doctor", "Health report", Profile::Full),
            rest: None,
            flags: (true, false, true),
            examples: no_examples,
            need: |_| Need::Nothing,
            typed: typed!(Empty, DoctorResponse, |m, _r, c| {
                c.admit(&Need::ReadAll, &|| category_names(&m))?;
                m.upkeep().doctor().map(|mut d| {
                    d.status.access = Some(c.describe());
                    d
                })
            }),
        },
        op! {
            name: "verify_store",
            summary: "Check that files, history, ledger and index agree",
            description: "A read-only check of every file, the history, the ledger and the index. Exits 1 (CLI) when it finds a problem.",
            cli: Some("verify-store"),
            mcp: None,
            rest: get("/api/v1/verify", "verifyStore", &["meta"], &[500, 503]),
            flags: (true, false, true),
            examples: no_examples,
            need: |_| Need::Nothing,
            typed: typed!(Empty, VerifyResponse, |m, _r, c| {
                c.admit(&Need::ReadAll, &|| category_names(&m))?;
                m.upkeep().verify()
            }),
        },
        op! {
            name: "reindex",
            summary: "Rebuild the search index from the files",
            description: "Rebuild the search index from the files; rebuilds from nothing when the index cannot be read.",
            cli: Some("reindex"),
            mcp: None,
            rest: None,
            flags: (false, false, true),
            examples: no_examples,
            need: |_| Need::Nothing,
            typed: typed!(Empty, ReindexResponse, |m, _r| m.indexing().reindex(m.progress())),
        },
        op! {
            name: "import",
            summary: "Import another tool's history",
            description: "Import another tool's history (jsonl: memdir chunk lines; claude-code; codex; opencode; local-memory; mcp-memory-rs and mcp-memory-jsonl, which become categories) from a file or directory (default: where the tool keeps it). Every chunk carries a source_id and a category version already in history is not added again, so running it again adds only what is new. dry_run counts without writing.",
            cli: Some("import"),
            mcp: None,
            rest: None,
            flags: (false, false, true),
            examples: || vec![("dry-run", json!({"format": "jsonl", "path": "-", "dry_run": true}))],
            // Importers of categories write categories the source names, unknown before it is
            // read: only a device that may write every category imports them, and a dry run, which
            // tells whether content is already in a category's history, needs the right to read all.
            need: |r| match (memdir_api::CATEGORY_IMPORT_FORMATS.contains(&r.format.as_str()), r.dry_run) {
                (false, true) => Need::Nothing,
                (false, false) => Need::Privileged("import history"),
                (true, true) => Need::ReadAll,
                (true, false) => Need::Admin { what: "import categories from another tool" },
            },
            typed: typed!(ImportRequest, ImportResponse, |m, r| crate::import::run(m, &r, &memdir_store::env::process)),
        },
        op! {
            name: "sync",
            summary: "Sync with the git remote",
            description: "Commit local changes, fetch, merge with memdir's rules (concurrent versions resolved by the conflict strategy, losers kept in history and conflict records), then push. Offline, commits locally and reports the push as pending.",
            cli: Some("sync"),
            mcp: tool("memory_sync", "Sync with a remote", Profile::Full),
            rest: post("/api/v1/sync", "sync", &["sync"], &[400, 404, 409, 413, 422, 500, 503]),
            flags: (false, true, false),
            // An HTTP remote that cannot be reached: the report says so and that the push is
            // pending.
            examples: || vec![("offline", json!({"remote": "http://127.0.0.1:9"}))],
            need: |_| Need::Admin { what: "sync the store with a remote" },
            typed: typed!(SyncRequest, SyncResponse, |m, r, c| {
                m.replication().sync_with(&r, sync_token(&m, c, &r)?, m.progress())
            }),
        },
    ]
}

/// The HTTP sync plane and conflicts.
fn sync_plane() -> Vec<Op> {
    vec![
        op! {
            name: "sync_manifest",
            summary: "The hash tree of the files a sync exchanges",
            description: "The root and per-bucket BLAKE3 hashes of the history entries, conflict records and session segments this device may read. Equal roots on two stores: nothing to sync. Used by `sync` against an HTTP remote.",
            cli: None,
            mcp: tool("sync_manifest", "Sync manifest", Profile::Full),
            rest: get("/api/v1/sync/manifest", "syncManifest", &["sync"], &[400, 500, 503]),
            flags: (true, false, true),
            examples: no_examples,
            need: |_| Need::Nothing,
            typed: typed!(Empty, SyncManifestResponse, |m, _r, c| {
                with_sync_access(&m, c, |a| m.peers().sync_manifest(a))
            }),
        },
        op! {
            name: "sync_diff",
            summary: "What each side of a sync lacks",
            description: "Given the caller's files in the buckets whose hashes differ from sync_manifest's, lists what this store lacks (push) and what the caller lacks (pull): whole files, or segment tails from a byte offset. A file the caller would push into a category it may not write refuses the whole diff.",
            cli: None,
            mcp: tool("sync_diff", "Sync diff", Profile::Full),
            rest: post("/api/v1/sync/diff", "syncDiff", &["sync"], &[400, 413, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("nothing", json!({"buckets": {}}))],
            // The sync plane's reads and writes are checked per category and project by the
            // access the table hands the engine (`ops::with_sync_access`).
            need: |_| Need::Nothing,
            typed: typed!(SyncDiffRequest, SyncDiffResponse, |m, r, c| {
                with_sync_access(&m, c, |a| m.peers().sync_diff(&r, a))
            }),
        },
        op! {
            name: "sync_pull",
            summary: "A page of files for a sync",
            description: "Sends the files and segment tails asked for (as sync_diff listed them under pull), at most max_bytes of data per page, each with its BLAKE3 hash; what did not fit is listed under rest.",
            cli: None,
            mcp: tool("sync_pull", "Sync pull", Profile::Full),
            rest: post("/api/v1/sync/pull", "syncPull", &["sync"], &[400, 404, 413, 422, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("nothing", json!({"want": []}))],
            need: |_| Need::Nothing,
            typed: typed!(SyncPullRequest, SyncPage, |m, r, c| {
                with_sync_access(&m, c, |a| m.peers().sync_pull(&r, a))
            }),
        },
        op! {
            name: "sync_push",
            summary: "Apply a page of files from a sync",
            description: "Checks every item of the page (BLAKE3 hash, path, content, access) and applies all of them as one transaction, or none: new history entries and conflict records, segment tails; categories whose history grew are derived by the same merge as git sync.",
            cli: None,
            mcp: tool("sync_push", "Sync push", Profile::Full),
            rest: post("/api/v1/sync/push", "syncPush", &["sync"], &[400, 409, 413, 422, 500, 503]),
            flags: (false, false, true),
            examples: || vec![("nothing", json!({"items": []}))],
            need: |_| Need::Nothing,
            typed: typed!(SyncPushRequest, SyncPushResponse, |m, r, c| {
                with_sync_access(&m, c, |a| m.peers().sync_push(&r, a))
            }),
        },
        op! {
            name: "resolve",
            summary: "Resolve a sync conflict",
            description: "Write the resolved content of a category a sync left in conflict: pick one of its versions, or give the data. Closes its open conflicts.",
            cli: Some("resolve"),
            mcp: None,
            rest: None,
            flags: (false, false, false),
            examples: || vec![("pick", json!({"category": "base", "pick": "1"}))],
            need: |r| Need::Write(&r.category),
            typed: typed!(ResolveRequest, ResolveResponse, |m, r| m.replication().resolve(&r)),
        },
    ]
}

/// Snapshots, export, embeddings, init.
fn store() -> Vec<Op> {
    vec![
        op! {
            name: "snapshot",
            summary: "Write a verified copy of the store",
            description: "Copy every file of the store (not the derived ledger and index) to dest, a new or empty directory, under the store lock, with a manifest of blake3 hashes checked before it answers.",
            cli: Some("snapshot"),
            mcp: None,
            rest: None,
            flags: (true, false, false),
            examples: || vec![("example", json!({"dest": "/backups/memdir-2026-11-30"}))],
            need: |_| Need::ReadAll,
            typed: typed!(SnapshotRequest, SnapshotResponse, |m, r| m.upkeep().take_snapshot_with(&r, m.progress())),
        },
        op! {
            name: "restore_snapshot",
            summary: "Replace the store by a snapshot",
            description: "Check a snapshot against its manifest, then swap it in as the store; the previous store is moved aside (parked), not deleted.",
            cli: Some("restore-snapshot"),
            mcp: None,
            rest: None,
            flags: (false, true, false),
            examples: || vec![("example", json!({"src": "/backups/memdir-2026-11-30"}))],
            need: |_| Need::Admin { what: "replace the store with a snapshot" },
            typed: typed!(RestoreSnapshotRequest, RestoreSnapshotResponse, |m, r| m.upkeep().restore_snapshot(&r)),
        },
        op! {
            name: "export",
            summary: "Export sessions and categories as jsonl or markdown",
            description: "Export sessions as jsonl (chunk lines that ingest --jsonl loads) or sessions and categories as markdown, optionally for one project and from a time on.",
            cli: Some("export"),
            mcp: None,
            rest: None,
            flags: (true, false, true),
            examples: || vec![("markdown", json!({"format": "markdown", "project": "web", "since": "2026-11-01"}))],
            need: |_| Need::ReadAll,
            typed: typed!(ExportRequest, ExportResponse, |m, r| m.upkeep().export(&r)),
        },
        op! {
            name: "embed",
            summary: "Embed every text not embedded yet",
            description: "Embed every indexed chunk and category that has no vector yet with the configured provider (searches and servers do this a little at a time).",
            cli: Some("embed"),
            mcp: None,
            rest: None,
            flags: (false, false, true),
            examples: no_examples,
            need: |_| Need::Nothing,
            typed: typed!(Empty, EmbedResponse, |m, _r| m.indexing().embed_with(m.progress())),
        },
        op! {
            name: "models",
            summary: "List or fetch embedding models",
            description: "Show the configured embeddings provider and the models in the model cache; with fetch, download a model from Hugging Face into the cache.",
            cli: Some("models"),
            mcp: None,
            rest: None,
            flags: (true, false, true),
            examples: no_examples,
            need: |_| Need::Nothing,
            typed: typed!(ModelsRequest, ModelsResponse, |m, r| m.indexing().models(&r)),
        },
        op! {
            name: "init",
            summary: "Create the memory directory",
            description: "Create the memory directory with its format file, .gitignore and .gitattributes.",
            cli: Some("init"),
            mcp: None,
            rest: None,
            flags: (false, false, true),
            examples: no_examples,
            need: |_| Need::Nothing,
            typed: typed!(Empty, InitResponse, |m, _r| m.init()),
        },
    ]
}

/// The path below `notes/` a memory-tool path names (`/memories/a.md` is `a.md`).
fn under_memories(path: &Option<String>) -> &str {
    path.as_deref()
        .unwrap_or("")
        .trim_start_matches(crate::service::notes::memory_tool::ROOT)
        .trim_start_matches('/')
}

/// What a memory-tool command touches.
fn memory_tool_need(r: &MemoryToolRequest) -> Need<'_> {
    match r.command.as_str() {
        "view" => Need::Notes {
            write: false,
            paths: vec![under_memories(&r.path)],
        },
        "rename" => Need::Notes {
            write: true,
            paths: vec![under_memories(&r.old_path), under_memories(&r.new_path)],
        },
        _ => Need::Notes {
            write: true,
            paths: vec![under_memories(&r.path)],
        },
    }
}

/// Notes: the Markdown files under `notes/`, and the memory-tool protocol on them.
fn notes() -> Vec<Op> {
    vec![
        op! {
            name: "note_read",
            summary: "Read a note (or some of its lines, or an old version)",
            description: "Read a note by its path below notes/ (projects/orbital.md). Returns {text, hash, lines, range, version, updated_at, updated_by}; view_range [first, last] returns those lines. Pass hash as expected_hash to a later change.",
            cli: Some("note read"),
            mcp: tool("note_read", "Read a note", Profile::Full),
            rest: post("/api/v1/notes/read", "readNote", &["notes"], &[400, 404, 413, 422, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("example", json!({"path": "projects/orbital.md"})), ("lines", json!({"path": "MEMORY.md", "view_range": [1, 20]}))],
            need: |r| Need::Notes { write: false, paths: vec![&r.path] },
            typed: typed!(NoteReadRequest, NoteReadResponse, |m, r| m.notes().read(&r)),
        },
        op! {
            name: "note_write",
            summary: "Create or replace a note",
            description: "Write a note's whole text (Markdown by default); every write is a version in its history. Pass expected_hash from the last read to fail instead of overwriting a concurrent change, or \"absent\" to create only.",
            cli: Own("note write"),
            mcp: tool("note_write", "Write a note", Profile::Full),
            rest: post("/api/v1/notes/write", "writeNote", &["notes"], &[400, 409, 413, 422, 500, 503]),
            flags: (false, true, true),
            examples: || vec![("example", json!({"path": "projects/apollo.md", "text": "# Apollo\n\nReleases go out on Thursdays.\n", "expected_hash": "absent"}))],
            need: |r| Need::Notes { write: true, paths: vec![&r.path] },
            typed: typed!(NoteWriteRequest, NoteWriteResponse, |m, r| m.notes().write(&r)),
        },
        op! {
            name: "note_append",
            summary: "Add text at the end of a note",
            description: "Add text at the end of a note, on a line of its own (the note is created when absent). Safe for many writers at once: each append is applied to the note as it is.",
            cli: Own("note append"),
            mcp: tool("note_append", "Append to a note", Profile::Full),
            rest: post("/api/v1/notes/append", "appendNote", &["notes"], &[400, 409, 413, 422, 500, 503]),
            flags: (false, false, false),
            examples: || vec![("example", json!({"path": "MEMORY.md", "text": "- the staging box is staging-2 now"}))],
            need: |r| Need::Notes { write: true, paths: vec![&r.path] },
            typed: typed!(NoteAppendRequest, NoteWriteResponse, |m, r| m.notes().append(&r)),
        },
        op! {
            name: "note_edit",
            summary: "Replace text in a note, or insert lines",
            description: "Change a note in place: old_str (which must occur exactly once) becomes new_str, or insert_text goes after line insert_line (0: at the start). Fails, changing nothing, when old_str is absent or occurs more than once.",
            cli: Some("note edit"),
            mcp: tool("note_edit", "Edit a note", Profile::Full),
            rest: post("/api/v1/notes/edit", "editNote", &["notes"], &[400, 404, 409, 413, 422, 500, 503]),
            flags: (false, true, false),
            examples: || vec![("replace", json!({"path": "projects/orbital.md", "old_str": "staging first", "new_str": "staging-2 first"})), ("insert", json!({"path": "MEMORY.md", "insert_line": 0, "insert_text": "# Memory"}))],
            need: |r| Need::Notes { write: true, paths: vec![&r.path] },
            typed: typed!(NoteEditRequest, NoteWriteResponse, |m, r| m.notes().edit(&r)),
        },
        op! {
            name: "note_list",
            summary: "List notes and folders",
            description: "Notes and folders under a folder (default: all), by path, with size and modification time.",
            cli: Some("note ls"),
            mcp: tool("note_list", "List notes", Profile::Full),
            rest: get("/api/v1/notes", "listNotes", &["notes"], &[400, 404, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("example", json!({"depth": 2}))],
            need: |r| Need::Notes { write: false, paths: vec![r.folder.as_deref().unwrap_or("")] },
            typed: typed!(NoteListRequest, NoteListResponse, |m, r| m.notes().list(&r)),
        },
        op! {
            name: "memory",
            summary: "The memory tool: view, create, str_replace, insert, delete, rename under /memories",
            description: "Memory files under /memories, kept across sessions (the memory tool protocol). Commands: view {path, view_range?}, create {path, file_text}, str_replace {path, old_str, new_str}, insert {path, insert_line, insert_text}, delete {path}, rename {old_path, new_path}. Every change is versioned; view before you edit.",
            cli: Some("memory-tool"),
            mcp: tool("memory", "Memory files", Profile::MemoryTool),
            rest: post("/api/v1/memory-tool", "memoryTool", &["notes"], &[400, 403, 404, 409, 413, 422, 500, 503]),
            flags: (false, true, false),
            examples: || vec![("view", json!({"command": "view", "path": "/memories"})), ("create", json!({"command": "create", "path": "/memories/notes.md", "file_text": "# Notes\n"}))],
            need: memory_tool_need,
            typed: typed!(MemoryToolRequest, MemoryToolResponse, |m, r| m.notes().memory_tool(&r)),
        },
    ]
}

/// Notes: delete, rename, versions.
fn note_versions() -> Vec<Op> {
    vec![
        op! {
            name: "note_delete",
            summary: "Delete a note (or a folder of notes)",
            description: "Delete a note, or every note in a folder. Each leaves a tombstone in its history; note_restore brings a version back.",
            cli: Some("note rm"),
            mcp: tool("note_delete", "Delete a note", Profile::Full),
            rest: post("/api/v1/notes/delete", "deleteNote", &["notes"], &[400, 404, 409, 413, 500, 503]),
            flags: (false, true, true),
            examples: || vec![("example", json!({"path": "scratch/todo.md"}))],
            need: |r| Need::Notes { write: true, paths: vec![&r.path] },
            typed: typed!(NoteDeleteRequest, NoteDeleteResponse, |m, r| m.notes().delete(&r)),
        },
        op! {
            name: "note_rename",
            summary: "Move a note (or a folder of notes)",
            description: "Move a note, or every note in a folder, to a new path where nothing is yet. History follows: a rename version at the new path, a tombstone at the old.",
            cli: Some("note mv"),
            mcp: tool("note_rename", "Move a note", Profile::Full),
            rest: post("/api/v1/notes/rename", "renameNote", &["notes"], &[400, 404, 409, 413, 500, 503]),
            flags: (false, true, false),
            examples: || vec![("example", json!({"from": "todo.md", "to": "projects/todo.md"}))],
            need: |r| Need::Notes { write: true, paths: vec![&r.from, &r.to] },
            typed: typed!(NoteRenameRequest, NoteRenameResponse, |m, r| m.notes().rename(&r)),
        },
        op! {
            name: "note_history",
            summary: "Versions of a note",
            description: "Versions of a note, newest first (version, id, hash, op, actor, reason, timestamp), deletes and renames included.",
            cli: Some("note history"),
            mcp: tool("note_history", "Note history", Profile::Full),
            rest: post("/api/v1/notes/history", "noteHistory", &["notes"], &[400, 404, 413, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("example", json!({"path": "MEMORY.md", "limit": 20}))],
            need: |r| Need::Notes { write: false, paths: vec![&r.path] },
            typed: typed!(NoteHistoryRequest, NoteHistoryResponse, |m, r| m.notes().history(&r)),
        },
        op! {
            name: "note_diff",
            summary: "Diff two versions of a note",
            description: "A unified diff between two versions of a note (default: the newest and its parent).",
            cli: Some("note diff"),
            mcp: tool("note_diff", "Diff a note", Profile::Full),
            rest: post("/api/v1/notes/diff", "diffNote", &["notes"], &[400, 404, 413, 500, 503]),
            flags: (true, false, true),
            examples: || vec![("example", json!({"path": "MEMORY.md", "from": "1", "to": "2"}))],
            need: |r| Need::Notes { write: false, paths: vec![&r.path] },
            typed: typed!(NoteDiffRequest, NoteDiffResponse, |m, r| m.notes().diff(&r)),
        },
        op! {
            name: "note_restore",
            summary: "Restore an old version of a note",
            description: "Write an old version's text again, as a new version (nothing is lost: the versions after it stay in history).",
            cli: Some("note restore"),
            mcp: tool("note_restore", "Restore a note", Profile::Full),
            rest: post("/api/v1/notes/restore", "restoreNote", &["notes"], &[400, 404, 409, 413, 500, 503]),
            flags: (false, true, true),
            examples: || vec![("example", json!({"path": "MEMORY.md", "version": "1"}))],
            need: |r| Need::Notes { write: true, paths: vec![&r.path] },
            typed: typed!(NoteRestoreRequest, NoteWriteResponse, |m, r| m.notes().restore(&r)),
        },
        op! {
            name: "notes_export",
            summary: "Write notes out as plain files",
            description: "Write the notes (or a folder's) into a directory as plain files, for a client that reads its memory there. A file changed there since the last export is never overwritten: it is reported as a conflict.",
            cli: Some("notes export"),
            mcp: None,
            rest: None,
            flags: (false, false, true),
            examples: || vec![("example", json!({"directory": "/home/me/.claude/projects/-home-me-app/memory", "folder": "imports/claude-code/-home-me-app"}))],
            need: |r| Need::Notes { write: false, paths: vec![r.folder.as_deref().unwrap_or("")] },
            typed: typed!(NotesExportRequest, NotesExportResponse, |m, r| m.notes().export(&r)),
        },
    ]
}

/// The operation named `name`.
pub fn find(name: &str) -> Option<&'static Op> {
    table().iter().find(|o| o.name == name)
}

/// The operation behind MCP tool `tool`, if the profile offers it.
pub fn find_tool(tool: &str, profile: Profile) -> Option<&'static Op> {
    table().iter().find(|o| {
        o.mcp
            .is_some_and(|t| t.name == tool && profile.offers(t.profile))
    })
}

/// Runs `op` for `caller` with JSON arguments (`null` or absent means none): access control
/// first, then the operation, with the caller's device as the actor of its writes.
pub fn call(memdir: &Memdir, caller: &Caller, op: &Op, args: Value) -> Result<Value> {
    call_with(memdir, caller, op, args, None)
}

/// [`call`], with a long job (reindex, import, sync, snapshot, embed) reporting its progress
/// to `progress` as (done, total).
pub fn call_with(
    memdir: &Memdir,
    caller: &Caller,
    op: &Op,
    args: Value,
    progress: Option<Progress<'_>>,
) -> Result<Value> {
    let args = if args.is_null() {
        Value::Object(Map::new())
    } else {
        args
    };
    if !args.is_object() {
        return Err(Error::invalid(
            "arguments",
            format!(
                "arguments must be a JSON object, got {}",
                crate::service::type_name(&args)
            ),
        ));
    }
    let call = Call::by(caller);
    (op.run)(memdir.acting(&call).with_progress(progress), args)
}

/// Whether `caller` may run `op` with `args`, without running it: for a caller that does the
/// operation's work in its own steps (a capture hook imports as `import` does).
pub fn admit(memdir: &Memdir, caller: &Caller, op: &Op, args: Value) -> Result<()> {
    (op.admit)(memdir, caller, args)
}

/// Settings for tool input schemas: everything inline.
fn generator() -> SchemaGenerator {
    let mut s = SchemaSettings::draft2020_12();
    s.inline_subschemas = true;
    SchemaGenerator::new(s)
}

/// The strict JSON Schema of an operation's input, as MCP tools carry it: an object whose
/// every property has a type and a description, with no union types (`anyOf`, `oneOf`, type
/// arrays), which strict validators and some model providers refuse.
pub fn input_schema(op: &Op) -> Map<String, Value> {
    let mut g = generator();
    let schema = (op.request)(&mut g);
    let mut v = schema.to_value();
    strict(&mut v);
    if let Value::Object(m) = &mut v {
        m.remove("$schema");
        m.remove("title");
        m.remove("description");
        m.entry("properties").or_insert_with(|| json!({}));
        m.insert("type".into(), json!("object"));
        m.insert("additionalProperties".into(), json!(false));
        return m.clone();
    }
    Map::new()
}

/// The JSON Schema of an operation's response, everything inline. Unlike an input schema it
/// keeps `null` in the types of optional fields: an answer sends them as `null`.
pub fn output_schema(op: &Op) -> Value {
    let mut v = (op.response)(&mut generator()).to_value();
    if let Value::Object(m) = &mut v {
        m.remove("$schema");
        m.remove("title");
    }
    v
}

/// Rewrites a schema without union types: `Option<T>` becomes T (absence is optionality),
/// and integer formats go (strict clients reject `uint`).
pub fn strict(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Array(types)) = m.get("type").cloned() {
                let non_null: Vec<_> = types.into_iter().filter(|t| t != "null").collect();
                if non_null.len() == 1 {
                    m.insert("type".into(), non_null[0].clone());
                }
            }
            for key in ["anyOf", "oneOf"] {
                if let Some(Value::Array(alts)) = m.get(key).cloned() {
                    let non_null: Vec<_> = alts
                        .into_iter()
                        .filter(|a| a.get("type") != Some(&json!("null")))
                        .collect();
                    if non_null.len() == 1 {
                        m.remove(key);
                        if let Value::Object(inner) = &non_null[0] {
                            for (k, x) in inner {
                                m.entry(k.clone()).or_insert(x.clone());
                            }
                        }
                    }
                }
            }
            if m.get("type") == Some(&json!("integer")) {
                m.remove("format");
            }
            if m.get("type") == Some(&json!("number")) {
                m.remove("format");
            }
            // A default of null says nothing.
            if m.get("default") == Some(&Value::Null) {
                m.remove("default");
            }
            for (_, x) in m.iter_mut() {
                strict(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strict),
        _ => {}
    }
}

/// The MCP tools of a profile, in table order: (op, tool).
pub fn tools(profile: Profile) -> Vec<(&'static Op, Tool)> {
    table()
        .iter()
        .filter_map(|o| o.mcp.filter(|t| profile.offers(t.profile)).map(|t| (o, t)))
        .collect()
}

/// A surface, for rendering hints in its own vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Surface {
    Cli,
    Mcp,
    Rest,
}

/// How a surface names an operation: the CLI its command, MCP its tool, REST its route; an
/// operation a surface lacks is named as the CLI runs it.
pub fn op_name(name: &str, surface: Surface) -> String {
    let Some(op) = find(name) else {
        return name.to_string();
    };
    let cli = || op.cli.map(|c| format!("`memdir {}`", c.name));
    match surface {
        Surface::Cli => cli(),
        Surface::Mcp => op.mcp.map(|t| t.name.to_string()).or_else(cli),
        Surface::Rest => op
            .rest
            .map(|r| {
                let m = match r.method {
                    Method::Get => "GET",
                    Method::Post => "POST",
                };
                format!("{m} {}", r.path)
            })
            .or_else(cli),
    }
    .unwrap_or_else(|| name.to_string())
}

/// How a surface names an argument: the CLI as a flag, the others as the JSON field.
pub fn arg_name(name: &str, surface: Surface) -> String {
    match surface {
        Surface::Cli => format!("--{}", name.replace('_', "-")),
        Surface::Mcp | Surface::Rest => name.to_string(),
    }
}

/// Renders the engine's `{op:NAME}` and `{arg:NAME}` references in a text for a surface.
pub fn render(text: &str, surface: Surface) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let token = tail.find('}').map(|j| &tail[1..j]);
        match token.and_then(|t| t.split_once(':')) {
            Some(("op", n)) if find(n).is_some() => {
                out.push_str(&op_name(n, surface));
                rest = &tail[n.len() + 5..];
            }
            Some(("arg", n)) if n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') => {
                out.push_str(&arg_name(n, surface));
                rest = &tail[n.len() + 6..];
            }
            _ => {
                out.push('{');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// An error with its message and hints rendered for a surface.
pub fn for_surface(mut e: Error, surface: Surface) -> Error {
    e.message = render(&e.message, surface);
    for h in &mut e.hints {
        *h = render(h, surface);
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_name_things_in_each_surface_vocabulary() {
        let t =
            "{op:history} lists versions; pass {arg:expected_hash}; {op:reindex}; {x} {op:nope}";
        assert_eq!(
            render(t, Surface::Cli),
            "`memdir history` lists versions; pass --expected-hash; `memdir reindex`; {x} {op:nope}"
        );
        assert_eq!(
            render(t, Surface::Mcp),
            "memory_history lists versions; pass expected_hash; `memdir reindex`; {x} {op:nope}"
        );
        assert_eq!(
            render(t, Surface::Rest),
            "POST /api/v1/history lists versions; pass expected_hash; `memdir reindex`; {x} {op:nope}"
        );
    }

    #[test]
    fn every_tool_schema_is_strict_and_described() {
        fn walk(v: &Value, at: &str) {
            if let Value::Object(m) = v {
                for bad in ["anyOf", "oneOf", "allOf", "$ref"] {
                    assert!(!m.contains_key(bad), "{at}: {bad}");
                }
                if let Some(t) = m.get("type") {
                    assert!(t.is_string(), "{at}: type {t}");
                }
                if let Some(Value::Object(props)) = m.get("properties") {
                    for (k, p) in props {
                        assert!(
                            p.get("description")
                                .and_then(Value::as_str)
                                .is_some_and(|d| !d.is_empty()),
                            "{at}.{k} has no description"
                        );
                        assert!(p.get("type").is_some(), "{at}.{k} has no type");
                        walk(p, &format!("{at}.{k}"));
                    }
                }
                if let Some(items) = m.get("items") {
                    walk(items, &format!("{at}[]"));
                }
            }
        }
        for (op, t) in tools(Profile::Full) {
            let s = Value::Object(input_schema(op));
            walk(&s, t.name);
        }
    }

    #[test]
    fn names_are_unique_on_every_surface() {
        let mut seen = std::collections::BTreeSet::new();
        for op in table() {
            assert!(seen.insert(format!("op {}", op.name)));
            if let Some(c) = op.cli.map(|c| c.name) {
                assert!(seen.insert(format!("cli {c}")), "cli {c}");
            }
            if let Some(t) = op.mcp {
                assert!(seen.insert(format!("mcp {}", t.name)), "mcp {}", t.name);
            }
            if let Some(r) = op.rest {
                assert!(seen.insert(format!("rest {}", r.path)), "rest {}", r.path);
                assert!(seen.insert(format!("operationId {}", r.operation_id)));
            }
        }
    }
}
