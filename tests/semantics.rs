//! Workflow semantics and operator controls, each test over the real `shoal standalone`
//! (SQLite, in-process registry) and over a cluster of processes (api-server, master,
//! worker on Postgres and etcd): retries, failure strategies, skipped tasks, start
//! options, stop, pause/resume, rerun and resubmit-failed, task kill and force-success,
//! logic tasks, sub-workflows, a notebook task's parameters and outputs.
//! Side effects (lines appended to files) count real executions.

mod support;

use serde_json::Value;
use std::path::Path;
use support::{Env, LONG, attempts, cli, lines, set_secret, text, wait_for};

support::deployments!(
    retries_make_one_attempt_row_each_and_then_fail_or_succeed,
    failure_strategy_continue_runs_independent_branches_and_skipped_tasks_pass,
    stop_kills_a_sleeping_task_and_its_process_is_gone,
    pause_lets_the_running_task_finish_and_resume_runs_the_rest_once,
    resubmit_failed_reruns_only_the_failed_part,
    a_killed_task_fails_its_instance_and_force_success_lets_it_finish,
    rerunning_one_task_leaves_the_others_as_they_were,
    an_offline_workflow_neither_starts_nor_fires_and_comes_back_online,
    rollback_and_deletes_keep_what_must_stay,
    rerun_runs_everything_again_as_a_new_run,
    dry_run_and_start_from_a_task,
    a_dry_run_s_child_foreach_and_exception_runs_are_dry_runs_too,
    time_expressions_and_builtins_reach_the_task,
    logic_tasks_branch_on_the_master,
    a_conditions_task_may_also_require_an_expression,
    a_sub_workflow_runs_as_a_child_and_hands_back_its_outputs,
    stopping_a_parent_stops_its_child_run_and_pausing_lets_the_child_finish,
    every_task_type_runs_and_both_timeouts_hold,
    a_secret_reaches_its_task_masked_in_the_log_and_a_secret_datasource_is_used,
    a_notebook_gets_its_parameters_from_the_run_and_hands_on_its_outputs,
);

fn alive(pid: i32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .status()
        .unwrap()
        .success()
}

fn count(path: &Path, line: &str) -> usize {
    lines(path).iter().filter(|l| *l == line).count()
}

