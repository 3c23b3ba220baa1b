//! The web viewer: a page that shows and steers the memory from a browser, served at `/` by the
//! REST server (`memdir serve --transport http`, `memdir ui`).
//!
//! The viewer is static: an HTML shell, one script, one stylesheet and an icon, embedded in the
//! binary (no build step, no CDN, no external font). Everything it shows it fetches from the
//! REST routes of the operation table, and every change it makes (restore, append) is a REST
//! call, so it passes the same guard (token, Host and Origin, JSON bodies), the same access
//! control and the same compare-and-swap as any other client.
//!
//! Architecture Invariant: this module serves bytes and nothing else: it knows no operation and
//! never calls the engine. The assets carry no data, so the guard lets them through without a
//! token (like `GET /health`); the token, when one is set, is entered in the page and sent on
//! each API request as `Authorization: Bearer`.
//!
//! Every asset is served with its content type, `X-Content-Type-Options: nosniff` and a strict
//! Content-Security-Policy ([`CSP`]: scripts, styles, images and fetches from this origin only,
//! no inline script, no frames, Trusted Types so the script cannot build HTML from strings).
//! The page names its assets with a version query (`?v=` a hash of the assets), so they are
//! cached for a year and a new binary is picked up at once; the page itself is revalidated by
//! its `ETag` on every load.

use std::sync::LazyLock;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// One embedded file.
struct Asset {
    /// Its path under `/ui/`.
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const INDEX: &str = include_str!("../assets/viewer/index.html");

const ASSETS: &[Asset] = &[
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../assets/viewer/app.js"),
    },
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../assets/viewer/style.css"),
    },
    Asset {
        name: "icon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("../assets/viewer/icon.svg"),
    },
];

/// The Content-Security-Policy of every viewer response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; \
     require-trusted-types-for 'script'; trusted-types 'none'";

/// The most the viewer may weigh, uncompressed: the page and every asset.
pub const PAGE_WEIGHT_LIMIT: usize = 200 * 1024;

/// A hash of every asset: the `?v=` of their URLs and the `ETag` of the page.
static VERSION: LazyLock<String> = LazyLock::new(|| {
    let mut h = blake3::Hasher::new();
    h.update(INDEX.as_bytes());
    for a in ASSETS {
        h.update(a.name.as_bytes());
        h.update(&(a.body.len() as u64).to_le_bytes());
        h.update(a.body);
    }
    h.finalize().to_hex()[..16].to_string()
});

/// The page, with the assets' version in their URLs.
static PAGE: LazyLock<String> = LazyLock::new(|| INDEX.replace("{{v}}", &VERSION));

/// The bytes the viewer loads in all: the page and every asset.
pub fn page_weight() -> usize {
    PAGE.len() + ASSETS.iter().map(|a| a.body.len()).sum::<usize>()
}

/// Whether a request is for the viewer's files, which the guard serves without a token (they
/// hold no data; Host and Origin are checked as for every request).
pub fn is_asset(method: &Method, path: &str) -> bool {
    (method == Method::GET || method == Method::HEAD)
        && (path == "/"
            || path
                .strip_prefix("/ui/")
                .is_some_and(|n| ASSETS.iter().any(|a| a.name == n)))
}

/// The viewer's routes: `/` (the page) and `/ui/<asset>`.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(page))
        .route("/ui/{name}", get(asset))
}

fn respond(
    headers: &HeaderMap,
    content_type: &'static str,
    body: &'static [u8],
    immutable: bool,
) -> Response {
    let etag = format!("\"{}\"", *VERSION);
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut r = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = body.into_response();
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        r
    };
    let h = r.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if immutable {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        }),
    );
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    r
}

async fn page(headers: HeaderMap) -> Response {
    respond(&headers, "text/html; charset=utf-8", PAGE.as_bytes(), false)
}

async fn asset(
    axum::extract::Path(name): axum::extract::Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let Some(a) = ASSETS.iter().find(|a| a.name == name) else {
        let body = serde_json::json!({"error": {
            "code": "not_found",
            "message": format!("no such endpoint: GET {}", uri.path()),
            "hints": [],
        }});
        let mut r = (StatusCode::NOT_FOUND, body.to_string()).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return r;
    };
    // Cached for good only under the current version: a stale or missing `v` revalidates.
    let current = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == format!("v={}", *VERSION)));
    respond(&headers, a.content_type, a.body, current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_every_asset_with_its_version_and_nothing_outside() {
        for a in ASSETS {
            assert!(
                PAGE.contains(&format!("/ui/{}?v={}", a.name, *VERSION)),
                "{} is not linked with its version",
                a.name
            );
        }
        // No external request: no absolute URL anywhere, no inline script or style.
        let texts = std::iter::once(PAGE.as_str())
            .chain(ASSETS.iter().map(|a| std::str::from_utf8(a.body).unwrap()));
        for t in texts {
            // The SVG's xmlns is a name, not a request.
            let t = t.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
            for bad in [
                "http://",
                "https://",
                "src=\"//",
                "href=\"//",
                "url(",
                "@import",
            ] {
                assert!(!t.contains(bad), "an asset contains {bad:?}");
            }
        }
        assert!(!PAGE.contains("<script>") && !PAGE.contains("style="));
        assert!(!PAGE.contains("<style"));
    }

    #[test]
    fn the_page_weighs_at_most_200_kb() {
        assert!(
            page_weight() <= PAGE_WEIGHT_LIMIT,
            "the viewer weighs {} bytes",
            page_weight()
        );
    }

    /// Issue 29, item 11: the viewer asked for 10 hits where the CLI and REST give 5.
    #[test]
    fn the_viewer_shows_as_many_hits_as_every_other_surface() {
        let js = std::str::from_utf8(ASSETS[0].body).expect("app.js is UTF-8");
        let want = format!(
            "const SEARCH_LIMIT = {};",
            memdir_api::defaults::SEARCH_LIMIT
        );
        assert!(js.contains(&want), "app.js does not say {want:?}");
        // The request leaves the number to the server unless the person asks for one.
        assert!(js.contains("const body = { query: v.q };"));
    }

    #[test]
    fn only_the_viewer_files_are_assets() {
        assert!(is_asset(&Method::GET, "/"));
        assert!(is_asset(&Method::HEAD, "/ui/app.js"));
        assert!(is_asset(&Method::GET, "/ui/style.css"));
        assert!(!is_asset(&Method::POST, "/"));
        assert!(!is_asset(&Method::GET, "/ui/"));
        assert!(!is_asset(&Method::GET, "/ui/other.js"));
        assert!(!is_asset(&Method::GET, "/ui/../status"));
        assert!(!is_asset(&Method::GET, "/status"));
        assert!(!is_asset(&Method::GET, "/index.html"));
    }
}
