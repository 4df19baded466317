//! Without auth, whoever reaches the API can run code, and so can any web page the user
//! opens, through their browser: a page may send a "simple" cross-origin POST (a
//! `text/plain` body, no preflight) to `http://127.0.0.1:12345`, or rebind a name of its
//! own to 127.0.0.1 and read the answers as same-origin (DNS rebinding). So, with auth off
//! (`shoal standalone` without `--auth`), the server refuses what only a browser driven by
//! another site sends (the checks of Jupyter, Vite and webpack-dev-server):
//!
//! - every request, reads included: the `Host` is an IP address, `localhost` (or a name
//!   under `.localhost`), or a name given with `--allowed-host`. A rebinding page's requests
//!   carry the page's own name. The port is not compared: a rebinding page cannot change
//!   the name, and port forwards (`ssh -L`, `docker -p`) change the port.
//! - a request that changes something (any method but GET, HEAD and OPTIONS): its `Origin`,
//!   when it has one, is the server's own (the `Host` the request was sent to); and a
//!   POST, PUT or PATCH has a JSON or YAML `Content-Type`, empty body or not, which a
//!   browser sends to another origin only after a preflight this server never grants.
//!
//! Webhook trigger and callback URLs are no exception: a program calling them from this
//! machine sends `Content-Type: application/json` and no `Origin`. Form pages
//! (`/forms/...`) are posted form-encoded by the browser, as HTML forms are: for them the
//! `Origin` check alone stands (a browser sends `Origin` with every POST), and they make
//! it with auth on too ([`check_origin`]), since a browser replays HTTP Basic credentials
//! by itself.
//!
//! With auth on, none of this applies: a browser never adds a bearer token by itself, so
//! another site's page cannot act as the user, and a proxy in front may rewrite `Host`.

use crate::error::Error;
use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::Arc;

/// Host names, besides IP addresses and `localhost`, that requests may be addressed to
/// (lower case).
#[derive(Clone, Debug, Default)]
pub(crate) struct AllowedHosts(Arc<[String]>);

impl AllowedHosts {
    pub fn new(names: &[String]) -> AllowedHosts {
        AllowedHosts(names.iter().map(|n| n.to_ascii_lowercase()).collect())
    }

    fn allows(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        let ip = host.trim_start_matches('[').trim_end_matches(']');
        ip.parse::<IpAddr>().is_ok()
            || host == "localhost"
            || host.ends_with(".localhost")
            || self.0.contains(&host)
    }
}

/// The middleware: refuses what another site's page could make a browser send.
pub(crate) async fn refuse(
    State(allowed): State<AllowedHosts>,
    req: Request,
    next: Next,
) -> Response {
    let form = req.uri().path().starts_with(FORMS);
    match check(&allowed, req.method(), req.headers(), form) {
        Ok(()) => next.run(req).await,
        Err(e) => {
            tracing::warn!(method = %req.method(), path = req.uri().path(), error = %e, "request refused as possibly driven by another site");
            e.into_response()
        }
    }
}

/// Where form pages are served.
const FORMS: &str = "/forms/";

fn check(
    allowed: &AllowedHosts,
    method: &Method,
    headers: &HeaderMap,
    form: bool,
) -> Result<(), Error> {
    // Browsers always send Host; a client without it (HTTP/1.0) is no web page.
    let host = match headers.get(header::HOST) {
        None => None,
        Some(v) => Some(authority(v.to_str().ok()).ok_or_else(|| {
            Error::BadRequest("the Host header is not a host name or address".into())
        })?),
    };
    if let Some(host) = &host
        && !allowed.allows(host.host())
    {
        return Err(Error::Forbidden(format!(
            "this server is not reached by the name '{}' (Host): use its IP address or \
             localhost, or start it with --allowed-host {0} (SHOAL_ALLOWED_HOST), or with --auth",
            host.host()
        )));
    }
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    if let Err(origin) = check_origin(headers) {
        return Err(Error::Forbidden(format!(
            "a change requested by a page of another site (Origin '{origin}') is refused: \
             without auth only this server's own pages, and programs (no Origin), may make \
             changes; start shoal with --auth to use it from other sites"
        )));
    }
    if form && *method == Method::POST && is_form(headers) {
        return Ok(());
    }
    if matches!(*method, Method::POST | Method::PUT | Method::PATCH) {
        let given = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !is_json_or_yaml(given) {
            let given = if given.is_empty() { "none" } else { given };
            return Err(Error::UnsupportedMediaType(format!(
                "{method} needs Content-Type application/json or application/yaml (got {given}), \
                 also with an empty body: without auth, shoal refuses requests a web page of \
                 another site could send"
            )));
        }
    }
    Ok(())
}

