//! `shoal standalone` end to end, driven through the CLI as a user would.

mod support;

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{Api, SHOAL, Standalone, cli, free_port, text, wait_for};

fn apply(s: &Standalone, name: &str, yaml: &str) {
    let path = s.dir.path().join(format!("{name}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    let out = cli(&s.api, &["apply", "-f", path.to_str().unwrap()]);
    assert!(out.status.success(), "apply {name}: {}", text(&out.stderr));
}

fn task<'a>(inst: &'a Value, name: &str) -> &'a Value {
    inst["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no task {name} in {inst}"))
}

fn ms(t: &Value, field: &str) -> i64 {
    let s = t[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} missing in {t}"));
    chrono::DateTime::parse_from_rfc3339(s)
        .unwrap()
        .timestamp_millis()
}

#[test]
fn diamond_and_fan_in_respect_dependencies() {
    let s = Standalone::start();
    let marks = s.dir.path().join("marks");
    let yaml = format!(
        r#"
name: shapes
params: {{ dt: "2026-01-01" }}
tasks:
  - {{ name: a, type: shell, command: "echo a-${{dt}} >> {m}" }}
  - {{ name: b, type: shell, command: "sleep 0.4; echo b >> {m}", depends_on: [a] }}
  - {{ name: c, type: shell, command: "sleep 0.2; echo c >> {m}", depends_on: [a] }}
  - {{ name: d, type: shell, command: "echo d >> {m}", depends_on: [b, c] }}
  - {{ name: x1, type: noop }}
  - {{ name: x2, type: shell, command: "sleep 0.3" }}
  - {{ name: x3, type: noop }}
  - {{ name: y, type: shell, command: "echo y >> {m}", depends_on: [x1, x2, x3] }}
"#,
        m = marks.display()
    );
    apply(&s, "shapes", &yaml);
    let out = cli(
        &s.api,
        &["start", "shapes", "--param", "dt=2026-02-03", "--wait"],
    );
    assert!(
        out.status.success(),
        "start --wait failed: {}",
        text(&out.stderr)
    );
    let id: i64 = text(&out.stdout)
        .trim()
        .parse()
        .expect("start prints the instance id");

    let inst = s.api.get(&format!("/instances/{id}"));
    assert_eq!(inst["state"], "success");
    let tasks = inst["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 8, "each task ran once: {inst}");
    assert!(
        tasks
            .iter()
            .all(|t| t["state"] == "success" && t["attempt"] == 1)
    );
    let d_start = ms(task(&inst, "d"), "started_at");
    assert!(
        d_start >= ms(task(&inst, "b"), "ended_at"),
        "d started before b ended"
    );
    assert!(
        d_start >= ms(task(&inst, "c"), "ended_at"),
        "d started before c ended"
    );
    let y_start = ms(task(&inst, "y"), "started_at");
    assert!(
        y_start >= ms(task(&inst, "x2"), "ended_at"),
        "fan-in started before x2 ended"
    );

    let lines = std::fs::read_to_string(&marks).unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(
        lines[0], "a-2026-02-03",
        "start params win over global params"
    );
    let pos = |n: &str| {
        lines
            .iter()
            .position(|l| *l == n)
            .unwrap_or_else(|| panic!("{n} never ran"))
    };
    assert!(pos("d") > pos("b") && pos("d") > pos("c"));

    let out = cli(&s.api, &["status", &id.to_string(), "--output", "json"]);
    assert!(out.status.success());
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["state"], "success");

    let metrics = s.api.get_text("/metrics");
    for line in [
        "shoal_commands_claimed_total 1",
        "shoal_instances_finished_total{state=\"success\"} 1",
        "shoal_worker_tasks_finished_total{state=\"success\"} 8",
        "shoal_instances_running 0",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "/metrics lacks '{line}':\n{metrics}"
        );
    }
}

