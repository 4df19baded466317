//! Execution types, task groups and alerts, each test over the real `shoal standalone` and
//! over a cluster of processes (Postgres, etcd). Tasks write `<tag> start|end
//! <nanoseconds>` lines to a shared file; overlaps are judged from them.

mod support;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::mpsc;
use support::{Env, LONG, Standalone, cli, intervals, max_overlap, text, timed, wait_for};

support::deployments!(
    serial_wait_runs_one_after_another_in_start_order,
    serial_discard_discards_a_start_while_a_run_is_active,
    serial_priority_replaces_the_waiting_run_with_the_newest,
    a_waiting_run_can_be_stopped_and_the_next_one_still_runs,
    a_task_group_of_two_slots_never_runs_more_than_two_of_its_tasks,
    a_slot_is_released_after_a_failure_and_after_a_stop,
    task_group_mistakes_are_refused_with_a_clear_error,
    a_failure_alert_reaches_the_webhook_and_a_failing_channel_is_recorded,
    alert_mistakes_are_refused_with_a_clear_error,
    stopping_a_parent_discards_its_child_waiting_as_a_serial_run,
);

fn start_quickly(e: &Env, name: &str, n: usize) -> Vec<i64> {
    let commands: Vec<i64> = (0..n)
        .map(|_| {
            let (status, body) = e
                .api()
                .post(&format!("/projects/default/workflows/{name}/start"), "{}");
            assert_eq!(status, 202, "{body}");
            body["command_id"].as_i64().unwrap()
        })
        .collect();
    commands.into_iter().map(|c| e.instance_of(c)).collect()
}

/// A workflow of `kind` whose one task records its run under the instance id.
fn serial_workflow(e: &Env, name: &str, kind: &str, file: &Path, seconds: &str) {
    e.apply(&format!(
        "name: {name}\nexecution_type: {kind}\ntasks:\n- {{ name: work, type: shell, command: '{}' }}\n",
        timed(file, "${system.workflow.instance.id}", seconds)
    ));
}

fn instance(e: &Env, id: i64) -> Value {
    e.api().get(&format!("/instances/{id}"))
}

fn serial_wait_runs_one_after_another_in_start_order(e: Env) {
    let f = e.path("spans");
    serial_workflow(&e, "one_by_one", "serial_wait", &f, "0.7");
    let ids = start_quickly(&e, "one_by_one", 3);
    let second = e.wait_state(ids[1], &["serial_wait"]);
    assert!(
        second["message"]
            .as_str()
            .unwrap()
            .contains("waiting for instance"),
        "{second}"
    );
    let out = cli(e.api(), &["status", &ids[1].to_string()]);
    let shown = text(&out.stdout);
    assert!(
        shown.contains("serial_wait") && shown.contains("waiting for instance"),
        "{shown}"
    );
    for id in &ids {
        assert_eq!(e.end(*id)["state"], "success");
    }
    let spans = intervals(&f);
    let order: Vec<i64> = spans.iter().map(|(t, _, _)| t.parse().unwrap()).collect();
    assert_eq!(order, ids, "runs started in start order: {spans:?}");
    assert_eq!(max_overlap(&spans), 1, "runs never overlapped: {spans:?}");
}

fn serial_discard_discards_a_start_while_a_run_is_active(e: Env) {
    let f = e.path("spans");
    serial_workflow(&e, "only_one", "serial_discard", &f, "1");
    let ids = start_quickly(&e, "only_one", 2);
    let discarded = e.end(ids[1]);
    assert_eq!(discarded["state"], "stopped", "{discarded}");
    assert!(
        discarded["message"]
            .as_str()
            .unwrap()
            .contains(&format!("discarded: instance {} ", ids[0])),
        "{discarded}"
    );
    assert_eq!(discarded["tasks"].as_array().unwrap().len(), 0);
    assert_eq!(e.end(ids[0])["state"], "success");
    let ran: Vec<String> = intervals(&f).into_iter().map(|(t, _, _)| t).collect();
    assert_eq!(ran, vec![ids[0].to_string()], "only the first run ran");
    // Once it ended, a new start runs.
    let later = start_quickly(&e, "only_one", 1)[0];
    assert_eq!(e.end(later)["state"], "success");
}

