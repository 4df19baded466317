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
//! machine sends `Content-Type: application/json` and no `Origin`.
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
    match check(&allowed, req.method(), req.headers()) {
        Ok(()) => next.run(req).await,
        Err(e) => {
            tracing::warn!(method = %req.method(), path = req.uri().path(), error = %e, "request refused as possibly driven by another site");
            e.into_response()
        }
    }
}

fn check(allowed: &AllowedHosts, method: &Method, headers: &HeaderMap) -> Result<(), Error> {
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
    if let Some(origin) = headers.get(header::ORIGIN) {
        let text = origin.to_str().unwrap_or("");
        let from = text.split_once("://").and_then(|(_, a)| authority(Some(a)));
        let same = matches!((&from, &host), (Some(from), Some(host))
            if from.host().eq_ignore_ascii_case(host.host()) && from.port_u16() == host.port_u16());
        if !same {
            return Err(Error::Forbidden(format!(
                "a change requested by a page of another site (Origin '{text}') is refused: \
                 without auth only this server's own pages, and programs (no Origin), may make \
                 changes; start shoal with --auth to use it from other sites"
            )));
        }
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
