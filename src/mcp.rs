//! MCP over stdio, on the official `rmcp` SDK.
//!
//! Architecture Invariant: this is the only module that knows MCP. It maps tool calls to
//! [`Memdir`] operations and [`Error`]s to tool errors (`isError: true` with
//! `{code, message, hints, ...}`); JSON-RPC errors are kept for unknown tools and malformed
//! requests. Initialize does no store or index work, so it answers at once on any store size.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{Error, ErrorKind, Result};
use crate::service::{
    self, AppendRequest, FieldList, Memdir, NewChunk, OverviewRequest, ReadRequest, SearchRequest,
    VersionRef, WriteRequest,
};

/// Which tools `tools/list` offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// The small set agents need.
    Default,
    /// Every tool name of the designs memdir replaces, too.
    Full,
}

impl Profile {
    /// Parses `default` or `full`.
    pub fn parse(s: &str) -> Result<Profile> {
        match s {
            "default" | "" => Ok(Profile::Default),
            "full" | "compat" | "all" => Ok(Profile::Full),
            _ => Err(Error::invalid(
                "tools",
                format!("tool profile must be default or full; got {s:?}"),
            )),
        }
    }
}

/// What the server tells the client at initialize.
pub const INSTRUCTIONS: &str = "memdir is long-term memory that persists across sessions, stored as plain files on this machine.
Two kinds of memory:
- Session memory: chunks of past conversations. Find them with memory_search {query} (every hit comes with neighbouring chunks as context); list sessions with memory_overview {days}; read one page by page with memory_fetch {session_id, position}; save new chunks with memory_ingest {session_id, content}.
- Curated state: named JSON documents called categories (e.g. base, projects). memory_list shows them; memory_read {category} returns one; memory_write {category, data, merge: true} updates keys (null deletes a key); pass expected_hash from the last read to avoid overwriting someone else's change. Logs grow with memory_append {category, data}.
Start a session with memory_list and memory_read of the categories you need; search before asking the user for something they may have said before.";

struct ToolDef {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    schema: fn() -> Value,
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    full_only: bool,
}

