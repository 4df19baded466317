//! Alert channels beyond the plain webhook, each over a real `shoal standalone`: e-mail
//! through a real SMTP server (Python's aiosmtpd: STARTTLS with a private CA and AUTH, or
//! plain), chat robots' formats, alerts of a task that failed for good, and a run's
//! timeout.

#[path = "support/callback_server.rs"]
mod callback_server;
mod support;

use callback_server::CallbackServer;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use support::{Env, LONG, Standalone, cli, make_certs, text, wait_for};

fn standalone() -> Env {
    Env::Standalone(Standalone::start())
}

fn create_channel(e: &Env, channel: Value) {
    let (status, body) = e.api().post("/alert-channels", &channel.to_string());
    assert_eq!(status, 201, "{body}");
}

/// The alerts of instance `id` once each has been delivered or given up.
fn delivered(e: &Env, id: i64, n: usize) -> Vec<Value> {
    let mut last = Value::Null;
    support::poll(LONG, || {
        last = e.api().get(&format!("/alerts?instance={id}"));
        let alerts = last.as_array().cloned().unwrap_or_default();
        (alerts.len() == n && alerts.iter().all(|a| a["state"] != "pending")).then_some(alerts)
    })
    .unwrap_or_else(|| panic!("{n} alerts of instance {id} were not all delivered: {last:#}"))
}

/// aiosmtpd on a free port; its messages, one JSON value each, come through the receiver.
struct Smtp {
    child: Child,
    port: u16,
    messages: mpsc::Receiver<Value>,
}

impl Smtp {
    fn start(tls: Option<(&support::Certs, &str, &str)>) -> Smtp {
        let port = support::free_port();
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/support/smtp_server.py"
        );
        let mut cmd = Command::new("python3");
        cmd.arg(script).arg(port.to_string());
        if let Some((certs, user, password)) = tls {
            cmd.arg(&certs.cert).arg(&certs.key).args([user, password]);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs (scripts/test installs aiosmtpd)");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        assert_eq!(
            first, "ready",
            "the SMTP server did not start: is aiosmtpd installed?"
        );
        let (tx, messages) = mpsc::channel();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let _ = tx.send(serde_json::from_str(&line).unwrap_or(Value::Null));
            }
        });
        Smtp {
            child,
            port,
            messages,
        }
    }
}

impl Drop for Smtp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_email_alert_crosses_starttls_with_auth_to_a_real_smtp_server() {
    let e = standalone();
    let certs = make_certs(&e.path("."), "smtp");
    let smtp = Smtp::start(Some((&certs, "alerts", "s3cret-pw")));
    let ca = std::fs::read_to_string(&certs.ca).unwrap();
    create_channel(
        &e,
        json!({
            "name": "ops-mail", "type": "email",
            "smtp": format!("smtp://127.0.0.1:{}?tls=required", smtp.port),
            "from": "shoal@example.com", "to": ["oncall@example.com", "lead@example.com"],
            "username": "alerts", "password": "s3cret-pw", "ca": ca,
        }),
    );
    // The password is never shown again.
    let channels = e.api().get("/alert-channels");
    let shown = channels
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "ops-mail")
        .unwrap();
    assert_eq!(shown["password"], "***", "{shown}");
    assert!(!channels.to_string().contains("s3cret-pw"), "{channels}");

    e.apply("name: nightly\nalerts: [{on: failure, channel: ops-mail}]\ntasks:\n- { name: load, type: shell, command: 'exit 4' }\n");
    let id = e.start("nightly", "{}");
    assert_eq!(e.end(id)["state"], "failure");
    let mail = smtp
        .messages
        .recv_timeout(LONG)
        .expect("the SMTP server got the alert");
    assert_eq!(mail["from"], "shoal@example.com", "{mail}");
    assert_eq!(
        mail["to"],
        json!(["oncall@example.com", "lead@example.com"]),
        "{mail}"
    );
    // Long headers are folded over lines.
    let content = mail["content"]
        .as_str()
        .unwrap()
        .replace("\r\n ", " ")
        .replace("\n ", " ");
    assert!(
        content.contains(&format!(
            "Subject: shoal: workflow default/nightly instance {id} failure"
        )) && content.contains("failed tasks: load"),
        "{content}"
    );
    assert_eq!(delivered(&e, id, 1)[0]["state"], "sent");
}

