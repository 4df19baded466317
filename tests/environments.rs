//! Project environments over `shoal standalone` (SQLite) and a cluster (Postgres): shell
//! lines a worker runs in the same bash before a shell or python task, chosen by the
//! workflow, the task (which wins) or the run's start (which wins over both); refused at
//! apply and start when unknown, kept while a workflow names them; set and read with
//! `shoal env`.

mod support;

use serde_json::{Value, json};
use support::{Env, attempts, cli, text};

support::deployments!(
    an_environment_runs_before_a_task_in_its_bash_and_the_nearest_choice_wins,
    unknown_environments_are_refused_and_one_in_use_is_kept,
    the_cli_sets_lists_shows_and_deletes_environments,
);

const WORKFLOW: &str = r#"
name: envs
environment: wf_env
params: {dt: "2026-01-01"}
tasks:
  - name: from_workflow
    type: shell
    command: 'echo "who=$WHO local=$LOCAL_ONLY dt=$dt"; if type greet >/dev/null 2>&1; then greet; fi'
  - name: own
    type: shell
    environment: task_env
    command: 'echo "who=$WHO"'
  - name: py
    type: python
    environment: task_env
    script: |
      import os, sys
      print("who=" + os.environ["WHO"])
      print("prefix=" + sys.prefix)
"#;

fn set_env(e: &Env, name: &str, config: &str) {
    let (status, body) = e.api().put(
        &format!("/projects/default/environments/{name}"),
        &json!({ "config": config }).to_string(),
    );
    assert!(
        status == 201 || status == 200,
        "set {name}: {status} {body}"
    );
}

/// The log of the first attempt of `task`.
fn log_of(e: &Env, inst: &Value, task: &str) -> String {
    let id = attempts(inst, task)[0]["id"].as_i64().unwrap();
    e.api().log(id).1
}

