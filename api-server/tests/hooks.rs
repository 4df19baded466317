//! Webhook triggers through the router, with auth on, against a real SQLite store, and the
//! caller's address the audit log records. The caller's address is set on each request as
//! the server sets it (its TCP peer); a task
//! stands in for a master's intake and claims each command (a real claim, in the store),
//! so calls learn their instance. Runs ending (sync 200) are tested end to end in
//! `tests/triggers.rs`.

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Request, StatusCode, header};
use serde_json::{Value, json};
use shoal_api_server::{ApiState, Auth, Limits, router};
use shoal_common::secret_key::SecretKey;
use shoal_common::types::WorkflowState;
use shoal_store::{AuditFilter, InstanceUpdate, Store, WriteBatch};
use std::net::SocketAddr;
use std::time::Duration;
use tempfile::TempDir;
use tower::ServiceExt;

const ADMIN: &str = "the-operators-admin-token";
const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const TOKEN: &str = "hook-token-0123456789";
const PASSWORD: &str = "correct-horse-battery-staple";

/// Every kind of trigger; `${who}` is defined only by the mapping of `tok` and `local`.
const WORKFLOW: &str = "\
name: etl
params: { who: nobody }
triggers:
  - { name: tok, auth: { token: hook-token-0123456789 }, params: { who: $.user.name, n: '$.items[0]' } }
  - { name: bas, auth: { basic: { user: ci, password: '${secret.hook_pw}' } } }
  - { name: local, auth: { token: hook-token-0123456789 }, allow_ips: [127.0.0.1/32, '::1'] }
  - { name: slow, mode: sync, auth: { token: hook-token-0123456789 }, timeout: 1s, outputs: [x] }
tasks:
  - { name: a, type: shell, command: 'echo ${who}' }
";

struct Env {
    app: Router,
    store: Store,
    _dir: TempDir,
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    json: Value,
}

/// A request from `peer` with `headers`.
struct Call<'a> {
    uri: &'a str,
    peer: &'a str,
    headers: Vec<(&'a str, String)>,
    body: String,
}