#[test]
fn a_failing_task_fails_the_instance_and_its_log_is_readable() {
    let s = Standalone::start();
    apply(
        &s,
        "breaks",
        r#"
name: breaks
tasks:
  - { name: ok, type: shell, command: "echo fine" }
  - { name: boom, type: shell, command: "echo about to fail; echo oops >&2; exit 3", depends_on: [ok] }
  - { name: after, type: shell, command: "echo never", depends_on: [boom] }
  - { name: slow, type: shell, command: "sleep 30", depends_on: [ok] }
"#,
    );
    let out = cli(&s.api, &["start", "breaks", "--wait"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed instance exits 1: {}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("boom"),
        "the failed task is named: {}",
        text(&out.stderr)
    );
    let id: i64 = text(&out.stdout).trim().parse().unwrap();

    let inst = s.api.wait_instance(id, Duration::from_secs(20));
    assert_eq!(inst["state"], "failure");
    assert_eq!(task(&inst, "boom")["state"], "failure");
    assert_eq!(task(&inst, "boom")["exit_code"], 3);
    assert_eq!(
        task(&inst, "slow")["state"],
        "killed",
        "failure strategy end kills running tasks"
    );
    assert!(
        inst["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["name"] != "after"),
        "nothing starts after a failure"
    );

    let boom = task(&inst, "boom")["id"].as_i64().unwrap();
    let out = cli(&s.api, &["logs", &boom.to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let log = text(&out.stdout);
    assert!(
        log.contains("about to fail") && log.contains("oops"),
        "log: {log}"
    );

    let out = cli(
        &s.api,
        &["instances", "--state", "failure", "--output", "json"],
    );
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(list.as_array().unwrap().iter().any(|i| i["id"] == id));
}

#[test]
fn invalid_definitions_are_refused_with_the_offender_named() {
    let s = Standalone::start();
    let path = s.dir.path().join("cycle.yaml");
    std::fs::write(
        &path,
        "name: loop\ntasks:\n- {name: a, type: noop, depends_on: [b]}\n- {name: b, type: noop, depends_on: [a]}\n",
    )
    .unwrap();
    let out = cli(&s.api, &["apply", "-f", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("a -> b -> a"),
        "{}",
        text(&out.stderr)
    );
    let (status, _) = s.api.post("/projects/default/workflows/loop/start", "{}");
    assert_eq!(status, 404, "nothing was stored");

    apply(
        &s,
        "needs",
        "name: needs\ntasks:\n- { name: t, type: shell, command: 'echo ${region}' }\n",
    );
    let out = cli(&s.api, &["start", "needs"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("${region}"),
        "{}",
        text(&out.stderr)
    );
    let out = cli(
        &s.api,
        &["start", "needs", "--param", "region=eu", "--wait"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    let out = cli(&s.api, &["start", "nope"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("nope"), "{}", text(&out.stderr));
}

#[test]
fn a_20_mib_body_is_refused_with_413_and_the_server_stays_healthy() {
    use std::io::{Read, Write};
    let s = Standalone::start();
    // A request announcing a 20 MiB definition, of which one byte past the 8 MiB limit is
    // sent: the server answers once the limit is passed. (A client still writing the other
    // 12 MiB then can see the connection closed under it before it reads the answer.)
    let addr = s.api.base.trim_start_matches("http://");
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        conn,
        "POST /api/v1/projects/default/workflows HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/yaml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        20 << 20
    )
    .unwrap();
    conn.write_all(&vec![b'x'; (8 << 20) + 1]).unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("--max-body-bytes"), "{answer}");
    assert!(s.api.healthy());
    apply(
        &s,
        "small",
        "name: small\ntasks:\n- { name: t, type: noop }\n",
    );
    let out = cli(&s.api, &["start", "small", "--wait"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn a_crashed_standalone_finishes_its_instances_after_a_restart() {
    let mut s = Standalone::start();
    let (ran, started) = (s.dir.path().join("ran"), s.dir.path().join("started"));
    apply(
        &s,
        "crashy",
        &format!(
            "name: crashy\ntasks:\n- {{ name: first, type: shell, command: 'echo first >> {r}' }}\n- {{ name: slow, type: shell, command: 'touch {st}; sleep 1; echo slow >> {r}', depends_on: [first] }}\n- {{ name: last, type: shell, command: 'echo last >> {r}', depends_on: [slow] }}\n",
            r = ran.display(),
            st = started.display()
        ),
    );
    let out = cli(&s.api, &["start", "crashy"]);
    let id: i64 = text(&out.stdout).trim().parse().expect("instance id");
    support::wait_for("slow to start", Duration::from_secs(30), || {
        started.exists().then_some(())
    });
    // Its start is a record the engine writes within 10 ms: the crash comes once it is
    // written (a task lost before that is asked for on the new worker and run again as
    // the same attempt; either way it finishes once).
    support::wait_for("slow recorded running", Duration::from_secs(30), || {
        let inst = s.api.get(&format!("/instances/{id}"));
        let tasks = inst["tasks"].as_array()?.clone();
        tasks
            .iter()
            .any(|t| t["name"] == "slow" && t["state"] == "running")
            .then_some(())
    });
    s.crash_and_restart();

    let inst = s.api.wait_instance(id, Duration::from_secs(60));
    assert_eq!(inst["state"], "success", "{inst}");
    let lines = std::fs::read_to_string(&ran).unwrap();
    assert_eq!(
        lines.lines().filter(|l| *l == "first").count(),
        1,
        "a finished task is not run again: {lines}"
    );
    assert_eq!(lines.lines().filter(|l| *l == "last").count(), 1);
    let slow: Vec<&Value> = inst["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "slow")
        .collect();
    assert_eq!(
        slow[0]["state"], "need_fault_tolerance",
        "the attempt lost in the crash is marked"
    );
    assert_eq!(slow.last().unwrap()["state"], "success");
}

#[test]
fn a_task_whose_group_has_no_worker_waits_with_the_reason_shown() {
    let s = Standalone::start();
    apply(
        &s,
        "gpu",
        "name: gpu\ntasks:\n- { name: train, type: noop, worker_group: gpu }\n",
    );
    let out = cli(&s.api, &["start", "gpu"]);
    let id: i64 = text(&out.stdout).trim().parse().expect("instance id");
    let task = support::wait_for("the waiting reason", Duration::from_secs(30), || {
        let inst = s.api.get(&format!("/instances/{id}"));
        let t = inst["tasks"].as_array()?.first()?.clone();
        t["message"]
            .as_str()
            .is_some_and(|m| m.contains("group 'gpu'"))
            .then_some(t)
    });
    assert_eq!(task["state"], "submitted", "it waits, queued");
    let out = cli(&s.api, &["status", &id.to_string()]);
    assert!(
        text(&out.stdout).contains("no live worker serves group 'gpu'"),
        "{}",
        text(&out.stdout)
    );
    let (status, _) = s.api.post(&format!("/instances/{id}/stop"), "");
    assert_eq!(status, 202);
    let inst = s.api.wait_instance(id, Duration::from_secs(30));
    assert_eq!(inst["state"], "stopped");
    assert_eq!(
        inst["tasks"][0]["state"], "killed",
        "a queued task is withdrawn on stop"
    );
}

/// A worker short of disk space (here: a --min-free-disk no disk has) takes no task; the
/// task waits, queued, and its row says which worker refused it and why.
#[test]
fn a_task_refused_for_want_of_disk_space_waits_with_the_reason_shown() {
    let s = Standalone::start_with(&[("SHOAL_MIN_FREE_DISK", "1000000GiB")]);
    apply(
        &s,
        "tight",
        "name: tight\ntasks:\n- { name: write, type: shell, command: 'echo hi' }\n",
    );
    let out = cli(&s.api, &["start", "tight"]);
    let id: i64 = text(&out.stdout).trim().parse().expect("instance id");
    let task = support::wait_for("the refusal's reason", Duration::from_secs(30), || {
        let inst = s.api.get(&format!("/instances/{id}"));
        let t = inst["tasks"].as_array()?.first()?.clone();
        t["message"]
            .as_str()
            .is_some_and(|m| m.contains("--min-free-disk"))
            .then_some(t)
    });
    assert_eq!(task["state"], "submitted", "it waits, queued: {task}");
    let message = task["message"].as_str().unwrap();
    assert!(
        message.starts_with("waiting: worker ") && message.contains("disk nearly full"),
        "{message}"
    );
}

#[test]
fn logs_written_to_a_pipe_carry_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = Command::new(SHOAL)
        .args(["standalone", "--port", &port.to_string(), "--data-dir"])
        .arg(dir.path().join("data"))
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let api = Api::new(port);
    let healthy = support::poll(Duration::from_secs(60), || api.healthy().then_some(())).is_some();
    let _ = child.kill();
    let logs = text(&child.wait_with_output().unwrap().stderr);
    assert!(healthy, "standalone did not answer /health:\n{logs}");
    assert!(logs.contains("INFO"), "no log lines on stderr:\n{logs}");
    assert!(
        !logs.contains('\x1b'),
        "colour codes in piped logs:\n{}",
        logs.escape_debug()
    );
}

#[test]
fn dump_config_shows_that_a_token_or_key_is_set_but_not_its_value() {
    let key = "ab".repeat(32);
    for role in [
        &["standalone"][..],
        &["api-server", "--database-url", "postgres://h/db"],
        &["master", "--database-url", "postgres://h/db"],
    ] {
        let out = Command::new(SHOAL)
            .args(role)
            .args(["--dump-config"])
            .env("SHOAL_TOKEN", "s3cret-value")
            .env("SHOAL_SECRET_KEY", &key)
            .output()
            .unwrap();
        let printed = text(&out.stdout);
        assert!(out.status.success(), "{role:?}: {}", text(&out.stderr));
        if role[0] != "master" {
            assert!(printed.contains("token = \"***\""), "{role:?}:\n{printed}");
        }
        assert!(
            printed.contains("secret_key = \"***\""),
            "{role:?}:\n{printed}"
        );
        assert!(
            !printed.contains("s3cret-value") && !printed.contains(&key),
            "{role:?}:\n{printed}"
        );
    }
}

/// A task's environment is the allowlist (PATH, HOME, LANG, ...), the names given to
/// `--task-env` and its own parameters: never the server's token, key or other variables.
#[test]
fn a_task_sees_none_of_the_server_s_environment_but_the_allowlist() {
    let key = "cd".repeat(32);
    let s = Standalone::start_with(&[
        ("SHOAL_TOKEN", support::API_TOKEN),
        ("SHOAL_SECRET_KEY", &key),
        // The standalone's own user runs the tasks: the test is about the environment.
        ("SHOAL_SINGLE_TEAM", "true"),
        ("SHOAL_TASK_ENV", "PASSED_ON"),
        ("PASSED_ON", "by-the-operator"),
        ("CLOUD_CREDENTIALS", "of-the-service"),
    ]);
    apply(
        &s,
        "show_env",
        "name: show_env\nparams: {greeting: hello}\ntasks:\n  - { name: env, type: shell, command: env }\n",
    );
    let out = cli(&s.api, &["start", "show_env", "--wait"]);
    let id: i64 = text(&out.stdout).trim().parse().unwrap();
    let inst = s.api.wait_instance(id, Duration::from_secs(20));
    assert_eq!(inst["state"], "success", "{inst}");
    let env_task = task(&inst, "env")["id"].as_i64().unwrap();
    let env = text(&cli(&s.api, &["logs", &env_task.to_string()]).stdout);
    let names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    for leaked in [support::API_TOKEN, &key, "of-the-service"] {
        assert!(!env.contains(leaked), "{leaked} reached the task:\n{env}");
    }
    // The task's own parameters come as SHOAL_PARAM_*; no other SHOAL_ variable.
    let shoal: Vec<_> = (names.iter()).filter(|n| n.starts_with("SHOAL_")).collect();
    assert!(
        shoal.iter().all(|n| n.starts_with("SHOAL_PARAM_")),
        "{names:?}"
    );
    assert!(env.contains("PASSED_ON=by-the-operator\n"), "{env}");
    assert!(
        env.contains("greeting=hello\n"),
        "its own parameters: {env}"
    );
    assert!(names.contains(&"PATH"), "{names:?}");
}

/// Secrets are refused on a server's command line (every local user and task reads
/// `/proc/PID/cmdline`), and taken from the environment.
#[test]
fn a_secret_on_a_server_s_command_line_is_refused() {
    let key = "ab".repeat(32);
    for (args, says) in [
        (&["standalone", "--token", "t0ken-value"][..], "SHOAL_TOKEN"),
        (&["standalone", "--secret-key", &key], "SHOAL_SECRET_KEY"),
        (
            &["worker", "--cluster-secret=0123456789abcdef0"],
            "SHOAL_CLUSTER_SECRET",
        ),
        (
            &["master", "--database-url", "postgres://u:pw@h/db"],
            "SHOAL_DATABASE_URL",
        ),
        (
            &["worker", "--datasource", "w=postgres://u:pw@h/db"],
            "--config",
        ),
    ] {
        let out = Command::new(SHOAL)
            .args(args)
            .arg("--dump-config")
            .output()
            .unwrap();
        let said = text(&out.stderr);
        assert!(
            !out.status.success(),
            "{args:?} accepted: {}",
            text(&out.stdout)
        );
        assert!(
            said.contains("can be read by every user of this machine") && said.contains(says),
            "{args:?}: {said}"
        );
    }
    let out = Command::new(SHOAL)
        .args(["standalone", "--dump-config"])
        .env("SHOAL_TOKEN", "t0ken-value")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// The data dir is shoal's alone: a task of another OS user (a tenant) reads neither the
/// store, the secret key nor the logs of other tasks, and a data dir an older version left
/// open is tightened at start.
#[test]
fn a_tenant_s_task_cannot_read_the_data_dir() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let mut s = Standalone::start();
    // The tenant reaches its work directories through the test's (private) directory.
    std::fs::set_permissions(s.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = s.dir.path().join("data");
    let mode = |name: &str| std::fs::metadata(data.join(name)).unwrap().mode() & 0o777;
    let probe = format!(
        "for f in shoal.db shoal.db-wal secret.key logs; do test -r '{0}/'$f && echo readable:$f; done; \
         ls '{0}' || true; echo probed",
        data.display()
    );
    apply(
        &s,
        "probe",
        &format!(
            "name: probe\ntenant: nobody\ntasks:\n  - {{ name: p, type: shell, command: \"{probe}\" }}\n"
        ),
    );
    let run = |s: &Standalone| {
        let out = cli(&s.api, &["start", "probe", "--wait"]);
        let id: i64 = text(&out.stdout).trim().parse().unwrap();
        let inst = s.api.wait_instance(id, Duration::from_secs(20));
        assert_eq!(inst["state"], "success", "{inst}");
        let p = task(&inst, "p")["id"].as_i64().unwrap();
        text(&cli(&s.api, &["logs", &p.to_string()]).stdout)
    };
    let log = run(&s);
    assert!(
        log.contains("probed") && !log.contains("readable:"),
        "{log}"
    );
    assert!(
        log.contains("Permission denied"),
        "the data dir cannot be listed: {log}"
    );
    for (name, want) in [
        ("", 0o711),
        ("shoal.db", 0o600),
        ("secret.key", 0o600),
        ("logs", 0o700),
        ("work", 0o711),
    ] {
        assert_eq!(mode(name), want, "{name}: {:o}", mode(name));
    }

    // What an older version left open is closed at the next start.
    for (name, loose) in [("", 0o755), ("shoal.db", 0o644), ("logs", 0o755)] {
        std::fs::set_permissions(data.join(name), std::fs::Permissions::from_mode(loose)).unwrap();
    }
    s.crash_and_restart();
    assert_eq!(
        (mode(""), mode("shoal.db"), mode("logs")),
        (0o711, 0o600, 0o700)
    );
    let log = run(&s);
    assert!(!log.contains("readable:"), "{log}");
}

/// Starts `workflow` of `project` and waits for its end.
fn run_in(s: &Standalone, project: &str, workflow: &str) -> Value {
    let out = cli(&s.api, &["start", workflow, "--project", project, "--wait"]);
    let id: i64 = text(&out.stdout).trim().parse().unwrap();
    s.api.wait_instance(id, Duration::from_secs(20))
}

/// With auth on, users of other projects are not the admin: a task never runs as the OS
/// user of shoal itself. One whose workflow names no tenant fails, naming the settings
/// that fix it; one with a tenant runs as that user.
#[test]
fn with_auth_a_task_without_a_tenant_is_refused_with_the_reason() {
    use std::os::unix::fs::PermissionsExt;
    let s = Standalone::start_with(&[("SHOAL_TOKEN", support::API_TOKEN)]);
    // The tenant reaches its work directories through the test's (private) directory.
    std::fs::set_permissions(s.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let who = "tasks:\n  - { name: who, type: shell, command: 'id -un' }\n";
    apply(&s, "as_shoal", &format!("name: as_shoal\n{who}"));
    apply(
        &s,
        "as_nobody",
        &format!("name: as_nobody\ntenant: nobody\n{who}"),
    );

    let inst = run_in(&s, "default", "as_shoal");
    assert_eq!(inst["state"], "failure", "{inst}");
    let message = task(&inst, "who")["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("names no tenant")
            && message.contains("--default-tenant")
            && message.contains("--single-team"),
        "{message}"
    );

    let inst = run_in(&s, "default", "as_nobody");
    assert_eq!(inst["state"], "success", "{inst}");
    let id = task(&inst, "who")["id"].as_i64().unwrap();
    let out = cli(&s.api, &["logs", &id.to_string()]);
    assert_eq!(text(&out.stdout).trim(), "nobody");
}

/// A worker's `--datasource` serves the projects it is granted to: a sql task of another
/// project is refused with the reason (any user may create a project).
#[test]
fn a_worker_datasource_serves_only_the_projects_granted_it() {
    let dir = tempfile::tempdir().unwrap();
    let wh = format!(
        "wh@sales=sqlite://{}?mode=rwc",
        dir.path().join("wh.db").display()
    );
    let s = Standalone::start_with_args(
        &[("SHOAL_TOKEN", support::API_TOKEN)],
        &["--datasource", &wh],
    );
    let out = cli(&s.api, &["project", "create", "sales"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let query = "tasks:\n  - { name: q, type: sql, sql: { datasource: wh, query: 'SELECT 7 AS n', output: first_row } }\n";
    for project in ["sales", "default"] {
        apply(
            &s,
            &format!("q_{project}"),
            &format!("name: q\nproject: {project}\n{query}"),
        );
    }
    let inst = run_in(&s, "sales", "q");
    assert_eq!(inst["state"], "success", "{inst}");
    let inst = run_in(&s, "default", "q");
    assert_eq!(inst["state"], "failure", "{inst}");
    let message = task(&inst, "q")["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("datasource 'wh' of this worker is not granted to project 'default'")
            && message.contains("--datasource wh@default=URL"),
        "{message}"
    );
}

/// A workflow's tenant: its shell tasks run as that OS user (`nobody` here; switching to it
/// needs the worker to run as root, as CI's does), a tenant missing on the worker fails
/// the task with the reason.
#[test]
fn a_workflow_s_tenant_runs_its_shell_tasks_as_that_os_user() {
    use std::os::unix::fs::PermissionsExt;
    let s = Standalone::start();
    // The tenant reaches its work directories through the test's (private) directory.
    std::fs::set_permissions(s.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    apply(
        &s,
        "as_nobody",
        "name: as_nobody\ntenant: nobody\ntasks:\n  - { name: who, type: shell, command: 'id -un' }\n",
    );
    apply(
        &s,
        "as_ghost",
        "name: as_ghost\ntenant: ghost_tenant\ntasks:\n  - { name: who, type: shell, command: 'id -un' }\n",
    );
    let run = |workflow: &str| {
        let out = cli(&s.api, &["start", workflow, "--wait"]);
        let id: i64 = text(&out.stdout).trim().parse().unwrap();
        s.api.wait_instance(id, Duration::from_secs(20))
    };
    let inst = run("as_nobody");
    assert_eq!(inst["state"], "success", "{inst}");
    let who = task(&inst, "who")["id"].as_i64().unwrap();
    let out = cli(&s.api, &["logs", &who.to_string()]);
    assert_eq!(text(&out.stdout).trim(), "nobody");

    let inst = run("as_ghost");
    assert_eq!(inst["state"], "failure", "{inst}");
    let message = task(&inst, "who")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains("'ghost_tenant' is not an OS user on this worker"),
        "{message}"
    );
}

#[test]
fn start_runs_the_version_asked_for() {
    let s = Standalone::start();
    let v1 = "name: versioned\ntasks:\n  - { name: a, type: shell, command: 'echo one' }\n";
    apply(&s, "versioned", v1);
    apply(&s, "versioned", &v1.replace("echo one", "echo two"));
    let out = cli(&s.api, &["start", "versioned", "--version", "1", "--wait"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let id: i64 = text(&out.stdout).trim().parse().unwrap();
    let inst = s.api.wait_instance(id, Duration::from_secs(20));
    assert_eq!(inst["version"], 1);
    let a = task(&inst, "a")["id"].as_i64().unwrap();
    let log = cli(&s.api, &["logs", &a.to_string()]);
    assert_eq!(text(&log.stdout).trim(), "one");

    let out = cli(&s.api, &["start", "versioned", "--version", "9"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("has no version 9 (latest is 2)"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_config_file_sets_what_neither_flags_nor_the_environment_do() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shoal.toml");
    std::fs::write(
        &file,
        "slots = 7\nmax_tasks = 50\nport = 12999\ncommand_poll = '500ms'\ndatabase_url = 'postgres://h/db'\n",
    )
    .unwrap();
    let dump = |env: &[(&str, &str)], args: &[&str]| {
        let out = Command::new(SHOAL)
            .args([
                "standalone",
                "--config",
                file.to_str().unwrap(),
                "--dump-config",
            ])
            .args(args)
            .env_remove("SHOAL_SLOTS")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let printed = dump(&[], &[]);
    assert!(
        printed.contains("slots = 7") && printed.contains("max_tasks = 50"),
        "{printed}"
    );
    assert!(printed.contains("port = 12999"), "{printed}");
    assert!(
        printed.contains("command_poll = \"500ms\"")
            && printed.contains("reconcile_interval = \"30s\""),
        "{printed}"
    );
    assert!(
        dump(&[("SHOAL_SLOTS", "9")], &[]).contains("slots = 9"),
        "the environment wins"
    );
    assert!(
        dump(&[("SHOAL_SLOTS", "9")], &["--slots", "5"]).contains("slots = 5"),
        "a flag wins"
    );

    std::fs::write(&file, "slotz = 7\n").unwrap();
    let out = Command::new(SHOAL)
        .args([
            "standalone",
            "--config",
            file.to_str().unwrap(),
            "--dump-config",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("'slotz' is not a setting"),
        "{}",
        text(&out.stderr)
    );
}

/// `--https-cert` and `--https-key`: the API, the web UI and the CLI over HTTPS. Plain HTTP
/// to the port gets no answer; a client that does not trust the certificate is told how to.
#[test]
fn the_api_the_ui_and_the_cli_work_over_https_with_a_certificate() {
    let certs_dir = tempfile::tempdir().unwrap();
    let certs = support::make_certs(certs_dir.path(), "web");
    let s = Standalone::start_https(&certs);
    assert!(s.api.base.starts_with("https://"), "{}", s.api.base);
    let page = s.api.get_text("/instances");
    assert!(page.contains("<div id=\"root\">"), "{page}");
    // Browsers are told to keep to HTTPS for this server.
    let answer = s.api.get_ok("/api/v1/health");
    assert_eq!(
        answer.headers()["strict-transport-security"],
        "max-age=31536000"
    );

    let ca = [("SHOAL_API_CA", certs.ca.to_str().unwrap())];
    let path = s.dir.path().join("hello.yaml");
    std::fs::write(
        &path,
        "name: hello\ntasks:\n  - { name: a, type: shell, command: 'echo hi' }\n",
    )
    .unwrap();
    let out = support::cli_env(&s.api, &["apply", "-f", path.to_str().unwrap()], &ca);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = support::cli_env(&s.api, &["start", "hello", "--wait"], &ca);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let id: i64 = text(&out.stdout).trim().parse().unwrap();
    assert_eq!(s.api.get(&format!("/instances/{id}"))["state"], "success");

    let out = cli(&s.api, &["instances"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("over TLS") && err.contains("--api-ca"),
        "{err}"
    );
    let plain = s.api.base.replace("https://", "http://");
    let answer = reqwest::blocking::get(format!("{plain}/api/v1/health"));
    assert!(answer.is_err(), "plain HTTP answered: {answer:?}");

    // A key that is not the certificate's, or a missing file: refused at start, named.
    let other = support::make_certs(certs_dir.path(), "other");
    for (cert, key, says) in [
        (&certs.cert, &other.key, "do not make a server identity"),
        (
            &certs_dir.path().join("none.pem"),
            &certs.key,
            "cannot read the certificate",
        ),
    ] {
        let out = Command::new(SHOAL)
            .args(["standalone", "--port", "0", "--data-dir"])
            .arg(certs_dir.path().join("data"))
            .arg("--https-cert")
            .arg(cert)
            .arg("--https-key")
            .arg(key)
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(text(&out.stderr).contains(says), "{}", text(&out.stderr));
    }
}

/// `shoal ROLE --dump-config > shoal.toml` then `--config shoal.toml` gives the same
/// configuration; a secret it masked is refused, not taken as the value.
#[test]
fn dump_config_prints_a_config_file_that_gives_the_same_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shoal.toml");
    let dump = |args: &[&str]| {
        let out = Command::new(SHOAL)
            .args(args)
            .arg("--dump-config")
            .env_remove("SHOAL_SLOTS")
            .output()
            .unwrap();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    };
    let config = ["--config", file.to_str().unwrap()];
    for role in [
        &[
            "standalone",
            "--slots",
            "3",
            "--datasource",
            "wh=sqlite:///tmp/wh.db",
        ][..],
        &[
            "standalone",
            "--trusted-proxy",
            "10.0.0.0/8",
            "--retention",
            "2d",
            "--max-tasks",
            "9",
        ],
        &[
            "worker",
            "--etcd",
            "http://a:2379,http://b:2379",
            "--slots",
            "4",
            "--insecure",
        ],
        &[
            "master",
            "--database-url",
            "postgres://h/db",
            "--failover-poll",
            "7s",
        ],
        &[
            "api-server",
            "--database-url",
            "postgres://h/db",
            "--max-body-bytes",
            "1MiB",
        ],
    ] {
        let (ok, printed, err) = dump(role);
        assert!(ok, "{role:?}: {err}");
        std::fs::write(&file, &printed).unwrap();
        let (ok, again, err) = dump(&[&role[..1], &config[..]].concat());
        assert!(ok, "{role:?} from its dump:\n{printed}\n{err}");
        assert_eq!(again, printed, "{role:?}");
    }

    // Passwords come from a file (on the command line they are refused).
    std::fs::write(&file, "database_url = 'postgres://u:pw@h/db'\n").unwrap();
    let (ok, printed, err) = dump(&["master", config[0], config[1]]);
    assert!(ok, "{err}");
    assert!(
        printed.contains("database_url = \"postgres://u:***@h/db\"") && !printed.contains("pw"),
        "{printed}"
    );
    // libpq's password of the TLS client key too.
    let url = "postgres://u@h/db?sslmode=require&sslpassword=keypw";
    let (ok, printed, err) = dump(&["api-server", "--database-url", url]);
    assert!(ok, "{err}");
    assert!(
        printed.contains("sslpassword=***") && !printed.contains("keypw"),
        "{printed}"
    );
    std::fs::write(&file, "datasource = ['wh=postgres://u:pw@h/db']\n").unwrap();
    let (ok, printed, err) = dump(&["standalone", config[0], config[1]]);
    assert!(ok, "{err}");
    assert!(
        printed.contains("datasource = [\"wh=postgres://u:***@h/db\"]") && !printed.contains("pw"),
        "{printed}"
    );
    let out = Command::new(SHOAL)
        .args([
            "api-server",
            "--database-url",
            "postgres://h/db",
            "--dump-config",
        ])
        .env("SHOAL_TOKEN", "***")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("give the token itself"),
        "{}",
        text(&out.stderr)
    );
    std::fs::write(&file, &printed).unwrap();
    let (ok, _, err) = dump(&["standalone", config[0], config[1]]);
    assert!(!ok);
    assert!(
        err.contains("'datasource' holds the *** that --dump-config prints"),
        "{err}"
    );
}

/// `--retention` and `--log-retention`: an instance that ended longer ago than the
/// retention goes with its task rows and its logs (on the worker too); one still running
/// stays.
#[test]
fn ended_instances_and_their_logs_go_after_the_retention() {
    let s = Standalone::start_with(&[("SHOAL_RETENTION", "3s"), ("SHOAL_LOG_RETENTION", "3s")]);
    apply(
        &s,
        "short",
        "name: short\ntasks:\n- { name: a, type: shell, command: 'echo hi' }\n",
    );
    apply(
        &s,
        "long",
        "name: long\ntasks:\n- { name: a, type: shell, command: 'echo hi; sleep 15' }\n",
    );
    let start = |name: &str| {
        let out = cli(&s.api, &["start", name]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).trim().parse::<i64>().unwrap()
    };
    let (short, long) = (start("short"), start("long"));
    let ended = s.api.wait_instance(short, Duration::from_secs(20));
    assert_eq!(ended["state"], "success");
    let task = ended["tasks"][0]["id"].as_i64().unwrap();
    let logs = s.dir.path().join(format!("data/logs/{short}"));
    assert!(logs.is_dir(), "{} holds the log", logs.display());

    support::wait_for("the ended instance to go", Duration::from_secs(30), || {
        (s.api.status(&format!("/instances/{short}")) == 404).then_some(())
    });
    assert_eq!(s.api.status(&format!("/task-instances/{task}/log")), 404);
    support::wait_for("its log directory to go", Duration::from_secs(30), || {
        (!logs.exists()).then_some(())
    });
    let running = s.api.get(&format!("/instances/{long}"));
    assert_eq!(running["state"], "running", "a running instance stays");
    let log_of_long = s.dir.path().join(format!("data/logs/{long}"));
    assert!(
        log_of_long.is_dir(),
        "and so does the log of its running task"
    );
}

#[test]
fn an_overloaded_master_claims_no_new_runs_says_why_and_claims_them_once_recovered() {
    // No host has a pebibyte of memory available: the master is overloaded from its start.
    let mut s = Standalone::start_with(&[("SHOAL_MIN_FREE_MEMORY", "1PiB")]);
    apply(
        &s,
        "quick",
        "name: quick\ntasks:\n- { name: t, type: noop }\n",
    );
    let (status, started) = s.api.post("/projects/default/workflows/quick/start", "{}");
    assert_eq!(status, 202, "{started}");
    let command = format!("/commands/{}", started["command_id"]);

    let nodes = s.api.get("/cluster");
    let master = nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["role"] == "master")
        .unwrap_or_else(|| panic!("no master in {nodes}"));
    let why = master["overloaded"].as_str().unwrap_or_default();
    assert!(
        why.starts_with("available memory") && why.contains("below --min-free-memory 1.0 PiB"),
        "{master}"
    );
    let metrics = s.api.get_text("/metrics");
    assert!(
        metrics.lines().any(|l| l == "shoal_master_overloaded 1"),
        "{metrics}"
    );
    // Several command polls (1 s) and measurements (2 s) go by: the command stays unclaimed.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(s.api.get(&command)["status"], "pending");

    // The same data without the limit: the command that waited runs.
    s.crash_and_restart_with(&[]);
    let id = wait_for(&command, Duration::from_secs(30), || {
        s.api.get(&command)["workflow_instance_id"].as_i64()
    });
    let end = s.api.wait_instance(id, Duration::from_secs(30));
    assert_eq!(end["state"], "success", "{end}");
    assert!(s.api.get("/cluster")[0].get("overloaded").is_none());
}
