//! Webhook triggers end to end, over the real `shoal standalone` and over a cluster of
//! processes: calls from real sockets (a second loopback address stands for a caller the
//! allowlist refuses, a third for a trusted reverse proxy), runs that really run.

mod support;

use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{Value, json};
use std::net::IpAddr;
use std::time::Duration;
use support::{API_TOKEN, Env, LONG, cli, cli_env, text};

/// The api-servers of these tests trust 127.0.0.3 as a reverse proxy, and take bodies
/// up to 64 KiB.
const SERVER_ENV: &[(&str, &str)] = &[
    ("SHOAL_TRUSTED_PROXY", "127.0.0.3"),
    ("SHOAL_MAX_BODY_BYTES", "64KiB"),
];

support::deployments!(
    env: crate::SERVER_ENV;
    a_sync_call_answers_with_the_runs_outputs_and_an_async_one_with_its_run,
    callers_without_the_credential_or_from_another_address_are_refused,
    an_idempotency_key_starts_one_run_and_unreadable_payloads_are_refused,
    a_call_its_when_does_not_match_starts_nothing_and_says_so,
    open_triggers_take_get_and_put_and_public_ones_are_limited_to_their_rate,
);

const TOKEN: &str = "e2e-hook-token-0123456789";
const PASSWORD: &str = "e2e-hook-password-0123456789";

/// `${who}` comes from the payload; the task publishes two outputs, the sync trigger
/// answers with one.
fn workflow() -> String {
    r#"
name: greet
params: { who: nobody }
triggers:
  - { name: now, mode: sync, auth: { token: TOKEN }, params: { who: $.user.name }, outputs: [greeting], timeout: 60s }
  - { name: later, auth: { basic: { user: ci, password: PASSWORD } }, params: { who: $.user.name } }
  - { name: local, auth: { token: TOKEN }, allow_ips: [127.0.0.1/32] }
  - name: pushed
    auth: { token: TOKEN }
    when: "body.ref == 'main' && headers['x-event'] == 'push'"
    params: { who: $.user.name }
tasks:
  - name: greet
    type: shell
    command: |
      g="hello ${who}"
      echo '${setValue(greeting='"$g"')}'
      echo '${setValue(internal=x)}'
"#
    .replace("TOKEN", TOKEN)
    .replace("PASSWORD", PASSWORD)
}

/// An HTTP client whose connections come from `from` (a loopback address).
fn client(from: &str) -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::builder()
        .local_address(from.parse::<IpAddr>().unwrap())
        .timeout(Duration::from_secs(90))
        .build()
        .unwrap()
}

/// A POST to the hook of trigger `trigger` of `greet`.
fn hook(e: &Env, from: &str, trigger: &str) -> RequestBuilder {
    let url = format!("{}/api/v1/hooks/default/greet/{trigger}", e.api().base);
    // As webhook senders do; without auth the API refuses a write without it.
    client(from)
        .post(url)
        .header("content-type", "application/json")
}

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    json: Value,
}

impl Answer {
    /// A header of the answer; empty when it has none.
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", |v| v.to_str().unwrap())
    }
}

fn send(req: RequestBuilder) -> Answer {
    let resp = req.send().unwrap();
    Answer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        json: resp.json().unwrap_or(Value::Null),
    }
}

/// The run an async answer names (it may be written before a master claims it).
fn run_of(e: &Env, answer: &Answer) -> i64 {
    match answer.json["workflow_instance_id"].as_i64() {
        Some(id) => id,
        None => e.instance_of(answer.json["command_id"].as_i64().unwrap()),
    }
}