fn s(desc: &str) -> Value {
    json!({"type": "string", "description": desc})
}
fn int(desc: &str, min: i64, max: i64) -> Value {
    json!({"type": "integer", "minimum": min, "maximum": max, "description": desc})
}
fn obj(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

fn search_schema() -> Value {
    obj(
        json!({
            "query": s("Words to look for, or an exact identifier/error/path; wrap in double quotes for an exact phrase."),
            "limit": int("Results to return (default 5).", 1, 1000),
            "mode": {"type": "string", "enum": ["auto", "bm25", "exact"], "description": "auto (default) tries exact for identifiers and quoted phrases, else BM25."},
            "project": s("Only chunks of this project."),
            "session_id": s("Only chunks of this session."),
            "category": s("Only this category."),
            "kind": {"type": "string", "enum": ["chunk", "category"], "description": "Only session chunks or only categories."},
            "since": s("Only items at or after this time (RFC 3339 or YYYY-MM-DD)."),
            "until": s("Only items at or before this time."),
            "context": int("Neighbouring chunks per side in each hit's context (default 3).", 0, 20),
            "full": {"type": "boolean", "description": "Full content instead of 500-character excerpts."}
        }),
        &["query"],
    )
}

const TOOLS: &[ToolDef] = &[
    ToolDef {
        name: "memory_search",
        title: "Search memory",
        description: "Search past sessions and categories. Returns {results, engine}; each chunk hit has session_id, position, content, score and context (neighbouring chunks).",
        schema: search_schema,
        read_only: true,
        destructive: false,
        idempotent: true,
        full_only: false,
    },
    ToolDef {
        name: "memory_fetch",
        title: "Read a session",
        description: "Read one session's chunks in order, a page at a time. Use next_position from the result to continue.",
        schema: || {
            obj(
                json!({"session_id": s("The session to read."), "position": int("First position (default 0).", 0, i64::MAX), "limit": int("Chunks per page (default 20).", 1, 1000)}),
                &["session_id"],
            )
        },
        read_only: true,
        destructive: false,
        idempotent: true,
        full_only: false,
    },
    ToolDef {
        name: "memory_overview",
        title: "List sessions",
        description: "The session catalog, newest first: id, title, project, message_count, start_time, last_active.",
        schema: || {
            obj(
                json!({"days": int("Only sessions active in the last N days (default 7; 0 = all).", 0, 36500), "project": s("Only this project."), "offset": int("Skip this many sessions.", 0, i64::MAX), "limit": int("Sessions per page (default 50).", 1, 1000)}),
                &[],
            )
        },
        read_only: true,
        destructive: false,
        idempotent: true,
        full_only: false,
    },
    ToolDef {
        name: "memory_ingest",
        title: "Save to session memory",
        description: "Save a chunk (a message, note or paragraph) to a session: {session_id, content}. For many at once pass chunks: [{session_id, content, ...}] instead. Returns the position of each.",
        schema: || {
            obj(
                json!({
                    "session_id": s("Session to append to (any string, e.g. a UUID)."),
                    "content": s("The text to remember."),
                    "project": s("Optional project name, for filtering."),
                    "metadata": {"type": "object", "description": "Optional free-form JSON object (e.g. {\"role\": \"user\"})."},
                    "chunks": {"type": "array", "description": "A batch, saved all or nothing.", "items": {"type": "object", "properties": {"session_id": {"type": "string"}, "content": {"type": "string"}, "project": {"type": "string"}, "metadata": {"type": "object"}}, "required": ["session_id", "content"]}}
                }),
                &[],
            )
        },
        read_only: false,
        destructive: false,
        idempotent: false,
        full_only: false,
    },
    ToolDef {
        name: "memory_read",
        title: "Read a category",
        description: "Read a category by its name (not a key inside it). Returns {data, meta: {hash, version, updated_at, updated_by, size_bytes}}.",
        schema: || {
            obj(
                json!({"category": s("Category name, e.g. base. memory_list shows them."), "fields": {"type": ["string", "array"], "items": {"type": "string"}, "description": "Top-level keys to return, comma-separated or a list (default all)."}, "version": {"type": ["integer", "string"], "description": "An old version number or id from memory_history."}}),
                &["category"],
            )
        },
        read_only: true,
        destructive: false,
        idempotent: true,
        full_only: false,
    },
    ToolDef {
        name: "memory_write",
        title: "Write a category",
        description: "Create or change a category. merge: true updates only the given top-level keys (null deletes a key); otherwise data replaces the whole category. Pass expected_hash from memory_read to fail instead of overwriting a concurrent change (\"absent\": create only).",
        schema: || {
            obj(
                json!({"category": s("Category name."), "data": {"type": "object", "description": "JSON object to write or merge."}, "merge": {"type": "boolean", "description": "Merge keys instead of replacing (default false)."}, "expected_hash": s("Hash the category must have now, or \"absent\"."), "reason": s("Why, kept in history.")}),
                &["category", "data"],
            )
        },
        read_only: false,
        destructive: false,
        idempotent: true,
        full_only: false,
    },
    ToolDef {
        name: "memory_append",
        title: "Append to a log",
        description: "Append an entry to a log category (created if missing), keeping the newest max_entries (default 200) and entries within max_age_days of the newest.",
        schema: || {
            obj(
                json!({"category": s("Log name."), "data": {"type": "object", "description": "The entry."}, "max_entries": int("Entries to keep.", 1, 100000), "max_age_days": int("Drop entries older than this, counted from the newest.", 1, 36500), "reason": s("Why, kept in history.")}),
                &["category", "data"],
            )
        },
        read_only: false,
        destructive: false,
        idempotent: false,
        full_only: false,
    },
    ToolDef {
        name: "memory_list",
        title: "List categories",
        description: "Every category with kind, hash, version, size, updated_at and updated_by.",
        schema: || obj(json!({}), &[]),
        read_only: true,
        destructive: false,
        idempotent: true,
        full_only: false,
    },
    ToolDef {
        name: "memory_history",
        title: "Category history",
        description: "Versions of a category, newest first (version, id, hash, op, actor, reason, timestamp). With diff_from and/or diff_to, also a unified diff between two versions.",
        schema: || {
            obj(
                json!({"category": s("Category name."), "limit": int("Versions to list (default 20).", 1, 1000), "diff_from": {"type": ["integer", "string"], "description": "Diff from this version."}, "diff_to": {"type": ["integer", "string"], "description": "Diff to this version (default newest)."}}),
                &["category"],
            )
        },
        read_only: true,
        destructive: false,
        idempotent: true,
        full_only: false,
    },
    ToolDef {
        name: "memory_delete",
        title: "Delete a category",
        description: "Delete a category. Its history is kept and memory_restore can bring it back.",
        schema: || {
            obj(
                json!({"category": s("Category name."), "expected_hash": s("Delete only if the category has this hash."), "reason": s("Why, kept in history.")}),
                &["category"],
            )
        },
        read_only: false,
        destructive: true,
        idempotent: false,
        full_only: false,
    },
    ToolDef {
        name: "memory_status",
        title: "Memory status",
        description: "Counts of sessions, chunks and categories, sizes, and the health of store and index.",
        schema: || obj(json!({}), &[]),
        read_only: true,
        destructive: false,
        idempotent: true,
        full_only: false,
    },
    ToolDef {
        name: "memory_search_semantic",
        title: "Semantic search",
        description: "Search by meaning. Until an embeddings endpoint is configured this is keyword search, reported as engine keyword-fallback.",
        schema: || {
            obj(
                json!({"query": s("What to look for."), "limit": int("Results (default 5).", 1, 1000)}),
                &["query"],
            )
        },
        read_only: true,
        destructive: false,
        idempotent: true,
        full_only: true,
    },
    ToolDef {
        name: "memory_context",
        title: "Read several categories",
        description: "Read several categories at once, for session warm-up. Missing ones are listed, not errors.",
        schema: || {
            obj(
                json!({"categories": {"type": "array", "items": {"type": "string"}, "description": "Category names."}, "fields": s("Comma-separated top-level keys.")}),
                &["categories"],
            )
        },
        read_only: true,
        destructive: false,
        idempotent: true,
        full_only: true,
    },
    ToolDef {
        name: "memory_delta",
        title: "Changed since",
        description: "Whether a category changed since a hash: unchanged, changed (with data) or deleted.",
        schema: || {
            obj(
                json!({"category": s("Category name."), "since_hash": s("The hash you last saw.")}),
                &["category", "since_hash"],
            )
        },
        read_only: true,
        destructive: false,
        idempotent: true,
        full_only: true,
    },
    ToolDef {
        name: "memory_compact",
        title: "Compact history",
        description: "Trim history to the newest keep_versions versions per category (current versions and delete tombstones stay).",
        schema: || {
            obj(
                json!({"category": s("One category (default all)."), "keep_versions": int("Versions to keep (default 5).", 1, 100000)}),
                &[],
            )
        },
        read_only: false,
        destructive: true,
        idempotent: true,
        full_only: true,
    },
    ToolDef {
        name: "memory_restore",
        title: "Restore a version",
        description: "Restore an old version of a category (also after a delete) as a new version.",
        schema: || {
            obj(
                json!({"category": s("Category name."), "version": {"type": ["integer", "string"], "description": "Version number or id from memory_history."}, "expected_hash": s("Restore only if the category has this hash."), "reason": s("Why.")}),
                &["category", "version"],
            )
        },
        read_only: false,
        destructive: false,
        idempotent: false,
        full_only: true,
    },
    ToolDef {
        name: "memory_doctor",
        title: "Health report",
        description: "Paths, configuration source, and a full check of files, history, ledger and index.",
        schema: || obj(json!({}), &[]),
        read_only: true,
        destructive: false,
        idempotent: true,
        full_only: true,
    },
];

fn tool(d: &ToolDef) -> Tool {
    let schema: JsonObject = match (d.schema)() {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    };
    Tool::new(d.name, d.description, Arc::new(schema))
        .with_title(d.title)
        .with_annotations(
            ToolAnnotations::with_title(d.title)
                .read_only(d.read_only)
                .destructive(d.destructive)
                .idempotent(d.idempotent)
                .open_world(false),
        )
}

/// The tools of a profile.
pub fn tools(profile: Profile) -> Vec<Tool> {
    TOOLS
        .iter()
        .filter(|d| profile == Profile::Full || !d.full_only)
        .map(tool)
        .collect()
}

/// The MCP server.
pub struct Server {
    memdir: Arc<Memdir>,
    profile: Profile,
}

fn args<T: for<'de> Deserialize<'de>>(a: &JsonObject) -> Result<T> {
    service::from_args(Value::Object(a.clone()))
}

fn get_str<'a>(a: &'a JsonObject, k: &str) -> Result<Option<&'a str>> {
    match a.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(Error::invalid(
            k,
            format!("{k} must be a string, got {}", service::type_name(v)),
        )),
    }
}

