use super::*;
use crate::start::StartOptions;

const DIAMOND: &str = r#"
name: etl_daily
params: { dt: 2026-01-01, n: 3 }
tasks:
  - { name: a, type: shell, command: "echo ${dt}", priority: high }
  - { name: b, type: noop, depends_on: [a] }
  - { name: c, type: noop, depends_on: [a] }
  - { name: d, type: noop, depends_on: [b, c] }
"#;

#[test]
fn parses_a_valid_diamond_with_defaults() {
    let def = WorkflowDef::parse(DIAMOND).unwrap();
    assert_eq!(def.project, "default");
    assert_eq!(def.params["dt"], "2026-01-01");
    assert_eq!(def.params["n"], "3");
    assert_eq!(def.tasks[0].priority, Priority::High);
    assert_eq!(def.tasks[1].worker_group, "default");
    assert_eq!(
        def.upstream_indices(),
        vec![vec![], vec![0], vec![0], vec![1, 2]]
    );
}

#[test]
fn references_no_source_can_satisfy_are_found_on_root_tasks_only() {
    let def = WorkflowDef::parse(
        "name: r\nparams: {g: 1}\ntasks:\n- {name: a, type: shell, command: 'echo ${g} ${s} ${nope} ${system.biz.date}'}\n- {name: b, type: shell, command: 'echo ${from_a}', depends_on: [a]}\n",
    )
    .unwrap();
    let start = BTreeMap::from([("s".to_string(), "x".to_string())]);
    assert_eq!(
        def.unresolvable_references(&start),
        vec![("a".to_string(), "nope".to_string())]
    );
}

#[test]
fn json_is_accepted_too() {
    let json = r#"{"name":"j","tasks":[{"name":"x","type":"noop"}]}"#;
    assert_eq!(WorkflowDef::parse(json).unwrap().tasks.len(), 1);
}

fn err(yaml: &str) -> String {
    WorkflowDef::parse(yaml).unwrap_err().to_string()
}

#[test]
fn a_cycle_is_named() {
    let e = err(
        "name: w\ntasks:\n- {name: a, type: noop, depends_on: [c]}\n- {name: b, type: noop, depends_on: [a]}\n- {name: c, type: noop, depends_on: [b]}\n- {name: z, type: noop}\n",
    );
    assert_eq!(e, "tasks form a cycle: a -> b -> c -> a");
    let e = err("name: w\ntasks:\n- {name: a, type: noop, depends_on: [a]}\n");
    assert_eq!(e, "tasks form a cycle: a -> a");
    let e = WorkflowDef::parse("name: w\ntasks:\n- {name: b, type: noop, depends_on: [b]}\n")
        .unwrap_err();
    assert_eq!(
        e.task(),
        Some("b"),
        "the editor marks the line of the cycle's first task"
    );
}

