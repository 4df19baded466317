//! Events that complete waiting tasks, each test over the real `shoal standalone` and over
//! a cluster of processes (both with auth on): an event completes every wait of its
//! project, event and key, and its data picks the branch of a switch after it; an event
//! sent before its wait completes it when it begins, once, and not after its retention;
//! events for another key, event or project complete nothing; bad input and a viewer are
//! refused with the reason and change nothing.

mod support;

use serde_json::{Value, json};
use std::time::Duration;
use support::{Env, LONG, attempts, cli, cli_env, lines, text, wait_for};

/// How long the api-server keeps an event no wait took (`--event-retention`).
const RETENTION: Duration = Duration::from_secs(8);

// Auth on in both, so a viewer is refused; the standalone's worker then runs the test's
// tasks as its own user only when told every user may act as its admin.
support::deployments!(
    env: &[
        ("SHOAL_TOKEN", crate::support::API_TOKEN),
        ("SHOAL_SINGLE_TEAM", "true"),
        ("SHOAL_EVENT_RETENTION", "8s"),
    ];
    an_event_completes_every_wait_for_its_key_and_its_data_picks_the_branch,
    an_event_before_its_wait_completes_it_when_it_begins_once_within_retention,
    bad_events_and_viewers_are_refused_with_the_reason_and_change_nothing,
);

/// A run waits for `order_paid` with its order id, then ships or refunds as the event's
/// `status` says.
fn apply_orders(e: &Env) -> std::path::PathBuf {
    let done = e.path("done");
    e.apply(&format!(
        r#"
name: orders
params: {{ order_id: "0" }}
tasks:
  - {{ name: paid, type: wait, event: order_paid, key: "${{order_id}}", timeout: 10m }}
  - name: route
    type: switch
    depends_on: [paid]
    switch: {{ cases: [{{ when: "outputs.paid.status == 'ok'", then: ship }}], default: refund }}
  - {{ name: ship, type: shell, depends_on: [route], command: "echo ship ${{order_id}} >> {f}" }}
  - {{ name: refund, type: shell, depends_on: [route], command: "echo refund ${{order_id}} >> {f}" }}
"#,
        f = done.display()
    ));
    done
}

fn order(e: &Env, id: &str) -> i64 {
    e.start("orders", &json!({"params": {"order_id": id}}).to_string())
}

/// The `paid` task of run `instance` once it waits.
fn waiting(e: &Env, instance: i64) -> Value {
    wait_for("the order to wait for its payment", LONG, || {
        let inst = e.api().get(&format!("/instances/{instance}"));
        let paid = attempts(&inst, "paid").into_iter().next()?.clone();
        (paid["state"] == "waiting").then_some(paid)
    })
}

fn send(e: &Env, project: &str, event: &str, body: Value) -> (u16, Value) {
    e.api().post(
        &format!("/projects/{project}/events/{event}"),
        &body.to_string(),
    )
}

/// Asserts that run `instance` still waits for its payment a few polls of its master
/// later.
fn still_waits(e: &Env, instance: i64) {
    waiting(e, instance);
    std::thread::sleep(Duration::from_secs(2));
    let inst = e.api().get(&format!("/instances/{instance}"));
    let paid = attempts(&inst, "paid")[0];
    assert_eq!(paid["state"], "waiting", "{paid}");
}

