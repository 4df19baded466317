//! What a web browser may do with the API, over real HTTP on a real port: without auth, a
//! page of another site can neither write (no JSON/YAML content type, or another `Origin`)
//! nor read through a name of its own (DNS rebinding); answers carry the headers that keep
//! browsers from misusing them; a client that never finishes its headers is dropped.

use serde_json::Value;
use shoal_api_server::{ApiState, Auth, serve};
use shoal_store::Store;
use std::net::SocketAddr;
use std::time::Duration;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

const ADMIN: &str = "browsers-admin-token";
const FLOW: &str = "name: drive_by\ntasks:\n  - { name: a, type: shell, command: id }\n";

struct Server {
    addr: SocketAddr,
    shutdown: CancellationToken,
    _dir: TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn server(auth: Auth, allowed_hosts: &[&str]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let state = ApiState {
        store: Store::connect(&url).await.unwrap(),
        auth,
        registry: None,
        secret: Default::default(),
        limits: Default::default(),
        secret_key: None,
        trusted_proxies: Vec::new(),
        allowed_hosts: allowed_hosts.iter().map(|h| h.to_string()).collect(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    tokio::spawn(serve(listener, state, None, shutdown.clone()));
    Server {
        addr,
        shutdown,
        _dir: dir,
    }
}

struct Answer {
    status: u16,
    /// Lower-case names.
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        let found = self.headers.iter().find(|(n, _)| n == name);
        found.map(|(_, v)| v.as_str())
    }

    fn error(&self) -> String {
        let v: Value = serde_json::from_str(&self.body).unwrap_or(Value::Null);
        v["error"].as_str().unwrap_or(&self.body).to_string()
    }
}

/// A request as a browser (or curl) writes it: `headers` are sent as given, `Host` among
/// them (the server's address when not given).
async fn send(
    s: &Server,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {}\r\n", s.addr));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    let mut conn = TcpStream::connect(s.addr).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines.next().unwrap().split(' ').nth(1).unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.to_string()))
        .collect();
    Answer {
        status: status.parse().unwrap(),
        headers,
        body: body.to_string(),
    }
}

async fn workflows(s: &Server) -> Value {
    let a = send(s, "GET", "/api/v1/projects/default/workflows", &[], "").await;
    assert_eq!(a.status, 200, "{}", a.body);
    serde_json::from_str(&a.body).unwrap()
}

const JSON: (&str, &str) = ("Content-Type", "application/json");
const YAML: (&str, &str) = ("Content-Type", "application/yaml");
const APPLY: &str = "/api/v1/projects/default/workflows";
const START: &str = "/api/v1/projects/default/workflows/drive_by/start";

/// The drive-by of the finding: a page POSTs a workflow as `text/plain` (a "simple"
/// request, sent without a preflight) and starts it with an empty body.
#[tokio::test]
async fn without_auth_a_write_needs_a_json_or_yaml_content_type() {
    let s = server(Auth::Off, &[]).await;
    let plain = ("Content-Type", "text/plain;charset=UTF-8");
    let a = send(&s, "POST", APPLY, &[plain], FLOW).await;
    assert_eq!(a.status, 415, "{}", a.body);
    assert!(
        a.error().contains("application/json or application/yaml"),
        "{}",
        a.body
    );
    assert_eq!(workflows(&s).await, serde_json::json!([]), "nothing stored");
    for form in [
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let a = send(&s, "POST", APPLY, &[("Content-Type", form)], FLOW).await;
        assert_eq!(a.status, 415, "{form}: {}", a.body);
    }

    assert_eq!(send(&s, "POST", APPLY, &[YAML], FLOW).await.status, 201);
    let a = send(&s, "POST", START, &[], "").await;
    assert_eq!(a.status, 415, "an empty body needs one too: {}", a.body);
    assert!(a.error().contains("got none"), "{}", a.body);
    let a = send(&s, "POST", START, &[JSON], "").await;
    assert_eq!(a.status, 202, "{}", a.body);

    // Other systems' URLs follow the same rule, and get through with JSON.
    let callback = "/api/v1/callbacks/not-a-token";
    assert_eq!(send(&s, "POST", callback, &[plain], "{}").await.status, 415);
    let a = send(&s, "POST", callback, &[JSON], "{}").await;
    assert_eq!(a.status, 404, "{}", a.body);
    let hook = "/api/v1/hooks/default/drive_by/nope";
    assert_eq!(send(&s, "POST", hook, &[plain], "{}").await.status, 415);
    assert_eq!(send(&s, "POST", hook, &[JSON], "{}").await.status, 404);
    // DELETE is never sent cross-origin without a preflight: no content type needed.
    let a = send(
        &s,
        "DELETE",
        "/api/v1/projects/default/workflows/none",
        &[],
        "",
    )
    .await;
    assert_eq!(a.status, 404, "{}", a.body);
}

#[tokio::test]
async fn without_auth_only_the_servers_own_origin_may_write() {
    let s = server(Auth::Off, &[]).await;
    let own = format!("http://{}", s.addr);
    let other_port = format!("http://127.0.0.1:{}", s.addr.port() + 1);
    for origin in [other_port.as_str(), "http://evil.example", "null"] {
        let a = send(&s, "POST", APPLY, &[YAML, ("Origin", origin)], FLOW).await;
        assert_eq!(a.status, 403, "{origin}: {}", a.body);
        assert!(a.error().contains("another site"), "{}", a.body);
    }
    assert_eq!(workflows(&s).await, serde_json::json!([]), "nothing stored");
    let a = send(&s, "POST", APPLY, &[YAML, ("Origin", &own)], FLOW).await;
    assert_eq!(a.status, 201, "the UI's own page: {}", a.body);
    let host = format!("localhost:{}", s.addr.port());
    let origin = format!("http://{host}");
    let headers = [JSON, ("Host", host.as_str()), ("Origin", origin.as_str())];
    assert_eq!(send(&s, "POST", START, &headers, "").await.status, 202);

    // A preflight is never granted, so a page cannot send JSON to it either.
    let preflight = [
        ("Origin", other_port.as_str()),
        ("Access-Control-Request-Method", "POST"),
        ("Access-Control-Request-Headers", "content-type"),
    ];
    let a = send(&s, "OPTIONS", START, &preflight, "").await;
    assert!(
        a.header("access-control-allow-origin").is_none(),
        "{:?}",
        a.headers
    );
}

/// DNS rebinding: a page whose name now resolves to 127.0.0.1 sends its own name as Host.
#[tokio::test]
async fn without_auth_only_addresses_localhost_and_allowed_names_are_served() {
    let s = server(Auth::Off, &["Shoal.Internal"]).await;
    let port = s.addr.port();
    for path in ["/api/v1/projects", "/", "/api/v1/openapi.json"] {
        let a = send(
            &s,
            "GET",
            path,
            &[("Host", &format!("rebind.example:{port}"))],
            "",
        )
        .await;
        assert_eq!(a.status, 403, "{path}: {}", a.body);
        assert!(
            a.error().contains("--allowed-host rebind.example"),
            "{}",
            a.body
        );
    }
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "shoal.internal".to_string(),
        format!("SHOAL.internal:{}", port + 7),
    ] {
        let a = send(&s, "GET", "/api/v1/projects", &[("Host", &host)], "").await;
        assert_eq!(a.status, 200, "{host}: {}", a.body);
    }
}

/// With auth on the token is the protection (a browser never adds it by itself), and a
/// proxy in front may rewrite Host: neither Host nor Origin is checked.
#[tokio::test]
async fn with_auth_a_proxy_may_name_the_server_otherwise() {
    let s = server(Auth::tokens(Some(ADMIN.into())), &[]).await;
    let bearer = format!("Bearer {ADMIN}");
    let proxied = [
        ("Host", "shoal.example.com"),
        ("Origin", "https://shoal.example.com"),
        ("Authorization", bearer.as_str()),
        YAML,
    ];
    let a = send(&s, "POST", APPLY, &proxied, FLOW).await;
    assert_eq!(a.status, 201, "{}", a.body);
    let a = send(
        &s,
        "POST",
        APPLY,
        &[("Host", "shoal.example.com"), YAML],
        FLOW,
    )
    .await;
    assert_eq!(a.status, 401, "no token: {}", a.body);
}

#[tokio::test]
async fn answers_carry_headers_that_keep_browsers_from_misusing_them() {
    let s = server(Auth::Off, &[]).await;
    let api = send(&s, "GET", "/api/v1/projects", &[], "").await;
    let missing = send(&s, "POST", "/api/v1/nowhere", &[JSON], "{}").await;
    let refused = send(&s, "POST", APPLY, &[], FLOW).await;
    for a in [&api, &missing, &refused] {
        assert_eq!(a.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(a.header("x-frame-options"), Some("DENY"));
        assert_eq!(
            a.header("cache-control"),
            Some("no-store"),
            "{:?}",
            a.headers
        );
        assert_eq!(
            a.header("content-security-policy"),
            Some("default-src 'none'; frame-ancestors 'none'")
        );
        assert!(
            a.header("strict-transport-security").is_none(),
            "plain HTTP"
        );
    }
    let page = send(&s, "GET", "/instances/7", &[], "").await;
    assert_eq!(page.status, 200);
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(
        page.header("cache-control"),
        Some("no-cache"),
        "the UI may be cached"
    );
    let policy = page.header("content-security-policy").unwrap();
    assert!(
        policy.contains("frame-ancestors 'none'") && policy.contains("default-src 'self'"),
        "{policy}"
    );
}

/// Slowloris: connections that send half a request's headers are dropped once the header
/// read timeout passes (on a paused clock: the test does not wait for it).
#[tokio::test]
async fn a_request_whose_headers_never_end_is_dropped() {
    let s = server(Auth::Off, &[]).await;
    let mut half_sent = Vec::new();
    for _ in 0..6 {
        let mut conn = TcpStream::connect(s.addr).await.unwrap();
        conn.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            .await
            .unwrap();
        half_sent.push(conn);
    }
    tokio::time::pause();
    for mut conn in half_sent {
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_secs(3600), conn.read(&mut buf)).await;
        match read {
            Ok(Ok(0)) | Ok(Err(_)) => {}
            Ok(Ok(n)) => panic!("answered: {}", String::from_utf8_lossy(&buf[..n])),
            Err(_) => panic!("the server held a half-sent request for an hour"),
        }
    }
    tokio::time::resume();
    // Others are still served.
    assert_eq!(send(&s, "GET", "/api/v1/health", &[], "").await.status, 200);
}
