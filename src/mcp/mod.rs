//! MCP over stdio, on the official `rmcp` SDK.
//!
//! Architecture Invariant: this is the only module that knows MCP. Its tools, their input and
//! output schemas and annotations come from the operation table ([`memdir_engine::ops`]); a
//! call runs [`ops::call`] and answers its JSON as text and as `structuredContent`, or maps
//! [`Error`]s to tool errors (`isError: true` with `{code, message, hints, ...}`); JSON-RPC
//! errors are kept for unknown tools and malformed requests. Resources ([`resource`]: sessions,
//! chunks, categories and their versions at `memdir://` URIs) and prompts ([`prompt`]) reach
//! the engine the same way, through [`ops::call`] with the request's caller, so access control
//! applies to them as to the tools. Initialize does no store or index work, so it answers at
//! once on any store size.
//!
//! Over stdio, memdir reads the lines itself instead of through rmcp's transport, which drops
//! an over-long or unparsable line without an answer: every line gets an answer, lines are at
//! most [`MAX_MESSAGE_BYTES`] long (enough for the largest ingest batch), and a tool call whose
//! arguments hold an integer that would lose digits is refused as the CLI refuses it.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    GetPromptRequestParams, GetPromptResponse, Implementation, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWriteExt};

use memdir_api::error::{Error, ErrorKind, Result};
use memdir_api::jsontext::*;
use memdir_engine::acl::Caller;
pub use memdir_engine::ops::Profile;
use memdir_engine::ops::{self, Op};
use memdir_engine::service::{self, Memdir};

mod prompt;
mod resource;
mod watch;

/// What the server tells the client at initialize.
pub const INSTRUCTIONS: &str = "memdir is long-term memory that persists across sessions, stored as plain files on this machine.
Two kinds of memory:
- Session memory: chunks of past conversations. Find them with memory_search {query} (every hit comes with neighbouring chunks as context); list sessions with memory_overview {days}; read one page by page with memory_fetch {session_id, position}; save new chunks with memory_ingest {session_id, content}.
- Curated state: named JSON documents called categories (e.g. base, projects). memory_list shows them; memory_read {category} returns one; memory_write {category, data, merge: true} updates keys (null deletes a key); pass expected_hash from the last read to avoid overwriting someone else's change. Logs grow with memory_append {category, data}.
Start a session with memory_list and memory_read of the categories you need; search before asking the user for something they may have said before.";

fn tool(op: &Op, t: ops::Tool, profile: Profile) -> Tool {
    // The spec gives destructiveHint and idempotentHint meaning only for a tool that is not
    // read-only: a read-only tool leaves them out of every listing.
    let mut annotations = ToolAnnotations::new()
        .read_only(op.read_only)
        .open_world(false);
    if !op.read_only {
        annotations = annotations
            .destructive(op.destructive)
            .idempotent(op.idempotent);
    }
    let tool = Tool::new(t.name, op.description, Arc::new(ops::input_schema(op)))
        .with_title(t.title)
        // The title is the tool's own (MCP 2025-06-18); the annotations' copy of it, which
        // older clients read, would only repeat it in every listing.
        .with_annotations(annotations);
    // Output schemas would triple the default listing (about 25,000 characters for eleven
    // tools, against a budget of 10,000), and models do not need them to read the answers:
    // the default profile answers with structured content but lists no schema.
    let tool = if APP_TOOLS.contains(&t.name) {
        tool.with_meta(app_meta())
    } else {
        tool
    };
    match profile {
        Profile::Full => tool.with_raw_output_schema(Arc::new(output_schema(op))),
        Profile::Default | Profile::MemoryTool => tool,
    }
}

/// The tools whose results the viewer app renders (MCP Apps: a host that supports the
/// extension shows the app beside their result).
const APP_TOOLS: [&str; 3] = ["memory_search", "memory_history", "memory_overview"];

/// `_meta` of a tool the viewer app renders: `ui.resourceUri` (the extension's flat
/// `ui/resourceUri` key is deprecated, and the default listing has no room to repeat it).
fn app_meta() -> rmcp::model::MetaObject {
    let mut meta = rmcp::model::MetaObject::new();
    meta.insert("ui".into(), json!({"resourceUri": resource::VIEWER_URI}));
    meta
}