impl<'a> Call<'a> {
    fn to(uri: &'a str) -> Call<'a> {
        Call {
            uri,
            peer: "127.0.0.1",
            headers: Vec::new(),
            body: String::new(),
        }
    }

    fn from(mut self, peer: &'a str) -> Self {
        self.peer = peer;
        self
    }

    fn header(mut self, name: &'a str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    fn token(self, token: &str) -> Self {
        self.header("authorization", format!("Bearer {token}"))
    }

    fn body(mut self, body: impl Into<String>) -> Self {
        self.body = body.into();
        self
    }
}

async fn env(limits: Limits) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let store = Store::connect(&url).await.unwrap();
    let app = router(ApiState {
        store: store.clone(),
        auth: Auth::tokens(Some(ADMIN.into())),
        registry: None,
        secret: Default::default(),
        limits,
        secret_key: Some(SecretKey::from_hex(KEY).unwrap()),
        trusted_proxies: vec!["10.9.0.0/16".parse().unwrap()],
        allowed_hosts: Vec::new(),
    });
    let env = Env {
        app,
        store: store.clone(),
        _dir: dir,
    };
    let a = env
        .admin("POST", "/api/v1/projects/default/workflows", WORKFLOW)
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.json);
    let secret = json!({ "value": PASSWORD }).to_string();
    let a = env
        .admin("PUT", "/api/v1/projects/default/secrets/hook_pw", &secret)
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.json);
    // A master's intake: claims every command, so calls learn their instance.
    tokio::spawn(async move {
        loop {
            let _ = store.claim_commands("test-master", 1, 100).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    env
}

impl Env {
    async fn send(&self, method: &str, call: Call<'_>) -> Answer {
        let mut req = Request::builder().method(method).uri(call.uri);
        for (name, value) in &call.headers {
            req = req.header(*name, value);
        }
        let mut req = req.body(Body::from(call.body)).unwrap();
        let peer = SocketAddr::new(call.peer.parse().unwrap(), 40000);
        req.extensions_mut().insert(ConnectInfo(peer));
        let resp = self.app.clone().oneshot(req).await.unwrap();
        let (status, headers) = (resp.status(), resp.headers().clone());
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer {
            status,
            headers,
            json,
        }
    }

    async fn hook(&self, call: Call<'_>) -> Answer {
        self.send("POST", call).await
    }

    async fn admin(&self, method: &str, uri: &str, body: &str) -> Answer {
        self.send(method, Call::to(uri).token(ADMIN).body(body))
            .await
    }

    /// `shoal_api_commands_written_total` (each test runs in a process of its own).
    async fn commands_written(&self) -> u64 {
        let req = Request::get("/metrics").body(Body::empty()).unwrap();
        let resp = self.app.clone().oneshot(req).await.unwrap();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("shoal_api_commands_written_total "))
            .expect("the counter");
        line.rsplit(' ').next().unwrap().parse().unwrap()
    }

    async fn instances(&self) -> usize {
        let all = self
            .store
            .list_instances(&Default::default())
            .await
            .unwrap();
        all.len()
    }
}

const TOK: &str = "/api/v1/hooks/default/etl/tok";
const PAYLOAD: &str = r#"{"user": {"name": "ann"}, "items": [7]}"#;

fn error(a: &Answer) -> &str {
    a.json["error"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_call_is_let_in_by_the_triggers_own_credential_and_address_only() {
    let env = env(Limits::default()).await;
    let no = env.hook(Call::to(TOK).body(PAYLOAD)).await;
    assert_eq!(no.status, StatusCode::UNAUTHORIZED, "{}", no.json);
    assert!(error(&no).contains("needs its token"), "{}", no.json);
    let challenge = no.headers[header::WWW_AUTHENTICATE].to_str().unwrap();
    assert!(challenge.starts_with("Bearer realm=\"shoal trigger default/etl/tok\""));
    // A user's API token is not the trigger's, even a global admin's.
    for wrong in [ADMIN, "hook-token-0123456788", ""] {
        let a = env.hook(Call::to(TOK).token(wrong).body(PAYLOAD)).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{wrong}: {}", a.json);
    }
    let ok = env.hook(Call::to(TOK).token(TOKEN).body(PAYLOAD)).await;
    assert_eq!(ok.status, StatusCode::ACCEPTED, "{}", ok.json);
    let instance = ok.json["workflow_instance_id"].as_i64().expect("claimed");
    assert!(ok.json["command_id"].is_i64());
    let run = env
        .admin("GET", &format!("/api/v1/instances/{instance}"), "")
        .await;
    assert_eq!(run.json["params"], json!({"who": "ann", "n": "7"}));

    let bas = "/api/v1/hooks/default/etl/bas";
    let a = env.hook(Call::to(bas).token(TOKEN)).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    let challenge = a.headers[header::WWW_AUTHENTICATE].to_str().unwrap();
    assert!(challenge.starts_with("Basic realm="), "{challenge}");
    assert!(error(&a).contains("HTTP Basic"), "{}", a.json);
    // `echo -n ci:wrong | base64`, cj:PASSWORD, ':'.
    for wrong in [
        "Y2k6d3Jvbmc=",
        "Y2o6Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5LXN0YXBsZQ==",
        "Og==",
    ] {
        let call = Call::to(bas).header("authorization", format!("Basic {wrong}"));
        let a = env.hook(call).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{wrong}");
        assert!(error(&a).contains("wrong user or password"), "{}", a.json);
    }
    // ci:PASSWORD
    let right = "Basic Y2k6Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5LXN0YXBsZQ==";
    let a = env.hook(Call::to(bas).header("authorization", right)).await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.json);

    let local = "/api/v1/hooks/default/etl/local";
    let refused = env
        .hook(Call::to(local).from("127.0.0.2").token(TOKEN))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.json);
    assert!(
        error(&refused).contains("from 127.0.0.2"),
        "{}",
        refused.json
    );
    let forged = Call::to(local).from("127.0.0.2").token(TOKEN);
    let forged = forged.header("x-forwarded-for", "127.0.0.1");
    assert_eq!(env.hook(forged).await.status, StatusCode::FORBIDDEN);
    let direct = env.hook(Call::to(local).token(TOKEN)).await;
    assert_eq!(direct.status, StatusCode::ACCEPTED, "{}", direct.json);
    let v6 = env.hook(Call::to(local).from("::1").token(TOKEN)).await;
    assert_eq!(v6.status, StatusCode::ACCEPTED, "{}", v6.json);
    let proxied = Call::to(local).from("10.9.3.4").token(TOKEN);
    let proxied = proxied.header("x-forwarded-for", "198.51.100.1, 127.0.0.1");
    assert_eq!(env.hook(proxied).await.status, StatusCode::ACCEPTED);
    let proxied = Call::to(local).from("10.9.3.4").token(TOKEN);
    let proxied = proxied.header("x-forwarded-for", "198.51.100.1");
    let a = env.hook(proxied).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert!(error(&a).contains("from 198.51.100.1"), "{}", a.json);

    // One answer whatever is missing: a caller learns nothing of what exists.
    for missing in ["default/etl/nope", "default/gone/tok", "nowhere/etl/tok"] {
        let uri = format!("/api/v1/hooks/{missing}");
        let a = env.hook(Call::to(&uri).token(TOKEN)).await;
        assert_eq!(a.status, StatusCode::NOT_FOUND);
        let says = format!("no trigger '{missing}': check the project, workflow and trigger");
        assert!(error(&a).starts_with(&says), "{}", a.json);
    }

    // Audited once let in: who (the trigger), from where; refusals before that are not.
    let filter = AuditFilter {
        action: Some("callTrigger".into()),
        limit: 100,
        ..Default::default()
    };
    let rows = env.store.list_audit(&filter).await.unwrap();
    let seen: Vec<(&str, &str, &str)> = rows
        .iter()
        .rev()
        .map(|r| (r.actor.as_str(), r.address.as_str(), r.result.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("trigger etl/tok", "127.0.0.1", "ok"),
            ("trigger etl/bas", "127.0.0.1", "ok"),
            ("trigger etl/local", "127.0.0.1", "ok"),
            ("trigger etl/local", "::1", "ok"),
            ("trigger etl/local", "127.0.0.1", "ok"),
        ]
    );
}

/// Any change through the API is audited with the caller's address as a trusted proxy
/// forwarded it; an untrusted peer's X-Forwarded-For is not believed.
#[tokio::test]
async fn a_change_through_a_trusted_proxy_is_audited_with_the_client_s_address() {
    let env = env(Limits::default()).await;
    let create = |name: &'static str| {
        let body = json!({ "name": name }).to_string();
        Call::to("/api/v1/projects").token(ADMIN).body(body)
    };
    let forwarded = "203.0.113.7, 10.9.0.4";
    let a = env
        .send(
            "POST",
            create("via_proxy")
                .from("10.9.0.3")
                .header("x-forwarded-for", forwarded),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.json);
    let a = env
        .send(
            "POST",
            create("forged")
                .from("192.0.2.1")
                .header("x-forwarded-for", "203.0.113.7"),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.json);
    let filter = AuditFilter {
        action: Some("createProject".into()),
        limit: 100,
        ..Default::default()
    };
    let rows = env.store.list_audit(&filter).await.unwrap();
    let seen: Vec<(&str, &str)> = rows
        .iter()
        .rev()
        .map(|r| (r.project.as_deref().unwrap_or_default(), r.address.as_str()))
        .collect();
    assert_eq!(
        seen,
        [("via_proxy", "203.0.113.7"), ("forged", "192.0.2.1")]
    );
}

