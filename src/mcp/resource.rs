//! Memories as MCP resources: sessions, chunks, categories, their versions and the status,
//! each at its `memdir://` URI ([`memdir_api::uri`]).
//!
//! Every list and read runs an operation of the table through [`ops::call`] with the request's
//! caller, exactly as a tool call does, so the access-control list applies unchanged: a
//! category the caller may not read is absent from `resources/list` and its read fails as
//! `memory_read` fails. Every resource is `application/json`: a category (or a version) is
//! its document as it is stored (pretty JSON, the same bytes as its file, so the listed size
//! is exact), with its hash and version in `_meta`; a session page, a chunk and the status are
//! the lean JSON of the operation's answer.

use rmcp::ErrorData;
use std::collections::HashMap;

use rmcp::model::{
    CompletionInfo, ErrorCode, ListResourceTemplatesResult, ListResourcesResult, MetaObject,
    ReadResourceResult, Reference, Resource, ResourceContents, ResourceTemplate,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use memdir_api::error::{Error, ErrorKind};
use memdir_api::uri::{self, Resource as Uri};
use memdir_api::{
    CategorySummary, FetchResponse, HistoryResponse, ListResponse, OverviewResponse, ReadResponse,
    SessionSummary,
};
use memdir_engine::acl::Caller;
use memdir_engine::ops;
use memdir_engine::service::Memdir;

/// Resources per page of `resources/list`.
pub const PAGE: usize = 50;

const JSON: &str = "application/json";

/// The resource templates.
pub fn templates() -> ListResourceTemplatesResult {
    let t = |template: &str, name: &str, title: &str, description: &str| {
        ResourceTemplate::new(template, name)
            .with_title(title)
            .with_description(description)
            .with_mime_type(JSON)
    };
    ListResourceTemplatesResult::with_all_items(vec![
        t(
            "memdir://sessions/{session_id}",
            "session",
            "A session",
            "A page of a session's chunks; add ?position=N (its next_position) for the next page.",
        ),
        t(
            "memdir://sessions/{session_id}/{position}",
            "chunk",
            "A chunk of a session",
            "One chunk, by its position in its session.",
        ),
        t(
            "memdir://categories/{name}",
            "category",
            "A category",
            "A category's current document.",
        ),
        t(
            "memdir://categories/{name}/versions/{n}",
            "category-version",
            "A version of a category",
            "A category's document as it was at version n (memory_history lists them).",
        ),
    ])
}

/// Runs operation `name` for `caller` and reads its answer as `T`.
fn run<T: DeserializeOwned>(m: &Memdir, c: &Caller, name: &str, args: Value) -> Result<T, Error> {
    let op = ops::find(name).expect("invariant: the resource operations are in the table");
    let v = ops::call(m, c, op, args).map_err(|e| ops::for_surface(e, ops::Surface::Mcp))?;
    serde_json::from_value(v).map_err(|e| Error::internal(format!("{name} answered {e}")))
}

/// A memdir error as the JSON-RPC error of a resource request: `not_found` is the spec's
/// resource-not-found, bad input invalid params; the memdir error rides along as data.
pub fn rpc_error(e: Error) -> ErrorData {
    let code = match e.kind {
        ErrorKind::NotFound => ErrorCode::RESOURCE_NOT_FOUND,
        ErrorKind::Invalid | ErrorKind::TooLarge => ErrorCode::INVALID_PARAMS,
        ErrorKind::Forbidden | ErrorKind::Denied => ErrorCode::INVALID_REQUEST,
        _ => ErrorCode::INTERNAL_ERROR,
    };
    ErrorData::new(code, e.message.clone(), Some(e.to_json()))
}

fn status() -> Resource {
    Resource::new(uri::STATUS, "status")
        .with_title("Memory status")
        .with_description("Counts, sizes and health of the store.")
        .with_mime_type(JSON)
}

fn category(c: &CategorySummary) -> Resource {
    Resource::new(uri::category(&c.name), &c.name)
        .with_title(&c.name)
        .with_description(format!(
            "{} category, version {}, updated {} by {}",
            c.kind, c.version, c.updated_at, c.updated_by
        ))
        .with_mime_type(JSON)
        .with_size(u64::try_from(c.size_bytes).unwrap_or(0))
}

fn session(s: &SessionSummary) -> Resource {
    let project = match s.project.as_str() {
        "" => String::new(),
        p => format!(", project {p}"),
    };
    Resource::new(uri::session(&s.id), &s.id)
        .with_title(&s.title)
        .with_description(format!(
            "Session of {} chunks{project}, last active {}",
            s.message_count, s.last_active
        ))
        .with_mime_type(JSON)
}

/// The viewer as an MCP App (the `io.modelcontextprotocol/ui` extension): one HTML document
/// that renders the result of the tools that name it in `_meta.ui.resourceUri` and calls tools
/// back through the host. It loads nothing (its own CSP refuses every request), so the resource
/// declares no domains and the host's most restrictive default applies.
pub const VIEWER_URI: &str = "ui://memdir/viewer";
const APP_MIME: &str = "text/html;profile=mcp-app";
const VIEWER_HTML: &str = include_str!("../../assets/mcp-app/viewer.html");

fn viewer() -> Resource {
    Resource::new(VIEWER_URI, "viewer")
        .with_title("memdir viewer")
        .with_description(
            "Search hits, sessions, the session catalog and a category's history, diff and restore, rendered inside the chat (MCP Apps).",
        )
        .with_mime_type(APP_MIME)
        .with_size(VIEWER_HTML.len() as u64)
}

/// The viewer's HTML, byte for byte (its CSP holds hashes of its inline script and style).
fn viewer_contents() -> ReadResourceResult {
    let mut meta = MetaObject::new();
    meta.insert("ui".into(), json!({"prefersBorder": true}));
    ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
        uri: VIEWER_URI.to_string(),
        mime_type: Some(APP_MIME.into()),
        text: VIEWER_HTML.to_string(),
        meta: Some(meta),
    }])
}