/// Refuses a request a page of another site sent: its `Origin`, when it has one, must be
/// the `Host` it was sent to. The error is the `Origin` refused.
pub(crate) fn check_origin(headers: &HeaderMap) -> Result<(), String> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let host = authority(headers.get(header::HOST).and_then(|v| v.to_str().ok()));
    let text = origin.to_str().unwrap_or("");
    let from = text.split_once("://").and_then(|(_, a)| authority(Some(a)));
    let same = matches!((&from, &host), (Some(from), Some(host))
        if from.host().eq_ignore_ascii_case(host.host()) && from.port_u16() == host.port_u16());
    if same { Ok(()) } else { Err(text.to_string()) }
}

/// Whether the body is an HTML form's (`application/x-www-form-urlencoded`).
pub(crate) fn is_form(headers: &HeaderMap) -> bool {
    let given = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = given.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/x-www-form-urlencoded")
}

fn authority(text: Option<&str>) -> Option<Authority> {
    text?.parse::<Authority>().ok()
}

/// A media type a browser sends cross-origin only after a preflight.
fn is_json_or_yaml(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    matches!(
        essence.as_str(),
        "application/json" | "application/yaml" | "application/x-yaml" | "text/yaml"
    ) || (essence.starts_with("application/")
        && (essence.ends_with("+json") || essence.ends_with("+yaml")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_yaml_media_types_are_told_from_simple_ones() {
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/yaml",
            "application/x-yaml",
            "text/yaml",
            "application/merge-patch+json",
        ] {
            assert!(is_json_or_yaml(ok), "{ok}");
        }
        for refused in [
            "",
            "text/plain",
            "text/plain; charset=application/json",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "text/json+plain",
        ] {
            assert!(!is_json_or_yaml(refused), "{refused}");
        }
    }

    #[test]
    fn form_pages_take_form_posts_from_their_own_origin_only() {
        let hosts = AllowedHosts::default();
        let headers = |origin: Option<&str>, content_type: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, "127.0.0.1:8080".parse().unwrap());
            h.insert(header::CONTENT_TYPE, content_type.parse().unwrap());
            if let Some(o) = origin {
                h.insert(header::ORIGIN, o.parse().unwrap());
            }
            h
        };
        let form = "application/x-www-form-urlencoded";
        let own = headers(Some("http://127.0.0.1:8080"), form);
        assert!(check(&hosts, &Method::POST, &own, true).is_ok());
        assert!(check(&hosts, &Method::POST, &headers(None, form), true).is_ok());
        let other = headers(Some("http://evil.example"), form);
        assert!(check(&hosts, &Method::POST, &other, true).is_err());
        assert_eq!(check_origin(&other), Err("http://evil.example".to_string()));
        assert_eq!(check_origin(&own), Ok(()));
        // Elsewhere a form post is what another site's page sends: refused.
        assert!(check(&hosts, &Method::POST, &own, false).is_err());
        let plain = headers(Some("http://127.0.0.1:8080"), "text/plain");
        assert!(check(&hosts, &Method::POST, &plain, true).is_err());
    }

    #[test]
    fn addresses_localhost_and_given_names_are_allowed_hosts() {
        let hosts = AllowedHosts::new(&["Shoal.Internal".to_string()]);
        for ok in [
            "127.0.0.1",
            "10.1.2.3",
            "[::1]",
            "localhost",
            "app.localhost",
            "shoal.internal",
        ] {
            assert!(hosts.allows(ok), "{ok}");
        }
        for refused in ["evil.example", "localhost.evil.example", "127.0.0.1.nip.io"] {
            assert!(!hosts.allows(refused), "{refused}");
        }
    }
}