fn an_event_completes_every_wait_for_its_key_and_its_data_picks_the_branch(e: Env) {
    let done = apply_orders(&e);
    let (status, body) = e.api().post("/projects", r#"{"name": "other"}"#);
    assert_eq!(status, 201, "{body}");
    let (a, b, c) = (order(&e, "42"), order(&e, "42"), order(&e, "43"));
    let paid_a = waiting(&e, a);
    waiting(&e, b);
    waiting(&e, c);
    let says = paid_a["message"].as_str().unwrap();
    assert!(
        says.contains("event 'order_paid' with key '42'") && says.contains("shoal event send"),
        "the waiting task says what completes it: {says}"
    );

    // Another project, event or key completes nothing.
    for (project, event, key) in [
        ("other", "order_paid", "42"),
        ("default", "order_shipped", "42"),
        ("default", "order_paid", "44"),
    ] {
        let (status, body) = send(&e, project, event, json!({"key": key}));
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["completed"], json!([]), "{project}/{event}/{key}");
    }
    still_waits(&e, a);

    let out = cli(
        e.api(),
        &[
            "event",
            "send",
            "default",
            "order_paid",
            "--key",
            "42",
            "--data",
            r#"{"status": "ok", "amount": 12.5}"#,
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    let (id_a, id_b) = (paid_a["id"].as_i64().unwrap(), paid_id(&e, b));
    assert!(
        said.contains(&format!(
            "completed task instances {}, {}",
            id_a.min(id_b),
            id_a.max(id_b)
        )),
        "both waits for key 42 are completed: {said}"
    );
    for run in [a, b] {
        let inst = e.end(run);
        assert_eq!(inst["state"], "success", "{inst}");
        let paid = attempts(&inst, "paid")[0];
        assert_eq!(paid["output"], json!({"status": "ok", "amount": "12.5"}));
        assert_eq!(
            paid["message"],
            "completed by event 'order_paid' (key '42')"
        );
    }
    assert_eq!(
        lines(&done),
        ["ship 42", "ship 42"],
        "the data picked the branch"
    );
    assert_eq!(waiting(&e, c)["state"], "waiting", "key 43 waits on");

    let args = ["event", "send", "default", "order_paid", "--key", "43"];
    let args = [
        &args[..],
        &["--data", r#"{"status": "lost"}"#, "-o", "json"],
    ]
    .concat();
    let out = cli(e.api(), &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let body: Value = serde_json::from_slice(&out.stdout).expect("-o json prints JSON");
    assert_eq!(body["completed"], json!([paid_id(&e, c)]));
    assert_eq!(body["kept_until"], Value::Null);
    assert_eq!(e.end(c)["state"], "success");
    assert_eq!(lines(&done)[2], "refund 43");
}

/// The id of run `instance`'s `paid` task (waiting or not).
fn paid_id(e: &Env, instance: i64) -> i64 {
    let inst = e.api().get(&format!("/instances/{instance}"));
    attempts(&inst, "paid")[0]["id"].as_i64().unwrap()
}

fn an_event_before_its_wait_completes_it_when_it_begins_once_within_retention(e: Env) {
    let done = apply_orders(&e);
    let early = json!({"key": "7", "data": {"status": "ok"}});
    let (status, body) = send(&e, "default", "order_paid", early);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["completed"], json!([]));
    assert!(body["kept_until"].is_string(), "it is kept: {body}");

    let first = order(&e, "7");
    let inst = e.end(first);
    assert_eq!(
        inst["state"], "success",
        "the kept event completed it: {inst}"
    );
    assert_eq!(
        attempts(&inst, "paid")[0]["output"],
        json!({"status": "ok"})
    );
    assert_eq!(lines(&done), ["ship 7"]);
    // The kept event went to the first wait: a second one waits for an event of its own.
    let second = order(&e, "7");
    still_waits(&e, second);

    let (status, body) = send(
        &e,
        "default",
        "order_paid",
        json!({"key": "8", "data": {"status": "ok"}}),
    );
    assert_eq!(status, 200, "{body}");
    std::thread::sleep(RETENTION + Duration::from_secs(1));
    let late = order(&e, "8");
    still_waits(&e, late);
    assert_eq!(lines(&done), ["ship 7"], "nothing else ran");

    for (key, run) in [("7", second), ("8", late)] {
        let paid = json!({"key": key, "data": {"status": "no"}});
        let (status, body) = send(&e, "default", "order_paid", paid);
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["completed"], json!([paid_id(&e, run)]));
        assert_eq!(e.end(run)["state"], "success");
    }
    assert_eq!(lines(&done), ["ship 7", "refund 7", "refund 8"]);
}

fn bad_events_and_viewers_are_refused_with_the_reason_and_change_nothing(e: Env) {
    apply_orders(&e);
    let run = order(&e, "1");
    let paid = waiting(&e, run);
    let refused = |project: &str, event: &str, body: &str, status: u16, says: &str| {
        let (got, answer) = e
            .api()
            .post(&format!("/projects/{project}/events/{event}"), body);
        assert_eq!(got, status, "{project}/{event} {body}: {answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains(says), "{project}/{event} {body}: {error}");
    };
    refused(
        "nope",
        "order_paid",
        r#"{"key": "1"}"#,
        404,
        "no project named 'nope'",
    );
    refused(
        "default",
        "order_paid",
        r#"{"key": "1", "data": [1]}"#,
        400,
        "\"data\" must be a JSON object",
    );
    refused(
        "default",
        "order_paid",
        r#"{"key": "1", "data": {"a": {"b": 1}}}"#,
        400,
        "must be a string, number or boolean",
    );
    refused(
        "default",
        "order_paid",
        r#"{"data": {}}"#,
        400,
        "\"key\" is required",
    );
    refused("default", "order_paid", "", 400, "\"key\" is required");
    refused(
        "default",
        "order_paid",
        r#"{"key": "1", "dta": {}}"#,
        400,
        "unknown field",
    );
    refused(
        "default",
        "-paid",
        r#"{"key": "1"}"#,
        400,
        "invalid event name",
    );
    let apply = "/projects/default/workflows";
    let (status, body) = e.api().post(
        apply,
        "name: x\ntasks:\n- { name: a, type: wait, key: k }\n",
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("key needs event"),
        "{body}"
    );

    // A viewer of the project may not send events, by the API or the CLI.
    let (status, body) = e.api().post("/users", r#"{"name": "vic"}"#);
    assert_eq!(status, 201, "{body}");
    let (status, token) = e.api().post("/tokens", r#"{"name": "t", "user": "vic"}"#);
    assert_eq!(status, 201, "{token}");
    let (status, body) = e
        .api()
        .put("/projects/default/members/vic", r#"{"role": "viewer"}"#);
    assert_eq!(status, 200, "{body}");
    let vic = token["token"].as_str().unwrap();
    let as_vic = reqwest::blocking::Client::new()
        .post(format!(
            "{}/api/v1/projects/default/events/order_paid",
            e.api().base
        ))
        .bearer_auth(vic)
        .header("content-type", "application/json")
        .body(r#"{"key": "1"}"#)
        .send()
        .unwrap();
    assert_eq!(as_vic.status().as_u16(), 403);
    let args = ["event", "send", "default", "order_paid", "--key", "1"];
    let args = [&args[..], &["--data", r#"{"status": "ok"}"#]].concat();
    let out = cli_env(e.api(), &args, &[("SHOAL_TOKEN", vic)]);
    assert!(!out.status.success());
    let error = text(&out.stderr);
    assert!(
        error.contains("operator"),
        "the viewer is told what it lacks: {error}"
    );

    let now = waiting(&e, run);
    assert_eq!(now["id"], paid["id"], "none of it completed the wait");
    let out = cli(e.api(), &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(e.end(run)["state"], "success");
}