/// A tool's output schema: its operation's response schema as the JSON object MCP requires
/// of both the schema and the structured content.
///
/// A response that is an object, or one of several objects (`ingest`: one chunk or a batch),
/// is its own schema, marked `type: object`. Any other response (no operation answers one
/// today) is wrapped as `{"result": ...}`, as the spec suggests for a tool whose result is not
/// an object, and [`structured`] wraps its values alike.
fn output_schema(op: &Op) -> JsonObject {
    let schema = ops::output_schema(op);
    let object = |s: &Value| s.get("type") == Some(&json!("object"));
    let alternatives = ["anyOf", "oneOf"]
        .iter()
        .find_map(|k| schema.get(*k).and_then(Value::as_array));
    match schema {
        Value::Object(mut m)
            if object(&schema) || alternatives.is_some_and(|a| a.iter().all(object)) =>
        {
            m.insert("type".into(), json!("object"));
            m
        }
        other => json!({"type": "object", "properties": {"result": other}, "required": ["result"]})
            .as_object()
            .cloned()
            .expect("invariant: an object literal"),
    }
}

/// The structured content of an answer: the answer itself when it is an object (every
/// operation's is), else `{"result": ...}` as [`output_schema`] says.
fn structured(v: Value) -> Value {
    if v.is_object() {
        v
    } else {
        json!({"result": v})
    }
}

/// The tools of a profile.
pub fn tools(profile: Profile) -> Vec<Tool> {
    ops::tools(profile)
        .into_iter()
        .map(|(op, t)| tool(op, t, profile))
        .collect()
}

/// Finds the caller of a request in its extensions (MCP over HTTP: the device its token maps
/// to, put there by the HTTP guard).
pub type CallerOf = fn(&rmcp::model::Extensions) -> Option<Caller>;

/// The MCP server.
pub struct Server {
    memdir: Arc<Memdir>,
    profile: Profile,
    /// Who calls: over stdio, the configured device.
    caller: Caller,
    /// Over HTTP, each request's caller; a request without one is refused.
    caller_of: Option<CallerOf>,
    /// This connection's `resources/subscribe` subscriptions; a task polls them while any
    /// are left (see [`watch`]).
    watcher: Arc<std::sync::Mutex<watch::Watcher>>,
    /// What this session's memory-tool `view`s showed: its edits of a viewed file are
    /// compare-and-swaps against them.
    views: Arc<memdir_engine::acl::Views>,
}

impl Server {
    /// A server over `memdir` for one caller (stdio).
    pub fn new(memdir: Arc<Memdir>, profile: Profile, caller: Caller) -> Server {
        Server {
            memdir,
            profile,
            caller,
            caller_of: None,
            watcher: Arc::default(),
            views: Arc::default(),
        }
    }

    /// A server over a store shared with other sessions (MCP over HTTP makes one per session),
    /// whose requests carry their caller.
    pub fn shared(memdir: Arc<Memdir>, profile: Profile, caller_of: CallerOf) -> Server {
        Server {
            memdir,
            profile,
            caller: Caller::new(String::new(), None),
            caller_of: Some(caller_of),
            watcher: Arc::default(),
            views: Arc::default(),
        }
    }

    /// Whether `name` is a tool of `profile`.
    pub fn offers(profile: Profile, name: &str) -> bool {
        ops::find_tool(name, profile).is_some()
    }
}

/// A tool's answer: its JSON as the text content, and the same value as `structuredContent`,
/// valid against the tool's output schema.
///
/// The text is what a client that reads only text hands its model, so it stays the lean JSON
/// of the answer, serialized once; the structured copy is for clients and hosts that validate
/// or render a result by its schema (the spec asks a tool that sends structured content to send
/// the same JSON as text). A tool error carries only its text `{"error": {code, message,
/// hints}}`: the output schema describes successful answers.
fn tool_result(r: Result<Value>) -> CallToolResult {
    match r.map_err(|e| ops::for_surface(e, ops::Surface::Mcp)) {
        Ok(v) => {
            let text = serde_json::to_string(&v).unwrap_or_default();
            let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
            result.structured_content = Some(structured(v));
            result
        }
        Err(e) => {
            let body = json!({"error": e.to_json()});
            CallToolResult::error(vec![ContentBlock::text(
                serde_json::to_string(&body).unwrap_or_default(),
            )])
        }
    }
}

/// Tools whose answers are a protocol's strings (the memory tool's), not memdir's JSON.
const PROTOCOL_TOOLS: [&str; 1] = ["memory"];