#[test]
fn bad_definitions_name_the_offender() {
    assert!(err("name: w\ntasks: []\n").contains("'w' has no tasks"));
    assert!(
        err("name: w\ntasks:\n- {name: a, type: noop}\n- {name: a, type: noop}\n")
            .contains("'a' is used more than once")
    );
    let e = err("name: w\ntasks:\n- {name: a, type: flink}\n");
    assert!(
        e.contains("task 'a' has unknown type 'flink'") && e.contains("shell"),
        "{e}"
    );
    assert!(
        err("name: w\ntasks:\n- {name: a, type: noop, depends_on: [ghost]}\n")
            .contains("task 'a' depends on 'ghost'")
    );
    assert!(
        err("name: w\ntasks:\n- {name: a, type: shell}\n")
            .contains("task 'a' of type shell needs 'command'")
    );
    assert!(err("name: 'bad name'\ntasks:\n- {name: a, type: noop}\n").contains("bad name"));
    for bad in ["..", ".", ".hidden", "-rf"] {
        let e = err(&format!(
            "name: w\nproject: '{bad}'\ntasks:\n- {{name: a, type: noop}}\n"
        ));
        assert!(e.contains(&format!("invalid project name '{bad}'")), "{e}");
    }
    assert!(WorkflowDef::parse("name: _w.v2-x\ntasks:\n- {name: a, type: noop}\n").is_ok());
    // Names of any script; a reference with the composed `é` finds a task named with a
    // decomposed one, and both are stored composed (NFC).
    let def = WorkflowDef::parse(
        "name: 日次集計\nproject: 数据仓库\ntasks:\n- {name: \"cafe\u{301}\", type: noop}\n- {name: 前置sql节点, type: noop, depends_on: [caf\u{e9}]}\n",
    )
    .unwrap();
    assert_eq!(def.tasks[0].name, "caf\u{e9}");
    assert_eq!(def.tasks[1].depends_on, ["caf\u{e9}"]);
    assert_eq!(
        WorkflowDef::parse(&def.to_yaml(&[])).unwrap().name,
        "日次集計"
    );
    let e = err("name: w\ntasks:\n- {name: 'a/b', type: noop}\n");
    assert!(
        e.contains("invalid task name 'a/b': it contains '/'"),
        "{e}"
    );
    let tenant = |t: &str| {
        WorkflowDef::parse(&format!(
            "name: w\ntenant: '{t}'\ntasks:\n- {{name: a, type: noop}}\n"
        ))
    };
    assert_eq!(
        tenant("etl_user").unwrap().tenant.as_deref(),
        Some("etl_user")
    );
    for bad in ["root;rm", "a.b", "x".repeat(33).as_str(), ""] {
        let e = tenant(bad).unwrap_err().to_string();
        assert!(e.contains("invalid tenant"), "{bad}: {e}");
    }
    assert!(err("name: w\ntasks:\n- {name: a, type: noop, colour: red}\n").contains("colour"));
    assert!(err("{{{").starts_with("definition is not valid"));
}

#[test]
fn wait_and_callback_tasks_are_checked() {
    let def = WorkflowDef::parse(
        "name: w\ntasks:\n- {name: gate, type: wait, timeout: 1h, on_timeout: late}\n- {name: late, type: noop, depends_on: [gate]}\n- {name: ask, type: callback, callback: {url: 'http://x/${callback.url}'}}\n",
    )
    .unwrap();
    assert_eq!(def.tasks[0].on_timeout(), OnTimeout::Run("late"));
    assert_eq!(def.tasks[2].on_timeout(), OnTimeout::Fail);
    assert_eq!(def.tasks[2].callback.as_ref().unwrap().method, "POST");
    assert!(def.unresolvable_references(&BTreeMap::new()).is_empty());
    let e = err("name: w\ntasks:\n- {name: gate, type: wait, on_timeout: ghost}\n");
    assert!(
        e.contains("'ghost' must be a task that depends on 'gate'"),
        "{e}"
    );
    let e = err("name: w\ntasks:\n- {name: s, type: shell, command: x, on_timeout: succeed}\n");
    assert!(
        e.contains("on_timeout applies to wait, callback and external tasks only"),
        "{e}"
    );
    let e = err("name: w\ntasks:\n- {name: c, type: callback}\n");
    assert!(
        e.contains("task 'c' of type callback needs 'callback'"),
        "{e}"
    );
}

