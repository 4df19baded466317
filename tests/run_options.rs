//! Start options per run, over `shoal standalone` (and a cluster where worker groups
//! matter): failure strategy, timeout, alert channels, environment and worker group each
//! change what the run does; a child run inherits them; unknown names are refused and
//! write nothing. And runs at a later time (`"at"`, `shoal start --at`): they wait as
//! pending commands, start no earlier than their time, survive a restart and can be
//! cancelled.

#[path = "support/callback_server.rs"]
mod callback_server;
mod support;

use callback_server::CallbackServer;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::{Env, LONG, MiniCluster, Standalone, attempts, cli, text, wait_for};

fn standalone() -> Standalone {
    Standalone::start()
}

fn env(s: Standalone) -> Env {
    Env::Standalone(s)
}

fn pending(e: &Env) -> Vec<Value> {
    e.api()
        .get("/projects/default/commands")
        .as_array()
        .unwrap()
        .clone()
}

fn set_env(e: &Env, name: &str, config: &str) {
    let (status, body) = e.api().put(
        &format!("/projects/default/environments/{name}"),
        &json!({ "config": config }).to_string(),
    );
    assert!(status == 201 || status == 200, "{status} {body}");
}

/// A webhook alert channel `name` and the server it posts to.
fn webhook_channel(e: &Env, name: &str) -> CallbackServer {
    let hook = CallbackServer::start(None);
    let channel = json!({"name": name, "type": "webhook", "url": hook.url});
    let (status, body) = e.api().post("/alert-channels", &channel.to_string());
    assert_eq!(status, 201, "{body}");
    hook
}

/// A 400 whose error says `says`.
fn refused(answer: (u16, Value), says: &str) {
    let (status, body) = answer;
    assert_eq!(status, 400, "{body}");
    let error = body["error"].as_str().unwrap_or_default();
    assert!(error.contains(says), "{error}");
}

/// The first run of `workflow` (a schedule's or backfill's), once it ended.
fn first_run_of(e: &Env, workflow: &str) -> Value {
    let id = wait_for(&format!("a run of {workflow}"), LONG, || {
        e.api().get(&format!("/instances?workflow={workflow}"))[0]["id"].as_i64()
    });
    e.end(id)
}

/// The log of the first attempt of `task`.
fn log_of(e: &Env, inst: &Value, task: &str) -> String {
    let id = attempts(inst, task)[0]["id"].as_i64().unwrap();
    e.api().log(id).1
}