fn an_environment_runs_before_a_task_in_its_bash_and_the_nearest_choice_wins(e: Env) {
    // A real virtualenv: its `activate` decides which python3 a python task gets.
    let venv = e.path("venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made.stderr));
    let venv = venv.to_str().unwrap();
    // Not exported, and a function: seen only by a script run in the same bash. The
    // `${dt}` stays as written: an environment is not expanded with the run's params.
    set_env(
        &e,
        "wf_env",
        "WHO=workflow\nLOCAL_ONLY=unexported\ngreet() { echo \"greeted by $WHO\"; }\necho 'literal ${dt}'",
    );
    set_env(
        &e,
        "task_env",
        &format!("export WHO=task\nsource {venv}/bin/activate"),
    );
    set_env(&e, "run_env", "export WHO=run");
    e.apply(WORKFLOW);

    let id = e.start("envs", "{}");
    let inst = e.end(id);
    assert_eq!(inst["state"], "success", "{inst:#}");
    let log = log_of(&e, &inst, "from_workflow");
    for line in [
        "literal ${dt}",
        "who=workflow local=unexported dt=2026-01-01",
        "greeted by workflow",
    ] {
        assert!(log.contains(line), "missing {line:?} in:\n{log}");
    }
    let log = log_of(&e, &inst, "own");
    assert!(log.contains("who=task"), "the task's own wins:\n{log}");
    let log = log_of(&e, &inst, "py");
    assert!(log.contains("who=task"), "{log}");
    assert!(
        log.contains(&format!("prefix={venv}")),
        "the venv's python ran the script:\n{log}"
    );

    // The run's environment wins over both.
    let id = e.start("envs", r#"{"environment": "run_env"}"#);
    let inst = e.end(id);
    assert_eq!(inst["state"], "success", "{inst:#}");
    assert_eq!(inst["options"]["environment"], "run_env", "{inst:#}");
    for task in ["own", "py"] {
        let log = log_of(&e, &inst, task);
        assert!(log.contains("who=run"), "{task}:\n{log}");
        assert!(!log.contains(venv), "{task}: no venv now:\n{log}");
    }
    // The workflow's environment did not run at all.
    let log = log_of(&e, &inst, "from_workflow");
    assert!(log.contains("who=run local= dt=2026-01-01"), "{log}");
    assert!(
        !log.contains("greeted") && !log.contains("literal"),
        "{log}"
    );

    // A changed environment reaches the next run's tasks.
    set_env(&e, "task_env", "export WHO=changed");
    let id = e.start("envs", "{}");
    let inst = e.end(id);
    assert!(log_of(&e, &inst, "own").contains("who=changed"));
}

fn unknown_environments_are_refused_and_one_in_use_is_kept(e: Env) {
    let apply = |yaml: &str| e.api().post("/projects/default/workflows", yaml);
    let (status, body) = apply(WORKFLOW);
    assert_eq!(status, 400, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("environment 'task_env'")
            && error.contains("shoal env set task_env -f env.sh --project default"),
        "{error}"
    );
    set_env(&e, "task_env", "export WHO=task");
    let (status, body) = apply(WORKFLOW);
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("'wf_env'"),
        "{body}"
    );
    let (status, body) = apply(
        "name: h\ntasks:\n- {name: a, type: http, http: {url: 'http://x'}, environment: task_env}\n",
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("shell and python tasks only"),
        "{body}"
    );
    set_env(&e, "wf_env", "WHO=workflow");
    e.apply(WORKFLOW);

    // At start: an environment the project lacks.
    let (status, body) = e.api().post(
        "/projects/default/workflows/envs/start",
        r#"{"environment": "nope"}"#,
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("environment 'nope'"),
        "{body}"
    );

    // Named by the latest version of a workflow: kept, the workflow named.
    let (status, body) = delete(&e, "task_env");
    assert_eq!(status, 409, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("workflow 'envs'"), "{error}");
    e.apply(&WORKFLOW.replace("    environment: task_env\n", ""));
    let (status, body) = delete(&e, "task_env");
    assert_eq!(status, 204, "{body}");
    assert_eq!(
        e.api().status("/projects/default/environments/task_env"),
        404
    );
}

fn delete(e: &Env, name: &str) -> (u16, Value) {
    let out = cli(e.api(), &["env", "delete", name]);
    let stderr = text(&out.stderr);
    match out.status.code() {
        Some(0) => (204, Value::Null),
        _ if stderr.contains("is used by") => (409, json!({ "error": stderr })),
        _ => (0, json!({ "error": stderr })),
    }
}

fn the_cli_sets_lists_shows_and_deletes_environments(e: Env) {
    let file = e.path("env.sh");
    std::fs::write(
        &file,
        "export JAVA_HOME=/opt/jdk17\nexport PATH=$JAVA_HOME/bin:$PATH\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let run = |args: &[&str]| {
        let out = cli(e.api(), args);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stdout}\n{stderr}");
        stdout
    };
    let said = run(&[
        "env",
        "set",
        "jdk17",
        "-f",
        file,
        "--description",
        "java 17",
    ]);
    assert!(
        said.contains("environment jdk17 of project default set"),
        "{said}"
    );
    let listed = run(&["env", "list"]);
    assert!(
        listed.contains("jdk17") && listed.contains("java 17"),
        "{listed}"
    );
    let shown = run(&["env", "show", "jdk17"]);
    assert_eq!(
        shown,
        "export JAVA_HOME=/opt/jdk17\nexport PATH=$JAVA_HOME/bin:$PATH\n"
    );
    let json: Value = serde_json::from_str(&run(&["env", "show", "jdk17", "-o", "json"])).unwrap();
    assert_eq!(json["description"], "java 17");
    run(&["env", "delete", "jdk17"]);
    let out = cli(e.api(), &["env", "show", "jdk17"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("project 'default' has no environment 'jdk17'"),
        "{}",
        text(&out.stderr)
    );
}