#[test]
fn error_handlers_and_terminate_are_checked() {
    let def = WorkflowDef::parse(
        "name: w\ntasks:\n- {name: load, type: shell, command: x, on_error: {action: catch, then: cleanup, retries: 2, interval: 5s}}\n- {name: cleanup, type: shell, command: 'echo ${error.message}'}\n- {name: end, type: terminate, terminate: {state: failure, message: no data}}\n",
    )
    .unwrap();
    assert_eq!(def.tasks[0].retry_count(), 2);
    assert_eq!(def.tasks[0].retry_wait(), Some(Duration::from_secs(5)));
    assert_eq!(
        def.tasks[0].error_action(),
        Some((ErrorAction::Catch, Some("cleanup")))
    );
    assert!(def.unresolvable_references(&BTreeMap::new()).is_empty());
    let task = |t: &str| {
        format!(
            "name: w\ntasks:\n{t}- {{name: h, type: noop}}\n- {{name: g, type: noop, depends_on: [h]}}\n"
        )
    };
    for (tasks, expected) in [
        (
            "- {name: a, type: noop, on_error: {action: catch}}\n",
            "needs `then`",
        ),
        (
            "- {name: a, type: noop, on_error: {action: catch, then: ghost}}\n",
            "'ghost' is not a task",
        ),
        (
            "- {name: a, type: noop, on_error: {action: ignore, then: h}}\n",
            "applies to action catch only",
        ),
        (
            "- {name: a, type: noop, on_error: {action: catch, then: g}}\n",
            "may not depend on other tasks",
        ),
        (
            "- {name: a, type: noop, on_error: {action: catch, then: h}}\n- {name: b, type: noop, on_error: {action: catch, then: h}}\n",
            "already handles 'a'",
        ),
        (
            "- {name: a, type: noop, retries: 1, on_error: {action: retry, retries: 2}}\n",
            "not both",
        ),
        (
            "- {name: a, type: noop, on_error: {action: catch, then: b}}\n- {name: b, type: noop, on_error: {action: catch, then: a}}\n",
            "catch each other: ",
        ),
        (
            "- {name: a, type: noop, on_error: {action: swallow}}\n",
            "swallow",
        ),
        ("- {name: a, type: terminate}\n", "needs 'terminate'"),
        (
            "- {name: a, type: terminate, terminate: {state: stopped}}\n",
            "stopped",
        ),
    ] {
        let e = err(&task(tasks));
        assert!(e.contains(expected), "{tasks}: {e}");
    }
}

#[test]
fn the_other_projects_a_workflow_starts_or_reads_runs_of_are_found_at_any_depth() {
    let def = WorkflowDef::parse(
        "name: w\nproject: own\non_failure: { workflow: pager, project: ops }\ntasks:\n\
         - { name: a, type: sub_workflow, sub_workflow: { workflow: x, project: lab } }\n\
         - { name: b, type: sub_workflow, sub_workflow: { workflow: y } }\n\
         - { name: c, type: foreach, foreach: { items: '[1]', workflow: z, project: farm } }\n\
         - { name: d, type: foreach, foreach: { items: '[1]', task: { type: sub_workflow, sub_workflow: { workflow: z, project: deep } } } }\n\
         - { name: e, type: do_while, do_while: { condition: 'iteration < 2', tasks: [ { name: s, type: sub_workflow, sub_workflow: { workflow: z, project: loop } } ] } }\n\
         - { name: f, type: dependent, dependent: { workflow: raw, project: lake } }\n\
         - { name: g, type: dependent, dependent: { groups: [ { items: [ { workflow: raw, project: lake }, { workflow: v, project: own }, { workflow: u } ] } ] } }\n",
    )
    .unwrap();
    let other = def.other_projects();
    assert_eq!(other.starts, ["deep", "farm", "lab", "loop", "ops"]);
    assert_eq!(other.reads, ["lake"], "its own project is not another");
    let alone = WorkflowDef::parse("name: p\ntasks:\n- {name: a, type: noop}\n").unwrap();
    assert_eq!(alone.other_projects(), OtherProjects::default());
}