fn retries_make_one_attempt_row_each_and_then_fail_or_succeed(e: Env) {
    let (always, once) = (e.path("always"), e.path("once"));
    e.apply(&format!(
        r#"
name: retrying
failure_strategy: continue
tasks:
  - {{ name: doomed, type: shell, retries: 2, retry_interval: 200ms, command: "echo try >> {a}; exit 1" }}
  - {{ name: second_time_lucky, type: shell, retries: 3, command: "echo try >> {o}; [ $(wc -l < {o}) -ge 2 ]" }}
"#,
        a = always.display(),
        o = once.display()
    ));
    let id = e.start("retrying", "{}");
    let inst = e.end(id);
    assert_eq!(inst["state"], "failure");
    let doomed = attempts(&inst, "doomed");
    assert_eq!(doomed.len(), 3, "3 attempts: {inst}");
    assert_eq!(
        doomed
            .iter()
            .map(|t| t["attempt"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert!(doomed.iter().all(|t| t["state"] == "failure"));
    assert_eq!(lines(&always).len(), 3, "each attempt really ran");
    let lucky = attempts(&inst, "second_time_lucky");
    assert_eq!(lucky.len(), 2);
    assert_eq!(lucky[1]["state"], "success");
    assert_eq!(lines(&once).len(), 2);
}

fn failure_strategy_continue_runs_independent_branches_and_skipped_tasks_pass(e: Env) {
    let f = e.path("ran");
    e.apply(&format!(
        r#"
name: branches
failure_strategy: continue
tasks:
  - {{ name: bad, type: shell, command: "exit 2" }}
  - {{ name: after_bad, type: shell, command: "echo after_bad >> {f}", depends_on: [bad] }}
  - {{ name: good, type: shell, command: "sleep 0.3; echo good >> {f}" }}
  - {{ name: off, type: shell, command: "echo off >> {f}", enabled: false, depends_on: [good] }}
  - {{ name: after_off, type: shell, command: "echo after_off >> {f}", depends_on: [off] }}
"#,
        f = f.display()
    ));
    let inst = e.end(e.start("branches", "{}"));
    assert_eq!(inst["state"], "failure");
    assert_eq!(
        lines(&f),
        vec!["good", "after_off"],
        "the branch without the failure ran to the end"
    );
    assert_eq!(attempts(&inst, "off")[0]["state"], "skipped");
    assert!(attempts(&inst, "after_bad").is_empty());
}

fn stop_kills_a_sleeping_task_and_its_process_is_gone(e: Env) {
    let pid_file = e.path("pid");
    e.apply(&format!(
        "name: sleeper\ntasks:\n- {{ name: nap, type: shell, command: 'echo $$ > {p}; sleep 60' }}\n- {{ name: never, type: noop, depends_on: [nap] }}\n",
        p = pid_file.display()
    ));
    let id = e.start("sleeper", "{}");
    let pid: i32 = wait_for("the task to write its pid", LONG, || {
        std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    });
    let (status, body) = e.action(id, "stop");
    assert_eq!(status, 202, "{body}");
    let inst = e.wait_state(id, &["stopped"]);
    assert_eq!(attempts(&inst, "nap")[0]["state"], "killed");
    assert!(attempts(&inst, "never").is_empty());
    assert!(!alive(pid), "the task's process {pid} is gone");
    let (status, body) = e.action(id, "stop");
    assert_eq!(
        status, 409,
        "stopping a stopped instance is refused: {body}"
    );
    assert!(
        body["error"].as_str().unwrap().contains("stopped"),
        "{body}"
    );
}

fn pause_lets_the_running_task_finish_and_resume_runs_the_rest_once(e: Env) {
    let (f, go) = (e.path("ran"), e.path("go"));
    e.apply(&format!(
        r#"
name: pausable
tasks:
  - {{ name: a, type: shell, command: "while [ ! -f {go} ]; do sleep 0.05; done; echo a >> {f}" }}
  - {{ name: b, type: shell, command: "echo b >> {f}", depends_on: [a] }}
"#,
        f = f.display(),
        go = go.display()
    ));
    let id = e.start("pausable", "{}");
    wait_for("a to run", LONG, || {
        let inst = e.api().get(&format!("/instances/{id}"));
        (attempts(&inst, "a").first()?["state"] == "running").then_some(())
    });
    let (status, body) = e.action(id, "pause");
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["state"], "ready_pause");
    std::fs::write(&go, "").unwrap();
    let inst = e.wait_state(id, &["paused"]);
    assert_eq!(
        attempts(&inst, "a")[0]["state"],
        "success",
        "the running task finished"
    );
    assert!(
        attempts(&inst, "b").is_empty(),
        "nothing new started while pausing"
    );

    let out = cli(e.api(), &["resume", &id.to_string(), "--wait"]);
    assert!(out.status.success(), "resume --wait: {}", text(&out.stderr));
    let inst = e.api().get(&format!("/instances/{id}"));
    assert_eq!(inst["state"], "success");
    assert_eq!(lines(&f), vec!["a", "b"], "a was not run again");
}

fn resubmit_failed_reruns_only_the_failed_part(e: Env) {
    let (f, fixed) = (e.path("ran"), e.path("fixed"));
    e.apply(&format!(
        r#"
name: fragile
tasks:
  - {{ name: extract, type: shell, command: "echo extract >> {f}; echo '${{setValue(rows=42)}}'" }}
  - {{ name: transform, type: shell, command: "echo transform >> {f}; [ -f {fixed} ]", depends_on: [extract] }}
  - {{ name: load, type: shell, command: "echo load-${{rows}} >> {f}", depends_on: [transform] }}
"#,
        f = f.display(),
        fixed = fixed.display()
    ));
    let id = e.start("fragile", "{}");
    assert_eq!(e.end(id)["state"], "failure");
    let (status, body) = e.action(id, "resume");
    assert_eq!(status, 409, "a failed instance cannot be resumed: {body}");

    std::fs::write(&fixed, "").unwrap();
    let out = cli(e.api(), &["resubmit", &id.to_string(), "--wait"]);
    assert!(
        out.status.success(),
        "resubmit --wait: {}",
        text(&out.stderr)
    );
    let inst = e.api().get(&format!("/instances/{id}"));
    assert_eq!(inst["state"], "success");
    assert_eq!(
        count(&f, "extract"),
        1,
        "the succeeded task was not executed again"
    );
    assert_eq!(count(&f, "transform"), 2);
    assert_eq!(
        count(&f, "load-42"),
        1,
        "outputs of kept tasks still flow downstream"
    );
    let transform = attempts(&inst, "transform");
    assert_eq!(transform.len(), 2);
    assert_eq!(transform[1]["attempt"], 2);

    let (status, body) = e.action(id, "resubmit-failed");
    assert_eq!(
        status, 409,
        "a succeeded instance has nothing to resubmit: {body}"
    );
}

/// DolphinScheduler's task actions: `kill` one running attempt (the instance fails, its
/// other branch finishes under failure strategy continue), then `force-success` it: the
/// instance goes on as if the task had passed, and only what follows it runs.
fn a_killed_task_fails_its_instance_and_force_success_lets_it_finish(e: Env) {
    let (f, pid_file) = (e.path("ran"), e.path("pid"));
    e.apply(&format!(
        r#"
name: stuck
failure_strategy: continue
tasks:
  - {{ name: hang, type: shell, command: "echo $$ > {p}; sleep 60" }}
  - {{ name: after, type: shell, command: "echo after >> {f}", depends_on: [hang] }}
  - {{ name: side, type: shell, command: "echo side >> {f}" }}
"#,
        f = f.display(),
        p = pid_file.display()
    ));
    let id = e.start("stuck", "{}");
    let pid: i32 = wait_for("hang to write its pid", LONG, || {
        std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    });
    let inst = e.api().get(&format!("/instances/{id}"));
    let hang = attempts(&inst, "hang")[0]["id"].as_i64().unwrap();
    let (status, body) = e
        .api()
        .post(&format!("/task-instances/{hang}/force-success"), "");
    assert_eq!(status, 409, "a running instance decides itself: {body}");
    assert!(
        body["error"].as_str().unwrap().contains("running"),
        "{body}"
    );

    let out = cli(e.api(), &["task", "kill", &hang.to_string()]);
    assert!(out.status.success(), "task kill: {}", text(&out.stderr));
    let inst = e.wait_state(id, &["failure"]);
    assert_eq!(attempts(&inst, "hang")[0]["state"], "killed");
    assert!(attempts(&inst, "after").is_empty());
    assert!(!alive(pid), "the task's process {pid} is gone");
    assert_eq!(lines(&f), vec!["side"]);
    let (status, body) = e.api().post(&format!("/task-instances/{hang}/kill"), "");
    assert_eq!(status, 409, "a killed task cannot be killed again: {body}");
    let side = attempts(&inst, "side")[0]["id"].as_i64().unwrap();
    let (status, body) = e
        .api()
        .post(&format!("/task-instances/{side}/force-success"), "");
    assert_eq!(status, 409, "a passed task needs no forcing: {body}");
    let (status, body) = e.api().post(&format!("/task-instances/{hang}/retry"), "");
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("force-success"),
        "{body}"
    );

    let out = cli(
        e.api(),
        &["task", "force-success", &hang.to_string(), "--wait"],
    );
    assert!(
        out.status.success(),
        "task force-success: {}",
        text(&out.stderr)
    );
    let inst = e.api().get(&format!("/instances/{id}"));
    assert_eq!(inst["state"], "success");
    let forced = attempts(&inst, "hang");
    assert_eq!(forced.len(), 1, "the forced task does not run again");
    assert_eq!(forced[0]["state"], "forced_success");
    assert_eq!(lines(&f), vec!["side", "after"], "only what follows it ran");
}

/// `POST /task-instances/{id}/rerun`: one task of an ended instance runs again as a new
/// attempt and the others keep their state (a failed one keeps the run failed); with
/// `downstream`, what follows it runs again too.
fn rerunning_one_task_leaves_the_others_as_they_were(e: Env) {
    let (f, fixed) = (e.path("ran"), e.path("fixed"));
    e.apply(&format!(
        r#"
name: partial
failure_strategy: continue
tasks:
  - {{ name: a, type: shell, command: "echo a >> {f}" }}
  - {{ name: b, type: shell, command: "echo b >> {f}", depends_on: [a] }}
  - {{ name: c, type: shell, command: "echo c >> {f}", depends_on: [b] }}
  - {{ name: x, type: shell, command: "echo x >> {f}; [ -f {fixed} ]" }}
"#,
        f = f.display(),
        fixed = fixed.display()
    ));
    let id = e.start("partial", "{}");
    let inst = e.end(id);
    assert_eq!(inst["state"], "failure");
    let task_id = |inst: &Value, name: &str| {
        let rows = attempts(inst, name);
        rows.last().unwrap()["id"].as_i64().unwrap()
    };
    let rerun = |tid: i64, downstream: bool| {
        let tid = tid.to_string();
        let mut args = vec!["task", "rerun", tid.as_str(), "--wait"];
        if downstream {
            args.push("--downstream");
        }
        cli(e.api(), &args)
    };

    // b alone: c does not run again, and x, still failed, keeps the run failed.
    let out = rerun(task_id(&inst, "b"), false);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the run stays failed: {}",
        text(&out.stderr)
    );
    let inst = e.api().get(&format!("/instances/{id}"));
    assert_eq!(inst["state"], "failure");
    assert_eq!(inst["run"], 1, "the same run");
    let b = attempts(&inst, "b");
    assert_eq!(
        (b.len(), &b[1]["attempt"], &b[1]["state"]),
        (2, &Value::from(2), &Value::from("success"))
    );
    assert_eq!(
        attempts(&inst, "x").len(),
        1,
        "the failed task was left alone"
    );
    assert_eq!(
        (
            count(&f, "a"),
            count(&f, "b"),
            count(&f, "c"),
            count(&f, "x")
        ),
        (1, 2, 1, 1)
    );

    // x alone, fixed now: every task has passed, so the run succeeds.
    std::fs::write(&fixed, "").unwrap();
    let out = rerun(task_id(&inst, "x"), false);
    assert!(out.status.success(), "rerun x: {}", text(&out.stderr));
    assert_eq!(
        (
            count(&f, "a"),
            count(&f, "b"),
            count(&f, "c"),
            count(&f, "x")
        ),
        (1, 2, 1, 2)
    );

    // b and what follows it.
    let inst = e.api().get(&format!("/instances/{id}"));
    assert_eq!(inst["state"], "success");
    let out = rerun(task_id(&inst, "b"), true);
    assert!(
        out.status.success(),
        "rerun b --downstream: {}",
        text(&out.stderr)
    );
    assert_eq!(
        (
            count(&f, "a"),
            count(&f, "b"),
            count(&f, "c"),
            count(&f, "x")
        ),
        (1, 3, 2, 2)
    );
    let inst = e.api().get(&format!("/instances/{id}"));
    assert_eq!(inst["state"], "success");
    assert!(
        inst["options"].get("rerun_task").is_some(),
        "the run says what it reran: {inst}"
    );

    // A bad body is refused.
    let (status, body) = e.api().post(
        &format!("/task-instances/{}/rerun", task_id(&inst, "a")),
        r#"{"downstream": "yes"}"#,
    );
    assert_eq!(status, 400, "a bad body is refused: {body}");
}

