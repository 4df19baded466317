//! The one HTTP helper of the client commands: builds `/api/v1` URLs, adds the token and
//! turns transport failures and error answers into messages that say what to do.

use super::Connection;
use anyhow::{Context, anyhow, bail};
use reqwest::{Method, Response, StatusCode, Url};
use serde::de::DeserializeOwned;
use std::time::Duration;

pub struct Api {
    http: reqwest::Client,
    base: Url,
    /// The address as the user gave it, for messages.
    shown: String,
    token: Option<String>,
}

/// A request body and its content type.
pub struct Body {
    pub content_type: &'static str,
    pub bytes: Vec<u8>,
}

impl Body {
    pub fn json(value: &serde_json::Value) -> Body {
        Body {
            content_type: "application/json",
            bytes: value.to_string().into_bytes(),
        }
    }
}

impl Api {
    pub fn new(conn: &Connection) -> anyhow::Result<Api> {
        let api = &conn.endpoint.api;
        let base = Url::parse(api).map_err(|e| {
            anyhow!("invalid api address '{api}': {e} (expected e.g. http://127.0.0.1:12345)")
        })?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            bail!("invalid api address '{api}': use an http:// or https:// URL");
        }
        // reqwest is built without a TLS crypto provider; main installs ring at start-up,
        // this covers any other entry (tests). A second install is a harmless no-op.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(60));
        if let Some(path) = &conn.endpoint.api_ca {
            builder = builder.tls_certs_merge(trusted_certs(path)?);
        }
        let http = builder.build().context("cannot set up the HTTP client")?;
        let token = conn.token.clone().filter(|t| !t.is_empty());
        Ok(Api {
            http,
            base,
            shown: api.clone(),
            token,
        })
    }

    /// `base/api/v1/<segments...>?<query>`; segments are percent-encoded.
    fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .expect("checked in Api::new")
            .pop_if_empty()
            .extend(["api", "v1"])
            .extend(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    /// Sends a request and returns the answer if it is a success; otherwise an error with
    /// the server's message.
    pub async fn send(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<Body>,
    ) -> anyhow::Result<Response> {
        let mut req = self.request(method, segments, query);
        if let Some(b) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, b.content_type)
                .body(b.bytes);
        }
        let resp = self.execute(req).await?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let message = error_message(resp).await;
        Err(match status {
            StatusCode::UNAUTHORIZED => anyhow!("{message} (pass --token or set SHOAL_TOKEN)"),
            _ => anyhow!(message),
        })
    }

    /// A request to `/api/v1/<segments...>`, with the token if there is one.
    pub fn request(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
    ) -> reqwest::RequestBuilder {
        let req = self.http.request(method, self.url(segments, query));
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// Sends `req`; a failure to reach the api says what to do.
    pub async fn execute(&self, req: reqwest::RequestBuilder) -> anyhow::Result<Response> {
        req.send().await.map_err(|e| self.transport_error(e))
    }

    pub async fn get<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        query: &[(&str, String)],
    ) -> anyhow::Result<T> {
        let resp = self.send(Method::GET, segments, query, None).await?;
        self.read_json(resp).await
    }

    pub async fn post<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        body: Body,
    ) -> anyhow::Result<T> {
        let resp = self.send(Method::POST, segments, &[], Some(body)).await?;
        self.read_json(resp).await
    }

    pub async fn delete<T: DeserializeOwned>(&self, segments: &[&str]) -> anyhow::Result<T> {
        let resp = self.send(Method::DELETE, segments, &[], None).await?;
        self.read_json(resp).await
    }

    async fn read_json<T: DeserializeOwned>(&self, resp: Response) -> anyhow::Result<T> {
        let url = resp.url().clone();
        let bytes = resp.bytes().await.map_err(|e| self.transport_error(e))?;
        serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "unexpected answer from {url}: is {} a shoal api of this version?",
                self.shown
            )
        })
    }

    fn transport_error(&self, e: reqwest::Error) -> anyhow::Error {
        let message = if let Some(tls) = tls_error(&e) {
            let fix = match tls {
                rustls::Error::InvalidCertificate(_) => {
                    "give the CA that signed its certificate with --api-ca or SHOAL_API_CA"
                }
                _ => "does it serve HTTPS? an address of a plain HTTP server starts with http://",
            };
            format!(
                "cannot connect to the shoal api at {} over TLS: {tls} ({fix})",
                self.shown
            )
        } else if e.is_connect() {
            format!(
                "cannot reach the shoal api at {}: is `shoal standalone` or the api-server \
                 running? (set --api or SHOAL_API)",
                self.shown
            )
        } else if e.is_timeout() {
            format!("the shoal api at {} did not answer in time", self.shown)
        } else {
            format!("request to the shoal api at {} failed: {e}", self.shown)
        };
        Unreachable(message).into()
    }
}

