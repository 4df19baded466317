//! A real cluster: api-server, two masters and two workers as separate processes on
//! Postgres (one test: MariaDB) and etcd.

mod support;

use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;
use support::{LONG, MiniCluster, intervals, max_overlap, timed, wait_for};

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

    // Started one by one until both masters drive some (whichever claims first wins). A
    // master that logged its start may still be opening its command intake: while only one
    // has claimed, starts are spaced out, for up to 20 s.
    let mut instances = Vec::new();
    let mut masters = HashSet::new();
    let since = std::time::Instant::now();
    while instances.len() < 4 || (masters.len() < 2 && since.elapsed() < Duration::from_secs(20)) {
        if masters.len() == 1 && instances.len() >= 4 {
            std::thread::sleep(Duration::from_millis(200));
        }
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

/// Every node's gRPC service refuses a peer without a certificate of the cluster's CA at
/// the TLS handshake, and a call that lacks the cluster's secret or carries another
/// cluster's, before the service sees it: a machine that reaches a worker's port cannot
/// dispatch a command to it. (Every cluster of the suite runs on mutual TLS, so the runs
/// of the other tests go over it.)
#[test]
fn calls_between_nodes_need_the_cluster_s_certificate_and_secret() {
    use shoal_common::cluster_secret::ClusterSecret;
    use shoal_common::cluster_tls::ClusterTls;
    use shoal_common::proto::master_client::MasterClient;
    use shoal_common::proto::worker_client::WorkerClient;
    use shoal_common::proto::{ControlAction, ControlRequest, ProbeRequest};
    use tonic::Code;
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

    let c = MiniCluster::start(1, 1);
    let nodes = c.api.get("/cluster");
    let addr = |role: &str| {
        nodes
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["role"] == role)
            .unwrap()["addr"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (master, worker) = (addr("master"), addr("worker"));
    let file = |name: &str| c.dir.path().join(name);
    let own = || {
        ClusterTls::load(
            &file("cluster-node.pem"),
            &file("cluster-node.key"),
            &file("cluster-ca.pem"),
        )
        .unwrap()
    };
    let rogue = support::make_certs(c.dir.path(), "rogue");
    let right = ClusterSecret::new(support::CLUSTER_SECRET).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        // Without the cluster's certificate: refused by the transport, before any service
        // (which would say Unauthenticated), even with the right secret.
        let tls = |identity: Option<&support::Certs>| {
            let ca = std::fs::read(file("cluster-ca.pem")).unwrap();
            let config = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(ca))
                .domain_name("127.0.0.1");
            match identity {
                Some(c) => config.identity(Identity::from_pem(
                    std::fs::read(&c.cert).unwrap(),
                    std::fs::read(&c.key).unwrap(),
                )),
                None => config,
            }
        };
        let https = Endpoint::from_shared(format!("https://{worker}")).unwrap();
        for (what, endpoint) in [
            (
                "plain http",
                Endpoint::from_shared(format!("http://{worker}")).unwrap(),
            ),
            (
                "tls without a certificate",
                https.clone().tls_config(tls(None)).unwrap(),
            ),
            (
                "a certificate of another CA",
                https.tls_config(tls(Some(&rogue))).unwrap(),
            ),
        ] {
            let mut client = WorkerClient::new(right.channel(&worker, endpoint.connect_lazy()));
            let refused = client
                .probe(ProbeRequest { tasks: vec![] })
                .await
                .expect_err(what);
            let by_transport = std::error::Error::source(&refused)
                .is_some_and(|e| e.downcast_ref::<tonic::transport::Error>().is_some());
            assert!(by_transport, "{what}: {refused}");
        }

        // With the cluster's certificate, as the nodes connect: the secret decides.
        for (secret, refused) in [
            (None, true),
            (Some("another-cluster-s3cret-0123"), true),
            (Some(support::CLUSTER_SECRET), false),
        ] {
            let secret = secret
                .map(|s| ClusterSecret::new(s).unwrap())
                .unwrap_or_default()
                .with_tls(own());
            let channel =
                |addr: &str| secret.channel(addr, secret.endpoint(addr).unwrap().connect_lazy());
            let probe = WorkerClient::new(channel(&worker))
                .probe(ProbeRequest { tasks: vec![] })
                .await;
            let control = MasterClient::new(channel(&master))
                .control(ControlRequest {
                    workflow_instance_id: 987_654,
                    action: ControlAction::Stop.into(),
                    ..Default::default()
                })
                .await;
            let codes = [
                probe.err().map(|s| s.code()),
                control.err().map(|s| s.code()),
            ];
            if refused {
                assert_eq!(codes, [Some(Code::Unauthenticated); 2], "{secret:?}");
            } else {
                // Through to the services: the probe answers, the unknown instance is not found.
                assert_eq!(codes, [None, Some(Code::NotFound)], "{secret:?}");
            }
        }
    });
}

