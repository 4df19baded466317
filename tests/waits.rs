//! Wait and callback tasks, each test over the real `shoal standalone` and over a cluster
//! of processes: a wait completed through the API and the CLI (a second completion is
//! refused), a timeout that takes the `on_timeout` branch or fails the run, and a callback
//! task whose outside system (an HTTP server of the test's own) calls back, or never does.

#[path = "support/callback_server.rs"]
mod callback_server;
mod support;

use callback_server::CallbackServer;
use serde_json::json;
use support::{Env, attempts, cli, text, wait_for};

support::deployments!(
    a_wait_is_completed_through_the_cli_and_the_api_and_only_once,
    a_wait_that_times_out_takes_its_on_timeout_branch_or_fails,
    a_callback_task_ends_with_what_its_outside_system_posts_back,
);

/// The id of `task`'s attempt once it waits.
fn waiting(e: &Env, instance: i64, task: &str) -> i64 {
    wait_for(&format!("{task} to wait"), support::LONG, || {
        let inst = e.api().get(&format!("/instances/{instance}"));
        let t = attempts(&inst, task).into_iter().next()?.clone();
        (t["state"] == "waiting").then(|| t["id"].as_i64().unwrap())
    })
}

fn a_wait_is_completed_through_the_cli_and_the_api_and_only_once(e: Env) {
    let seen = e.path("seen");
    e.apply(&format!(
        r#"
name: approval
tasks:
  - {{ name: approve, type: wait, timeout: 10m }}
  - {{ name: reject, type: wait }}
  - {{ name: ship, type: shell, depends_on: [approve], command: "echo ${{approved_by}} >> {f}" }}
"#,
        f = seen.display()
    ));
    let id = e.start("approval", "{}");
    let approve = waiting(&e, id, "approve");
    let reject = waiting(&e, id, "reject");
    let task = e.api().get(&format!("/task-instances/{approve}"));
    assert!(
        task["message"]
            .as_str()
            .unwrap()
            .contains("shoal task complete"),
        "the waiting task says how to complete it: {task}"
    );

    let out = cli(
        e.api(),
        &[
            "task",
            "complete",
            &approve.to_string(),
            "--output",
            "approved_by=ann",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("completed as success"));
    let (status, body) = e.api().post(
        &format!("/task-instances/{approve}/complete"),
        r#"{"state": "failure"}"#,
    );
    assert_eq!(status, 409, "a second completion is refused: {body}");
    assert!(
        body["error"].as_str().unwrap().contains("success already"),
        "{body}"
    );

    // Bad input changes nothing: a state a completion cannot set, a reserved output.
    let (status, body) = e.api().post(
        &format!("/task-instances/{reject}/complete"),
        r#"{"state": "killed"}"#,
    );
    assert_eq!(status, 400, "{body}");
    let (status, body) = e.api().post(
        &format!("/task-instances/{reject}/complete"),
        r#"{"outputs": {"timed_out": "x"}}"#,
    );
    assert_eq!(status, 400, "{body}");
    let (status, _) = e.api().post("/task-instances/999999/complete", "");
    assert_eq!(status, 404);
    let ship = wait_for("ship to run", support::LONG, || {
        std::fs::read_to_string(&seen).ok()
    });
    assert_eq!(
        ship.trim(),
        "ann",
        "the completion's output reached downstream"
    );

    let (status, body) = e.api().post(
        &format!("/task-instances/{reject}/complete"),
        r#"{"state": "failure", "message": "not this week"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let inst = e.end(id);
    assert_eq!(
        inst["state"], "failure",
        "the rejected approval fails the run"
    );
    let reject_row = attempts(&inst, "reject")[0];
    assert_eq!(reject_row["state"], "failure");
    assert_eq!(reject_row["message"], "not this week");
    assert_eq!(attempts(&inst, "approve").len(), 1, "one attempt: {inst}");

    // A shell task is not completed from outside.
    let shell = attempts(&inst, "ship")[0]["id"].as_i64().unwrap();
    let (status, body) = e
        .api()
        .post(&format!("/task-instances/{shell}/complete"), "");
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("shell task"),
        "{body}"
    );
}

fn a_wait_that_times_out_takes_its_on_timeout_branch_or_fails(e: Env) {
    let ran = e.path("ran");
    e.apply(&format!(
        r#"
name: escalating
tasks:
  - {{ name: signoff, type: wait, timeout: 1s, on_timeout: escalate }}
  - {{ name: proceed, type: shell, depends_on: [signoff], command: "echo proceed >> {f}" }}
  - {{ name: escalate, type: shell, depends_on: [signoff], command: "echo escalate ${{timed_out}} >> {f}" }}
"#,
        f = ran.display()
    ));
    e.apply("name: strict\ntasks:\n- { name: gate, type: wait, timeout: 1s }\n");
    let (escalating, strict) = (e.start("escalating", "{}"), e.start("strict", "{}"));

    let inst = e.end(escalating);
    assert_eq!(inst["state"], "success", "{inst}");
    let signoff = attempts(&inst, "signoff")[0];
    assert_eq!(signoff["state"], "success");
    assert!(
        signoff["message"]
            .as_str()
            .unwrap()
            .contains("timed out after 1s")
    );
    assert_eq!(
        std::fs::read_to_string(&ran).unwrap(),
        "escalate true\n",
        "only the timeout branch ran"
    );
    assert!(attempts(&inst, "proceed").is_empty(), "{inst}");
    let (status, _) = e
        .api()
        .post(&format!("/task-instances/{}/complete", signoff["id"]), "");
    assert_eq!(status, 409, "a timed-out wait is not completed later");

    let inst = e.end(strict);
    assert_eq!(inst["state"], "failure");
    let gate = attempts(&inst, "gate")[0];
    assert!(
        gate["message"]
            .as_str()
            .unwrap()
            .contains("nothing completed it"),
        "{gate}"
    );
}

fn a_callback_task_ends_with_what_its_outside_system_posts_back(e: Env) {
    let answering = CallbackServer::start(Some(json!({"outputs": {"answer": 42}})));
    let silent = CallbackServer::start(None);
    let seen = e.path("seen");
    e.apply(&format!(
        r#"
name: outside
params: {{ job: nightly }}
tasks:
  - {{ name: ask, type: callback, callback: {{ url: "{a}" }} }}
  - {{ name: use, type: shell, depends_on: [ask], command: "echo answer=${{answer}} >> {f}" }}
  - {{ name: hopeful, type: callback, timeout: 2s, on_timeout: succeed,
       callback: {{ url: "{s}", body: '{{"job": "${{job}}", "reply_to": "${{callback.url}}"}}' }} }}
"#,
        a = answering.url,
        s = silent.url,
        f = seen.display()
    ));
    let id = e.start("outside", "{}");
    let inst = e.end(id);
    assert_eq!(inst["state"], "success", "{inst}");
    assert_eq!(std::fs::read_to_string(&seen).unwrap(), "answer=42\n");
    let ask = attempts(&inst, "ask")[0];
    assert_eq!(ask["state"], "success");
    assert_eq!(ask["message"], "completed by its callback");

    let sent = answering.requests();
    assert_eq!(sent.len(), 1, "one request: {sent:?}");
    assert_eq!(sent[0]["task_instance_id"], ask["id"]);
    assert_eq!(sent[0]["workflow_instance_id"], id);
    let callback_url = sent[0]["callback_url"].as_str().unwrap();
    let again = reqwest::blocking::Client::new()
        .post(callback_url)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .unwrap();
    assert_eq!(again.status().as_u16(), 409, "the token works once");
    let wrong = format!("{}x", callback_url.trim_end_matches(char::is_alphanumeric));
    let wrong = reqwest::blocking::Client::new()
        .post(wrong)
        .header("content-type", "application/json")
        .send()
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 404, "a wrong token is refused");

    let asked = silent.requests();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["job"], "nightly", "the body template was expanded");
    assert!(
        asked[0]["reply_to"]
            .as_str()
            .unwrap()
            .contains("/api/v1/callbacks/")
    );
    let hopeful = attempts(&inst, "hopeful")[0];
    assert_eq!(hopeful["state"], "success");
    assert!(hopeful["message"].as_str().unwrap().contains("timed out"));
}

