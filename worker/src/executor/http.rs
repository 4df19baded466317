//! Http tasks: one request from the worker itself. Success means an expected status (any
//! 2xx when the task lists none); output parameters are picked out of a JSON response with
//! the [`jsonpath`](shoal_common::jsonpath) subset.
//!
//! The log gets the request line, the header names (not their values, which often carry
//! credentials), the status and the response body up to [`LOG_BODY_LIMIT`].

use super::kill::KillSwitch;
use super::task_log::TaskLog;
use super::{NO_EXIT_CODE, Outcome};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Client, Method, Url};
use shoal_common::definition::HttpSpec;
use shoal_common::jsonpath::{self, JsonPath};
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

/// Longest a request may take, unless the task's timeout (strategy `fail`) is shorter.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes of the response body copied to the task log.
pub(crate) const LOG_BODY_LIMIT: usize = 64 * 1024;
/// Bytes of the response body read to extract outputs from.
const MAX_BODY: usize = 16 * 1024 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The worker's http client, built on first use: connections are pooled across tasks.
pub(crate) fn client() -> Result<&'static Client, String> {
    static CLIENT: OnceLock<Result<Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            // reqwest is built without a TLS crypto provider and panics without one. The
            // binary installs ring at start-up; this covers embedders that do not.
            if rustls::crypto::CryptoProvider::get_default().is_none() {
                let _ = rustls::crypto::ring::default_provider().install_default();
            }
            Client::builder()
                .user_agent(concat!("shoal-worker/", env!("CARGO_PKG_VERSION")))
                .connect_timeout(CONNECT_TIMEOUT)
                .build()
                .map_err(|e| format!("cannot build the http client: {}", chain(&e)))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The request, checked before anything is sent.
struct Prepared {
    method: Method,
    url: Url,
    headers: HeaderMap,
    outputs: Vec<(String, String, JsonPath)>,
}

fn prepare(spec: &HttpSpec) -> Result<Prepared, String> {
    let method = spec.method.trim().to_ascii_uppercase();
    let method = Method::from_bytes(method.as_bytes())
        .map_err(|_| format!("invalid http method '{}'", spec.method))?;
    let url =
        Url::parse(spec.url.trim()).map_err(|e| format!("invalid url '{}': {e}", spec.url))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "unsupported url scheme '{}' in '{}' (use http or https)",
            url.scheme(),
            spec.url
        ));
    }
    let mut headers = HeaderMap::new();
    for (name, value) in &spec.headers {
        let name_ = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| format!("invalid header name '{name}'"))?;
        let value = HeaderValue::from_str(value.trim())
            .map_err(|_| format!("invalid value for header '{name}'"))?;
        headers.append(name_, value);
    }
    let outputs = spec
        .outputs
        .iter()
        .map(|(name, path)| {
            JsonPath::parse(path)
                .map(|p| (name.clone(), path.clone(), p))
                .map_err(|e| format!("output '{name}': invalid JSONPath '{path}': {e}"))
        })
        .collect::<Result<_, _>>()?;
    Ok(Prepared {
        method,
        url,
        headers,
        outputs,
    })
}

/// Runs the request; a stop (kill or timeout) drops it, which cancels it.
pub(crate) async fn run(spec: &HttpSpec, log: &TaskLog, kill: &KillSwitch) -> Outcome {
    let prepared = match prepare(spec) {
        Ok(p) => p,
        Err(message) => {
            log.note(&message);
            return Outcome::failure(message);
        }
    };
    let client = match client() {
        Ok(c) => c,
        Err(message) => {
            log.note(&message);
            return Outcome::failure(message);
        }
    };
    // Cancellation-safe: dropping the request future aborts the request and its connection.
    tokio::select! {
        outcome = request(client, spec, prepared, log) => outcome,
        _ = kill.stopped() => Outcome::killed(),
    }
}