fn serial_priority_replaces_the_waiting_run_with_the_newest(e: Env) {
    let f = e.path("spans");
    serial_workflow(&e, "newest", "serial_priority", &f, "1");
    let ids = start_quickly(&e, "newest", 3);
    let middle = e.end(ids[1]);
    assert_eq!(middle["state"], "stopped", "{middle}");
    assert!(
        middle["message"]
            .as_str()
            .unwrap()
            .contains(&format!("replaced by the newer instance {}", ids[2])),
        "{middle}"
    );
    assert_eq!(e.end(ids[0])["state"], "success");
    assert_eq!(e.end(ids[2])["state"], "success");
    let spans = intervals(&f);
    let order: Vec<String> = spans.iter().map(|(t, _, _)| t.clone()).collect();
    assert_eq!(order, vec![ids[0].to_string(), ids[2].to_string()]);
    assert_eq!(max_overlap(&spans), 1, "{spans:?}");
}

fn a_waiting_run_can_be_stopped_and_the_next_one_still_runs(e: Env) {
    e.apply("name: queue\nexecution_type: serial_wait\ntasks:\n- { name: work, type: shell, command: 'sleep 1' }\n");
    let ids = start_quickly(&e, "queue", 3);
    e.wait_state(ids[1], &["serial_wait"]);
    let (status, body) = e.action(ids[1], "stop");
    assert_eq!(status, 202, "{body}");
    assert_eq!(e.end(ids[1])["state"], "stopped");
    assert_eq!(e.end(ids[0])["state"], "success");
    assert_eq!(e.end(ids[2])["state"], "success");
}

fn group_task(name: &str, group: &str, command: &str) -> String {
    format!("- {{ name: {name}, type: shell, task_group: {group}, command: '{command}' }}\n")
}

