//! The guard every request passes: bearer or `X-Token` tokens compared in constant time,
//! loopback-only `Host` and `Origin` without a token (DNS rebinding), and the caller a token
//! maps to.

use super::*;

/// Shortest token accepted on a non-loopback bind, where anyone who can connect may guess.
pub const MIN_PUBLIC_TOKEN_CHARS: usize = 16;

/// Checks the single token and every device's token; a bind beyond loopback needs at least
/// one. An error names the device whose token is wrong.
pub(super) fn check_tokens(
    host: &str,
    token: Option<&str>,
    device_tokens: &[(String, String)],
) -> Result<()> {
    if device_tokens.is_empty() || token.is_some() {
        check_token(host, token)?;
    }
    for (t, device) in device_tokens {
        check_token(host, Some(t)).map_err(|e| {
            let mut e = e.detail("device", Value::from(device.clone()));
            e.message = format!("the token of device {device:?}: {}", e.message);
            e
        })?;
    }
    Ok(())
}

/// Refuses a token nobody could use, and a weak one where anyone can connect.
pub(super) fn check_token(host: &str, token: Option<&str>) -> Result<()> {
    let public = !is_loopback(host);
    let regenerate = "generate one, e.g. `head -c 24 /dev/urandom | base64`";
    match token {
        None | Some("") if public => Err(Error::new(
            ErrorKind::Denied,
            format!("refusing to listen on {host} without a token: anyone who can reach it could read and change your memory"),
        )
        .hint("set --token or MEMDIR_HTTP_TOKEN, or bind to 127.0.0.1, ::1 or localhost")),
        None => Ok(()),
        Some(t) if t.trim().is_empty() => Err(Error::invalid(
            "token",
            "the token is empty or only whitespace: no client could send it",
        )
        .hint(regenerate)
        .hint("or leave --token and MEMDIR_HTTP_TOKEN unset to serve loopback without one")),
        Some(t) if t.trim() != t => Err(Error::invalid(
            "token",
            "the token starts or ends with whitespace, which HTTP strips from header values: no client could send it",
        )
        .hint("remove the surrounding whitespace")),
        Some(t) if t.chars().any(char::is_control) => Err(Error::invalid(
            "token",
            "the token contains control characters, which no HTTP header can carry",
        )
        .hint(regenerate)),
        Some(t) if public && t.chars().count() < MIN_PUBLIC_TOKEN_CHARS => Err(Error::new(
            ErrorKind::Denied,
            format!(
                "refusing to listen on {host} with a token of {} characters: a non-loopback bind needs at least {MIN_PUBLIC_TOKEN_CHARS}",
                t.chars().count()
            ),
        )
        .hint(regenerate)),
        Some(_) => Ok(()),
    }
}

/// Whether a host name or address is loopback.
pub fn is_loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost") || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The host part of a `Host` header or an origin (`http://name:port`).
pub(super) fn host_name(value: &str) -> &str {
    let v = value.split("://").nth(1).unwrap_or(value);
    let v = v.split('/').next().unwrap_or(v);
    if let Some(rest) = v.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    v.rsplit_once(':')
        .filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()))
        .map_or(v, |(n, _)| n)
}

pub(super) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    // Length is not secret; the content is compared without an early exit.
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Authentication, Host/Origin and Content-Type checks, body, concurrency and time limits,
/// MCP session bookkeeping, and JSON for every error the router itself produces (404, 405).
pub(super) async fn guard(State(app): State<App>, req: Request, next: Next) -> Response {
    // Held until the response is ready: the connection has a request in progress.
    let _in_progress = req
        .extensions()
        .get::<ConnectInfo<ConnHandle>>()
        .map(|c| c.0.0.enter());
    // Liveness and the viewer's files (which hold no data) need no token.
    let open = (req.method() == Method::GET && req.uri().path() == "/health")
        || (app.sessions.is_none() && crate::viewer::is_asset(req.method(), req.uri().path()));
    let caller = match authenticate(&app, req.headers(), open) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    if open {
        // Liveness takes no permit and reads no body, so it answers however busy the server is.
        return next.run(req).await;
    }
    let is_mcp = req.uri().path().starts_with("/mcp");
    // Read in full even when it is refused below: a response sent while the client is still
    // sending would be lost to a connection reset.
    let (mut req, body) = match buffer_body(&app, req).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    // Who asks: REST handlers and MCP tools (through rmcp's copy of the request parts) act
    // as this device.
    req.extensions_mut().insert(caller);
    // A page can send text/plain and form bodies anywhere without a CORS preflight, JSON never.
    if !body.is_empty() && !is_json(req.headers()) {
        return plain_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "a request body must be JSON: send Content-Type: application/json",
        );
    }
    // rmcp parses the body itself: it turns an integer beyond 64 bits into a float and answers
    // a body it cannot parse (too deep, not JSON) with a plain-text 415. Such a message is
    // answered here with the JSON-RPC error (or tool error) it gets over stdio.
    if is_mcp
        && app.sessions.is_some()
        && req.method() == Method::POST
        && let Some(reply) = crate::mcp::refuse(&body)
    {
        let status = if reply.get("id").is_some_and(|id| !id.is_null()) {
            StatusCode::OK
        } else {
            StatusCode::BAD_REQUEST
        };
        return json_response(status, &reply);
    }
    let session = req
        .headers()
        .get(SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let initialize = is_mcp
        && session.is_none()
        && req.method() == Method::POST
        && serde_json::from_slice::<Value>(&body)
            .is_ok_and(|v| v.get("method").and_then(Value::as_str) == Some("initialize"));
    if let Some(sessions) = &app.sessions {
        if let Some(id) = &session {
            sessions.touch(id);
        } else if initialize {
            sessions.make_room().await;
        }
    }
    let Ok(permit) = tokio::time::timeout(app.timeout, app.permits.clone().acquire_owned()).await
    else {
        return busy_response("too many requests at once; retry");
    };
    let response = if is_mcp {
        // MCP keeps streams open (SSE): no overall deadline there.
        next.run(req).await
    } else {
        match tokio::time::timeout(app.timeout, next.run(req)).await {
            Ok(r) => r,
            Err(_) => busy_response("the request took too long; retry"),
        }
    };
    drop(permit);
    if let Some(sessions) = &app.sessions
        && initialize
        && let Some(id) = response
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
    {
        sessions.created(id);
    }
    if response.status() == StatusCode::METHOD_NOT_ALLOWED && !is_mcp {
        return method_not_allowed(&response);
    }
    response
}