/// `shoal worker` with `args` and no inherited secret; what it printed, once it exited or
/// had a few seconds.
fn worker_start(args: &[&str], secret: Option<&str>) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let mut all = vec![
        "worker",
        "--port",
        "0",
        "--metrics-port",
        "0",
        "--data-dir",
        data,
    ];
    // Nothing listens there: a node that gets past its secret check fails on etcd.
    all.extend(["--etcd", "http://127.0.0.1:9"]);
    all.extend(args);
    start_briefly(&all, secret.map(|s| ("SHOAL_CLUSTER_SECRET", s)))
}

/// `shoal` with `args`, without the security settings of the test's environment but `env`;
/// whether it succeeded and what it printed, once it exited or had a few seconds.
fn start_briefly(args: &[&str], env: Option<(&str, &str)>) -> (bool, String) {
    use std::process::{Command, Stdio};
    let mut cmd = Command::new(support::SHOAL);
    cmd.args(args)
        .env_remove("SHOAL_CLUSTER_SECRET")
        .env_remove("SHOAL_TOKEN")
        .env_remove("SHOAL_INSECURE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    // Not exited after 20 s: it runs (is killed below).
    support::poll(Duration::from_secs(20), || child.try_wait().unwrap());
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), support::text(&out.stderr))
}

#[test]
fn a_node_on_a_public_address_needs_a_secret_or_insecure() {
    let (ok, err) = worker_start(&["--bind", "0.0.0.0"], None);
    assert!(!ok);
    assert!(
        err.contains("without a cluster secret") && err.contains("SHOAL_CLUSTER_SECRET"),
        "{err}"
    );
    assert!(err.contains("--insecure"), "{err}");

    let (ok, err) = worker_start(&["--bind", "0.0.0.0"], Some("short"));
    assert!(!ok);
    assert!(err.contains("at least 16"), "{err}");

    // Past the check, the worker goes on to etcd (and fails there): with --insecure it
    // warns, with a secret or on loopback it does not.
    for (args, secret, warns) in [
        (&["--bind", "0.0.0.0", "--insecure"][..], None, true),
        (
            &["--bind", "0.0.0.0"][..],
            Some(support::CLUSTER_SECRET),
            false,
        ),
        (&["--bind", "127.0.0.1"][..], None, false),
    ] {
        let (_, err) = worker_start(args, secret);
        assert!(!err.contains("listens on"), "{args:?}: refused:\n{err}");
        assert_eq!(
            err.contains("WITHOUT a cluster secret"),
            warns,
            "{args:?}:\n{err}"
        );
        assert!(
            err.contains("registry"),
            "{args:?}: did not get to the registry:\n{err}"
        );
    }
}

/// The bootstrap admin token the first start of an api-server printed in `log`.
fn bootstrap_token(log: &str) -> Option<String> {
    let line = log.lines().find(|l| l.trim_start().starts_with("shoal_"))?;
    Some(line.trim().to_string())
}