/// A page of `resources/list`: the status, the viewer app, every category the caller may read, then every
/// session, newest first. The cursor is the index of the page's first resource.
pub fn list(m: &Memdir, c: &Caller, cursor: Option<&str>) -> Result<ListResourcesResult, Error> {
    let start = match cursor {
        None => 0,
        Some(s) => s
            .parse::<usize>()
            .map_err(|_| Error::invalid("cursor", format!("not a cursor of this list: {s:?}")))?,
    };
    let cats: ListResponse = run(m, c, "list", json!({}))?;
    let mut page = Vec::new();
    if start == 0 {
        page.push(status());
        page.push(viewer());
    }
    let skip = start.saturating_sub(2);
    page.extend(
        cats.categories
            .iter()
            .skip(skip)
            .take(PAGE - page.len())
            .map(category),
    );
    let fixed = 2 + cats.categories.len();
    let mut next = start + page.len();
    let mut more = next < fixed;
    if page.len() < PAGE {
        let sessions: OverviewResponse = run(
            m,
            c,
            "overview",
            json!({"days": 0, "offset": next - fixed, "limit": PAGE - page.len()}),
        )?;
        next += sessions.sessions.len();
        more = sessions.next_offset.is_some();
        page.extend(sessions.sessions.iter().map(session));
    }
    let mut out = ListResourcesResult::with_all_items(page);
    out.next_cursor = more.then(|| next.to_string());
    Ok(out)
}

fn text(uri: &str, text: String, meta: Option<MetaObject>) -> ReadResourceResult {
    let contents = ResourceContents::TextResourceContents {
        uri: uri.to_string(),
        mime_type: Some(JSON.into()),
        text,
        meta,
    };
    ReadResourceResult::new(vec![contents])
}

fn lean(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).expect("invariant: an answer serializes")
}

/// A category read as its resource: the document as stored, its metadata in `_meta`.
fn document(at: &str, r: ReadResponse) -> ReadResourceResult {
    let mut body = serde_json::to_string_pretty(&r.data).expect("invariant: JSON serializes");
    body.push('\n');
    let mut meta = serde_json::Map::new();
    meta.insert("memdir/meta".into(), json!(r.meta));
    text(at, body, Some(MetaObject(meta)))
}

