//! The REST surface: the operation table's routes, each request run through `ops::call`,
//! and the mapping of error kinds to HTTP statuses.

use super::*;

pub(super) fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::Invalid => StatusCode::BAD_REQUEST,
        ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::Busy | ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Corrupt => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::Denied | ErrorKind::Forbidden => StatusCode::FORBIDDEN,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

pub(super) fn json_response(status: StatusCode, v: &Value) -> Response {
    let mut r = (status, serde_json::to_string(v).unwrap_or_default()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

pub(super) fn error_response(e: &Error) -> Response {
    let e = &ops::for_surface(e.clone(), ops::Surface::Rest);
    let status = status_of(e.kind);
    let mut r = json_response(status, &json!({"error": e.to_json()}));
    if status == StatusCode::SERVICE_UNAVAILABLE {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    r
}

pub(super) fn plain_error(status: StatusCode, code: &str, message: &str) -> Response {
    json_response(
        status,
        &json!({"error": {"code": code, "message": message, "hints": []}}),
    )
}

/// Runs an operation on the blocking pool and shapes the response.
pub(super) async fn run(
    app: &App,
    caller: Caller,
    op: &'static Op,
    args: Map<String, Value>,
) -> Response {
    if let Err(e) = app.memdir.ensure_started() {
        return error_response(&e);
    }
    let memdir = app.memdir.clone();
    let out =
        tokio::task::spawn_blocking(move || ops::call(&memdir, &caller, op, Value::Object(args)))
            .await
            .unwrap_or_else(|e| Err(Error::internal(format!("request panicked: {e}"))));
    if !op.read_only && out.is_ok() {
        memdir_engine::service::catch_up_soon(&app.memdir);
    }
    match out {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(e) => error_response(&e),
    }
}

pub(super) async fn post_op(State(app): State<App>, op: &'static Op, req: Request) -> Response {
    let caller = match caller_of(&req) {
        Ok(c) => c,
        Err(e) => return error_response(&e),
    };
    match read_json(req, app.body_limit).await {
        Ok(args) => run(&app, caller, op, args).await,
        Err(e) => error_response(&e),
    }
}

pub(super) async fn get_op(State(app): State<App>, op: &'static Op, req: Request) -> Response {
    let caller = match caller_of(&req) {
        Ok(c) => c,
        Err(e) => return error_response(&e),
    };
    match query_args(&req, &integer_params(op)) {
        Ok(args) => run(&app, caller, op, args).await,
        Err(e) => error_response(&e),
    }
}

/// The names of an operation's integer parameters (query strings carry only text).
pub(super) fn integer_params(op: &Op) -> Vec<String> {
    ops::input_schema(op)
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, s)| s.get("type") == Some(&json!("integer")))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn query_args(req: &Request, ints: &[String]) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    for pair in req
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = v.replace('+', " ");
        let v = memdir_api::uri::decode(&v).ok_or_else(|| {
            Error::invalid(
                k,
                format!("query parameter {k} is not valid percent-encoding"),
            )
        })?;
        if ints.iter().any(|i| i == k) {
            let n: u64 = v.parse().map_err(|_| {
                Error::invalid(k, format!("{k} must be a non-negative integer, got {v:?}"))
            })?;
            out.insert(k.to_string(), Value::from(n));
        } else {
            out.insert(k.to_string(), Value::from(v));
        }
    }
    Ok(out)
}

/// `POST /search`: keyword search, or with `"semantic": true` semantic search (`query` and
/// `limit` only).
pub(super) async fn search(State(app): State<App>, req: Request) -> Response {
    let caller = match caller_of(&req) {
        Ok(c) => c,
        Err(e) => return error_response(&e),
    };
    let mut args = match read_json(req, app.body_limit).await {
        Ok(a) => a,
        Err(e) => return error_response(&e),
    };
    // `semantic` is strictly a boolean: "false" is an error, not true.
    let semantic = match args.remove("semantic") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => b,
        Some(other) => {
            return error_response(&Error::invalid(
                "semantic",
                format!(
                    "semantic must be true or false, got {}",
                    memdir_engine::service::type_name(&other)
                ),
            ));
        }
    };
    if semantic {
        let extra: Vec<String> = args
            .keys()
            .filter(|k| !["query", "limit"].contains(&k.as_str()))
            .cloned()
            .collect();
        if !extra.is_empty() {
            return error_response(&Error::invalid(
                &extra[0],
                format!(
                    "semantic search takes query and limit only; got {}",
                    extra.join(", ")
                ),
            ));
        }
        return run(&app, caller, op("search_semantic"), args).await;
    }
    run(&app, caller, op("search"), args).await
}

/// An operation of the table by name.
pub(super) fn op(name: &str) -> &'static Op {
    ops::find(name).expect("invariant: the REST surface names operations of the table")
}

pub(super) async fn health() -> Response {
    json_response(
        StatusCode::OK,
        &json!({"ok": true, "version": env!("CARGO_PKG_VERSION")}),
    )
}

pub(super) async fn tools(State(app): State<App>) -> Response {
    let list: Vec<Value> = ops::tools(app.profile)
        .iter()
        .map(|(op, t)| json!({"name": t.name, "description": op.description, "input_schema": Value::Object(ops::input_schema(op))}))
        .collect();
    json_response(StatusCode::OK, &json!({"tools": list}))
}

pub(super) async fn not_found(req: Request) -> Response {
    plain_error(
        StatusCode::NOT_FOUND,
        "not_found",
        &format!("no such endpoint: {} {}", req.method(), req.uri().path()),
    )
}

/// The REST routes: the surface's own (`/health`, `/tools`, `/search` with its semantic
/// switch, the web viewer at `/` and `/ui/`), then every REST route of the operation table.
pub(super) fn rest_router(app: App) -> Router {
    let mut r = crate::viewer::router()
        .route("/health", get(health))
        .route("/tools", get(tools))
        .route("/search", post(search));
    for op in ops::table() {
        let Some(route) = op.rest else { continue };
        if route.path == "/search" {
            continue;
        }
        r = match route.method {
            ops::Method::Get => r.route(
                route.path,
                get(move |state: State<App>, req: Request| get_op(state, op, req)),
            ),
            ops::Method::Post => r.route(
                route.path,
                post(move |state: State<App>, req: Request| post_op(state, op, req)),
            ),
        };
    }
    r.fallback(not_found).with_state(app)
}