#[test]
fn email_channel_mistakes_are_refused_and_create_nothing() {
    let e = standalone();
    for (channel, says) in [
        (
            json!({"name": "m", "type": "email", "smtp": "smtp://mail.example.com:25", "from": "a@example.com", "to": ["b@example.com"], "username": "u", "password": "p"}),
            "in clear",
        ),
        (
            json!({"name": "m", "type": "email", "smtp": "smtps://mail.example.com", "from": "not an address", "to": ["b@example.com"]}),
            "'not an address' is not an e-mail address",
        ),
        (
            json!({"name": "m", "type": "email", "smtp": "smtps://mail.example.com", "from": "a@example.com", "to": []}),
            "at least one address",
        ),
        (
            json!({"name": "m", "type": "email", "smtp": "imap://mail.example.com", "from": "a@example.com", "to": ["b@example.com"]}),
            "smtps://host",
        ),
        (
            json!({"name": "m", "type": "email", "smtp": "smtps://u:p@mail.example.com", "from": "a@example.com", "to": ["b@example.com"]}),
            "not in its URL",
        ),
        (
            json!({"name": "m", "type": "email", "from": "a@example.com", "to": ["b@example.com"]}),
            "needs \"smtp\"",
        ),
        (
            json!({"name": "m", "type": "email", "smtp": "smtps://mail.example.com", "from": "a@example.com", "to": ["b@example.com"], "ca": "junk"}),
            "PEM",
        ),
        (
            json!({"name": "m", "type": "webhook", "url": "http://x.example.com/", "smtp": "smtps://mail.example.com"}),
            "takes no \"smtp\"",
        ),
        (
            json!({"name": "m", "type": "webhook", "url": "https://api.telegram.org/botT/sendMessage", "format": "telegram"}),
            "chat_id",
        ),
    ] {
        let (status, body) = e.api().post("/alert-channels", &channel.to_string());
        assert_eq!(status, 400, "{channel}: {body}");
        assert!(
            body["error"].as_str().unwrap_or_default().contains(says),
            "{channel}: {body}"
        );
    }
    assert_eq!(e.api().get("/alert-channels"), json!([]));
}