/// Reads the resource at `at`.
pub fn read(m: &Memdir, c: &Caller, at: &str) -> Result<ReadResourceResult, Error> {
    if at == VIEWER_URI {
        return Ok(viewer_contents());
    }
    let Some(r) = uri::parse(at) else {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("no memdir resource has the URI {at:?}"),
        )
        .hint("resources/templates/list shows the URIs memdir serves"));
    };
    Ok(match r {
        Uri::Status => text(at, lean(&run::<Value>(m, c, "status", json!({}))?), None),
        Uri::Session {
            session_id,
            position,
        } => {
            let args = json!({"session_id": session_id, "position": position});
            text(at, lean(&run::<FetchResponse>(m, c, "fetch", args)?), None)
        }
        Uri::Chunk {
            session_id,
            position,
        } => {
            let args = json!({"session_id": session_id, "position": position, "limit": 1});
            let page: FetchResponse = run(m, c, "fetch", args)?;
            let Some(chunk) = page.chunks.first() else {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    format!(
                        "session {session_id:?} has {} chunks; position {position} is past its end",
                        page.total
                    ),
                ));
            };
            text(at, lean(chunk), None)
        }
        Uri::Category { name } => document(at, run(m, c, "read", json!({"category": name}))?),
        Uri::Version { name, version } => {
            let args = json!({"category": name, "version": version});
            document(at, run(m, c, "read", args)?)
        }
        Uri::Note { path } => {
            let n: Value = run(m, c, "note_read", json!({"path": path}))?;
            let mut meta = serde_json::Map::new();
            meta.insert("memdir/meta".into(), json!({"hash": n["hash"], "version": n["version"], "updated_at": n["updated_at"], "updated_by": n["updated_by"]}));
            let mut r = text(
                at,
                n["text"].as_str().unwrap_or_default().to_string(),
                Some(MetaObject(meta)),
            );
            for c in &mut r.contents {
                if let ResourceContents::TextResourceContents { mime_type, .. } = c {
                    *mime_type = Some("text/markdown".into());
                }
            }
            r
        }
    })
}

/// Completion of a template's or a prompt's argument (`completion/complete`): the values the
/// caller may see that start with what was typed (case-insensitive), at most 100, with the
/// total and whether more match. Session ids (newest first) and projects come from the session
/// catalog, category names from the list, version numbers from the history of the category the
/// context names; every one through its operation, so the access list applies. An argument
/// memdir has no values for completes to nothing; a prompt or template memdir does not have is
/// an error (invalid params), as the spec asks.
pub fn complete(
    m: &Memdir,
    c: &Caller,
    at: &Reference,
    arg: &str,
    typed: &str,
    context: &HashMap<String, String>,
) -> Result<CompletionInfo, Error> {
    match at {
        Reference::Prompt(p) => super::prompt::check(&p.name)?,
        Reference::Resource(r) => {
            if !templates()
                .resource_templates
                .iter()
                .any(|t| t.uri_template == r.uri)
            {
                return Err(Error::invalid(
                    "ref",
                    format!(
                        "no resource template is {:?}; resources/templates/list shows them",
                        r.uri
                    ),
                ));
            }
        }
        other => {
            return Err(Error::invalid(
                "ref",
                format!("memdir completes no {} reference", other.reference_type()),
            ));
        }
    }
    let sessions =
        || -> Result<OverviewResponse, Error> { run(m, c, "overview", json!({"days": 0})) };
    let values: Vec<String> = match (at, arg) {
        (Reference::Resource(r), "session_id") if r.uri.starts_with("memdir://sessions/") => {
            sessions()?.sessions.into_iter().map(|s| s.id).collect()
        }
        (Reference::Resource(r), "name") if r.uri.starts_with("memdir://categories/") => {
            let cats: ListResponse = run(m, c, "list", json!({}))?;
            cats.categories.into_iter().map(|c| c.name).collect()
        }
        (Reference::Resource(r), "n") if r.uri.ends_with("/versions/{n}") => {
            match context.get("name") {
                Some(name) => {
                    let h: HistoryResponse =
                        run(m, c, "history", json!({"category": name, "limit": 100}))?;
                    h.versions
                        .iter()
                        .filter_map(|v| v.version)
                        .map(|n| n.to_string())
                        .collect()
                }
                None => Vec::new(),
            }
        }
        (Reference::Prompt(_), "project") => {
            let mut projects: Vec<String> = Vec::new();
            for s in sessions()?.sessions {
                if !s.project.is_empty() && !projects.contains(&s.project) {
                    projects.push(s.project);
                }
            }
            projects
        }
        _ => Vec::new(),
    };
    let typed = typed.to_lowercase();
    let matching: Vec<String> = values
        .into_iter()
        .filter(|v| v.to_lowercase().starts_with(&typed))
        .collect();
    let total = matching.len();
    let shown: Vec<String> = matching
        .into_iter()
        .take(CompletionInfo::MAX_VALUES)
        .collect();
    let more = total > shown.len();
    CompletionInfo::with_pagination(shown, u32::try_from(total).ok(), more).map_err(Error::internal)
}