#[test]
fn failure_strategy_and_timeout_of_the_run_win_over_the_definition() {
    let e = env(standalone());
    e.apply(concat!(
        "name: branches\nfailure_strategy: end\ntasks:\n",
        "- { name: bad, type: shell, command: 'exit 3' }\n",
        "- { name: slow, type: shell, command: 'sleep 1' }\n",
        "- { name: after_slow, type: noop, depends_on: [slow] }\n",
    ));
    let id = e.start("branches", "{}");
    let inst = e.end(id);
    assert_eq!(inst["state"], "failure", "{inst:#}");
    assert!(
        attempts(&inst, "after_slow").is_empty(),
        "end: nothing new starts after a failure: {inst:#}"
    );

    let id = e.start("branches", r#"{"failure_strategy": "continue"}"#);
    let inst = e.end(id);
    assert_eq!(inst["state"], "failure", "{inst:#}");
    assert_eq!(inst["options"]["failure_strategy"], "continue", "{inst:#}");
    assert_eq!(
        attempts(&inst, "after_slow")[0]["state"],
        "success",
        "continue: the independent branch finished: {inst:#}"
    );

    // The run's timeout over the definition's hour; its strategy (fail) still applies.
    e.apply("name: sleepy\ntimeout: 1h\ntimeout_strategy: fail\ntasks:\n- { name: nap, type: shell, command: 'sleep 30' }\n");
    let begin = Instant::now();
    let id = e.start("sleepy", r#"{"timeout": "1s"}"#);
    let inst = e.end(id);
    assert_eq!(inst["state"], "failure", "{inst:#}");
    assert_eq!(inst["options"]["timeout"], "1s", "{inst:#}");
    assert!(
        begin.elapsed() < Duration::from_secs(20),
        "ended by its timeout"
    );
    let shown = text(&cli(e.api(), &["status", &id.to_string()]).stdout);
    assert!(shown.contains("options   timeout=1s"), "{shown}");
}

#[test]
fn the_run_s_alert_channels_replace_the_workflow_s() {
    let e = env(standalone());
    let workflow_hook = webhook_channel(&e, "wf-hook");
    let run_hook = webhook_channel(&e, "run-hook");
    e.apply("name: alerted\nalerts: [{on: failure, channel: wf-hook}]\ntasks:\n- { name: t, type: shell, command: 'exit 1' }\n");
    let out = cli(
        e.api(),
        &["start", "alerted", "--alert-channel", "run-hook", "--wait"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let received = wait_for("the run's channel to get the alert", LONG, || {
        let got = run_hook.requests();
        (!got.is_empty()).then_some(got)
    });
    assert_eq!(received[0]["event"], "failure", "{received:?}");
    assert_eq!(received[0]["workflow"], "alerted");
    let id = received[0]["workflow_instance_id"].as_i64().unwrap();
    let alerts = e.api().get(&format!("/alerts?instance={id}"));
    let channels: Vec<&str> = alerts
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["channel"].as_str().unwrap())
        .collect();
    assert_eq!(channels, ["run-hook"], "not the workflow's: {alerts:#}");
    assert!(workflow_hook.requests().is_empty());
}

#[test]
fn unknown_names_and_bad_options_are_refused_and_write_nothing() {
    let e = env(standalone());
    e.apply("name: w\ntasks:\n- { name: t, type: noop }\n");
    for (body, says) in [
        (
            json!({"worker_group": "gpu"}),
            "worker group 'gpu' has no live worker; start a worker with `--groups gpu` or choose one served now: default",
        ),
        (
            json!({"alert_channels": ["nope"]}),
            "alert channel 'nope' does not exist; create it first with `shoal alert-channel create nope",
        ),
        (
            json!({"environment": "nope"}),
            "environment 'nope', which project 'default' does not have; create it first with `shoal env set nope",
        ),
        (
            json!({"timeout": "soon"}),
            "timeout: invalid duration 'soon'",
        ),
        (json!({"timeout": "0s"}), "timeout must be longer than 0s"),
        (
            json!({"at": "2020-01-01T00:00:00Z"}),
            "at '2020-01-01T00:00:00Z' is in the past",
        ),
        (json!({"at": "tomorrow"}), "not an RFC 3339 time"),
        (
            json!({"failure_strategy": "retry"}),
            "unknown variant `retry`",
        ),
    ] {
        let start = "/projects/default/workflows/w/start";
        refused(e.api().post(start, &body.to_string()), says);
    }
    assert!(pending(&e).is_empty());
    assert_eq!(e.api().get("/instances"), json!([]));
    // A task alert inside a foreach template is checked at apply like any other.
    let fan = "name: fan\ntasks:\n- {name: each, type: foreach, foreach: {items: '[1]', task: {type: noop, alerts: [{on: task_failure, channel: ghost}]}}}\n";
    refused(
        e.api().post("/projects/default/workflows", fan),
        "alert channel 'ghost'",
    );
    // The CLI says the same.
    let out = cli(e.api(), &["start", "w", "--worker-group", "gpu"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("worker group 'gpu'"), "{out:?}");
}

#[test]
fn a_child_run_inherits_the_run_s_options() {
    let e = env(standalone());
    set_env(&e, "run_env", "export WHO=run");
    let hook = webhook_channel(&e, "run-hook");
    e.apply("name: kid\ntasks:\n- { name: who, type: shell, command: 'echo \"who=$WHO\"' }\n");
    e.apply(
        "name: mom\ntasks:\n- { name: sub, type: sub_workflow, sub_workflow: { workflow: kid } }\n",
    );
    let body = json!({
        "environment": "run_env",
        "failure_strategy": "continue",
        "alert_channels": ["run-hook"],
        "timeout": "10m",
    });
    let id = e.start("mom", &body.to_string());
    assert_eq!(e.end(id)["state"], "success");
    let kid = e.api().get("/instances?workflow=kid");
    let kid = e.end(kid[0]["id"].as_i64().unwrap());
    assert_eq!(
        kid["options"],
        json!({"environment": "run_env", "failure_strategy": "continue", "alert_channels": ["run-hook"]}),
        "not the parent's timeout: {kid:#}"
    );
    let log = log_of(&e, &kid, "who");
    assert!(log.contains("who=run"), "the parent's environment: {log}");
    // Both runs' ends went to the run's channel.
    wait_for("two alerts", LONG, || {
        (hook.requests().len() == 2).then_some(())
    });
}

#[test]
fn a_worker_group_of_the_run_routes_its_tasks() {
    let c = MiniCluster::start_env(1, 1, &[("SHOAL_GROUPS", "default,gpu")]);
    let e = Env::Cluster(c);
    e.apply("name: routed\ntasks:\n- { name: any, type: shell, command: 'true' }\n- { name: pinned, type: shell, command: 'true', worker_group: default }\n");
    let id = e.start("routed", r#"{"worker_group": "gpu"}"#);
    let inst = e.end(id);
    assert_eq!(inst["state"], "success", "{inst:#}");
    assert_eq!(attempts(&inst, "any")[0]["worker_group"], "gpu", "{inst:#}");
    // A task that names the default group explicitly counts as naming none.
    assert_eq!(attempts(&inst, "pinned")[0]["worker_group"], "gpu");
    let start = "/projects/default/workflows/routed/start";
    refused(
        e.api().post(start, r#"{"worker_group": "cpu"}"#),
        "default, gpu",
    );
}

fn rfc3339_in(secs: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(secs)).to_rfc3339()
}

fn ms(rfc3339: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339.as_str().unwrap())
        .unwrap()
        .timestamp_millis()
}

#[test]
fn a_run_at_a_later_time_starts_then_and_not_before() {
    // No fallback poll within the test: the master's timer to the due time starts it.
    let e = env(Standalone::start_with(&[("SHOAL_COMMAND_POLL", "60s")]));
    e.apply("name: later\ntasks:\n- { name: t, type: noop }\n");
    let at = rfc3339_in(3);
    let (status, body) = e.api().post(
        "/projects/default/workflows/later/start",
        &json!({ "at": at }).to_string(),
    );
    assert_eq!(status, 202, "{body}");
    let command = body["command_id"].as_i64().unwrap();
    let listed = pending(&e);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["id"], command);
    assert_eq!(ms(&listed[0]["due_at"]), ms(&json!(at)), "{listed:?}");
    assert_eq!(
        e.api().get(&format!("/commands/{command}"))["status"],
        "pending"
    );
    let id = e.instance_of(command);
    let inst = e.end(id);
    assert_eq!(inst["state"], "success", "{inst:#}");
    let late = ms(&inst["started_at"]) - ms(&json!(at));
    assert!(
        (0..2000).contains(&late),
        "started {} for {at}: {late} ms late",
        inst["started_at"]
    );
    assert!(pending(&e).is_empty());
}

#[test]
fn a_cancelled_run_at_a_later_time_never_runs() {
    let e = env(standalone());
    let f = e.path("ran");
    e.apply(&format!(
        "name: later\ntasks:\n- {{ name: t, type: shell, command: 'echo ran >> {}' }}\n",
        f.display()
    ));
    let out = cli(e.api(), &["start", "later", "--at", &rfc3339_in(2)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains("shoal command cancel"), "{said}");
    let listed = text(&cli(e.api(), &["command", "list"]).stdout);
    assert!(listed.contains("later"), "{listed}");
    let command = pending(&e)[0]["id"].as_i64().unwrap();
    let out = cli(e.api(), &["command", "cancel", &command.to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(pending(&e).is_empty());
    let status = e.api().get(&format!("/commands/{command}"));
    assert_eq!(status["status"], "error", "{status}");
    assert!(
        status["error"].as_str().unwrap().contains("cancelled by"),
        "{status}"
    );
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(e.api().get("/instances"), json!([]));
    assert!(!f.exists());
    // Cancelled twice, or a command that started: refused with what became of it.
    let (status, body) = e.api().delete(&format!("/commands/{command}"));
    assert_eq!(status, 409, "{body}");
    let started = e.start("later", "{}");
    let started_command = e.api().get(&format!("/instances/{started}"))["command_id"].clone();
    let (status, body) = e.api().delete(&format!("/commands/{started_command}"));
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains(&format!("workflow instance {started}")),
        "{body}"
    );
    assert_eq!(e.api().delete("/commands/999999").0, 404);
}

#[test]
fn a_run_at_a_later_time_survives_a_restart_and_runs_once() {
    let mut s = standalone();
    let f = s.dir.path().join("ran");
    let (status, body) = s.api.post(
        "/projects/default/workflows",
        &format!(
            "name: later\ntasks:\n- {{ name: t, type: shell, command: 'echo ran >> {}' }}\n",
            f.display()
        ),
    );
    assert_eq!(status, 201, "{body}");
    let (status, body) = s.api.post(
        "/projects/default/workflows/later/start",
        &json!({ "at": rfc3339_in(4) }).to_string(),
    );
    assert_eq!(status, 202, "{body}");
    s.crash_and_restart();
    let e = env(s);
    let id = e.instance_of(body["command_id"].as_i64().unwrap());
    assert_eq!(e.end(id)["state"], "success");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(support::lines(&f), ["ran"]);
    assert_eq!(e.api().get("/instances").as_array().unwrap().len(), 1);
}

#[test]
fn a_backfill_s_runs_take_its_start_options() {
    let e = env(standalone());
    set_env(&e, "run_env", "export WHO=backfill");
    e.apply("name: past\ntasks:\n- { name: who, type: shell, command: 'echo \"who=$WHO\"' }\n");
    let out = cli(
        e.api(),
        &[
            "backfill",
            "past",
            "--dates",
            "2026-01-01",
            "--environment",
            "run_env",
            "--failure-strategy",
            "continue",
            "--timeout",
            "5m",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let inst = first_run_of(&e, "past");
    assert_eq!(inst["options"]["timeout"], "5m", "{inst:#}");
    assert_eq!(inst["options"]["failure_strategy"], "continue");
    assert!(log_of(&e, &inst, "who").contains("who=backfill"));
    // Unknown names are refused as at a start.
    let body = json!({"dates": ["2026-01-02"], "alert_channels": ["ghost"]});
    let backfill = "/projects/default/workflows/past/backfill";
    refused(e.api().post(backfill, &body.to_string()), "'ghost'");
}

#[test]
fn a_schedule_s_runs_take_its_start_options() {
    let e = env(standalone());
    set_env(&e, "run_env", "export WHO=cron");
    let hook = webhook_channel(&e, "cron-hook");
    e.apply("name: ticking\ntasks:\n- { name: who, type: shell, command: 'echo \"who=$WHO\"' }\n");
    let schedules = "/projects/default/workflows/ticking/schedules";
    let ghost = json!({"cron": "* * * * * *", "alert_channels": ["ghost"]});
    refused(e.api().post(schedules, &ghost.to_string()), "'ghost'");
    let out = cli(
        e.api(),
        &[
            "schedule",
            "create",
            "ticking",
            "--cron",
            "* * * * * *",
            "--environment",
            "run_env",
            "--timeout",
            "10m",
            "--alert-channel",
            "cron-hook",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed = e.api().get(schedules);
    assert_eq!(listed[0]["timeout"], "10m", "{listed}");
    assert_eq!(listed[0]["alert_channels"], json!(["cron-hook"]));
    let inst = first_run_of(&e, "ticking");
    assert_eq!(inst["options"]["environment"], "run_env", "{inst:#}");
    assert_eq!(inst["options"]["timeout"], "10m");
    assert!(log_of(&e, &inst, "who").contains("who=cron"));
    wait_for("its alert on the schedule's channel", LONG, || {
        (!hook.requests().is_empty()).then_some(())
    });
}