fn get_u64(a: &JsonObject, k: &str, default: u64) -> Result<u64> {
    match a.get(k) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v.as_u64().ok_or_else(|| {
            Error::invalid(k, format!("{k} must be a non-negative integer, got {v}"))
        }),
    }
}

fn version_ref(a: &JsonObject, k: &str) -> Result<Option<VersionRef>> {
    match a.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(|n| Some(VersionRef::Ordinal(n)))
            .ok_or_else(|| Error::invalid(k, format!("{k} must be a version number or id"))),
        Some(Value::String(s)) => Ok(Some(VersionRef::parse(s))),
        Some(v) => Err(Error::invalid(
            k,
            format!(
                "{k} must be a version number or id, got {}",
                service::type_name(v)
            ),
        )),
    }
}

fn reject_unknown(a: &JsonObject, known: &[&str]) -> Result<()> {
    match a.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(Error::invalid(
            k,
            format!(
                "unknown argument {k:?}; expected one of: {}",
                known.join(", ")
            ),
        )),
        None => Ok(()),
    }
}

impl Server {
    /// A server over `memdir`.
    pub fn new(memdir: Memdir, profile: Profile) -> Server {
        Server::shared(Arc::new(memdir), profile)
    }

    /// A server over a store shared with other sessions (MCP over HTTP makes one per session).
    pub fn shared(memdir: Arc<Memdir>, profile: Profile) -> Server {
        Server { memdir, profile }
    }