/// The answer of a protocol tool: its result string as the text, as the protocol's own
/// implementations give it (and `{result}` structured); an error is its message alone.
fn protocol_result(r: Result<Value>) -> CallToolResult {
    match r {
        Ok(v) => {
            let text = v["result"].as_str().unwrap_or_default().to_string();
            let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
            result.structured_content = Some(structured(v));
            result
        }
        Err(e) => CallToolResult::error(vec![ContentBlock::text(e.message)]),
    }
}

impl Server {
    /// The caller of a request: over stdio the configured device, over HTTP the one its token
    /// maps to.
    fn caller(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> std::result::Result<Caller, ErrorData> {
        let caller = match self.caller_of {
            None => self.caller.clone(),
            Some(of) => of(&context.extensions).ok_or_else(|| {
                ErrorData::internal_error(
                    "invariant: an HTTP request reached the server without its caller",
                    None,
                )
            })?,
        };
        Ok(caller.with_views(self.views.clone()))
    }

    /// Runs `f` on the store for the request's caller, off the async runtime.
    async fn run<T: Send + 'static>(
        &self,
        context: &RequestContext<RoleServer>,
        f: impl FnOnce(&Memdir, &Caller) -> Result<T> + Send + 'static,
    ) -> std::result::Result<Result<T>, ErrorData> {
        let caller = self.caller(context)?;
        if let Err(e) = self.memdir.ensure_started() {
            return Ok(Err(e));
        }
        let memdir = self.memdir.clone();
        Ok(tokio::task::spawn_blocking(move || f(&memdir, &caller))
            .await
            .unwrap_or_else(|e| Err(Error::internal(format!("a request panicked: {e}")))))
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_completions()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_tools()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("memdir", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        Ok(cached(ListToolsResult::with_all_items(tools(self.profile))))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let Some(op) = ops::find_tool(&name, self.profile) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {name}"),
                Some(json!({"tool": name})),
            ));
        };
        let a = Value::Object(request.arguments.unwrap_or_default());
        let out = self
            .run(&context, move |m, c| ops::call(m, c, op, a))
            .await?;
        if !op.read_only && out.is_ok() {
            memdir_engine::service::catch_up_soon(&self.memdir);
        }
        if PROTOCOL_TOOLS.contains(&name.as_str()) {
            return Ok(protocol_result(out).into());
        }
        Ok(tool_result(out).into())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourcesResult, ErrorData> {
        let cursor = request.and_then(|r| r.cursor);
        let out = self
            .run(&context, move |m, c| {
                resource::list(m, c, cursor.as_deref())
            })
            .await?;
        out.map_err(resource::rpc_error)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourceTemplatesResult, ErrorData> {
        Ok(cached(resource::templates()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let out = self
            .run(&context, move |m, c| resource::read(m, c, &uri))
            .await?;
        out.map(Into::into).map_err(resource::rpc_error)
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<(), ErrorData> {
        let watcher = self.watcher.clone();
        let uri = request.uri;
        let first = self
            .run(&context, move |m, c| {
                let mut w = watcher.lock().unwrap_or_else(|p| p.into_inner());
                w.subscribe(m, c, &uri)?;
                // One polling task per connection: start it unless it runs.
                Ok(!std::mem::replace(&mut w.polling, true))
            })
            .await?
            .map_err(resource::rpc_error)?;
        if first {
            tokio::spawn(poll_subscriptions(
                self.memdir.clone(),
                self.watcher.clone(),
                context.peer.clone(),
            ));
        }
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<(), ErrorData> {
        let mut w = self.watcher.lock().unwrap_or_else(|p| p.into_inner());
        w.unsubscribe(&request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let uris: Vec<String> = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|u| watch::watchable(u))
            .cloned()
            .collect();
        Some(
            rmcp::model::SubscriptionFilter::builder()
                .resource_subscriptions(uris)
                .build(),
        )
    }

    async fn listen(
        &self,
        context: rmcp::service::SubscriptionContext,
    ) -> std::result::Result<(), ErrorData> {
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let watcher = Arc::new(std::sync::Mutex::new(watch::Watcher::default()));
        let w = watcher.clone();
        // A URI the caller may not read is accepted (the acknowledgement says only what the
        // server can watch) and never announced.
        self.run(context.request_context(), move |m, c| {
            let mut w = w.lock().unwrap_or_else(|p| p.into_inner());
            for at in &uris {
                let _ = w.subscribe(m, c, at);
            }
            Ok(())
        })
        .await?
        .map_err(resource::rpc_error)?;
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                () = tokio::time::sleep(watch::POLL) => {}
            }
            for at in changed(&self.memdir, &watcher).await {
                if context.sink().notify_resource_updated(at).await.is_err() {
                    return Ok(());
                }
            }
        }
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<rmcp::model::CompleteResult, ErrorData> {
        let rmcp::model::CompleteRequestParams {
            r#ref,
            argument,
            context: known,
            ..
        } = request;
        let known = known.and_then(|k| k.arguments).unwrap_or_default();
        let out = self
            .run(&context, move |m, c| {
                resource::complete(m, c, &r#ref, &argument.name, &argument.value, &known)
            })
            .await?;
        out.map(rmcp::model::CompleteResult::new)
            .map_err(resource::rpc_error)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListPromptsResult, ErrorData> {
        Ok(cached(ListPromptsResult::with_all_items(prompt::list())))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<GetPromptResponse, ErrorData> {
        prompt::get(&request.name, request.arguments.as_ref())
            .map(Into::into)
            .map_err(resource::rpc_error)
    }
}

/// How long a client may keep the tool, prompt and template lists: they are fixed while a
/// server runs (an hour, then a client asks again, e.g. after an upgrade).
const LISTS_TTL_MS: u64 = 3_600_000;

/// A list that is the same for every caller while the server runs, marked so (2026-07-28
/// caching hints). The resource list changes with every write and with the caller's access
/// list, so it carries no such mark (rmcp's default: not cached, private).
trait Cached {
    fn hints(&mut self) -> (&mut Option<u64>, &mut Option<rmcp::model::CacheScope>);
}

macro_rules! cached_list {
    ($($t:ty),*) => {$(
        impl Cached for $t {
            fn hints(&mut self) -> (&mut Option<u64>, &mut Option<rmcp::model::CacheScope>) {
                (&mut self.ttl_ms, &mut self.cache_scope)
            }
        }
    )*};
}
cached_list!(
    ListToolsResult,
    ListPromptsResult,
    ListResourceTemplatesResult
);

fn cached<T: Cached>(mut list: T) -> T {
    let (ttl, scope) = list.hints();
    *ttl = Some(LISTS_TTL_MS);
    *scope = Some(rmcp::model::CacheScope::Public);
    list
}

/// The URIs among `watcher`'s subscriptions whose files changed (the look runs off the
/// async runtime: it stats files).
async fn changed(
    memdir: &Arc<Memdir>,
    watcher: &Arc<std::sync::Mutex<watch::Watcher>>,
) -> Vec<String> {
    let (m, w) = (memdir.clone(), watcher.clone());
    tokio::task::spawn_blocking(move || w.lock().unwrap_or_else(|p| p.into_inner()).changed(&m))
        .await
        .unwrap_or_default()
}

/// Announces changes to a connection's `resources/subscribe` subscriptions until none are
/// left or the client is gone.
async fn poll_subscriptions(
    memdir: Arc<Memdir>,
    watcher: Arc<std::sync::Mutex<watch::Watcher>>,
    peer: rmcp::Peer<RoleServer>,
) {
    loop {
        tokio::time::sleep(watch::POLL).await;
        if peer.is_transport_closed() {
            return;
        }
        for at in changed(&memdir, &watcher).await {
            let note = rmcp::model::ResourceUpdatedNotificationParam::new(at);
            if peer.notify_resource_updated(note).await.is_err() {
                return;
            }
        }
        let mut w = watcher.lock().unwrap_or_else(|p| p.into_inner());
        if w.is_empty() {
            // Under this lock, so the next subscribe sees it and starts a new task.
            w.polling = false;
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Stdio framing.
//
// rmcp's own stdio transport drops a line over its cap and a line that is not JSON without a
// word, so a client waits forever for the answer. memdir reads stdin itself: one line is one
// message, at most `MAX_MESSAGE_BYTES` long; every line that cannot become a message gets a
// JSON-RPC error response (or, for a tool call whose arguments would lose digits, a tool error),
// and the server goes on reading. Lines that parse go to rmcp unchanged.

/// The largest JSON-RPC message (one line of stdin, without its newline) the stdio server reads,
/// in bytes.
///
/// Twice the largest ingest batch ([`service::limits::MAX_BATCH_BYTES`], 32 MiB of content),
/// and the same 64 MiB the CLI reads from a file or stdin: a batch at the content limit fits,
/// with room for JSON escaping of ordinary text (a newline or a quote takes two bytes) and the
/// other fields of its chunks. Content made mostly of control characters (six bytes each, as
/// `\u0001`) or batches with large metadata reach this limit first and must be split. A longer
/// line is skipped and answered with a JSON-RPC error (`-32600`, `data.code` `too_large`,
/// carrying the request's `id` when the line names one); the server reads on.
pub const MAX_MESSAGE_BYTES: usize = 2 * service::limits::MAX_BATCH_BYTES;

/// What to do with one line of stdin.
enum Incoming {
    /// Hand it to rmcp.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Answer it here with this JSON-RPC message.
    Reply(Value),
    /// Nothing: an empty line, or a notification (never answered, even when malformed).
    Skip,
}

fn rpc_error(id: Option<Value>, code: ErrorCode, e: &Error) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": {"code": code.0, "message": e.message, "data": e.to_json()},
    })
}

/// A JSON-RPC error response (invalid request) carrying memdir's error as its data: what an MCP
/// transport answers for a message it refuses before rmcp reads it.
pub fn error_reply(id: Option<Value>, e: &Error) -> Value {
    rpc_error(id, ErrorCode::INVALID_REQUEST, e)
}

fn too_large_reply(size: usize, id: Option<Value>) -> Value {
    let e = Error::too_large("message", size, MAX_MESSAGE_BYTES, "bytes")
        .hint("split a large memory_ingest batch into several calls");
    rpc_error(id, ErrorCode::INVALID_REQUEST, &e)
}

/// The JSON-RPC answer memdir gives itself to a message it refuses before rmcp reads it: a
/// tool call whose arguments hold an integer that would lose digits (a tool error `invalid`
/// naming the field), a message nested too deep or not JSON at all (parse error, with the
/// message's id when it names one), a message that is no JSON-RPC request. `None` for a
/// message rmcp should read. Both MCP transports use it, so they refuse alike.
pub fn refuse(message: &[u8]) -> Option<Value> {
    let mut scan = Scan::new(&["params", "arguments"]);
    scan.feed(message);
    scan.finish();
    match classify(message, &scan) {
        Incoming::Reply(v) => Some(v),
        Incoming::Message(_) | Incoming::Skip => None,
    }
}

/// Classifies one whole line (without its newline) and the scan of its bytes.
fn classify(line: &[u8], scan: &Scan) -> Incoming {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Incoming::Skip;
    }
    let err = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        Ok(msg) => {
            if let (Some((path, literal)), Some(id), Some("tools/call")) =
                (&scan.lossy, &scan.id, scan.method.as_deref())
            {
                let result = serde_json::to_value(tool_result(Err(lossy_error(path, literal))))
                    .unwrap_or_default();
                return Incoming::Reply(json!({"jsonrpc": "2.0", "id": id, "result": result}));
            }
            return Incoming::Message(Box::new(msg));
        }
        Err(e) => e,
    };
    match err.classify() {
        serde_json::error::Category::Data => {
            // Well-formed JSON that is not a JSON-RPC message rmcp knows.
            let v: Value = serde_json::from_slice(line).unwrap_or_default();
            let id = v.get("id").filter(|i| i.is_string() || i.is_number());
            if v.is_object() && id.is_none() && v.get("method").is_some() {
                return Incoming::Skip;
            }
            let e = Error::new(
                ErrorKind::Invalid,
                format!("not a valid JSON-RPC request: {err}"),
            );
            Incoming::Reply(rpc_error(id.cloned(), ErrorCode::INVALID_REQUEST, &e))
        }
        _ if scan.max_depth > MAX_JSON_DEPTH => {
            let path = scan.too_deep.clone().unwrap_or_default();
            let field = if path.is_empty() {
                "message".to_string()
            } else {
                path_string(&path[..1])
            };
            let e = Error::invalid(
                &field,
                format!(
                    "{field} is nested more than {MAX_JSON_DEPTH} levels deep; JSON that deep cannot be parsed"
                ),
            );
            Incoming::Reply(rpc_error(scan.id.clone(), ErrorCode::PARSE_ERROR, &e))
        }
        _ => {
            // Not JSON: no id can be trusted (JSON-RPC 2.0 §5: the id is null).
            let e = Error::invalid("message", format!("the message is not valid JSON: {err}"));
            Incoming::Reply(rpc_error(None, ErrorCode::PARSE_ERROR, &e))
        }
    }
}

/// One line of stdin.
enum Frame {
    Line(Vec<u8>, Scan),
    /// Over `max` bytes: the bytes were dropped as they came.
    TooLarge(usize, Scan),
    Eof,
}

/// Reads one line of at most `max` bytes (newline excluded), scanning every byte of it.
async fn next_frame(r: &mut (impl AsyncBufRead + Unpin), max: usize) -> std::io::Result<Frame> {
    let mut line = Vec::new();
    let mut size = 0usize;
    let mut over = false;
    let mut scan = Scan::new(&["params", "arguments"]);
    // Bounded by the input: every pass consumes at least one byte or returns.
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            scan.finish();
            return Ok(match (size, over) {
                (0, _) => Frame::Eof,
                (_, true) => Frame::TooLarge(size, scan),
                // A last line without a newline is still a message.
                (_, false) => Frame::Line(line, scan),
            });
        }
        let newline = buf.iter().position(|b| *b == b'\n');
        let take = newline.unwrap_or(buf.len());
        let piece = &buf[..take];
        scan.feed(piece);
        size += take;
        if !over && size > max {
            over = true;
            line = Vec::new();
        }
        if !over {
            line.extend_from_slice(piece);
        }
        r.consume(take + usize::from(newline.is_some()));
        if newline.is_some() {
            scan.finish();
            return Ok(if over {
                Frame::TooLarge(size, scan)
            } else {
                Frame::Line(line, scan)
            });
        }
    }
}

type Out = Arc<tokio::sync::Mutex<tokio::io::Stdout>>;

/// Writes one message and its newline as one write, so lines never interleave.
async fn write_line(out: &Out, mut line: Vec<u8>) -> std::io::Result<()> {
    line.push(b'\n');
    let mut out = out.lock().await;
    out.write_all(&line).await?;
    out.flush().await
}

/// Reads stdin line by line until it closes: messages go to `tx`, errors are answered on `out`.
async fn read_stdin(
    input: impl AsyncRead + Unpin,
    out: Out,
    tx: tokio::sync::mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
) {
    let mut r = tokio::io::BufReader::with_capacity(256 * 1024, input);
    // Bounded by the input: every pass reads one line, and the loop ends at end of input.
    loop {
        let reply = match next_frame(&mut r, MAX_MESSAGE_BYTES).await {
            Ok(Frame::Eof) | Err(_) => return,
            Ok(Frame::TooLarge(size, scan)) => too_large_reply(size, scan.id),
            Ok(Frame::Line(line, scan)) => match classify(&line, &scan) {
                Incoming::Message(m) => {
                    if tx.send(*m).await.is_err() {
                        return;
                    }
                    continue;
                }
                Incoming::Reply(v) => v,
                Incoming::Skip => continue,
            },
        };
        let bytes = serde_json::to_vec(&reply).expect("invariant: a JSON value serializes");
        if write_line(&out, bytes).await.is_err() {
            return;
        }
    }
}

/// The stdio transport: messages from [`read_stdin`], responses written whole to stdout.
struct StdioTransport {
    incoming: tokio::sync::mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    out: Out,
}

impl Transport<RoleServer> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = std::result::Result<(), Self::Error>> + Send + 'static {
        let out = self.out.clone();
        async move { write_line(&out, serde_json::to_vec(&item)?).await }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> std::result::Result<(), Self::Error> {
        self.incoming.close();
        Ok(())
    }
}

/// Serves MCP over stdio until the client closes stdin.
pub fn serve_stdio(memdir: Memdir, profile: Profile, caller: Caller) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::internal(format!("runtime: {e}")))?;
    let memdir = Arc::new(memdir);
    let kept = memdir.clone();
    let served = rt.block_on(async move {
        let out: Out = Arc::new(tokio::sync::Mutex::new(tokio::io::stdout()));
        // One parsed message waits at a time: a client cannot make the server buffer ahead.
        let (tx, incoming) = tokio::sync::mpsc::channel(1);
        tokio::spawn(read_stdin(tokio::io::stdin(), out.clone(), tx));
        let server = Server::new(memdir.clone(), profile, caller);
        let running = match server.serve(StdioTransport { incoming, out }).await {
            // Connected: the index gets ready while the client lists tools and thinks (after
            // the handshake, so the `initialize` answer does not share the processor with it).
            Ok(r) => {
                memdir_engine::service::warm_up(&memdir);
                r
            }
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
    });
    // stdin reads block in a thread that cannot be cancelled; the client is gone, so do not
    // wait for it.
    rt.shutdown_background();
    // What the index kept in memory goes to disk: the next process need not index it again.
    kept.indexing().land_index();
    served
}