/// A callback request carries a project secret in its URL and a header, and its outside
/// system echoes the request (with the callback URL and its one-time token) in an error
/// answer: the task's message, which viewers read, shows `***` for each.
#[test]
fn a_callback_request_s_secrets_and_token_are_masked_in_its_task_s_message() {
    const KEY: &str = "s3cr3t-api-key-7781";
    let s = support::Standalone::start();
    let e = Env::Standalone(s);
    let (status, body) = e.api().put(
        "/projects/default/secrets/api_key",
        &json!({ "value": KEY }).to_string(),
    );
    assert!(status == 201 || status == 200, "{status} {body}");
    let refusing = CallbackServer::refusing();
    let silent = CallbackServer::start(None);
    let callback = |url: &str| {
        format!(
            r#"{{ url: "{url}?key=${{secret.api_key}}", headers: {{ Authorization: "Bearer ${{secret.api_key}}" }} }}"#
        )
    };
    e.apply(&format!(
        "name: refused\ntasks:\n  - {{ name: ask, type: callback, callback: {} }}\n",
        callback(&refusing)
    ));
    e.apply(&format!(
        "name: pending\ntasks:\n  - {{ name: ask, type: callback, callback: {} }}\n",
        callback(&silent.url)
    ));

    let id = e.start("refused", "{}");
    let inst = e.end(id);
    let message = attempts(&inst, "ask")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("answered 500"), "{message}");
    assert!(!message.contains(KEY), "the secret is masked: {message}");
    assert!(
        message.contains("?key=***") && message.contains("Bearer ***"),
        "{message}"
    );
    assert!(
        message.contains("/api/v1/callbacks/***"),
        "the echoed callback token is masked: {message}"
    );

    let id = e.start("pending", "{}");
    waiting(&e, id, "ask");
    let inst = e.api().get(&format!("/instances/{id}"));
    let message = attempts(&inst, "ask")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        message,
        format!(
            "waiting for its callback (request to {}?key=***)",
            silent.url
        )
    );
    e.action(id, "stop");
}