    /// Whether `name` is a tool of `profile`.
    pub fn offers(profile: Profile, name: &str) -> bool {
        TOOLS
            .iter()
            .any(|d| d.name == name && (profile == Profile::Full || !d.full_only))
    }

    /// Runs one tool call (blocking).
    pub fn call(memdir: &Memdir, name: &str, a: &JsonObject) -> Result<Value> {
        match name {
            "memory_search" => memdir.search(&args::<SearchRequest>(a)?),
            "memory_search_semantic" => {
                reject_unknown(a, &["query", "limit"])?;
                let mut req = SearchRequest::new(
                    get_str(a, "query")?
                        .ok_or_else(|| Error::invalid("query", "query is required"))?,
                );
                req.limit = get_u64(a, "limit", 5)? as usize;
                req.mode = Some("bm25".into());
                let mut v = memdir.search(&req)?;
                if v["engine"] != "empty" {
                    v["engine"] = json!("keyword-fallback");
                    v["note"] = json!(
                        "no embeddings endpoint is configured: answered by BM25 keyword search"
                    );
                }
                Ok(v)
            }
            "memory_fetch" => {
                reject_unknown(a, &["session_id", "position", "limit"])?;
                let id = get_str(a, "session_id")?
                    .ok_or_else(|| Error::invalid("session_id", "session_id is required"))?;
                memdir.fetch(
                    id,
                    get_u64(a, "position", 0)?,
                    get_u64(a, "limit", 20)? as usize,
                )
            }
            "memory_overview" => {
                let mut req: OverviewRequest = args(a)?;
                if !a.contains_key("days") {
                    req.days = Some(7);
                }
                memdir.overview(&req)
            }
            "memory_ingest" => {
                if let Some(chunks) = a.get("chunks") {
                    reject_unknown(a, &["chunks"])?;
                    let chunks: Vec<NewChunk> =
                        service::from_args(chunks.clone()).map_err(|e| {
                            let inner = e
                                .details
                                .get("field")
                                .and_then(Value::as_str)
                                .map(str::to_string);
                            let field = match inner {
                                Some(f) => format!(
                                    "chunks{}{f}",
                                    if f.starts_with('[') { "" } else { "." }
                                ),
                                None => "chunks".to_string(),
                            };
                            e.field(&field)
                        })?;
                    memdir.ingest(&chunks)
                } else {
                    memdir.ingest_one(args::<NewChunk>(a)?)
                }
            }
            "memory_read" => memdir.read(&args::<ReadRequest>(a)?),
            "memory_write" => memdir.write(&args::<WriteRequest>(a)?),
            "memory_append" => memdir.append(&args::<AppendRequest>(a)?),
            "memory_list" => {
                reject_unknown(a, &[])?;
                memdir.list()
            }
            "memory_history" => {
                reject_unknown(a, &["category", "limit", "diff_from", "diff_to"])?;
                let cat = get_str(a, "category")?
                    .ok_or_else(|| Error::invalid("category", "category is required"))?;
                let mut v = memdir.history(cat, get_u64(a, "limit", 20)? as usize)?;
                let (from, to) = (version_ref(a, "diff_from")?, version_ref(a, "diff_to")?);
                if from.is_some() || to.is_some() {
                    v["diff"] = memdir.diff(cat, from.as_ref(), to.as_ref())?;
                }
                Ok(v)
            }
            "memory_delete" => {
                reject_unknown(a, &["category", "expected_hash", "reason"])?;
                let cat = get_str(a, "category")?
                    .ok_or_else(|| Error::invalid("category", "category is required"))?;
                memdir.delete(cat, get_str(a, "expected_hash")?, get_str(a, "reason")?)
            }
            // Not a tool (memory_history diffs for MCP); the REST API's diff endpoint.
            "memory_diff" => {
                reject_unknown(a, &["category", "from", "to"])?;
                let cat = get_str(a, "category")?
                    .ok_or_else(|| Error::invalid("category", "category is required"))?;
                memdir.diff(
                    cat,
                    version_ref(a, "from")?.as_ref(),
                    version_ref(a, "to")?.as_ref(),
                )
            }
            "memory_restore" => {
                reject_unknown(a, &["category", "version", "expected_hash", "reason"])?;
                let cat = get_str(a, "category")?
                    .ok_or_else(|| Error::invalid("category", "category is required"))?;
                let v = version_ref(a, "version")?
                    .ok_or_else(|| Error::invalid("version", "version is required"))?;
                memdir.restore(cat, &v, get_str(a, "expected_hash")?, get_str(a, "reason")?)
            }
            "memory_status" => {
                reject_unknown(a, &[])?;
                memdir.status()
            }
            "memory_context" => {
                reject_unknown(a, &["categories", "fields"])?;
                let cats: Vec<String> =
                    service::from_args(a.get("categories").cloned().unwrap_or(Value::Null))
                        .map_err(|e| e.field("categories"))?;
                let fields = get_str(a, "fields")?.map(|f| FieldList::Csv(f.to_string()));
                memdir.context(&cats, fields.as_ref())
            }
            "memory_delta" => {
                reject_unknown(a, &["category", "since_hash"])?;
                let cat = get_str(a, "category")?
                    .ok_or_else(|| Error::invalid("category", "category is required"))?;
                let since = get_str(a, "since_hash")?
                    .ok_or_else(|| Error::invalid("since_hash", "since_hash is required"))?;
                memdir.delta(cat, since)
            }
            "memory_compact" => {
                reject_unknown(a, &["category", "keep_versions"])?;
                memdir.compact(
                    get_str(a, "category")?,
                    get_u64(a, "keep_versions", 5)? as usize,
                )
            }
            "memory_doctor" => {
                reject_unknown(a, &[])?;
                Ok(json!({
                    "dir": memdir.layout().root.display().to_string(),
                    "dir_source": if std::env::var("MEMDIR_DIR").is_ok_and(|v| !v.is_empty()) { "MEMDIR_DIR" } else { "--dir or default" },
                    "actor": memdir.actor(),
                    "version": env!("CARGO_PKG_VERSION"),
                    "status": memdir.status()?,
                    "checks": memdir.verify()?,
                }))
            }
            other => Err(Error::new(
                ErrorKind::NotFound,
                format!("unknown tool {other}"),
            )),
        }
    }
}

