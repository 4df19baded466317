//! Headers every answer carries so that browsers do not misuse it: no framing by another
//! site (clickjacking), no guessing a content type other than the declared one, API
//! answers (task logs, secrets' names) never kept in a cache, and under HTTPS the browser
//! told to use HTTPS only.

use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, STRICT_TRANSPORT_SECURITY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::middleware::Next;
use axum::response::Response;

/// API answers are data: nothing in them may load or run anything.
const API_POLICY: &str = "default-src 'none'; frame-ancestors 'none'";

/// The web UI and the API docs load scripts, styles and images from this server only
/// (styles inline too: Swagger UI and the UI's components set `style` attributes) and
/// talk to this server only.
const PAGE_POLICY: &str = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; \
     object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// A year, as browsers' HSTS preload lists expect.
const HSTS: &str = "max-age=31536000";

/// The middleware; `https`: the server serves HTTPS itself.
pub(crate) async fn add(State(https): State<bool>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let api = path.starts_with("/api/v1/") || path == "/api/v1" || path == "/metrics";
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if api {
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.insert(
            CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(API_POLICY),
        );
    } else {
        h.insert(
            CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(PAGE_POLICY),
        );
    }
    if https {
        h.insert(STRICT_TRANSPORT_SECURITY, HeaderValue::from_static(HSTS));
    }
    response
}