#[test]
fn execution_type_task_groups_and_alerts_are_read_and_checked() {
    let def = WorkflowDef::parse(
        "name: s\nexecution_type: serial_wait\nalerts: [{on: failure, channel: ops}, {on: any, channel: ops}]\ntasks:\n- {name: a, type: noop, task_group: etl, task_group_priority: 3}\n- {name: b, type: noop, task_group: etl}\n",
    )
    .unwrap();
    assert_eq!(def.execution_type, ExecutionType::SerialWait);
    assert_eq!(def.alerts[0].on, AlertOn::Failure);
    assert_eq!(def.tasks[0].task_group_priority, 3);
    assert_eq!(def.task_groups(), vec!["etl"]);
    assert_eq!(def.alert_channels(), vec!["ops"]);
    // Defaults leave the stored form of older definitions unchanged.
    let plain = WorkflowDef::parse("name: p\ntasks:\n- {name: a, type: noop}\n").unwrap();
    let json = serde_json::to_string(&plain).unwrap();
    assert!(
        !json.contains("execution_type") && !json.contains("task_group"),
        "{json}"
    );

    let e = err("name: s\nexecution_type: serial\ntasks:\n- {name: a, type: noop}\n");
    assert!(e.contains("serial") && e.contains("serial_wait"), "{e}");
    let e =
        err("name: s\nalerts: [{on: sometimes, channel: ops}]\ntasks:\n- {name: a, type: noop}\n");
    assert!(e.contains("sometimes") && e.contains("failure"), "{e}");
    let e = err("name: s\ntasks:\n- {name: a, type: noop, task_group: 'a b'}\n");
    assert!(e.contains("invalid task group 'a b'"), "{e}");
    let e = err("name: s\nalerts: [{on: any, channel: ''}]\ntasks:\n- {name: a, type: noop}\n");
    assert!(e.contains("invalid alert channel"), "{e}");
}

#[test]
fn start_options_override_the_group_of_default_tasks_and_the_failure_strategy() {
    let mut def = WorkflowDef::parse(
        "name: w\ntasks:\n- {name: a, type: noop}\n- {name: b, type: noop, worker_group: gpu}\n",
    )
    .unwrap();
    def.apply_start(&StartOptions::default());
    assert_eq!(
        def.tasks[0].worker_group, "default",
        "no options, no change"
    );
    let options = StartOptions {
        worker_group: Some("etl".into()),
        failure_strategy: Some(FailureStrategy::Continue),
        ..Default::default()
    };
    def.apply_start(&options);
    assert_eq!(def.tasks[0].worker_group, "etl");
    assert_eq!(def.tasks[1].worker_group, "gpu", "a task's own group wins");
    assert_eq!(def.failure_strategy, FailureStrategy::Continue);
}

#[test]
fn a_wait_for_an_event_names_it_and_a_key_from_its_params() {
    let def = WorkflowDef::parse(
        "name: o\ntasks:\n- {name: paid, type: wait, event: order_paid, key: '${order_id}', timeout: 2d}\n",
    )
    .unwrap();
    assert_eq!(def.tasks[0].event.as_deref(), Some("order_paid"));
    assert!(def.tasks[0].texts().any(|t| t == "${order_id}"));
    assert_eq!(
        def.unresolvable_references(&BTreeMap::new()),
        vec![("paid".to_string(), "order_id".to_string())],
        "an undefined key parameter is caught before the run"
    );
    let refused = |task: &str, says: &str| {
        let e = err(&format!("name: o\ntasks:\n- {task}\n"));
        assert!(e.contains(says), "{task}: {e}");
    };
    refused("{name: a, type: wait, key: k}", "key needs event");
    refused("{name: a, type: wait, event: e}", "needs key");
    refused(
        "{name: a, type: wait, event: 'a b', key: k}",
        "invalid event 'a b'",
    );
    refused("{name: a, type: wait, event: e, key: ' '}", "key is empty");
    refused(
        "{name: a, type: wait, event: e, key: '${secret.k}'}",
        "may not name a secret",
    );
    refused(
        "{name: a, type: shell, command: 'true', event: e, key: k}",
        "wait tasks only",
    );
}