fn a_sync_call_answers_with_the_runs_outputs_and_an_async_one_with_its_run(e: Env) {
    e.apply(&workflow());
    let a = send(
        hook(&e, "127.0.0.1", "now")
            .bearer_auth(TOKEN)
            .json(&json!({"user": {"name": "ann"}})),
    );
    assert_eq!(a.status, 200, "{}", a.json);
    assert_eq!(a.json["state"], "success");
    assert_eq!(a.json["outputs"], json!({"greeting": "hello ann"}));
    let id = a.json["workflow_instance_id"].as_i64().unwrap();
    assert_eq!(e.api().get(&format!("/instances/{id}"))["state"], "success");

    let a = send(
        hook(&e, "127.0.0.1", "later")
            .basic_auth("ci", Some(PASSWORD))
            .json(&json!({"user": {"name": "bob"}})),
    );
    assert_eq!(a.status, 202, "{}", a.json);
    let run = e.api().wait_instance(run_of(&e, &a), LONG);
    assert_eq!(run["state"], "success", "{run}");
    assert_eq!(run["params"]["who"], "bob");

    // The CLI, with the trigger's token (not the user's, which it also has), from the
    // environment: arguments are visible to every user of the machine.
    let payload = r#"{"user": {"name": "cli"}}"#;
    let out = cli_env(
        e.api(),
        &["trigger", "call", "default/greet/now", "--data", payload],
        &[("SHOAL_TRIGGER_TOKEN", TOKEN)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        shown.contains(" success\n") && shown.ends_with("greeting=hello cli\n"),
        "{shown}"
    );
    let out = cli_env(
        e.api(),
        &[
            "trigger",
            "call",
            "default/greet/later",
            "--user",
            "ci",
            "-d",
            payload,
        ],
        &[("SHOAL_TRIGGER_PASSWORD", PASSWORD)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = cli(e.api(), &["trigger", "list"]);
    let listed = text(&out.stdout);
    assert!(
        listed.contains("/api/v1/hooks/default/greet/later")
            && listed.contains("basic")
            && listed.contains("127.0.0.1/32"),
        "{listed}"
    );
    assert!(
        !listed.contains(TOKEN) && !listed.contains(PASSWORD),
        "{listed}"
    );
}

fn callers_without_the_credential_or_from_another_address_are_refused(e: Env) {
    e.apply(&workflow());
    let missing = send(hook(&e, "127.0.0.1", "now"));
    assert_eq!(missing.status, 401, "{}", missing.json);
    let challenge = missing.header("www-authenticate");
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    for wrong in [API_TOKEN, "e2e-hook-token-012345678"] {
        let a = send(hook(&e, "127.0.0.1", "now").bearer_auth(wrong));
        assert_eq!(a.status, 401, "{wrong}: {}", a.json);
        assert!(a.json["error"].as_str().unwrap().contains("wrong token"));
    }
    let a = send(hook(&e, "127.0.0.1", "later").basic_auth("ci", Some("guess")));
    assert_eq!(a.status, 401, "{}", a.json);
    let challenge = a.header("www-authenticate");
    assert!(challenge.starts_with("Basic realm="), "{challenge}");
    let out = cli_env(
        e.api(),
        &["trigger", "call", "default/greet/now"],
        &[("SHOAL_TRIGGER_TOKEN", "guess")],
    );
    assert!(!out.status.success());
    let said = text(&out.stderr);
    assert!(
        said.contains("wrong token") && said.contains("SHOAL_TRIGGER_TOKEN"),
        "{said}"
    );
    // On the command line, where other users of the machine read it, it is refused.
    let out = cli(
        e.api(),
        &["trigger", "call", "default/greet/now", "--token", TOKEN],
    );
    let said = text(&out.stderr);
    assert!(
        !out.status.success() && said.contains("--token on the command line"),
        "{said}"
    );

    // allow_ips: [127.0.0.1/32]
    let a = send(hook(&e, "127.0.0.2", "local").bearer_auth(TOKEN));
    assert_eq!(a.status, 403, "{}", a.json);
    assert!(a.json["error"].as_str().unwrap().contains("from 127.0.0.2"));
    let a = send(hook(&e, "127.0.0.1", "local").bearer_auth(TOKEN));
    assert_eq!(a.status, 202, "{}", a.json);
    // X-Forwarded-For counts only from the trusted proxy (127.0.0.3).
    let forged = hook(&e, "127.0.0.2", "local").header("x-forwarded-for", "127.0.0.1");
    assert_eq!(send(forged.bearer_auth(TOKEN)).status, 403);
    let proxied = hook(&e, "127.0.0.3", "local").header("x-forwarded-for", "127.0.0.1");
    let a = send(proxied.bearer_auth(TOKEN));
    assert_eq!(a.status, 202, "{}", a.json);
    let proxied = hook(&e, "127.0.0.3", "local").header("x-forwarded-for", "10.1.1.1");
    let a = send(proxied.bearer_auth(TOKEN));
    assert_eq!(a.status, 403, "{}", a.json);
    assert!(a.json["error"].as_str().unwrap().contains("from 10.1.1.1"));
}

fn an_idempotency_key_starts_one_run_and_unreadable_payloads_are_refused(e: Env) {
    e.apply(&workflow());
    let keyed = || {
        hook(&e, "127.0.0.1", "later")
            .basic_auth("ci", Some(PASSWORD))
            .header("Idempotency-Key", "delivery-1")
            .json(&json!({"user": {"name": "kay"}}))
    };
    let first = send(keyed());
    assert_eq!(first.status, 202, "{}", first.json);
    let run = run_of(&e, &first);
    e.api().wait_instance(run, LONG);
    let again = send(keyed());
    assert_eq!(again.status, 202, "{}", again.json);
    assert_eq!(again.json["command_id"], first.json["command_id"]);
    assert_eq!(again.json["workflow_instance_id"], run);
    let runs = e.api().get("/instances?workflow=greet");
    assert_eq!(runs.as_array().unwrap().len(), 1, "one run: {runs}");

    let a = send(
        hook(&e, "127.0.0.1", "now")
            .bearer_auth(TOKEN)
            .json(&json!({"user": "ann"})),
    );
    assert_eq!(a.status, 400, "{}", a.json);
    assert_eq!(
        a.json["error"],
        "the payload has no value at $.user.name, which trigger 'now' maps to param 'who'"
    );
    let big = json!({"user": {"name": "x".repeat(70 * 1024)}});
    let a = send(hook(&e, "127.0.0.1", "now").bearer_auth(TOKEN).json(&big));
    assert_eq!(a.status, 413, "{}", a.json);
    assert!(
        a.json["error"]
            .as_str()
            .unwrap()
            .contains("--max-body-bytes")
    );
    let runs = e.api().get("/instances?workflow=greet");
    assert_eq!(
        runs.as_array().unwrap().len(),
        1,
        "refused calls start nothing"
    );
}

fn a_call_its_when_does_not_match_starts_nothing_and_says_so(e: Env) {
    e.apply(&workflow());
    let call = |event: &str, payload: Value| {
        send(
            hook(&e, "127.0.0.1", "pushed")
                .bearer_auth(TOKEN)
                .header("x-event", event)
                .json(&payload),
        )
    };
    let main = json!({"ref": "main", "user": {"name": "mia"}});
    for (event, payload) in [
        ("push", json!({"ref": "dev", "user": {"name": "x"}})),
        ("tag", main.clone()),
    ] {
        let a = call(event, payload);
        assert_eq!(a.status, 200, "{}", a.json);
        assert_eq!(a.json, json!({"started": false, "reason": "filtered"}));
    }
    let a = call("push", json!({"user": {"name": "x"}}));
    assert_eq!(a.status, 400, "{}", a.json);
    assert!(
        a.json["error"]
            .as_str()
            .unwrap()
            .starts_with("trigger 'pushed': when (body.ref == 'main'"),
        "{}",
        a.json
    );
    let a = call("push", main);
    assert_eq!(a.status, 202, "{}", a.json);
    let run = e.api().wait_instance(run_of(&e, &a), LONG);
    assert_eq!(run["params"]["who"], "mia", "{run}");
    let runs = e.api().get("/instances?workflow=greet");
    assert_eq!(
        runs.as_array().unwrap().len(),
        1,
        "only the match ran: {runs}"
    );

    let metrics = e.api().get_text("/metrics");
    for (outcome, n) in [("filtered", 2), ("ignored", 1), ("started", 1)] {
        let line = format!(
            "shoal_trigger_messages_total{{trigger=\"default/greet/pushed\",outcome=\"{outcome}\"}} {n}"
        );
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }

    // A `when` that does not compile is refused by name, and the workflow stays as it was.
    let broken = workflow().replace("'main' &&", "'main' && (");
    let (status, body) = e.api().post("/projects/default/workflows", &broken);
    assert_eq!(status, 400, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(
        error.starts_with("trigger 'pushed': when: column"),
        "{error}"
    );
    let stored = e.api().get("/projects/default/workflows/greet");
    assert_eq!(stored["version"], 1, "{stored}");
}

fn open_triggers_take_get_and_put_and_public_ones_are_limited_to_their_rate(e: Env) {
    let open = r#"
name: open
params: { who: nobody }
triggers:
  - { name: lan, auth: none, allow_ips: [127.0.0.1/32], methods: [GET, PUT], params: { who: $.who } }
  - { name: web, auth: none, public: true, rate: 2/m, params: { who: $.who } }
tasks:
  - { name: greet, type: shell, command: 'echo "hello ${who}"' }
"#;
    // Open to anyone without saying so, or public without a rate: refused, nothing stored.
    for (from, to, says) in [
        (
            ", allow_ips: [127.0.0.1/32]",
            "",
            "trigger 'lan': auth: none lets whoever reaches the server start runs: limit it to allow_ips, or say public: true with a rate",
        ),
        (
            ", rate: 2/m",
            "",
            "trigger 'web': public: true needs a rate",
        ),
    ] {
        let (status, body) = e
            .api()
            .post("/projects/default/workflows", &open.replace(from, to));
        assert_eq!(status, 400, "{body}");
        assert!(body["error"].as_str().unwrap().starts_with(says), "{body}");
    }
    assert_eq!(e.api().status("/projects/default/workflows/open"), 404);
    e.apply(open);
    let url = |trigger: &str| format!("{}/api/v1/hooks/default/open/{trigger}", e.api().base);
    let ran_for = |a: &Answer| {
        assert_eq!(a.status, 202, "{}", a.json);
        let run = e.api().wait_instance(run_of(&e, a), LONG);
        assert_eq!(run["state"], "success", "{run}");
        run["params"]["who"].as_str().unwrap().to_string()
    };

    // GET: the query parameters are the payload.
    let a = send(client("127.0.0.1").get(format!("{}?who=gus&extra=1", url("lan"))));
    assert_eq!(ran_for(&a), "gus");
    let a = send(
        client("127.0.0.1")
            .put(url("lan"))
            .json(&json!({"who": "pat"})),
    );
    assert_eq!(ran_for(&a), "pat");
    let a = send(
        client("127.0.0.1")
            .post(url("lan"))
            .json(&json!({"who": "x"})),
    );
    assert_eq!(a.status, 405, "{}", a.json);
    assert_eq!(a.header("allow"), "GET, PUT");
    assert_eq!(
        a.json["error"],
        "trigger 'lan' takes GET, PUT, not POST (its `methods`)"
    );
    let a = send(client("127.0.0.2").get(format!("{}?who=y", url("lan"))));
    assert_eq!(a.status, 403, "{}", a.json);

    // Public: anyone, two calls a minute.
    for who in ["ann", "bob"] {
        let a = send(
            client("127.0.0.2")
                .post(url("web"))
                .json(&json!({"who": who})),
        );
        assert_eq!(ran_for(&a), who);
    }
    let a = send(
        client("127.0.0.2")
            .post(url("web"))
            .json(&json!({"who": "eve"})),
    );
    assert_eq!(a.status, 429, "{}", a.json);
    let wait: u64 = a.header("retry-after").parse().unwrap();
    assert!((1..=60).contains(&wait), "Retry-After: {wait}");
    assert!(
        a.json["error"]
            .as_str()
            .unwrap()
            .contains("takes 2/m calls"),
        "{}",
        a.json
    );
    let runs = e.api().get("/instances?workflow=open");
    assert_eq!(
        runs.as_array().unwrap().len(),
        4,
        "refused calls start nothing: {runs}"
    );
}