#[test]
fn an_api_server_always_needs_a_token_and_its_first_start_prints_the_admins() {
    let dir = tempfile::tempdir().unwrap();
    let db = support::TestDb::create("shoal_bootstrap");
    let start = |name: &str| {
        let args = ["api-server", "--port", "0", "--bind", "127.0.0.1"];
        let env = [("SHOAL_DATABASE_URL", db.url.as_str())];
        let proc = support::Proc::spawn(name, dir.path(), support::SHOAL, &args, &env);
        let port = support::bound_port(&proc);
        (proc, format!("http://127.0.0.1:{port}/api/v1"))
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::blocking::Client::new();
    let status = |url: &str, token: Option<&str>| {
        let mut req = http.get(url);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().map(|r| r.status().as_u16()).unwrap_or(0)
    };
    let (first, api) = start("api-server");
    let token = support::wait_for("the bootstrap token", Duration::from_secs(60), || {
        bootstrap_token(&first.log_text())
    });
    support::wait_for("the api", Duration::from_secs(30), || {
        (status(&format!("{api}/health"), None) == 200).then_some(())
    });
    assert!(
        first
            .log_text()
            .contains("Created the global admin 'admin'")
    );
    assert_eq!(status(&format!("{api}/instances"), None), 401);
    assert_eq!(status(&format!("{api}/instances"), Some("guess")), 401);
    assert_eq!(status(&format!("{api}/instances"), Some(&token)), 200);
    assert_eq!(
        status(&format!("{api}/users"), Some(&token)),
        200,
        "a global admin"
    );

    // Later starts keep the admin and print no token.
    let (second, api2) = start("api-server-2");
    support::wait_for("the second api", Duration::from_secs(60), || {
        (status(&format!("{api2}/health"), None) == 200).then_some(())
    });
    assert_eq!(status(&format!("{api2}/instances"), Some(&token)), 200);
    assert_eq!(
        bootstrap_token(&second.log_text()),
        None,
        "{}",
        second.log_text()
    );
    drop((first, second));

    // A standalone on a public address needs --auth.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let (ok, err) = start_briefly(
        &[
            "standalone",
            "--bind",
            "0.0.0.0",
            "--port",
            "0",
            "--data-dir",
            data,
        ],
        None,
    );
    assert!(!ok);
    assert!(
        err.contains("the standalone listens on 0.0.0.0 without auth") && err.contains("--auth"),
        "{err}"
    );
}

/// The cluster on MariaDB (`--database-url mysql://...`): two masters, two workers and
/// etcd; the master that drives a running instance is killed. The other takes its
/// instances over, every run succeeds, and each task ran exactly once (no task that
/// finished, or was running on a worker, is run again).
#[test]
fn a_cluster_on_mariadb_takes_a_killed_master_s_runs_over_and_runs_each_task_once() {
    let mut c = MiniCluster::start_mysql(2, 2);
    let log = c.dir.path().join("executions");
    let task = |name: &str, deps: &str| {
        format!(
            "- {{ name: {name}, type: shell, {deps}command: 'echo {name} \
             ${{system.workflow.instance.id}} >> {}; sleep 1' }}\n",
            log.display()
        )
    };
    let yaml = format!(
        "name: chain\ntasks:\n{}{}{}",
        task("a", ""),
        task("b", "depends_on: [a], "),
        task("c", "depends_on: [b], ")
    );
    let (status, body) = c.api.post("/projects/default/workflows", &yaml);
    assert_eq!(status, 201, "{body}");
    let instances: Vec<i64> = (0..6)
        .map(|_| {
            let (status, body) = c.api.post("/projects/default/workflows/chain/start", "{}");
            assert_eq!(status, 202, "{body}");
            let command = body["command_id"].as_i64().unwrap();
            wait_for("the command to become an instance", LONG, || {
                c.api.get(&format!("/commands/{command}"))["workflow_instance_id"].as_i64()
            })
        })
        .collect();
    // The master driving the first run, by the address it registered.
    let owner = wait_for("the first run to have a master", LONG, || {
        let inst = c.api.get(&format!("/instances/{}", instances[0]));
        inst["master"].as_str().map(str::to_string)
    });
    let victim = c
        .procs
        .iter()
        .position(|p| p.name.starts_with("master") && p.log_text().contains(&owner))
        .unwrap_or_else(|| panic!("no master logged its address {owner}"));
    c.procs[victim].kill();

    for id in &instances {
        let inst = c.api.wait_instance(*id, Duration::from_secs(120));
        assert_eq!(inst["state"], "success", "{inst}");
    }
    // Three one-second tasks: the first run was still running when its master died.
    let first = c.api.get(&format!("/instances/{}", instances[0]));
    assert_ne!(first["master"], owner.as_str(), "taken over: {first}");
    let ran = std::fs::read_to_string(&log).unwrap();
    for id in &instances {
        for name in ["a", "b", "c"] {
            let times = ran.lines().filter(|l| *l == format!("{name} {id}")).count();
            assert_eq!(
                times, 1,
                "task {name} of run {id} ran {times} times:\n{ran}"
            );
        }
    }
}