/// The instances of `workflow`, as the API lists them.
fn instances_of(e: &Env, workflow: &str) -> Vec<Value> {
    let list = e
        .api()
        .get(&format!("/instances?workflow={workflow}&limit=1000"));
    list.as_array().unwrap().clone()
}

/// DolphinScheduler's release state: an offline workflow cannot be started (API, CLI,
/// trigger, backfill) and its schedule stops firing; online again, it starts, and its
/// schedule fires once enabled again.
fn an_offline_workflow_neither_starts_nor_fires_and_comes_back_online(e: Env) {
    e.apply(
        "name: shelved\ntriggers: [ { name: hook, auth: { token: t0ken-for-the-test-0123 } } ]\ntasks:\n- { name: a, type: noop }\n",
    );
    let (status, schedule) = e.api().post(
        "/projects/default/workflows/shelved/schedules",
        r#"{"cron": "* * * * * *"}"#,
    );
    assert_eq!(status, 201, "{schedule}");
    wait_for("a scheduled fire", LONG, || {
        (!instances_of(&e, "shelved").is_empty()).then_some(())
    });

    let out = cli(e.api(), &["workflow", "offline", "shelved"]);
    assert!(out.status.success(), "offline: {}", text(&out.stderr));
    let wf = e.api().get("/projects/default/workflows/shelved");
    assert_eq!(wf["online"], false);
    let listed = e.api().get("/projects/default/workflows");
    assert_eq!(listed[0]["online"], false, "{listed}");
    assert_eq!(
        listed[0]["schedule"]["enabled"], false,
        "its schedule is off: {listed}"
    );

    let out = cli(e.api(), &["start", "shelved"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("is offline"),
        "{}",
        text(&out.stderr)
    );
    let (status, body) = e
        .api()
        .post("/projects/default/workflows/shelved/start", "{}");
    assert_eq!(status, 409, "{body}");
    let hook = reqwest::blocking::Client::new()
        .post(format!(
            "{}/api/v1/hooks/default/shelved/hook",
            e.api().base
        ))
        .bearer_auth("t0ken-for-the-test-0123")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .unwrap();
    let (status, body) = (hook.status().as_u16(), hook.text().unwrap());
    assert_eq!(status, 409, "a trigger is refused too: {body}");
    e.apply(
        "name: shelf_parent\ntasks:\n- { name: child, type: sub_workflow, sub_workflow: { workflow: shelved } }\n",
    );
    let parent = e.end(e.start("shelf_parent", "{}"));
    assert_eq!(
        parent["state"], "failure",
        "nor does it run as a sub-workflow: {parent}"
    );
    let child = attempts(&parent, "child")[0];
    assert!(
        child["message"]
            .as_str()
            .unwrap_or_default()
            .contains("is offline"),
        "{child}"
    );
    let id = schedule["id"].as_i64().unwrap();
    let (status, body) = e.api().post(
        &format!("/projects/default/workflows/shelved/schedules/{id}/enable"),
        "",
    );
    assert_eq!(status, 409, "its schedule cannot be enabled: {body}");
    // Nothing fires while it is offline (a fire may have been under way at the switch).
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let before = instances_of(&e, "shelved").len();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert_eq!(
        instances_of(&e, "shelved").len(),
        before,
        "no scheduled fire while offline"
    );

    let out = cli(e.api(), &["workflow", "online", "shelved"]);
    assert!(out.status.success(), "online: {}", text(&out.stderr));
    let id = e.start("shelved", "{}");
    assert_eq!(e.end(id)["state"], "success");
    let out = cli(e.api(), &["schedule", "enable", "shelved"]);
    assert!(out.status.success(), "enable: {}", text(&out.stderr));
    let now = instances_of(&e, "shelved").len();
    wait_for("fires again", LONG, || {
        (instances_of(&e, "shelved").len() > now + 1).then_some(())
    });
    let out = cli(e.api(), &["schedule", "disable", "shelved"]);
    assert!(out.status.success(), "disable: {}", text(&out.stderr));
}

/// Rollback makes an old version the newest again; a workflow with an enabled schedule or
/// an active run cannot be deleted, and once deleted its ended instances stay readable;
/// only an ended instance can be deleted, and it goes with its tasks.
fn rollback_and_deletes_keep_what_must_stay(e: Env) {
    let (f, go) = (e.path("ran"), e.path("go"));
    let v1 = format!(
        "name: versioned\ntasks:\n- {{ name: a, type: shell, command: 'echo one >> {}' }}\n",
        f.display()
    );
    e.apply(&v1);
    e.apply(&format!(
        "name: versioned\ntasks:\n- {{ name: a, type: shell, command: 'while [ ! -f {g} ]; do sleep 0.05; done; echo two >> {f}' }}\n",
        g = go.display(),
        f = f.display()
    ));
    let out = cli(e.api(), &["workflow", "rollback", "versioned", "--to", "1"]);
    assert!(out.status.success(), "rollback: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("as version 3"),
        "{}",
        text(&out.stdout)
    );
    let wf = e.api().get("/projects/default/workflows/versioned");
    assert_eq!(wf["version"], 3);
    let old = e.start("versioned", "{}");
    assert_eq!(e.end(old)["state"], "success");
    assert_eq!(lines(&f), vec!["one"], "version 1's definition ran");
    let out = cli(e.api(), &["workflow", "rollback", "versioned", "--to", "9"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "no version 9: {}",
        text(&out.stderr)
    );

    // A run of version 2 is active: neither it nor the workflow can be deleted.
    let body = r#"{"version": 2}"#;
    let (status, started) = e
        .api()
        .post("/projects/default/workflows/versioned/start", body);
    assert_eq!(status, 202, "{started}");
    let running = e.instance_of(started["command_id"].as_i64().unwrap());
    wait_for("the run to start", LONG, || {
        (e.api().get(&format!("/instances/{running}"))["state"] == "running").then_some(())
    });
    let out = cli(e.api(), &["workflow", "delete", "versioned"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("active run"),
        "{}",
        text(&out.stderr)
    );
    let out = cli(e.api(), &["instance", "delete", &running.to_string()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("only an ended instance"),
        "{}",
        text(&out.stderr)
    );
    std::fs::write(&go, "").unwrap();
    assert_eq!(e.end(running)["state"], "success");

    let out = cli(e.api(), &["instance", "delete", &old.to_string()]);
    assert!(
        out.status.success(),
        "delete instance: {}",
        text(&out.stderr)
    );
    let (status, _) = e.api().post(&format!("/instances/{old}/rerun"), "");
    assert_eq!(status, 404, "the deleted instance is gone");
    let out = cli(e.api(), &["workflow", "delete", "versioned"]);
    assert!(
        out.status.success(),
        "delete workflow: {}",
        text(&out.stderr)
    );
    let (status, _) = e
        .api()
        .post("/projects/default/workflows/versioned/start", "{}");
    assert_eq!(status, 404, "the workflow is gone");
    let kept = e.api().get(&format!("/instances/{running}"));
    assert_eq!(
        kept["state"], "success",
        "its ended instances stay readable"
    );
}

fn rerun_runs_everything_again_as_a_new_run(e: Env) {
    let f = e.path("ran");
    e.apply(&format!(
        "name: again\ntasks:\n- {{ name: a, type: shell, command: 'echo a >> {f}' }}\n",
        f = f.display()
    ));
    let id = e.start("again", "{}");
    assert_eq!(e.end(id)["state"], "success");
    let (status, body) = e.action(id, "rerun");
    assert_eq!(status, 202, "{body}");
    e.instance_of(body["command_id"].as_i64().unwrap());
    let inst = wait_for("the rerun to finish", LONG, || {
        let inst = e.api().get(&format!("/instances/{id}"));
        (inst["run"] == 2 && inst["state"] == "success").then_some(inst)
    });
    assert_eq!(count(&f, "a"), 2);
    assert_eq!(
        attempts(&inst, "a")
            .iter()
            .filter(|t| t["run"] == 2)
            .count(),
        1
    );
}

fn dry_run_and_start_from_a_task(e: Env) {
    let f = e.path("ran");
    e.apply(&format!(
        r#"
name: shaped
tasks:
  - {{ name: a, type: shell, command: "echo a >> {f}" }}
  - {{ name: b, type: shell, command: "echo b >> {f}", depends_on: [a] }}
  - {{ name: c, type: shell, command: "echo c >> {f}", depends_on: [a] }}
  - {{ name: d, type: shell, command: "echo d >> {f}", depends_on: [b, c] }}
"#,
        f = f.display()
    ));
    let inst = e.end(e.start("shaped", r#"{"dry_run": true}"#));
    assert_eq!(inst["state"], "success");
    assert_eq!(inst["tasks"].as_array().unwrap().len(), 4);
    assert!(lines(&f).is_empty(), "a dry run executes nothing");

    let inst = e.end(e.start("shaped", r#"{"from_task": "b", "scope": "downstream"}"#));
    assert_eq!(inst["state"], "success");
    assert_eq!(lines(&f), vec!["b", "d"]);
    let names: Vec<&str> = inst["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["b", "d"]);
}

fn a_dry_run_s_child_foreach_and_exception_runs_are_dry_runs_too(e: Env) {
    let f = e.path("ran_below");
    for name in ["dry_child", "dry_handler"] {
        e.apply(&format!(
            "name: {name}\ntasks:\n- {{ name: destroy, type: shell, command: 'echo {name} >> {f}' }}\n",
            f = f.display()
        ));
    }
    e.apply(
        r#"
name: dry_parent
params: { days: '["d1", "d2"]' }
on_failure: { workflow: dry_handler }
tasks:
  - { name: sub, type: sub_workflow, sub_workflow: { workflow: dry_child } }
  - { name: each, type: foreach, foreach: { items: "days", as: day, workflow: dry_child } }
  - { name: fail, type: terminate, depends_on: [sub, each],
      terminate: { state: failure, message: "failed on purpose" } }
"#,
    );
    let id = e.start("dry_parent", r#"{"dry_run": true}"#);
    let inst = e.end(id);
    assert_eq!(inst["state"], "failure", "{inst}");
    let handler = wait_for("the exception run", LONG, || {
        let list = e.api().get("/instances?workflow=dry_handler");
        list.as_array()?.first().cloned()
    });
    assert_eq!(handler["options"]["handles_failure_of"], id, "{handler}");
    let children = e.api().get("/instances?workflow=dry_child");
    let children = children.as_array().unwrap();
    assert_eq!(
        children.len(),
        3,
        "one sub_workflow and two foreach children: {children:?}"
    );
    for run in children.iter().chain([&handler]) {
        let run = e.end(run["id"].as_i64().unwrap());
        assert_eq!(run["state"], "success", "{run}");
        assert_eq!(
            run["options"]["dry_run"], true,
            "a dry run's child is dry: {run}"
        );
        let destroy = attempts(&run, "destroy")[0];
        assert_eq!(destroy["message"], "dry run: not executed", "{destroy}");
    }
    assert!(
        !f.exists(),
        "no run below a dry run executed its shell task: {:?}",
        lines(&f)
    );
}

fn time_expressions_and_builtins_reach_the_task(e: Env) {
    let f = e.path("out");
    e.apply(&format!(
        "name: dated\nparams: {{ day: '$[yyyyMMdd]' }}\ntasks:\n- {{ name: t, type: shell, command: 'echo ${{day}} $[yyyyMMdd-1] ${{system.biz.date}} ${{system.workflow.instance.id}} > {f}' }}\n",
        f = f.display()
    ));
    let id = e.start("dated", "{}");
    assert_eq!(e.end(id)["state"], "success");
    let out = lines(&f).join("");
    let parts: Vec<&str> = out.split(' ').collect();
    assert_eq!(parts.len(), 4, "{out}");
    assert_eq!(parts[0].len(), 8);
    assert_eq!(parts[1], parts[2], "$[yyyyMMdd-1] is the business date");
    assert_eq!(parts[3], id.to_string());
}

fn logic_tasks_branch_on_the_master(e: Env) {
    let f = e.path("ran");
    e.apply(&format!(
        r#"
name: logic
params: {{ region: eu }}
tasks:
  - {{ name: extract, type: shell, command: "exit 3" }}
  - {{ name: check, type: conditions, depends_on: [extract], conditions: {{ success: [publish], failure: [alert] }} }}
  - {{ name: publish, type: shell, command: "echo publish >> {f}", depends_on: [check] }}
  - {{ name: alert, type: shell, command: "echo alert >> {f}", depends_on: [check] }}
  - {{ name: wait, type: delay, delay: 300ms, depends_on: [alert] }}
  - {{ name: route, type: switch, depends_on: [wait], switch: {{ cases: [{{ when: "${{region}} == 'us'", then: us }}, {{ when: "region == 'eu' && has(outputs.wait)", then: eu }}], default: us }} }}
  - {{ name: us, type: shell, command: "echo us >> {f}", depends_on: [route] }}
  - {{ name: eu, type: shell, command: "echo eu >> {f}", depends_on: [route] }}
"#,
        f = f.display()
    ));
    let inst = e.end(e.start("logic", "{}"));
    assert_eq!(
        inst["state"], "success",
        "the failure was handled by the conditions task: {inst}"
    );
    assert_eq!(lines(&f), vec!["alert", "eu"]);
    let route = attempts(&inst, "route")[0];
    assert_eq!(route["message"], "chose eu");
    assert!(attempts(&inst, "us").is_empty() && attempts(&inst, "publish").is_empty());
    let wait = attempts(&inst, "wait")[0];
    assert!(
        wait["worker"].is_null(),
        "a delay task holds no worker: {wait}"
    );

    let (status, body) = e.api().post(
        "/projects/default/workflows",
        "name: bad\ntasks:\n- {name: s, type: switch, switch: {cases: [{when: 'a ~ b', then: x}]}}\n- {name: x, type: noop, depends_on: [s]}\n",
    );
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("case 'a ~ b': column 4"),
        "{body}"
    );
}

fn a_conditions_task_may_also_require_an_expression(e: Env) {
    e.apply(
        r#"
name: gate
failure_strategy: continue
tasks:
  - { name: count, type: shell, command: 'test ${n} -ge 0 && echo "\${setValue(rows=${n})}"' }
  - { name: check, type: conditions, depends_on: [count],
      conditions: { when: "outputs.count.rows > 10", success: [load], failure: [skip_it] } }
  - { name: load, type: noop, depends_on: [check] }
  - { name: skip_it, type: noop, depends_on: [check] }
"#,
    );
    for (n, ran) in [("50", "load"), ("5", "skip_it"), ("-1", "skip_it")] {
        let id = e.start("gate", &format!(r#"{{"params": {{"n": "{n}"}}}}"#));
        let inst = e.end(id);
        assert_eq!(inst["state"], "success", "n={n}: {inst}");
        let other = if ran == "load" { "skip_it" } else { "load" };
        assert_eq!(attempts(&inst, ran).len(), 1, "n={n}: {inst}");
        assert!(attempts(&inst, other).is_empty(), "n={n}: {inst}");
    }
}

fn a_sub_workflow_runs_as_a_child_and_hands_back_its_outputs(e: Env) {
    let f = e.path("ran");
    e.apply(&format!(
        "name: child\ntasks:\n- {{ name: work, type: shell, command: \"echo child-${{region}} >> {f}; echo '${{setValue(rows=7)}}'\" }}\n",
        f = f.display()
    ));
    e.apply(&format!(
        r#"
name: parent
params: {{ region: eu }}
failure_strategy: continue
tasks:
  - {{ name: run_child, type: sub_workflow, sub_workflow: {{ workflow: child, params: {{ region: "${{region}}" }} }} }}
  - {{ name: after, type: shell, command: "echo after-${{rows}} >> {f}", depends_on: [run_child] }}
  - {{ name: ghost, type: sub_workflow, sub_workflow: {{ workflow: missing }} }}
  - {{ name: wait_child, type: dependent, dependent: {{ workflow: child, timeout: 30s, check_interval: 500ms }} }}
"#,
        f = f.display()
    ));
    let id = e.start("parent", "{}");
    let inst = e.end(id);
    assert_eq!(
        inst["state"], "failure",
        "the missing sub-workflow fails its task: {inst}"
    );
    assert_eq!(
        lines(&f),
        vec!["child-eu", "after-7"],
        "params go down, outputs come back: {inst}"
    );
    let ghost = attempts(&inst, "ghost")[0];
    assert!(
        ghost["message"]
            .as_str()
            .unwrap()
            .contains("'default/missing' does not exist"),
        "{ghost}"
    );
    assert_eq!(
        attempts(&inst, "wait_child")[0]["state"],
        "success",
        "the child's success satisfied the dependency"
    );
    let children: Value = e.api().get("/instances?workflow=child");
    assert_eq!(
        children.as_array().unwrap().len(),
        1,
        "exactly one child run"
    );
}

fn stopping_a_parent_stops_its_child_run_and_pausing_lets_the_child_finish(e: Env) {
    let pid_file = e.path("pid");
    let done = e.path("done");
    e.apply(&format!(
        "name: slow_child\ntasks:\n- {{ name: nap, type: shell, command: 'echo $$ >> {p}; sleep ${{secs}}; echo ok >> {d}' }}\n",
        p = pid_file.display(),
        d = done.display()
    ));
    e.apply(
        "name: holder\nparams: { secs: '60' }\ntasks:\n- { name: child, type: sub_workflow, sub_workflow: { workflow: slow_child, params: { secs: '${secs}' } } }\n- { name: after, type: noop, depends_on: [child] }\n",
    );
    let id = e.start("holder", "{}");
    let pid: i32 = wait_for("the child's task to write its pid", LONG, || {
        std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    });
    let (status, body) = e.action(id, "stop");
    assert_eq!(status, 202, "{body}");
    let inst = e.wait_state(id, &["stopped"]);
    assert_eq!(attempts(&inst, "child")[0]["state"], "killed", "{inst}");
    let children = e.api().get("/instances?workflow=slow_child");
    let child_id = children[0]["id"].as_i64().unwrap();
    let child = e.wait_state(child_id, &["stopped"]);
    assert_eq!(attempts(&child, "nap")[0]["state"], "killed", "{child}");
    wait_for("the child's task process to be gone", LONG, || {
        (!alive(pid)).then_some(())
    });

    // Pause: the running child is a running task; it finishes, then the parent pauses,
    // and resume goes on after it without a second child.
    let id = e.start("holder", r#"{"params": {"secs": "2"}}"#);
    wait_for("the second child's task to start", LONG, || {
        (std::fs::read_to_string(&pid_file).ok()?.lines().count() == 2).then_some(())
    });
    let (status, body) = e.action(id, "pause");
    assert_eq!(status, 202, "{body}");
    let inst = e.wait_state(id, &["paused"]);
    assert_eq!(attempts(&inst, "child")[0]["state"], "success", "{inst}");
    assert_eq!(lines(&done), vec!["ok"], "the child ran to its end");
    assert!(attempts(&inst, "after").is_empty(), "{inst}");
    let (status, body) = e.action(id, "resume");
    assert_eq!(status, 202, "{body}");
    let inst = e.wait_state(id, &["success"]);
    assert_eq!(attempts(&inst, "child").len(), 1, "{inst}");
    let children = e.api().get("/instances?workflow=slow_child");
    assert_eq!(children.as_array().unwrap().len(), 2, "one child per run");
}

fn every_task_type_runs_and_both_timeouts_hold(e: Env) {
    let (f, warned) = (e.path("ran"), e.path("warned"));
    let health = format!("{}/api/v1/health", e.api().base);
    e.apply(&format!(
        r#"
name: kinds
failure_strategy: continue
tasks:
  - {{ name: py, type: python, script: "print('${{setValue(n=21)}}')" }}
  - name: web
    type: http
    http: {{ url: "{health}", outputs: {{ health: "$.status" }} }}
    depends_on: [py]
  - name: db
    type: sql
    sql: {{ datasource: pg, query: "SELECT ${{n}} * 2 AS doubled", output: first_row }}
    depends_on: [py]
  - {{ name: use, type: shell, command: "echo ${{doubled}} ${{health}} >> {f}", depends_on: [web, db] }}
  - {{ name: slow_warn, type: shell, command: "sleep 1.5; echo done >> {w}", timeout: 1s, timeout_strategy: warn }}
  - {{ name: slow_fail, type: shell, command: "sleep 30", timeout: 1s, timeout_strategy: fail }}
"#,
        f = f.display(),
        w = warned.display()
    ));
    let id = e.start("kinds", "{}");
    let inst = e.end(id);
    assert_eq!(
        inst["state"], "failure",
        "the fail timeout fails the run: {inst}"
    );
    assert_eq!(
        lines(&f),
        vec!["42 ok"],
        "python output fed sql, http output came along: {inst}"
    );
    for task in ["py", "web", "db", "use", "slow_warn"] {
        assert_eq!(
            attempts(&inst, task)[0]["state"],
            "success",
            "{task}: {inst}"
        );
    }
    assert_eq!(lines(&warned), vec!["done"], "warn lets the task finish");
    let failed = attempts(&inst, "slow_fail")[0];
    assert_eq!(failed["state"], "failure", "{inst}");
    assert!(
        failed["message"]
            .as_str()
            .unwrap_or_default()
            .contains("timed out after 1s"),
        "{failed}"
    );
}

fn a_secret_reaches_its_task_masked_in_the_log_and_a_secret_datasource_is_used(e: Env) {
    let key = "sk-live-7f3a9c0e55d1";
    set_secret(&e, "api_key", key);
    // Set through the API with the line break a file read leaves: masked printed without.
    let read_from_file = "sk-file-4e1b0c77d2";
    let body = serde_json::json!({ "value": format!("{read_from_file}\n") }).to_string();
    let (status, answer) = e.api().put("/projects/default/secrets/from_file", &body);
    assert!(status < 300, "{status} {answer}");
    let db = e.path("warehouse.db");
    set_secret(
        &e,
        "warehouse",
        &format!("sqlite://{}?mode=rwc", db.display()),
    );
    let out = cli(e.api(), &["secret", "list", "-o", "json"]);
    let listed = text(&out.stdout);
    assert!(
        listed.contains("api_key") && listed.contains("warehouse"),
        "{listed}"
    );
    assert!(!listed.contains(key), "{listed}");
    e.apply(
        r#"
name: uses_secrets
tasks:
  - name: call
    type: shell
    command: |
      test "${secret.api_key}" = "sk-live-7f3a9c0e55d1" && echo "the key reached the task"
      echo "key=${secret.api_key}"
      printf 'sk-live-'; printf '7f3a9c0e55d1\n'
      echo '${setValue(leaked=${secret.api_key})}'
      test -n "${secret.from_file}" && echo "from a file: sk-file-4e1b0c77d2."
  - name: query
    type: sql
    sql: { datasource: warehouse, query: "select 41 + 1 as answer", output: first_row }
    depends_on: [call]
"#,
    );
    let out = cli(e.api(), &["start", "uses_secrets", "--wait"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let id: i64 = text(&out.stdout).trim().parse().unwrap();
    let inst = e.api().get(&format!("/instances/{id}"));
    assert!(
        !inst.to_string().contains(key),
        "the API shows the key: {inst}"
    );
    let call = attempts(&inst, "call")[0]["id"].as_i64().unwrap();
    let log = text(&cli(e.api(), &["logs", &call.to_string()]).stdout);
    assert!(log.contains("the key reached the task"), "{log}");
    assert!(log.contains("key=***"), "{log}");
    assert!(
        log.contains("from a file: ***.") && !log.contains(read_from_file),
        "{log}"
    );
    assert!(
        !log.contains(key),
        "the log shows the key, even printed in two pieces: {log}"
    );
    let query = attempts(&inst, "query")[0]["id"].as_i64().unwrap();
    let log = text(&cli(e.api(), &["logs", &query.to_string()]).stdout);
    assert!(log.contains("1 rows returned"), "{log}");

    // A secret the project lacks fails the task, saying which and how to set it.
    e.apply(
        "name: needs_secret\ntasks:\n- { name: t, type: shell, command: 'echo ${secret.nope}' }\n",
    );
    let out = cli(e.api(), &["start", "needs_secret", "--wait"]);
    assert!(!out.status.success());
    let id: i64 = text(&out.stdout).trim().parse().unwrap();
    let inst = e.api().wait_instance(id, LONG);
    let message = attempts(&inst, "t")[0]["message"].to_string();
    assert!(
        message.contains("has no secret 'nope'") && message.contains("shoal secret set nope"),
        "{message}"
    );
}

/// A notebook task (papermill and ipykernel, which scripts/test installs: without them
/// this fails under CI and scripts/test, and says it was skipped elsewhere) gets its
/// `parameters` expanded from an upstream output and its own `params` (here overridden by
/// a start parameter); what it prints as `${setValue(...)}` flows downstream.
fn a_notebook_gets_its_parameters_from_the_run_and_hands_on_its_outputs(e: Env) {
    let importable = |m: &str| {
        std::process::Command::new("python3")
            .args(["-c", &format!("import {m}")])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !(importable("papermill") && importable("ipykernel")) {
        let required = ["CI", "SHOAL_REQUIRE_DATA_TOOLS"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
        assert!(
            !required,
            "pip install papermill ipykernel (scripts/test does)"
        );
        eprintln!("SKIPPED: python3 cannot import papermill and ipykernel");
        return;
    }
    let (nb, seen, doubled) = (e.path("nb.ipynb"), e.path("seen"), e.path("doubled"));
    let code = |source: &str, tags: &[&str]| {
        serde_json::json!({"cell_type": "code", "metadata": {"tags": tags}, "source": source,
                           "outputs": [], "execution_count": null})
    };
    let notebook = serde_json::json!({
        "cells": [
            code("rows = 1\nlabel = ''\nout = ''", &["parameters"]),
            code("open(out, 'w').write('%r %s' % (rows, label))\nprint('${setValue(doubled=%d)}' % (rows * 2))", &[]),
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4, "nbformat_minor": 4,
    });
    std::fs::write(&nb, notebook.to_string()).unwrap();
    e.apply(&format!(
        r#"
name: nb
tasks:
  - {{ name: count, type: shell, command: "echo '${{setValue(rows=3)}}'" }}
  - name: report
    type: notebook
    depends_on: [count]
    params: {{ label: unset }}
    notebook: {{ path: {nb}, parameters: {{ rows: "${{rows}}", out: {seen} }} }}
  - {{ name: use, type: shell, command: "echo ${{doubled}} >> {doubled}", depends_on: [report] }}
"#,
        nb = nb.display(),
        seen = seen.display(),
        doubled = doubled.display(),
    ));
    // A start parameter wins over the task's own, as for any task.
    let id = e.start("nb", r#"{"params": {"label": "ann ok"}}"#);
    let inst = e.end(id);
    assert_eq!(inst["state"], "success", "{inst}");
    let seen = std::fs::read_to_string(&seen).unwrap_or_default();
    assert_eq!(seen, "3 ann ok", "typed as papermill types it");
    assert_eq!(lines(&doubled), vec!["6"]);
}
