//! A real cluster: api-server, two masters and two workers as separate processes on
//! Postgres and etcd.

mod support;

use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;
use support::{MiniCluster, intervals, max_overlap, timed, wait_for};

#[test]
fn fifty_instances_started_at_once_all_succeed_across_both_workers() {
    let c = MiniCluster::start(2, 2);
    let api = &c.api;

    let yaml = "name: fifty\ntasks:\n- {name: a, type: shell, command: 'echo a; sleep 0.05'}\n- {name: b, type: shell, command: 'echo b', depends_on: [a]}\n- {name: c, type: noop, depends_on: [a]}\n";
    let (status, body) = api.post("/projects/default/workflows", yaml);
    assert_eq!(status, 201, "{body}");

    let commands: Vec<i64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..50)
            .map(|_| {
                s.spawn(|| {
                    let (status, body) = api.post("/projects/default/workflows/fifty/start", "{}");
                    assert_eq!(status, 202, "{body}");
                    body["command_id"].as_i64().unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(commands.iter().collect::<HashSet<_>>().len(), 50);

    let instances: Vec<i64> = commands
        .iter()
        .map(|c| {
            wait_for(
                &format!("command {c} to become an instance"),
                Duration::from_secs(60),
                || {
                    let cmd = api.get(&format!("/commands/{c}"));
                    assert_ne!(cmd["status"], "error", "command {c} failed: {cmd}");
                    cmd["workflow_instance_id"].as_i64()
                },
            )
        })
        .collect();
    assert_eq!(
        instances.iter().collect::<HashSet<_>>().len(),
        50,
        "each command became its own instance"
    );

    let mut workers = HashSet::new();
    for id in &instances {
        let inst = api.wait_instance(*id, Duration::from_secs(120));
        assert_eq!(inst["state"], "success", "{inst}");
        let tasks = inst["tasks"].as_array().unwrap();
        assert_eq!(tasks.len(), 3, "every task ran exactly once: {inst}");
        for t in tasks {
            workers.insert(t["worker"].as_str().unwrap().to_string());
        }
    }
    let all: Value = api.get("/instances?workflow=fifty&limit=1000");
    assert_eq!(
        all.as_array().unwrap().len(),
        50,
        "no command was turned into two instances"
    );
    assert_eq!(workers.len(), 2, "tasks ran on both workers: {workers:?}");

    let out = support::cli(api, &["cluster", "--output", "json"]);
    assert!(out.status.success(), "{}", support::text(&out.stderr));
    let nodes: Value = serde_json::from_slice(&out.stdout).unwrap();
    let count = |role: &str| {
        nodes
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["role"] == role)
            .count()
    };
    assert_eq!(
        (count("master"), count("worker")),
        (2, 2),
        "shoal cluster lists every live node: {nodes}"
    );
}

/// The slot count of a task group holds across masters: each master drives some of the
/// instances, and never more than two of their tasks run at once.
#[test]
fn a_task_group_limits_tasks_driven_by_two_masters() {
    let cluster = MiniCluster::start(2, 2);
    let api = &cluster.api;
    let (status, body) = api.post("/task-groups", r#"{"name": "duo", "slots": 2}"#);
    assert_eq!(status, 201, "{body}");
    let spans = cluster.dir.path().join("spans");
    let task = |t: &str| {
        let command = timed(
            &spans,
            &format!("${{system.workflow.instance.id}}.{t}"),
            "0.4",
        );
        format!("- {{ name: {t}, type: shell, task_group: duo, command: '{command}' }}\n")
    };
    let yaml = format!("name: grouped\ntasks:\n{}{}", task("a"), task("b"));
    let (status, body) = api.post("/projects/default/workflows", &yaml);
    assert_eq!(status, 201, "{body}");

    // Started one by one until both masters drive some (whichever claims first wins).
    let mut instances = Vec::new();
    let mut masters = HashSet::new();
    while instances.len() < 4 || (masters.len() < 2 && instances.len() < 16) {
        let (status, body) = api.post("/projects/default/workflows/grouped/start", "{}");
        assert_eq!(status, 202, "{body}");
        let command = body["command_id"].as_i64().unwrap();
        let id = wait_for("the start to be claimed", Duration::from_secs(60), || {
            api.get(&format!("/commands/{command}"))["workflow_instance_id"].as_i64()
        });
        masters.insert(api.get(&format!("/instances/{id}"))["master"].to_string());
        instances.push(id);
    }
    assert_eq!(
        masters.len(),
        2,
        "both masters drove instances: {masters:?}"
    );
    for id in &instances {
        let inst = api.wait_instance(*id, Duration::from_secs(120));
        assert_eq!(inst["state"], "success", "{inst}");
    }
    let spans = intervals(&spans);
    assert_eq!(spans.len(), 2 * instances.len(), "{spans:?}");
    assert_eq!(
        max_overlap(&spans),
        2,
        "never more than the group's 2 slots: {spans:?}"
    );
}