#[test]
fn the_run_s_environment_beats_the_task_s_which_beats_the_workflow_s() {
    let def = WorkflowDef::parse(
        "name: w\nenvironment: wf\ntasks:\n\
         - {name: a, type: shell, command: 'true'}\n\
         - {name: b, type: python, script: 'pass', environment: own}\n\
         - {name: c, type: noop}\n\
         - {name: d, type: foreach, foreach: {items: '[1]', task: {type: shell, command: x, environment: tpl}}}\n",
    )
    .unwrap();
    assert_eq!(def.environments(), ["own", "tpl", "wf"]);
    let none = StartOptions::default();
    let run = StartOptions {
        environment: Some("run".into()),
        ..Default::default()
    };
    let of = |i: usize, o| def.environment_of(&def.tasks[i], o);
    assert_eq!(
        (of(0, &none), of(1, &none), of(2, &none)),
        (Some("wf"), Some("own"), None)
    );
    assert_eq!(
        (of(0, &run), of(1, &run), of(2, &run)),
        (Some("run"), Some("run"), None)
    );

    let e =
        err("name: w\ntasks:\n- {name: a, type: http, http: {url: 'http://x'}, environment: e}\n");
    assert!(
        e.contains("environment applies to shell and python tasks only"),
        "{e}"
    );
    let e = err("name: w\nenvironment: 'a/b'\ntasks:\n- {name: a, type: noop}\n");
    assert!(e.contains("invalid environment 'a/b'"), "{e}");
    let def = WorkflowDef::parse("name: w\nenvironment: 环境\ntasks:\n- {name: a, type: noop}\n");
    assert_eq!(
        def.unwrap().environment.as_deref(),
        Some("环境"),
        "any script"
    );
}

#[test]
fn one_walk_reaches_foreach_templates_and_do_while_bodies() {
    let def = WorkflowDef::parse(concat!(
        "name: deep\nenvironment: wf\nalerts: [{on: failure, channel: top}]\ntasks:\n",
        "- {name: each, type: foreach, foreach: {items: '[1, 2]', task: {type: shell, command: 'true', ",
        "environment: tmpl, alerts: [{on: task_failure, channel: in_template}]}}}\n",
        "- name: loop\n  type: do_while\n  do_while:\n    condition: 'false'\n    tasks:\n",
        "    - {name: body, type: shell, command: 'true', environment: body, worker_group: gpu, ",
        "alerts: [{on: task_timeout, channel: in_body}]}\n",
    ))
    .unwrap();
    let names: Vec<&str> = def.all_tasks().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        ["each", "", "loop", "body"],
        "parents before what they hold"
    );
    assert_eq!(
        def.alert_channels(),
        ["in_body", "in_template", "top"],
        "what apply checks exists"
    );
    assert_eq!(def.environments(), ["body", "tmpl", "wf"]);

    // A run's worker group reaches every task that names none, templates too.
    let mut run = def.clone();
    run.apply_start(&StartOptions {
        worker_group: Some("big".into()),
        alert_channels: vec!["mine".into()],
        timeout: Some(std::time::Duration::from_secs(5)),
        ..Default::default()
    });
    let groups: Vec<&str> = run
        .all_tasks()
        .iter()
        .map(|t| t.worker_group.as_str())
        .collect();
    assert_eq!(groups, ["big", "big", "big", "gpu"]);
    assert_eq!(run.timeout, Some(std::time::Duration::from_secs(5)));
    // The run's channels replace the workflow's, for the events it subscribed to; the
    // tasks' own stay.
    assert_eq!(run.alerts.len(), 1);
    assert_eq!(
        (run.alerts[0].on, run.alerts[0].channel.as_str()),
        (AlertOn::Failure, "mine")
    );
    assert_eq!(run.alert_channels(), ["in_body", "in_template", "mine"]);
    let mut bare = WorkflowDef::parse("name: b\ntasks:\n- {name: a, type: noop}\n").unwrap();
    bare.apply_start(&StartOptions {
        alert_channels: vec!["mine".into()],
        ..Default::default()
    });
    assert_eq!(
        bare.alerts[0].on,
        AlertOn::Any,
        "every end when it named none"
    );
}