#[tokio::test]
async fn a_payload_is_mapped_checked_and_an_idempotency_key_returns_the_first_run() {
    let env = env(Limits {
        body_bytes: 4096,
        ..Limits::default()
    })
    .await;
    let call = || Call::to(TOK).token(TOKEN);
    let a = env.hook(call().body(r#"{"user": {}}"#)).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        error(&a),
        "the payload has no value at $.items[0], which trigger 'tok' maps to param 'n'"
    );
    let a = env.hook(call().body("user=ann")).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(error(&a).starts_with("invalid JSON body"), "{}", a.json);
    let a = env.hook(call().body("x".repeat(5000))).await;
    assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(error(&a).contains("limit of 4096 bytes"), "{}", a.json);
    // Mapped parameters are checked as a start's are: `${region}` stays undefined.
    let needy = "name: needy\ntriggers: [{name: go, auth: {token: hook-token-0123456789}}]\n\
                 tasks: [{name: a, type: shell, command: 'echo ${region}'}]\n";
    let a = env
        .admin("POST", "/api/v1/projects/default/workflows", needy)
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.json);
    let a = env
        .hook(Call::to("/api/v1/hooks/default/needy/go").token(TOKEN))
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(error(&a).contains("refers to ${region}"), "{}", a.json);

    let keyed = || {
        call()
            .header("idempotency-key", "delivery-42")
            .body(PAYLOAD)
    };
    let written = env.commands_written().await;
    let first = env.hook(keyed()).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.json);
    let before = env.instances().await;
    let again = env.hook(keyed()).await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.json);
    assert_eq!(again.json, first.json, "the same run");
    assert_eq!(env.instances().await, before, "nothing new started");
    assert_eq!(
        env.commands_written().await,
        written + 1,
        "one command counted"
    );
    let other = call().header("idempotency-key", "delivery-42");
    let other = env
        .hook(other.body(r#"{"user": {"name": "bob"}, "items": [1]}"#))
        .await;
    assert_eq!(other.status, StatusCode::CONFLICT, "{}", other.json);
    let long = call()
        .header("idempotency-key", "k".repeat(256))
        .body(PAYLOAD);
    assert_eq!(env.hook(long).await.status, StatusCode::BAD_REQUEST);

    // A sync call whose run does not end (nothing runs it here) answers 504 with the run.
    let slow = Call::to("/api/v1/hooks/default/etl/slow").token(TOKEN);
    let a = env.hook(slow).await;
    assert_eq!(a.status, StatusCode::GATEWAY_TIMEOUT, "{}", a.json);
    let instance = a.json["workflow_instance_id"].as_i64().expect("the run");
    assert!(
        error(&a).contains(&format!(
            "goes on as workflow instance {instance} (running)"
        )),
        "{}",
        a.json
    );
}

#[tokio::test]
async fn triggers_are_listed_with_their_url_and_never_their_credential() {
    let env = env(Limits::default()).await;
    let a = env
        .admin("GET", "/api/v1/projects/default/triggers", "")
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    let text = a.json.to_string();
    assert!(!text.contains(TOKEN) && !text.contains("sha256") && !text.contains("hook_pw"));
    assert_eq!(a.json.as_array().unwrap().len(), 4);
    assert_eq!(
        a.json[0],
        json!({
            "workflow": "etl", "name": "tok", "type": "webhook", "mode": "async", "auth": "token",
            "allow_ips": [], "params": {"who": "$.user.name", "n": "$.items[0]"},
            "outputs": [], "timeout": null, "path": TOK, "methods": ["POST"],
            "public": false, "rate": null, "when": null,
        })
    );
    assert_eq!(a.json[1]["auth"], "basic");
    assert_eq!(a.json[3]["timeout"], "1s");
    assert_eq!(a.json[3]["outputs"], json!(["x"]));

    // Stored as a salted hash that is never shown: the definition reads `***`, which
    // applies again unchanged, and the token still opens the trigger.
    let def = env
        .admin("GET", "/api/v1/projects/default/workflows/etl", "")
        .await;
    let text = def.json.to_string();
    assert!(!text.contains(TOKEN) && !text.contains("sha256") && !text.contains("pbkdf2"));
    let yaml = def.json["yaml"].as_str().unwrap();
    assert!(yaml.contains("token: '***'"), "{yaml}");
    let again = env
        .admin("POST", "/api/v1/projects/default/workflows", yaml)
        .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.json);
    assert_eq!(again.json["created"], false);
    let call = env.hook(Call::to(TOK).token(TOKEN).body(PAYLOAD)).await;
    assert_eq!(call.status, StatusCode::ACCEPTED, "{}", call.json);

    // A new token replaces the old one; a hash written by hand is refused by name.
    let new_token = "a-brand-new-token-42";
    let changed = yaml.replacen("token: '***'", &format!("token: {new_token}"), 1);
    let applied = env
        .admin("POST", "/api/v1/projects/default/workflows", &changed)
        .await;
    assert_eq!(applied.status, StatusCode::CREATED, "{}", applied.json);
    let old = env.hook(Call::to(TOK).token(TOKEN).body(PAYLOAD)).await;
    assert_eq!(old.status, StatusCode::UNAUTHORIZED, "{}", old.json);
    let new = env.hook(Call::to(TOK).token(new_token).body(PAYLOAD)).await;
    assert_eq!(new.status, StatusCode::ACCEPTED, "{}", new.json);
    let forged = yaml.replacen(
        "token: '***'",
        &format!(
            "token: 'sha256:{}'",
            shoal_common::access::token_hash("guess")
        ),
        1,
    );
    let refused = env
        .admin("POST", "/api/v1/projects/default/workflows", &forged)
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.json);
    let e = error(&refused);
    assert!(
        e.contains("trigger 'tok'") && e.contains("is a hash"),
        "{e}"
    );
}