#[test]
fn a_plain_smtp_server_gets_the_alert_and_the_cli_creates_the_channel() {
    let e = standalone();
    let smtp = Smtp::start(None);
    let out = cli(
        e.api(),
        &[
            "alert-channel",
            "create",
            "mail",
            "--type",
            "email",
            "--smtp",
            &format!("smtp://127.0.0.1:{}", smtp.port),
            "--from",
            "shoal@example.com",
            "--to",
            "a@example.com,b@example.com",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    e.apply("name: daily\nalerts: [{on: success, channel: mail}]\ntasks:\n- { name: fine, type: noop }\n");
    let id = e.start("daily", "{}");
    assert_eq!(e.end(id)["state"], "success");
    let mail = smtp
        .messages
        .recv_timeout(LONG)
        .expect("the plain SMTP server got the alert");
    assert_eq!(
        mail["to"],
        json!(["a@example.com", "b@example.com"]),
        "{mail}"
    );
    let listed = text(&cli(e.api(), &["alert-channel", "list"]).stdout);
    assert!(
        listed.contains("mail") && listed.contains("email"),
        "{listed}"
    );
}

#[test]
fn chat_robots_get_their_format_and_a_robot_s_refusal_is_recorded() {
    let e = standalone();
    let dingtalk = CallbackServer::answering(r#"{"errcode":0,"errmsg":"ok"}"#);
    let feishu = CallbackServer::answering(r#"{"code":0,"msg":"success"}"#);
    let picky =
        CallbackServer::answering(r#"{"errcode":310000,"errmsg":"keywords not in content"}"#);
    let telegram = CallbackServer::answering(r#"{"ok":true}"#);
    for (name, url, format) in [
        ("ding", dingtalk.url.clone(), "dingtalk"),
        ("lark", feishu.url.clone(), "feishu"),
        ("wecom", picky.url.clone(), "wecom"),
        (
            "tg",
            format!("{}?chat_id=-100123", telegram.url),
            "telegram",
        ),
    ] {
        create_channel(
            &e,
            json!({"name": name, "type": "webhook", "url": url, "format": format}),
        );
    }
    e.apply("name: etl\nalerts: [{on: failure, channel: ding}, {on: failure, channel: lark}, {on: failure, channel: wecom}, {on: failure, channel: tg}]\ntasks:\n- { name: load, type: shell, command: 'exit 4' }\n");
    let id = e.start("etl", "{}");
    e.end(id);
    let line = format!("shoal: workflow default/etl instance {id} failure");
    let alerts = wait_for("the robots' deliveries to be recorded", LONG, || {
        let list = e.api().get(&format!("/alerts?instance={id}"));
        let alerts = list.as_array().cloned().unwrap_or_default();
        let settled = |a: &Value| a["state"] == "sent" || a["last_error"].is_string();
        (alerts.len() == 4 && alerts.iter().all(settled)).then_some(alerts)
    });
    let by = |name: &str| {
        alerts
            .iter()
            .find(|a| a["channel"] == name)
            .unwrap()
            .clone()
    };
    for ok in ["ding", "lark", "tg"] {
        assert_eq!(by(ok)["state"], "sent", "{}", by(ok));
    }
    let refused = by("wecom");
    assert!(
        refused["last_error"]
            .as_str()
            .unwrap()
            .contains("keywords not in content (code 310000)"),
        "{refused}"
    );
    let got = |s: &CallbackServer| s.requests().first().cloned().unwrap_or(Value::Null);
    assert_eq!(got(&dingtalk)["msgtype"], "text");
    assert!(
        got(&dingtalk)["text"]["content"]
            .as_str()
            .unwrap()
            .starts_with(&line),
        "{}",
        got(&dingtalk)
    );
    assert!(
        got(&feishu)["content"]["text"]
            .as_str()
            .unwrap()
            .starts_with(&line),
        "{}",
        got(&feishu)
    );
    assert_eq!(got(&telegram)["chat_id"], "-100123");
    assert!(
        got(&telegram)["text"].as_str().unwrap().starts_with(&line),
        "{}",
        got(&telegram)
    );
}

#[test]
fn a_task_alert_fires_once_when_the_task_fails_for_good() {
    let e = standalone();
    let hook = CallbackServer::start(None);
    let own = CallbackServer::start(None);
    create_channel(
        &e,
        json!({"name": "hook", "type": "webhook", "url": hook.url}),
    );
    create_channel(
        &e,
        json!({"name": "own", "type": "webhook", "url": own.url}),
    );
    e.apply(concat!(
        "name: flaky\nfailure_strategy: continue\nalerts: [{on: task_failure, channel: hook}, {on: any, channel: hook}]\ntasks:\n",
        "- { name: retried, type: shell, command: 'exit 3', retries: 1, retry_interval: 1s }\n",
        "- { name: mine, type: shell, command: 'exit 5', alerts: [{on: task_failure, channel: own}] }\n",
        "- { name: fine, type: noop }\n",
    ));
    let id = e.start("flaky", "{}");
    assert_eq!(e.end(id)["state"], "failure");
    // Two task failures and the run's end to hook; one task failure to own.
    let alerts = delivered(&e, id, 4);
    let events: Vec<(&str, &str)> = alerts
        .iter()
        .map(|a| (a["channel"].as_str().unwrap(), a["event"].as_str().unwrap()))
        .collect();
    assert_eq!(
        events
            .iter()
            .filter(|(_, ev)| *ev == "task_failure")
            .count(),
        3,
        "{events:?}"
    );
    let retried = alerts
        .iter()
        .find(|a| a["payload"]["task"] == "retried")
        .expect("an alert for the retried task");
    assert_eq!(
        retried["payload"]["attempt"], 2,
        "only after its last attempt: {retried}"
    );
    assert!(
        retried["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("3"),
        "{retried}"
    );
    wait_for("both receivers to get theirs", LONG, || {
        (hook.requests().len() == 3 && own.requests().len() == 1).then_some(())
    });
    assert_eq!(own.requests()[0]["task"], "mine");
    assert_eq!(own.requests()[0]["event"], "task_failure");
}

#[test]
fn a_task_alert_for_a_run_event_is_refused_at_apply() {
    let e = standalone();
    create_channel(&e, json!({"name": "hook", "type": "log"}));
    let (status, body) = e.api().post(
        "/projects/default/workflows",
        "name: w\ntasks:\n- { name: a, type: noop, alerts: [{on: failure, channel: hook}] }\n",
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body.to_string().contains("task_failure or task_timeout"),
        "{body}"
    );
}

#[test]
fn a_run_past_its_timeout_alerts_and_runs_on_under_warn() {
    let e = standalone();
    let hook = CallbackServer::start(None);
    create_channel(
        &e,
        json!({"name": "hook", "type": "webhook", "url": hook.url}),
    );
    e.apply("name: slow\ntimeout: 1s\ntimeout_strategy: warn\nalerts: [{on: timeout, channel: hook}]\ntasks:\n- { name: nap, type: shell, command: 'sleep 3' }\n");
    let id = e.start("slow", "{}");
    let alert = wait_for("the timeout alert", LONG, || {
        hook.requests().first().cloned()
    });
    assert_eq!(alert["event"], "timeout", "{alert}");
    assert_eq!(alert["workflow_instance_id"], id, "{alert}");
    assert_eq!(
        e.api().get(&format!("/instances/{id}"))["state"],
        "running",
        "warn lets it run on"
    );
    assert_eq!(e.end(id)["state"], "success");
    // Alerts are written with what they report: the end added none.
    let alerts = delivered(&e, id, 1);
    assert_eq!(alerts[0]["event"], "timeout", "nothing for the success");
    assert_eq!(hook.requests().len(), 1, "one timeout alert");
}

#[test]
fn a_task_past_its_timeout_alerts_from_its_worker() {
    let e = standalone();
    let hook = CallbackServer::start(None);
    create_channel(
        &e,
        json!({"name": "hook", "type": "webhook", "url": hook.url}),
    );
    e.apply(concat!(
        "name: naps\ntasks:\n",
        "- { name: nap, type: shell, command: 'sleep 2', timeout: 1s, timeout_strategy: warn,",
        " alerts: [{on: task_timeout, channel: hook}] }\n",
    ));
    let id = e.start("naps", "{}");
    let alert = wait_for("the task timeout alert", LONG, || {
        hook.requests().first().cloned()
    });
    assert_eq!(
        (
            alert["event"].as_str(),
            alert["task"].as_str(),
            alert["message"].as_str()
        ),
        (
            Some("task_timeout"),
            Some("nap"),
            Some("passed its timeout of 1s")
        ),
        "{alert}"
    );
    assert_eq!(e.end(id)["state"], "success", "warn lets it finish");
    assert_eq!(hook.requests().len(), 1);
}