/// The caller a request acts as, or the response that refuses it (boxed: a response is large
/// beside a caller). With tokens configured, a request off the open paths acts as the caller
/// its token maps to; without, it acts as this server's device, and every request must name
/// this machine in `Host` and `Origin`.
fn authenticate(
    app: &App,
    headers: &HeaderMap,
    open: bool,
) -> std::result::Result<Caller, Box<Response>> {
    let mut caller = app.local.clone();
    match app.auth.is_empty() {
        false if !open => {
            // The scheme name is case-insensitive (RFC 9110 §11.1); exactly one space follows.
            let bearer = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split_once(' '))
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                .map(|(_, t)| t.as_bytes());
            let x_token = headers.get("x-token").map(HeaderValue::as_bytes);
            let sent = bearer.or(x_token);
            // Every token is compared (in constant time each), so the time taken does not say
            // which one came close.
            let mut found = None;
            for (token, c) in app.auth.iter() {
                if sent.is_some_and(|t| ct_eq(t, token.as_bytes())) && found.is_none() {
                    found = Some(c.clone());
                }
            }
            match found {
                Some(c) => caller = c,
                None => {
                    let mut r = plain_error(
                        StatusCode::UNAUTHORIZED,
                        "unauthorized",
                        "a valid token is required: send Authorization: Bearer <token> or X-Token: <token>",
                    );
                    r.headers_mut()
                        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                    return Err(Box::new(r));
                }
            }
        }
        true => {
            let host_ok = headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|h| is_loopback(host_name(h)));
            // `Origin: null` comes from sandboxed frames, `data:` URLs and some redirects: a
            // page of unknown address, so it is refused like any other foreign origin.
            let origin_ok = headers
                .get(header::ORIGIN)
                .map(|v| v.to_str().ok().is_some_and(|o| is_loopback(host_name(o))))
                .unwrap_or(true);
            if !host_ok || !origin_ok {
                return Err(Box::new(plain_error(
                    StatusCode::FORBIDDEN,
                    "denied",
                    "Host and Origin must name this machine (localhost, 127.0.0.1, ::1); set a token to serve other names",
                )));
            }
        }
        _ => {}
    }
    Ok(caller)
}

/// The router's 405 as JSON, keeping the `Allow` header that lists the accepted methods.
fn method_not_allowed(response: &Response) -> Response {
    let allow = response.headers().get(header::ALLOW).cloned();
    let mut r = plain_error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this path does not accept that method; see the Allow header",
    );
    if let Some(a) = allow {
        r.headers_mut().insert(header::ALLOW, a);
    }
    r
}

/// Ends of MCP sessions as the MCP spec answers them. A client ends its session with a DELETE,
/// answered 200 (or 405 where clients may not end sessions); rmcp answers 202, which clients
/// such as the Python SDK report as a failed termination on every close.
pub(super) async fn session_end(req: Request, next: Next) -> Response {
    let delete = req.method() == Method::DELETE;
    let mut response = next.run(req).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
    }
    response
}

/// The caller the guard found for a request.
pub(super) fn caller_of(req: &Request) -> Result<Caller> {
    req.extensions()
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| Error::internal("invariant: the guard names every request's caller"))
}

/// The caller of an MCP request, from rmcp's copy of the HTTP request parts.
pub(super) fn mcp_caller(ext: &rmcp::model::Extensions) -> Option<Caller> {
    ext.get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<Caller>().cloned())
}