async fn request(client: &Client, spec: &HttpSpec, p: Prepared, log: &TaskLog) -> Outcome {
    // A password in the url stays out of the log.
    let shown = shoal_common::redact::without_password(p.url.as_str());
    log.note(&format!("{} {shown}", p.method));
    if !p.headers.is_empty() {
        let names: Vec<&str> = p.headers.keys().map(HeaderName::as_str).collect();
        log.note(&format!("request headers: {}", names.join(", ")));
    }
    let mut request = client
        .request(p.method, p.url)
        .headers(p.headers)
        .timeout(REQUEST_TIMEOUT);
    if let Some(body) = &spec.body {
        log.note(&format!("request body: {} bytes", body.len()));
        request = request.body(body.clone());
    }
    let mut response = match request.send().await {
        Ok(r) => r,
        Err(e) => return request_failed(log, &e),
    };
    let status = response.status();
    log.note(&format!("response status: {status}"));

    // Only what is needed is read: the logged prefix, or the whole body for outputs.
    let keep = if p.outputs.is_empty() {
        LOG_BODY_LIMIT
    } else {
        MAX_BODY
    };
    let mut body = Vec::new();
    let mut complete = true;
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > keep {
                    body.extend_from_slice(&chunk[..keep - body.len()]);
                    complete = false;
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => return request_failed(log, &e),
        }
    }
    log_body(log, &body, complete);

    let ok = if spec.expected_status.is_empty() {
        status.is_success()
    } else {
        spec.expected_status.contains(&status.as_u16())
    };
    if !ok {
        let expected = if spec.expected_status.is_empty() {
            "2xx".to_string()
        } else {
            spec.expected_status
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let message = format!("unexpected status {status} (expected {expected})");
        log.note(&message);
        return Outcome::Failure {
            exit_code: NO_EXIT_CODE,
            message,
            output: HashMap::new(),
        };
    }
    if p.outputs.is_empty() {
        return Outcome::Success {
            output: HashMap::new(),
        };
    }
    match extract(&body, complete, &p.outputs) {
        Ok(output) => Outcome::Success { output },
        Err(message) => {
            log.note(&message);
            Outcome::failure(message)
        }
    }
}

/// Output parameters from the JSON body.
fn extract(
    body: &[u8],
    complete: bool,
    outputs: &[(String, String, JsonPath)],
) -> Result<HashMap<String, String>, String> {
    if !complete {
        return Err(format!(
            "response body is larger than {} MiB; outputs cannot be extracted",
            MAX_BODY / (1024 * 1024)
        ));
    }
    let doc: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| format!("response is not JSON, outputs cannot be extracted: {e}"))?;
    outputs
        .iter()
        .map(|(name, text, path)| match path.find(&doc) {
            Some(value) => Ok((name.clone(), jsonpath::render(value))),
            None => Err(format!(
                "output '{name}': path '{text}' not found in the response"
            )),
        })
        .collect()
}

fn log_body(log: &TaskLog, body: &[u8], complete: bool) {
    let shown = &body[..body.len().min(LOG_BODY_LIMIT)];
    if !shown.is_empty() {
        log.write(shown);
        if !shown.ends_with(b"\n") {
            log.write(b"\n");
        }
    }
    if shown.len() < body.len() || !complete {
        log.note(&format!(
            "response body truncated at {LOG_BODY_LIMIT} bytes"
        ));
    }
}

fn request_failed(log: &TaskLog, e: &reqwest::Error) -> Outcome {
    let message = if e.is_timeout() {
        format!(
            "request timed out after {}",
            shoal_common::duration::format(REQUEST_TIMEOUT)
        )
    } else {
        format!("request failed: {}", chain(e))
    };
    log.note(&message);
    Outcome::failure(message)
}

/// An error with its sources: reqwest's own message alone rarely says what went wrong.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn spec(url: &str) -> HttpSpec {
        HttpSpec {
            url: url.into(),
            method: "GET".into(),
            headers: BTreeMap::new(),
            body: None,
            expected_status: vec![],
            outputs: BTreeMap::new(),
        }
    }

    #[test]
    fn requests_are_checked_before_they_are_sent() {
        let err = |s: HttpSpec| prepare(&s).err().expect("refused");
        assert!(prepare(&spec("http://127.0.0.1:1/x")).is_ok());
        let mut s = spec("http://h/");
        s.method = "post".into();
        assert_eq!(prepare(&s).unwrap().method, Method::POST);

        assert!(err(spec("not a url")).contains("invalid url"));
        assert!(err(spec("ftp://h/x")).contains("scheme 'ftp'"));
        let mut s = spec("http://h/");
        s.method = "GE T".into();
        assert!(err(s).contains("invalid http method"));
        let mut s = spec("http://h/");
        s.headers.insert("bad header".into(), "v".into());
        assert!(err(s).contains("'bad header'"));
        let mut s = spec("http://h/");
        s.outputs.insert("id".into(), "$.items[*]".into());
        let e = err(s);
        assert!(e.contains("output 'id'") && e.contains("$.items[*]"), "{e}");
    }

    #[test]
    fn outputs_come_from_the_json_body() {
        let outputs: Vec<_> = [("id", "$.data.id"), ("name", "$.data.name")]
            .into_iter()
            .map(|(n, p)| (n.to_string(), p.to_string(), JsonPath::parse(p).unwrap()))
            .collect();
        let got = extract(br#"{"data":{"id":7,"name":"x"}}"#, true, &outputs).unwrap();
        assert_eq!(got["id"], "7");
        assert_eq!(got["name"], "x");
        let e = extract(br#"{"data":{"id":7}}"#, true, &outputs).unwrap_err();
        assert!(e.contains("'$.data.name' not found"), "{e}");
        let e = extract(b"<html>", true, &outputs).unwrap_err();
        assert!(e.contains("not JSON"), "{e}");
        let e = extract(b"{}", false, &outputs).unwrap_err();
        assert!(e.contains("larger than"), "{e}");
    }
}
