//! A real cluster: api-server, two masters and two workers as separate processes on
//! Postgres and etcd.

mod support;

use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;
use support::{Proc, SHOAL, TestDb, free_port, start_etcd, wait_for};

#[test]
fn fifty_instances_started_at_once_all_succeed_across_both_workers() {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDb::create("shoal_cluster");
    let (_etcd, etcd_url) = start_etcd(dir.path());
    let env = [
        ("SHOAL_DATABASE_URL", db.url.as_str()),
        ("SHOAL_ETCD", etcd_url.as_str()),
        ("SHOAL_LEASE_TTL", "5"),
    ];
    let (_api_server, api) = support::start_api_server(dir.path(), &env);
    let mut nodes = vec![];
    for i in 0..2 {
        let port = free_port().to_string();
        nodes.push(Proc::spawn(
            &format!("master{i}"),
            dir.path(),
            SHOAL,
            &["master", "--port", &port],
            &env,
        ));
        let port = free_port().to_string();
        let data = dir.path().join(format!("worker{i}"));
        nodes.push(Proc::spawn(
            &format!("worker{i}"),
            dir.path(),
            SHOAL,
            &[
                "worker",
                "--port",
                &port,
                "--slots",
                "4",
                "--data-dir",
                data.to_str().unwrap(),
            ],
            &env,
        ));
    }

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

    let out = support::cli(&api, &["cluster", "--output", "json"]);
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
    drop(nodes);
}
