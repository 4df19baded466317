//! The web UI: the production bundle of `ui/` (committed as `ui/dist`, see
//! docs/decisions.md) embedded in the binary and served at `/`.
//!
//! Files are served as built; `NAME.gz` beside a file (written by the UI build) is sent
//! instead to browsers that accept gzip. Any other path outside `/api` gets `index.html`,
//! so every page of the single-page app survives a reload; the app itself shows its
//! not-found page for routes it does not know.

use axum::body::Body;
use axum::http::header::{ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE, VARY};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

/// `(path under ui/dist, content, gzipped content)`, written by build.rs.
type File = (&'static str, &'static [u8], Option<&'static [u8]>);
const BUNDLE: &[File] = include!(concat!(env!("OUT_DIR"), "/ui_bundle.rs"));

fn find(path: &str) -> Option<&'static File> {
    BUNDLE.iter().find(|f| f.0 == path)
}

/// Serves `uri` from the bundle, or `index.html` for an app route; `None` for API
/// paths and methods other than GET/HEAD, which stay the API's (JSON 404/405).
pub fn serve(method: &Method, uri: &Uri, headers: &HeaderMap) -> Option<Response> {
    let path = uri.path();
    if !(method == Method::GET || method == Method::HEAD)
        || path == "/api"
        || path.starts_with("/api/")
        || path == "/metrics"
    {
        return None;
    }
    let wanted = path.trim_start_matches('/');
    let (file, immutable) = match find(wanted) {
        // Vite puts a content hash in every name under assets/.
        Some(f) => (f, wanted.starts_with("assets/")),
        None => (find("index.html")?, false),
    };
    let (data, encoded) = match file.2.filter(|_| accepts_gzip(headers)) {
        Some(gz) => (gz, true),
        None => (file.1, false),
    };
    let mut response = (StatusCode::OK, Body::from(data)).into_response();
    let h = response.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type(file.0)));
    h.insert(VARY, HeaderValue::from_static("accept-encoding"));
    h.insert(
        CACHE_CONTROL,
        HeaderValue::from_static(if immutable {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        }),
    );
    if encoded {
        h.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    Some(response)
}

fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| matches!(p.trim(), "q=0" | "q=0.0" | "q=0.00" | "q=0.000"));
            name.eq_ignore_ascii_case("gzip") && !refused
        })
}

fn content_type(file: &str) -> &'static str {
    match file.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str, encoding: Option<&str>) -> Option<Response> {
        let mut headers = HeaderMap::new();
        if let Some(e) = encoding {
            headers.insert(ACCEPT_ENCODING, HeaderValue::from_str(e).unwrap());
        }
        serve(&Method::GET, &path.parse().unwrap(), &headers)
    }

    #[test]
    fn app_routes_get_the_index_and_api_paths_are_left_alone() {
        for path in [
            "/",
            "/instances/7",
            "/projects/default/workflows/etl/schedule",
        ] {
            let r = get(path, None).expect(path);
            assert_eq!(r.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
            assert_eq!(r.headers()[CACHE_CONTROL], "no-cache");
        }
        assert!(get("/api/v1/nope", None).is_none());
        assert!(get("/api", None).is_none());
        assert!(get("/metrics", None).is_none());
        assert!(serve(&Method::POST, &"/".parse().unwrap(), &HeaderMap::new()).is_none());
    }

    #[test]
    fn hashed_assets_are_cached_and_gzipped_when_accepted() {
        let asset = BUNDLE
            .iter()
            .map(|f| f.0)
            .find(|f| f.starts_with("assets/") && f.ends_with(".js"))
            .expect("the bundle has a script under assets/");
        let path = format!("/{asset}");
        let plain = get(&path, None).unwrap();
        assert!(plain.headers().get(CONTENT_ENCODING).is_none());
        assert_eq!(
            plain.headers()[CONTENT_TYPE],
            "text/javascript; charset=utf-8"
        );
        assert!(
            plain.headers()[CACHE_CONTROL]
                .to_str()
                .unwrap()
                .contains("immutable")
        );

        let gz = get(&path, Some("br, gzip;q=0.8")).unwrap();
        assert_eq!(gz.headers()[CONTENT_ENCODING], "gzip");
        let refused = get(&path, Some("gzip;q=0")).unwrap();
        assert!(refused.headers().get(CONTENT_ENCODING).is_none());
    }
}