/// The certificates of a PEM file given with `--api-ca`.
fn trusted_certs(path: &std::path::Path) -> anyhow::Result<Vec<reqwest::Certificate>> {
    let pem = std::fs::read(path)
        .with_context(|| format!("cannot read the --api-ca file {}", path.display()))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .ok()
        .filter(|certs| !certs.is_empty());
    certs.with_context(|| {
        format!(
            "the --api-ca file {} holds no PEM certificate",
            path.display()
        )
    })
}

/// The TLS failure behind a failed request (an untrusted certificate, mostly), if any.
fn tls_error(e: &reqwest::Error) -> Option<&rustls::Error> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        // An io::Error's `source` skips the error it wraps, which is how rustls' arrives.
        next = match err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner),
            None => err.source(),
        };
    }
    None
}

/// What an error answer says: its JSON `error`, else its text, else its status.
pub async fn error_message(resp: Response) -> String {
    let (status, url) = (resp.status(), resp.url().clone());
    let text = resp.text().await.unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .or_else(|| Some(text.trim().to_string()).filter(|t| !t.is_empty()))
        .unwrap_or_else(|| format!("the api answered {status} to {url}"))
}

/// The api could not be asked (refused, timed out, connection lost), as opposed to an
/// answer saying no. Worth retrying while following a run.
#[derive(Debug)]
pub struct Unreachable(String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(addr: &str) -> anyhow::Result<Api> {
        Api::new(&Connection {
            endpoint: super::super::Endpoint {
                api: addr.into(),
                api_ca: None,
            },
            token: None,
        })
    }

    #[test]
    fn urls_are_built_under_api_v1_with_encoded_segments() {
        let a = api("http://h:1").unwrap();
        assert_eq!(
            a.url(&["commands", "7"], &[]).as_str(),
            "http://h:1/api/v1/commands/7"
        );
        let a = api("http://h:1/shoal/").unwrap();
        let url = a.url(
            &["projects", "a b", "workflows"],
            &[("state", "running".into())],
        );
        assert_eq!(
            url.as_str(),
            "http://h:1/shoal/api/v1/projects/a%20b/workflows?state=running"
        );
    }

    #[test]
    fn bad_addresses_are_refused() {
        assert!(
            api("127.0.0.1:12345")
                .err()
                .unwrap()
                .to_string()
                .contains("http://")
        );
        assert!(
            api("ftp://h")
                .err()
                .unwrap()
                .to_string()
                .contains("http://")
        );
    }

    #[tokio::test]
    async fn a_refused_connection_says_how_to_fix_it() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = format!("http://{}", l.local_addr().unwrap());
        drop(l);
        let err = api(&addr)
            .unwrap()
            .get::<serde_json::Value>(&["health"], &[])
            .await;
        let err = err.unwrap_err();
        assert!(err.is::<Unreachable>(), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains(&addr) && msg.contains("SHOAL_API"), "{msg}");
    }
}