#[cfg(test)]
mod tests {
    use super::*;
    use memdir_api::{ReadRequest, SearchRequest, VersionRef, WriteRequest};

    /// Scans `text` fed in pieces of `step` bytes, so every state crosses a boundary.
    fn scan(text: &str, step: usize) -> Scan {
        let mut s = Scan::new(&["params", "arguments"]);
        for piece in text.as_bytes().chunks(step) {
            s.feed(piece);
        }
        s.finish();
        s
    }

    #[test]
    fn the_scan_finds_the_top_level_id_and_method_wherever_they_are() {
        let text = r#"{"params": {"id": 9, "x": ["id", {"id": 8}]}, "method": "tools/call", "id": "a\"b"}"#;
        for step in [1, 2, 3, 7, 1000] {
            let s = scan(text, step);
            assert_eq!(s.id, Some(json!("a\"b")), "step {step}");
            assert_eq!(s.method.as_deref(), Some("tools/call"));
            assert_eq!(s.max_depth, 4);
            assert!(s.lossy.is_none());
        }
        assert_eq!(scan(r#"{"id": -12, "x": 1}"#, 1).id, Some(json!(-12)));
        assert_eq!(scan(r#"{"id": null}"#, 1).id, None);
        assert_eq!(scan(r#"{"id": {"n": 1}}"#, 1).id, None);
    }

    #[test]
    fn the_scan_finds_integers_outside_64_bits_below_the_arguments_only() {
        let big = "123456789012345678901234567890";
        let text = format!(
            r#"{{"id": 1, "params": {{"n": {big}, "arguments": {{"a": "{big}", "b": [1.5e300, -9223372036854775808, 18446744073709551615, {{"c": {big}}}]}}}}}}"#
        );
        for step in [1, 5, 1000] {
            let s = scan(&text, step);
            let (path, literal) = s.lossy.expect("found");
            assert_eq!(path_string(&path), "b[3].c");
            assert_eq!(literal, big);
        }
        assert!(
            scan(
                r#"{"params": {"arguments": {"n": -9223372036854775809}}}"#,
                4
            )
            .lossy
            .is_some()
        );
        assert!(
            check_integers(br#"{"data": {"x": 1e400, "y": 18446744073709551616}}"#)
                .is_err_and(|e| e.details["field"] == "data" && e.details["path"] == "data.y")
        );
        assert!(check_integers(br#"{"data": [0.1, 1E5, -0, "99999999999999999999"]}"#).is_ok());
    }

    #[test]
    fn the_scan_counts_depth_without_keeping_it() {
        let deep = format!(
            r#"{{"id": 3, "params": {{"arguments": {{"data": {}1{}}}}}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let s = scan(&deep, 4096);
        assert_eq!(s.max_depth, 100_003);
        assert!(s.stack.is_empty());
        assert_eq!(s.id, Some(json!(3)));
        let path = s.too_deep.expect("past the limit");
        assert_eq!(
            path.len(),
            MAX_TRACKED_DEPTH - 2,
            "levels beyond the tracked ones are not kept"
        );
        assert_eq!(path[0], Seg::Key("data".into()));
    }

    #[test]
    fn lines_that_cannot_be_parsed_are_answered() {
        let answer = |line: &str| match classify(line.as_bytes(), &scan(line, 1000)) {
            Incoming::Reply(v) => v,
            Incoming::Message(_) => panic!("{line} was passed on"),
            Incoming::Skip => panic!("{line} was skipped"),
        };
        let r = answer("{not json");
        assert_eq!(
            (r["id"].clone(), r["error"]["code"].clone()),
            (Value::Null, json!(-32700))
        );
        let r = answer(r#"{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": 7}"#);
        assert_eq!(
            (r["id"].clone(), r["error"]["code"].clone()),
            (json!(4), json!(-32600))
        );
        let r = answer(&format!(
            r#"{{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {{"x": {}{}}}}}"#,
            "[".repeat(128),
            "]".repeat(128)
        ));
        assert_eq!(
            (r["id"].clone(), r["error"]["code"].clone()),
            (json!(5), json!(-32700))
        );
        // Exactly as deep as serde_json goes still parses.
        let ok = format!(
            r#"{{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {{"x": {}{}}}}}"#,
            "[".repeat(125),
            "]".repeat(125)
        );
        assert!(matches!(
            classify(ok.as_bytes(), &scan(&ok, 1000)),
            Incoming::Message(_)
        ));
        // Notifications are never answered, and blank lines are nothing.
        for quiet in [
            r#"{"jsonrpc": "2.0", "method": "notifications/x", "params": 1}"#,
            "  \r",
        ] {
            assert!(matches!(
                classify(quiet.as_bytes(), &scan(quiet, 1000)),
                Incoming::Skip
            ));
        }
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_measured_and_skipped() {
        let input = format!("{}\n{{\"id\": 1}}\n{}", "x".repeat(100), "y".repeat(3));
        let mut r = tokio::io::BufReader::with_capacity(7, input.as_bytes());
        assert!(matches!(
            next_frame(&mut r, 10).await,
            Ok(Frame::TooLarge(100, _))
        ));
        assert!(
            matches!(next_frame(&mut r, 10).await, Ok(Frame::Line(l, _)) if l == b"{\"id\": 1}")
        );
        assert!(matches!(next_frame(&mut r, 10).await, Ok(Frame::Line(l, _)) if l == b"yyy"));
        assert!(matches!(next_frame(&mut r, 10).await, Ok(Frame::Eof)));
    }

    #[test]
    fn every_output_schema_is_an_object_without_a_wrapper() {
        for (op, t) in ops::tools(Profile::Full) {
            let s = output_schema(op);
            assert_eq!(s["type"], json!("object"), "{}", t.name);
            // Only a protocol tool answers `{"result": ...}` (its protocol's string, on
            // purpose; docs/tools.md says so): any other response that would is a choice to
            // make on purpose.
            let props = s.get("properties").cloned().unwrap_or_default();
            assert_eq!(
                props.get("result").is_some(),
                PROTOCOL_TOOLS.contains(&t.name),
                "{}",
                t.name
            );
        }
        let listed = tools(Profile::Default);
        assert!(listed.iter().all(|t| t.output_schema.is_none()));
    }

    #[test]
    fn an_answer_is_its_lean_json_as_text_and_the_same_value_structured() {
        let v = json!({"results": [{"a": 1}], "engine": "bm25"});
        let r = serde_json::to_value(tool_result(Ok(v.clone()))).unwrap();
        assert_eq!(
            r["content"][0]["text"],
            json!(serde_json::to_string(&v).unwrap())
        );
        assert_eq!(r["structuredContent"], v);
        assert_eq!(structured(json!([1, 2])), json!({"result": [1, 2]}));
        let e = serde_json::to_value(tool_result(Err(Error::invalid("x", "bad")))).unwrap();
        assert_eq!(e["isError"], json!(true));
        assert!(e.get("structuredContent").is_none());
    }

    #[test]
    fn integers_may_be_written_as_whole_floats_within_2_pow_53() {
        let search = |limit: Value| {
            service::from_args::<SearchRequest>(json!({"query": "q", "limit": limit}))
                .map(|r| r.limit)
        };
        assert_eq!(search(json!(5.0)).unwrap(), 5);
        assert_eq!(search(json!(9007199254740991.0)).unwrap(), 9007199254740991);
        for bad in [
            json!(5.5),
            json!(1e300),
            json!(9007199254740992.0),
            json!(-1),
            json!("5"),
        ] {
            let e = search(bad.clone()).unwrap_err();
            assert_eq!(
                (e.kind, e.details["field"].clone()),
                (ErrorKind::Invalid, json!("limit")),
                "{bad}"
            );
        }
        // Free-form JSON keeps its floats.
        let w: WriteRequest =
            service::from_args(json!({"category": "c", "data": {"x": 5.0}})).unwrap();
        assert!(w.data["x"].is_f64());
        let r: ReadRequest = service::from_args(json!({"category": "c", "version": 2.0})).unwrap();
        assert!(matches!(r.version, Some(VersionRef::Ordinal(2))));
    }
}
