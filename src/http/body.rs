//! Request bodies: JSON only (a page cannot send it without a preflight), read within the
//! body deadline and size limit before a concurrency permit is taken.

use super::*;

pub(super) fn busy_response(message: &str) -> Response {
    let mut r = plain_error(StatusCode::SERVICE_UNAVAILABLE, "busy", message);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// Whether the `Content-Type` is `application/json`, parameters (`; charset=utf-8`) allowed.
pub(super) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// The 413 error for a body over `limit` (`declared`: its `Content-Length`, if any).
pub(super) fn body_too_large(declared: Option<usize>, limit: usize) -> Error {
    match declared {
        Some(n) if n > limit => {
            Error::too_large("body", n, limit, "bytes").hint("send a smaller request")
        }
        _ => Error::new(
            ErrorKind::TooLarge,
            format!("the body is over the limit of {limit} bytes"),
        )
        .field("body")
        .detail("limit", Value::from(limit))
        .hint("send a smaller request"),
    }
}

/// Reads the whole body within `limits.body_timeout`, so a slow client never holds a
/// concurrency permit; the request goes on with the body in memory.
/// How a body read ended when it was over the limit.
pub(super) struct Oversize {
    /// Bytes read in all (or the declared length, when that was over the limit already).
    pub(super) size: usize,
    /// The JSON-RPC id found in the body, for an MCP request read to its end.
    pub(super) id: Option<Value>,
}

/// Reads a body of at most `limit` bytes. A REST body over the limit stops the read at once;
/// an MCP message over it is read to its end through a scan that keeps none of its bytes, so
/// the answer can carry the request's id (the caller bounds the time).
pub(super) async fn read_limited(
    mut body: Body,
    limit: usize,
    mcp: bool,
) -> std::result::Result<std::result::Result<Bytes, Oversize>, ()> {
    use axum::body::HttpBody;
    let mut buf: Vec<u8> = Vec::new();
    let mut scan: Option<memdir_api::jsontext::Scan> = None;
    let mut size = 0usize;
    while let Some(frame) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
    {
        let Ok(frame) = frame else { return Err(()) };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        size += data.len();
        if let Some(sc) = scan.as_mut() {
            sc.feed(&data);
        } else if size <= limit {
            buf.extend_from_slice(&data);
        } else if mcp {
            let mut sc = memdir_api::jsontext::Scan::new(&[]);
            sc.feed(&buf);
            sc.feed(&data);
            buf = Vec::new();
            scan = Some(sc);
        } else {
            return Ok(Err(Oversize { size, id: None }));
        }
    }
    match scan {
        Some(mut sc) => {
            sc.finish();
            Ok(Err(Oversize { size, id: sc.id }))
        }
        None => Ok(Ok(Bytes::from(buf))),
    }
}

pub(super) async fn buffer_body(
    app: &App,
    req: Request,
) -> std::result::Result<(Request, Bytes), Response> {
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    // An MCP request gets its answer as a JSON-RPC error with its id, as over stdio.
    let mcp = app.sessions.is_some() && parts.uri.path().starts_with("/mcp");
    let too_large = |size: Option<usize>, id: Option<Value>| {
        let e = body_too_large(size, app.body_limit);
        if mcp {
            json_response(
                if id.is_some() {
                    StatusCode::OK
                } else {
                    StatusCode::PAYLOAD_TOO_LARGE
                },
                &crate::mcp::error_reply(id, &ops::for_surface(e, ops::Surface::Mcp)),
            )
        } else {
            error_response(&e)
        }
    };
    if !mcp && declared.is_some_and(|n| n > app.body_limit) {
        return Err(too_large(declared, None));
    }
    let read = read_limited(body, app.body_limit, mcp);
    match tokio::time::timeout(app.limits.body_timeout, read).await {
        Ok(Ok(Ok(bytes))) => Ok((Request::from_parts(parts, Body::from(bytes.clone())), bytes)),
        Ok(Ok(Err(over))) => Err(too_large(
            Some(over.size.max(declared.unwrap_or(0))),
            over.id,
        )),
        Ok(Err(())) => Err(too_large(declared, None)),
        Err(_) => {
            let mut r = plain_error(
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                &format!(
                    "the request body did not arrive within {} ms; send the whole request at once",
                    app.limits.body_timeout.as_millis()
                ),
            );
            r.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            Err(r)
        }
    }
}

/// The JSON object of a body the guard has already read (and limited in size and time).
pub(super) async fn read_json(req: Request, limit: usize) -> Result<Map<String, Value>> {
    let bytes: Bytes = axum::body::to_bytes(req.into_body(), limit)
        .await
        .map_err(|_| body_too_large(None, limit))?;
    if bytes.is_empty() {
        return Ok(Map::new());
    }
    // An integer literal beyond 64 bits would silently become a float: refused, as on every
    // surface.
    memdir_api::jsontext::check_integers(&bytes)?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(Error::invalid(
            "body",
            format!(
                "the body must be a JSON object, got {}",
                memdir_engine::service::type_name(&other)
            ),
        )),
        Err(e) => Err(Error::invalid(
            "body",
            format!("the body is not valid JSON: {e}"),
        )),
    }
}