/// A retried call whose run was deleted since gets a clear 409, every time, not a 500.
#[tokio::test]
async fn a_key_repeated_after_its_run_was_deleted_is_told_so() {
    let env = env(Limits::default()).await;
    let keyed = || {
        Call::to(TOK)
            .token(TOKEN)
            .header("idempotency-key", "delivery-7")
            .body(PAYLOAD)
    };
    let first = env.hook(keyed()).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.json);
    let id = first.json["workflow_instance_id"]
        .as_i64()
        .expect("claimed");
    let run = env.store.get_instance(id).await.unwrap().unwrap();
    let ended = WriteBatch {
        instance_updates: vec![InstanceUpdate {
            id,
            owner_epoch: run.owner_epoch,
            state: WorkflowState::Success,
            ended_at: Some(run.created_at + 1),
        }],
        epochs: vec![(id, run.owner_epoch)],
        ..Default::default()
    };
    env.store.write_batch(&ended).await.unwrap();
    let uri = format!("/api/v1/instances/{id}");
    assert_eq!(
        env.admin("DELETE", &uri, "").await.status,
        StatusCode::NO_CONTENT
    );
    for _ in 0..2 {
        let again = env.hook(keyed()).await;
        assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.json);
        assert_eq!(
            error(&again),
            format!(
                "the run this call started, workflow instance {id}, was deleted \
                 (Idempotency-Key 'delivery-7'); send a new Idempotency-Key to start another"
            )
        );
    }
}