/// `shoal standalone` crashes (SIGKILL) while a wait with a 10 s timeout is 3 s in: after
/// the restart it times out about 10 s after it began, not 10 s after the restart.
#[test]
fn a_standalone_restart_keeps_a_wait_s_deadline() {
    let mut s = support::Standalone::start();
    let (status, body) = s.api.post(
        "/projects/default/workflows",
        "name: gated\ntasks:\n- { name: gate, type: wait, timeout: 10s, on_timeout: succeed }\n",
    );
    assert_eq!(status, 201, "{body}");
    let (status, body) = s.api.post("/projects/default/workflows/gated/start", "");
    assert_eq!(status, 202, "{body}");
    let command = body["command_id"].as_i64().unwrap();
    let id = wait_for("the instance", support::LONG, || {
        s.api.get(&format!("/commands/{command}"))["workflow_instance_id"].as_i64()
    });
    wait_for("gate to wait", support::LONG, || {
        let inst = s.api.get(&format!("/instances/{id}"));
        (inst["tasks"][0]["state"] == "waiting").then_some(())
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    s.crash_and_restart();
    let inst = s.api.wait_instance(id, support::LONG);
    assert_eq!(inst["state"], "success", "{inst}");
    let gate = &inst["tasks"][0];
    let at = |k: &str| {
        let t = gate[k].as_str().unwrap();
        chrono::DateTime::parse_from_rfc3339(t)
            .unwrap()
            .timestamp_millis()
    };
    let took = at("ended_at") - at("started_at");
    assert!((10_000..12_500).contains(&took), "{took} ms: {inst}");
}