fn tool_result(r: Result<Value>) -> CallToolResult {
    match r {
        Ok(v) => {
            let text = serde_json::to_string(&v).unwrap_or_default();
            let mut res = CallToolResult::success(vec![ContentBlock::text(text)]);
            res.structured_content = Some(if v.is_object() {
                v
            } else {
                json!({"result": v})
            });
            res
        }
        Err(e) => {
            let body = json!({"error": e.to_json()});
            let mut res = CallToolResult::error(vec![ContentBlock::text(
                serde_json::to_string(&body).unwrap_or_default(),
            )]);
            res.structured_content = Some(body);
            res
        }
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("memdir", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools(self.profile)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let known = Server::offers(self.profile, &name);
        if !known {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {name}"),
                Some(json!({"tool": name})),
            ));
        }
        let a = request.arguments.unwrap_or_default();
        let memdir = self.memdir.clone();
        if let Err(e) = self.memdir.ensure_started() {
            return Ok(tool_result(Err(e)).into());
        }
        let out = tokio::task::spawn_blocking(move || Server::call(&memdir, &name, &a))
            .await
            .unwrap_or_else(|e| Err(Error::internal(format!("tool call panicked: {e}"))));
        Ok(tool_result(out).into())
    }
}

/// Serves MCP over stdio until the client closes stdin.
pub fn serve_stdio(memdir: Memdir, profile: Profile) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::internal(format!("runtime: {e}")))?;
    rt.block_on(async move {
        let server = Server::new(memdir, profile);
        let running = match server.serve(rmcp::transport::stdio()).await {
            Ok(r) => r,
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
            Err(e) => {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!("MCP handshake failed: {e}"),
                ));
            }
        };
        running
            .waiting()
            .await
            .map_err(|e| Error::internal(format!("MCP server: {e}")))?;
        Ok(())
    })?;
    // stdin reads block in a thread that cannot be cancelled; the client is gone, so exit now.
    Ok(())
}