fn a_task_group_of_two_slots_never_runs_more_than_two_of_its_tasks(e: Env) {
    let f = e.path("spans");
    let out = cli(e.api(), &["task-group", "create", "pair", "--slots", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for wf in ["left", "right"] {
        let mut yaml = format!("name: {wf}\ntasks:\n");
        for t in ["a", "b", "c"] {
            yaml.push_str(&group_task(
                t,
                "pair",
                &timed(&f, &format!("{wf}.{t}"), "0.6"),
            ));
        }
        e.apply(&yaml);
    }
    let mut ids = start_quickly(&e, "left", 1);
    ids.extend(start_quickly(&e, "right", 1));
    // Someone waits, visibly, while the slots are taken.
    let waiting = wait_for("a task waiting for a slot", LONG, || {
        ids.iter().find_map(|id| {
            let inst = instance(&e, *id);
            inst["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["state"] == "waiting_task_group")
                .map(|_| *id)
        })
    });
    let shown = text(&cli(e.api(), &["status", &waiting.to_string()]).stdout);
    assert!(
        shown.contains("waiting_task_group")
            && shown.contains("waiting for a slot of task group 'pair'"),
        "{shown}"
    );
    for id in &ids {
        assert_eq!(e.end(*id)["state"], "success");
    }
    let spans = intervals(&f);
    assert_eq!(spans.len(), 6, "{spans:?}");
    assert_eq!(
        max_overlap(&spans),
        2,
        "at most (and, here, exactly) two at once: {spans:?}"
    );
    let groups: Value =
        serde_json::from_slice(&cli(e.api(), &["task-group", "list", "-o", "json"]).stdout)
            .unwrap();
    assert_eq!(
        (groups[0]["in_use"].as_i64(), groups[0]["waiting"].as_i64()),
        (Some(0), Some(0)),
        "{groups}"
    );
}

fn a_slot_is_released_after_a_failure_and_after_a_stop(e: Env) {
    let (status, body) = e
        .api()
        .post("/task-groups", r#"{"name": "solo", "slots": 1}"#);
    assert_eq!(status, 201, "{body}");
    e.apply(&format!(
        "name: failing\ntasks:\n{}",
        group_task("boom", "solo", "exit 3")
    ));
    e.apply(&format!(
        "name: sleeping\ntasks:\n{}",
        group_task("nap", "solo", "sleep 60")
    ));
    e.apply(&format!(
        "name: quick\ntasks:\n{}",
        group_task("ok", "solo", "true")
    ));

    assert_eq!(
        e.end(start_quickly(&e, "failing", 1)[0])["state"],
        "failure"
    );
    assert_eq!(e.end(start_quickly(&e, "quick", 1)[0])["state"], "success");

    let sleeper = start_quickly(&e, "sleeping", 1)[0];
    wait_for("the sleeper to run", LONG, || {
        (instance(&e, sleeper)["tasks"][0]["state"] == "running").then_some(())
    });
    let blocked = start_quickly(&e, "quick", 1)[0];
    e.wait_state(blocked, &["running"]);
    wait_for("the quick task to wait for the slot", LONG, || {
        (instance(&e, blocked)["tasks"][0]["state"] == "waiting_task_group").then_some(())
    });
    let out = cli(e.api(), &["stop", &sleeper.to_string(), "--wait"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        e.end(blocked)["state"],
        "success",
        "the stop freed the slot"
    );

    // Idle again, the group can be deleted.
    let out = cli(e.api(), &["task-group", "delete", "solo"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

fn task_group_mistakes_are_refused_with_a_clear_error(e: Env) {
    let (status, body) = e.api().post(
        "/projects/default/workflows",
        &format!(
            "name: orphan\ntasks:\n{}",
            group_task("t", "nosuch", "true")
        ),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("task group 'nosuch', which does not exist"),
        "{body}"
    );
    let out = cli(e.api(), &["task-group", "create", "zero", "--slots", "0"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("at least 1 slot"),
        "{}",
        text(&out.stderr)
    );
    let (status, _) = e.api().post("/task-groups", r#"{"name": "g", "slots": 1}"#);
    assert_eq!(status, 201);
    let (status, body) = e.api().post("/task-groups", r#"{"name": "g", "slots": 3}"#);
    assert_eq!(status, 409, "{body}");
    e.apply(&format!(
        "name: holder\ntasks:\n{}",
        group_task("t", "g", "sleep 60")
    ));
    let id = start_quickly(&e, "holder", 1)[0];
    wait_for("the task to run", LONG, || {
        (instance(&e, id)["tasks"][0]["state"] == "running").then_some(())
    });
    let out = cli(e.api(), &["task-group", "delete", "g"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("running or waiting"),
        "{}",
        text(&out.stderr)
    );
    let out = cli(e.api(), &["task-group", "list"]);
    assert!(text(&out.stdout).contains("1/1"), "{}", text(&out.stdout));
}

/// A one-connection-at-a-time HTTP server that answers 200 and hands on each body.
fn webhook() -> (String, mpsc::Receiver<Value>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((k, v)) = line.split_once(':')
                    && k.eq_ignore_ascii_case("content-length")
                {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            let _ = tx.send(serde_json::from_slice(&body).unwrap_or(Value::Null));
        }
    });
    (url, rx)
}

fn a_failure_alert_reaches_the_webhook_and_a_failing_channel_is_recorded(e: Env) {
    let (url, received) = webhook();
    let dead = format!("http://127.0.0.1:{}/nobody", support::free_port());
    for (name, url, format) in [
        ("hook", url.as_str(), "json"),
        ("slack", url.as_str(), "slack"),
        ("dead", dead.as_str(), "json"),
    ] {
        let out = cli(
            e.api(),
            &[
                "alert-channel",
                "create",
                name,
                "--type",
                "webhook",
                "--url",
                url,
                "--format",
                format,
            ],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let out = cli(
        e.api(),
        &["alert-channel", "create", "ops-log", "--type", "log"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    e.apply(
        "name: alerting\nalerts: [{on: failure, channel: hook}, {on: any, channel: dead}, {on: success, channel: slack}, {on: failure, channel: ops-log}]\ntasks:\n- { name: fine, type: noop }\n- { name: broken, type: shell, command: 'exit 4' }\n",
    );
    let id = start_quickly(&e, "alerting", 1)[0];
    assert_eq!(
        e.end(id)["state"],
        "failure",
        "the failing channel holds nothing up"
    );

    let alert = received
        .recv_timeout(LONG)
        .expect("the webhook got the failure alert");
    assert_eq!(alert["workflow_instance_id"], id, "{alert}");
    assert_eq!(
        (
            alert["workflow"].as_str(),
            alert["state"].as_str(),
            alert["event"].as_str()
        ),
        (Some("alerting"), Some("failure"), Some("failure"))
    );
    assert_eq!(alert["failed_tasks"], serde_json::json!(["broken"]));
    assert!(
        alert["started_at"].is_string() && alert["ended_at"].is_string(),
        "{alert}"
    );

    let alerts = wait_for("both deliveries to be recorded", LONG, || {
        let list = e.api().get(&format!("/alerts?instance={id}"));
        let find = |c: &str| {
            list.as_array()
                .unwrap()
                .iter()
                .find(|a| a["channel"] == c)
                .cloned()
        };
        let (dead, hook) = (find("dead")?, find("hook")?);
        let recorded = dead["attempts"].as_i64() >= Some(1) && dead["last_error"].is_string();
        (recorded && hook["state"] == "sent").then_some(list)
    });
    let by_channel = |c: &str| {
        alerts
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["channel"] == c)
            .cloned()
    };
    assert!(
        by_channel("slack").is_none(),
        "no success alert for a failure: {alerts}"
    );
    let dead_alert = by_channel("dead").unwrap();
    assert!(
        dead_alert["last_error"]
            .as_str()
            .unwrap()
            .contains("/nobody"),
        "{dead_alert}"
    );
    wait_for("the log channel's alert to be sent", LONG, || {
        (by_channel_now(&e, id, "ops-log")["state"] == "sent").then_some(())
    });
    assert!(
        e.log_text()
            .contains("alert: shoal: workflow default/alerting")
    );
    let shown = text(&cli(e.api(), &["alerts", "--instance", &id.to_string()]).stdout);
    assert!(
        shown.contains("dead") && shown.contains("sent") && shown.contains("/nobody"),
        "{shown}"
    );

    // The Slack format on success.
    e.apply("name: alerting_ok\nalerts: [{on: success, channel: slack}]\ntasks:\n- { name: fine, type: noop }\n");
    let ok = start_quickly(&e, "alerting_ok", 1)[0];
    assert_eq!(e.end(ok)["state"], "success");
    let slack = received.recv_timeout(LONG).expect("the slack-format alert");
    let line = slack["text"].as_str().unwrap_or_default();
    assert!(
        line.contains("alerting_ok") && line.contains(&format!("instance {ok} success")),
        "{slack}"
    );
}

fn by_channel_now(e: &Env, id: i64, channel: &str) -> Value {
    let list = e.api().get(&format!("/alerts?instance={id}"));
    list.as_array()
        .unwrap()
        .iter()
        .find(|a| a["channel"] == channel)
        .cloned()
        .unwrap_or(Value::Null)
}

/// A webhook's path is often its credential: a viewer of the project reads a failed
/// delivery's `last_error` with the URL cut to where it goes; a global admin, whole.
#[test]
fn a_failed_alert_s_error_shows_a_viewer_only_where_the_webhook_goes() {
    let e = Env::Standalone(Standalone::start_with(&[(
        "SHOAL_TOKEN",
        support::API_TOKEN,
    )]));
    let port = support::free_port();
    let hook = format!("http://127.0.0.1:{port}/services/T0/s3cr3t-path");
    let channel = serde_json::json!({"name": "dead", "type": "webhook", "url": hook});
    let (status, body) = e.api().post("/alert-channels", &channel.to_string());
    assert_eq!(status, 201, "{body}");
    e.apply("name: alerting\nalerts: [{on: failure, channel: dead}]\ntasks:\n- { name: broken, type: shell, command: 'exit 4' }\n");
    let (status, body) = e.api().post("/users", r#"{"name": "val"}"#);
    assert_eq!(status, 201, "{body}");
    let (status, token) = e
        .api()
        .post("/tokens", r#"{"name": "laptop", "user": "val"}"#);
    assert_eq!(status, 201, "{token}");
    let (status, body) = e
        .api()
        .put("/projects/default/members/val", r#"{"role": "viewer"}"#);
    assert_eq!(status, 200, "{body}");

    let id = start_quickly(&e, "alerting", 1)[0];
    e.end(id);
    let whole = wait_for("the failed delivery to be recorded", LONG, || {
        by_channel_now(&e, id, "dead")["last_error"]
            .as_str()
            .map(str::to_string)
    });
    assert!(
        whole.contains(&hook),
        "a global admin sees it whole: {whole}"
    );
    let as_viewer: Value = reqwest::blocking::Client::new()
        .get(format!("{}/api/v1/alerts?instance={id}", e.api().base))
        .bearer_auth(token["token"].as_str().unwrap())
        .send()
        .unwrap()
        .json()
        .unwrap();
    let shown = as_viewer[0]["last_error"].as_str().unwrap();
    assert!(!shown.contains("s3cr3t-path"), "{shown}");
    assert!(
        shown.starts_with(&format!("POST http://127.0.0.1:{port}/***: ")),
        "{shown}"
    );
}

fn alert_mistakes_are_refused_with_a_clear_error(e: Env) {
    let (status, body) = e.api().post(
        "/projects/default/workflows",
        "name: w\nalerts: [{on: failure, channel: nowhere}]\ntasks:\n- { name: a, type: noop }\n",
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("alert channel 'nowhere' does not exist"),
        "{body}"
    );
    let (status, body) = e
        .api()
        .post("/alert-channels", r#"{"name": "x", "type": "webhook"}"#);
    assert_eq!(status, 400, "{body}");
    let (status, body) = e.api().post(
        "/alert-channels",
        r#"{"name": "x", "type": "webhook", "url": "ftp://h"}"#,
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("http://"),
        "{body}"
    );
    let (status, body) = e
        .api()
        .post("/alert-channels", r#"{"name": "x", "type": "pager"}"#);
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("pager"), "{body}");
    let out = cli(e.api(), &["alert-channel", "delete", "x"]);
    assert!(
        text(&out.stderr).contains("does not exist"),
        "{}",
        text(&out.stderr)
    );
    let channels: Value = e.api().get("/alert-channels");
    assert_eq!(channels, serde_json::json!([]), "nothing was created");
}

#[test]
fn waiting_runs_and_tasks_waiting_for_a_slot_survive_a_crash() {
    let mut e = Env::Standalone(Standalone::start());
    let (runs, tasks) = (e.path("runs"), e.path("tasks"));
    serial_workflow(&e, "queue", "serial_wait", &runs, "1.5");
    let (status, body) = e
        .api()
        .post("/task-groups", r#"{"name": "one", "slots": 1}"#);
    assert_eq!(status, 201, "{body}");
    let command = timed(&tasks, "${system.workflow.instance.id}", "1.5");
    e.apply(&format!(
        "name: grouped\ntasks:\n{}",
        group_task("t", "one", &command)
    ));
    let queued = start_quickly(&e, "queue", 2);
    let grouped = start_quickly(&e, "grouped", 2);
    e.wait_state(queued[1], &["serial_wait"]);
    wait_for("a task waiting for the slot", LONG, || {
        grouped
            .iter()
            .any(|id| instance(&e, *id)["tasks"][0]["state"] == "waiting_task_group")
            .then_some(())
    });

    if let Env::Standalone(s) = &mut e {
        s.crash_and_restart();
    }
    for id in queued.iter().chain(&grouped) {
        assert_eq!(e.end(*id)["state"], "success", "instance {id}");
    }
    for file in [&runs, &tasks] {
        let spans = intervals(file);
        assert_eq!(spans.len(), 2, "{spans:?}");
        assert_eq!(max_overlap(&spans), 1, "{spans:?}");
    }
}

fn stopping_a_parent_discards_its_child_waiting_as_a_serial_run(e: Env) {
    e.apply("name: child\nexecution_type: serial_wait\ntasks:\n- { name: work, type: shell, command: 'sleep 3' }\n");
    e.apply("name: parent\ntasks:\n- { name: sub, type: sub_workflow, sub_workflow: { workflow: child } }\n");
    let busy = start_quickly(&e, "child", 1)[0];
    e.wait_state(busy, &["running"]);
    let parent = start_quickly(&e, "parent", 1)[0];
    let waiting = wait_for("the child run to wait its turn", LONG, || {
        let list = e.api().get("/instances?workflow=child&state=serial_wait");
        list.as_array()?.first()?["id"].as_i64()
    });
    let (status, body) = e.action(parent, "stop");
    assert_eq!(status, 202, "{body}");
    assert_eq!(e.end(parent)["state"], "stopped");
    let child = e.end(waiting);
    assert_eq!(child["state"], "stopped", "{child}");
    assert_eq!(child["message"], "stopped with its parent");
    assert_eq!(e.end(busy)["state"], "success");
}
