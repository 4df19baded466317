//! The randomized fault campaign: a cluster of api-server, two masters (reaching Postgres
//! through a proxy that can cut connections right after a COMMIT, or slow every message)
//! and three workers (one with its data dir on a small disk of its own) runs a mixed
//! workload (diamonds of recorded shell tasks, a foreach with max_parallel, a do_while, a
//! task that passes on its retry followed by a sub-workflow, and a schedule firing every
//! two seconds) on a Postgres server of the test's own, while
//! faults land at random moments drawn from a printed seed: SIGKILL of a master (a new one
//! joins) or of a worker (it restarts on its data dir), SIGSTOP of a master or a worker
//! past or within its lease, an etcd restart, a Postgres crash and restart, COMMITs cut, a slow network
//! between the masters and Postgres, and the small disk filled up (sometimes with its
//! worker killed and restarted while it is full).
//!
//! After each round every instance must end `success`, each task must have exactly one
//! successful attempt that ran exactly once and whose log holds what it printed (failed
//! attempts only before a retry that succeeded), each sub-workflow task one child run, no
//! attempt may start twice, and each command must be exactly one instance (the checks of
//! `support/fault.rs`); at the end, no schedule time has fired twice. A task whose worker
//! was killed, or frozen past its lease, while it ran may have run before on that worker
//! (at-least-once for what had not been reported ended); nothing that had ended there runs
//! again.
//!
//! The partition campaign does the same on a cluster of separate network hosts
//! (`Cluster::start_hosts`): besides kills, freezes and etcd restarts, a node is cut from
//! etcd, from Postgres or from its peers, both ways or one way, and healed after a random
//! time; every task also leaves a marker file per execution, and no two executions of a
//! task may overlap (`support/partition.rs`).
//!
//! `SHOAL_CAMPAIGN_ROUNDS` sets the rounds of each (CI: 2); `SHOAL_FAULT_SEED` repeats a
//! draw. The figures of long campaigns are in RELIABILITY.md.

#[path = "support/fault.rs"]
mod fault;
#[path = "support/partition.rs"]
mod partition;
mod support;

use fault::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;
use support::{Lcg, Peer, PgProxy, SmallDisk, TestDb, Way, free_port};

fn rounds() -> usize {
    std::env::var("SHOAL_CAMPAIGN_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(2)
}

/// The foreach's children and the do_while's iterations, as the execution log names them.
const FAN_ITEMS: usize = 10;
const LOOP_ITERATIONS: usize = 4;

#[test]
fn a_randomized_fault_campaign_loses_and_repeats_nothing() {
    let rounds = rounds();
    let mut rng = Lcg::for_test("campaign");
    let mut c = Cluster::start_on(TestDb::private(), "campaign", &["default"; 3]);
    let disk = small_disk_for(&mut c, SMALL_DISK_WORKER);
    let proxy = PgProxy::start(&c.db.url);
    let through = proxy.url(&c.db.url);
    let mut masters_started = 0;
    for old in c.masters.drain(..).collect::<Vec<_>>() {
        old.proc.signal("KILL");
        let name = format!("master-p{masters_started}");
        masters_started += 1;
        let m = c.spawn_on_db(free_port(), &name, &["master"], &through);
        c.masters.push(m);
    }
    c.apply(&diamond(&c.execs));
    c.apply(&fan_loop(&c));
    c.apply(&format!(
        "name: leaf\nparams: {{ nap: '0.2' }}\ntasks:\n- {{ name: leaf, type: shell, command: '{}' }}\n",
        recorded(&c.execs, "leaf", "nap")
    ));
    c.apply(&nest(&c));
    c.apply(&format!(
        "name: tick\nparams: {{ nap: '0' }}\ntasks:\n- {{ name: tick, type: shell, command: '{}' }}\n",
        recorded(&c.execs, "tick", "nap")
    ));
    let (status, schedule) = c.api.post(
        "/projects/default/workflows/tick/schedules",
        r#"{"cron": "*/2 * * * * *", "misfire": "run_once"}"#,
    );
    assert_eq!(status, 201, "{schedule}");
    let (mut ticks_checked, mut leaves_checked) = (0, 0);

    let mut faults: BTreeMap<&str, usize> = BTreeMap::new();
    let mut instances = 0;
    // Per workflow: every command submitted and the instance each became.
    let mut started: BTreeMap<&str, (Vec<i64>, Vec<i64>)> = BTreeMap::new();
    for round in 1..=rounds {
        let diamonds: Vec<i64> = (0..4).map(|_| c.submit_diamond(&mut rng)).collect();
        let fan = c.submit("fan_loop", json!({}));
        let nested = c.submit("nest", json!({}));
        let commands: Vec<i64> = diamonds.iter().copied().chain([fan, nested]).collect();
        let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
        for (i, (cmd, id)) in commands.iter().zip(&ids).enumerate() {
            let workflow = match i {
                0..4 => "diamond",
                4 => "fan_loop",
                _ => "nest",
            };
            let entry = started.entry(workflow).or_default();
            entry.0.push(*cmd);
            entry.1.push(*id);
        }
        for _ in 0..1 + rng.below(3) {
            // Scenario, not a wait: the faults land at random moments of the runs.
            std::thread::sleep(rng.millis(200, 1500));
            let kind = inject(
                &mut c,
                &mut rng,
                &proxy,
                &through,
                &disk,
                &mut masters_started,
            );
            c.log(&format!("round {round}: {kind}"));
            *faults.entry(kind).or_default() += 1;
        }
        c.check_runs(&ids[..4], &DIAMOND_TASKS, false);
        let fan_tasks: Vec<String> = (0..FAN_ITEMS)
            .map(|i| format!("each[{i}]"))
            .chain((1..=LOOP_ITERATIONS).map(|k| format!("poll[{k}].step")))
            .collect();
        let names: Vec<&str> = fan_tasks.iter().map(String::as_str).collect();
        c.check_runs(&ids[4..5], &names, false);
        // `after` runs on the master (no execution to record): its row must be `success`.
        c.check_runs(&ids[5..], &["flaky"], false);
        // Each nest started one leaf run, which ran its task once.
        let leaves = c.instances_after("leaf", leaves_checked);
        assert_eq!(
            leaves.len(),
            1,
            "round {round}: one child run per nest run: {leaves:?}"
        );
        c.check_runs(&leaves, &["leaf"], false);
        leaves_checked = leaves[0];
        let ticks = c.instances_after("tick", ticks_checked);
        c.check_runs(&ticks, &["tick"], false);
        ticks_checked = ticks.iter().copied().max().unwrap_or(ticks_checked);
        instances += ids.len() + ticks.len() + leaves.len();
    }
    let (status, body) = c.api.post(
        &format!(
            "/projects/default/workflows/tick/schedules/{}/disable",
            schedule["id"]
        ),
        "",
    );
    assert_eq!(status, 200, "{body}");
    for (workflow, (commands, ids)) in &started {
        c.check_commands(workflow, commands, ids);
    }
    // Fired runs are instances, or commands not claimed yet.
    let fired = c.db.query(
        "SELECT schedule_time, count(*) FROM (SELECT schedule_time FROM workflow_instance \
         WHERE schedule_time IS NOT NULL UNION ALL SELECT schedule_time FROM command \
         WHERE schedule_time IS NOT NULL) t GROUP BY schedule_time HAVING count(*) > 1",
    );
    assert_eq!(fired.trim(), "", "schedule times fired twice (time|runs)");
    c.log(&format!(
        "campaign: {rounds} rounds, {instances} instances, faults {faults:?}, {} commits cut, violations 0",
        proxy.cut()
    ));
}

/// A foreach of recorded children, 3 at once, then a do_while of recorded steps.
fn fan_loop(c: &Cluster) -> String {
    let child = recorded(&c.execs, "each[${n}]", "nap");
    let step = recorded(&c.execs, "poll[${iteration}].step", "nap");
    let items: Vec<String> = (0..FAN_ITEMS).map(|i| i.to_string()).collect();
    format!(
        r#"
name: fan_loop
params: {{ nap: '0.3' }}
tasks:
  - {{ name: each, type: foreach,
       foreach: {{ items: "[{items}]", as: n, max_parallel: 3, task: {{ type: shell, command: '{child}' }} }} }}
  - {{ name: poll, type: do_while, depends_on: [each],
       do_while: {{ condition: "iteration < {LOOP_ITERATIONS}", tasks: [ {{ name: step, type: shell, command: '{step}' }} ] }} }}
"#,
        items = items.join(", ")
    )
}

/// The worker whose data dir is on a small disk, and that disk's size in MiB.
const SMALL_DISK_WORKER: usize = 2;
const SMALL_DISK_MIB: u32 = 16;

/// Moves worker `i` onto a small disk of its own (before it ran anything).
fn small_disk_for(c: &mut Cluster, i: usize) -> SmallDisk {
    let (port, name) = stop_worker(c, i);
    let disk = SmallDisk::mount(&c.dir.path().join(&name), SMALL_DISK_MIB);
    let again = c.spawn_worker(port, &name, "default");
    c.workers.insert(i, again);
    disk
}

/// SIGKILLs worker `i` and takes it out of the cluster; returns its port and name for a
/// restart.
fn stop_worker(c: &mut Cluster, i: usize) -> (u16, String) {
    let victim = c.workers.remove(i);
    let port: u16 = victim.addr.rsplit(':').next().unwrap().parse().unwrap();
    let name = victim.name.clone();
    victim.proc.signal("KILL");
    drop(victim);
    (port, name)
}

/// A task that fails its first attempt and passes its retry (its first attempt leaves a
/// mark and exits 1 before it records a run), then a sub-workflow run of `leaf`.
fn nest(c: &Cluster) -> String {
    let mark = c.dir.path().join("flaky-${system.workflow.instance.id}");
    let mark = mark.display();
    let flaky = recorded(&c.execs, "flaky", "nap");
    format!(
        r#"
name: nest
params: {{ nap: '0.2' }}
tasks:
  - {{ name: flaky, type: shell, retries: 2, retry_interval: 0s,
       command: 'if [ ! -e {mark} ]; then touch {mark}; exit 1; fi; {flaky}' }}
  - {{ name: after, type: sub_workflow, depends_on: [flaky], sub_workflow: {{ workflow: leaf }} }}
"#
    )
}

/// Injects one fault drawn from `rng`; returns its kind.
fn inject(
    c: &mut Cluster,
    rng: &mut Lcg,
    proxy: &PgProxy,
    through: &str,
    disk: &SmallDisk,
    masters_started: &mut usize,
) -> &'static str {
    match rng.below(9) {
        0 => {
            let victim = c.masters.remove(rng.below(c.masters.len()));
            victim.proc.signal("KILL");
            drop(victim);
            let name = format!("master-p{masters_started}");
            *masters_started += 1;
            let m = c.spawn_on_db(free_port(), &name, &["master"], through);
            c.masters.push(m);
            "master SIGKILL"
        }
        1 => {
            let i = rng.below(c.workers.len());
            let (port, name) = stop_worker(c, i);
            std::thread::sleep(rng.millis(0, 1000));
            let again = c.spawn_worker(port, &name, "default");
            c.workers.insert(i, again);
            "worker SIGKILL and restart"
        }
        2 => {
            let victim = &c.masters[rng.below(c.masters.len())];
            victim.proc.signal("STOP");
            // Within the lease (2 s) or past it.
            std::thread::sleep(rng.millis(500, 4000));
            victim.proc.signal("CONT");
            "master SIGSTOP"
        }
        8 => {
            // Its task processes go on; past the lease, the masters run its tasks again
            // elsewhere and the worker, once resumed, gives up what it had.
            let victim = &c.workers[rng.below(c.workers.len())];
            victim.proc.signal("STOP");
            std::thread::sleep(rng.millis(500, 4000));
            victim.proc.signal("CONT");
            "worker SIGSTOP"
        }
        3 => {
            c.kill_etcd();
            std::thread::sleep(rng.millis(200, 1500));
            c.restart_etcd();
            "etcd restart"
        }
        4 => {
            proxy.cut_commits(1 + rng.below(3));
            "COMMITs cut"
        }
        5 => {
            let server = c.db.server.as_ref().expect("the campaign's own Postgres");
            server.stop();
            std::thread::sleep(rng.millis(200, 3000));
            server.start_again();
            "Postgres crash and restart"
        }
        6 => {
            proxy.delay(rng.millis(20, 300));
            std::thread::sleep(rng.millis(1000, 4000));
            proxy.delay(Duration::ZERO);
            "slow network to Postgres"
        }
        _ => {
            disk.fill();
            std::thread::sleep(rng.millis(500, 3000));
            let kind = if rng.below(3) == 0 {
                // Its worker dies and starts again while the disk is still full.
                let (port, name) = stop_worker(c, SMALL_DISK_WORKER);
                let again = c.spawn_worker(port, &name, "default");
                c.workers.insert(SMALL_DISK_WORKER, again);
                "worker disk full, worker restarted on it"
            } else {
                "worker disk full"
            };
            std::thread::sleep(rng.millis(0, 1000));
            disk.free();
            kind
        }
    }
}

/// The partition campaign (module doc): a cluster on separate hosts with three workers,
/// ticking diamonds and a ticking schedule, partitions and process faults at random
/// moments; after each round the fault harness's checks and the marker checker's.
#[test]
fn a_randomized_partition_campaign_runs_each_task_once() {
    let Some(mut c) = Cluster::start_hosts("partition_campaign", &["default"; 3]) else {
        return;
    };
    let rounds = rounds();
    let mut rng = Lcg::for_test("partition_campaign");
    let markers = c.dir.path().join("markers");
    std::fs::create_dir(&markers).unwrap();
    c.apply(&partition::ticking(
        "diamond",
        &c.execs,
        &markers,
        &partition::DIAMOND,
    ));
    // A tick runs 0.3 s.
    c.apply(
        &partition::ticking("tick", &c.execs, &markers, &partition::TICK)
            .replace("t_tick: '20'", "t_tick: '3'"),
    );
    let (status, schedule) = c.api.post(
        "/projects/default/workflows/tick/schedules",
        r#"{"cron": "*/2 * * * * *", "misfire": "run_once"}"#,
    );
    assert_eq!(status, 201, "{schedule}");
    let mut ticks_checked = 0;
    let mut masters_started = 0;
    let mut faults: BTreeMap<String, usize> = BTreeMap::new();
    let (mut commands, mut ids) = (vec![], vec![]);
    let mut instances = 0;
    // Executions that ended on a cut-off worker before its lease lapsed, unreported, and
    // ran again elsewhere (at-least-once; never at once).
    let mut unreported = 0;
    for round in 1..=rounds {
        let cmds: Vec<i64> = (0..4)
            .map(|_| {
                // Each task runs 0.5 to 2 s.
                let mut t = || (5 + rng.below(16)).to_string();
                let p = json!({ "t_a": t(), "t_b": t(), "t_c": t(), "t_d": t() });
                c.submit("diamond", p)
            })
            .collect();
        let round_ids: Vec<i64> = cmds.iter().map(|cmd| c.instance_of(*cmd)).collect();
        for _ in 0..1 + rng.below(2) {
            // Scenario, not a wait: the faults land at random moments of the runs.
            std::thread::sleep(rng.millis(200, 1500));
            let kind = inject_on_hosts(&mut c, &mut rng, &mut masters_started);
            c.log(&format!("round {round}: {kind}"));
            *faults.entry(kind).or_default() += 1;
        }
        c.check_runs(&round_ids, &DIAMOND_TASKS, false);
        unreported +=
            partition::check_markers_unreported(&c, &markers, &round_ids, &partition::DIAMOND);
        let ticks = c.instances_after("tick", ticks_checked);
        c.check_runs(&ticks, &["tick"], false);
        unreported += partition::check_markers_unreported(&c, &markers, &ticks, &partition::TICK);
        ticks_checked = ticks.iter().copied().max().unwrap_or(ticks_checked);
        instances += round_ids.len() + ticks.len();
        commands.extend(cmds);
        ids.extend(round_ids);
    }
    let (status, body) = c.api.post(
        &format!(
            "/projects/default/workflows/tick/schedules/{}/disable",
            schedule["id"]
        ),
        "",
    );
    assert_eq!(status, 200, "{body}");
    c.check_commands("diamond", &commands, &ids);
    let fired = c.db.query(
        "SELECT schedule_time, count(*) FROM (SELECT schedule_time FROM workflow_instance \
         WHERE schedule_time IS NOT NULL UNION ALL SELECT schedule_time FROM command \
         WHERE schedule_time IS NOT NULL) t GROUP BY schedule_time HAVING count(*) > 1",
    );
    assert_eq!(fired.trim(), "", "schedule times fired twice (time|runs)");
    let executions = partition::executions(&markers).len();
    c.log(&format!(
        "partition campaign: {rounds} rounds, {instances} instances, {executions} executions \
         ({unreported} ended unreported on a cut-off worker and ran again), faults {faults:?}, \
         violations 0"
    ));
}

/// Injects one fault of the partition campaign drawn from `rng`; returns its kind. Two
/// thirds are partitions: a node cut from some of its peers (both ways, or one way: what
/// it sends dropped, or what it hears), healed after 0.5 to 8 s.
fn inject_on_hosts(c: &mut Cluster, rng: &mut Lcg, masters_started: &mut usize) -> String {
    let kind = match rng.below(9) {
        0..6 => return partition(c, rng),
        6 => {
            let victim = c.masters.remove(rng.below(c.masters.len()));
            victim.proc.signal("KILL");
            drop(victim);
            let name = format!("master-p{masters_started}");
            *masters_started += 1;
            let m = c.spawn_node_on(5678, &name, &["master"]);
            c.masters.push(m);
            "master SIGKILL"
        }
        7 => {
            let i = rng.below(c.workers.len());
            let (port, name) = stop_worker(c, i);
            std::thread::sleep(rng.millis(0, 1000));
            let again = c.spawn_worker(port, &name, "default");
            c.workers.insert(i, again);
            "worker SIGKILL and restart"
        }
        // Not a worker SIGSTOP: its task processes go on while their copies run elsewhere
        // (at-least-once, RELIABILITY.md), which the marker check would count as overlap.
        8 if rng.below(2) == 0 => {
            let victim = &c.masters[rng.below(c.masters.len())];
            victim.proc.signal("STOP");
            std::thread::sleep(rng.millis(500, 4000));
            victim.proc.signal("CONT");
            "master SIGSTOP"
        }
        _ => {
            c.kill_etcd();
            std::thread::sleep(rng.millis(200, 1500));
            c.restart_etcd();
            "etcd restart"
        }
    };
    kind.to_string()
}

/// Cuts a random node from some of its peers, one way or both, and heals it after 0.5 to
/// 8 s; returns what it did.
fn partition(c: &Cluster, rng: &mut Lcg) -> String {
    let (way, how) = [
        (Way::Both, "both ways"),
        (Way::Out, "one way: what it sends"),
        (Way::In, "one way: what it hears"),
    ][rng.below(3)];
    let hosts = |nodes: &[Node]| -> Vec<Peer> {
        nodes.iter().map(|n| Peer::host(&c.host(&n.name))).collect()
    };
    let pick = |nodes: &[Node], i: usize| -> (String, Vec<Peer>) {
        let others: Vec<Peer> = nodes
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, n)| Peer::host(&c.host(&n.name)))
            .collect();
        (nodes[i].name.clone(), others)
    };
    let (node, peers, what) = match rng.below(6) {
        0 => {
            let (m, _) = pick(&c.masters, rng.below(c.masters.len()));
            (m, vec![c.etcd_peer()], "master cut from etcd")
        }
        1 => {
            let (m, _) = pick(&c.masters, rng.below(c.masters.len()));
            (m, vec![c.postgres_peer()], "master cut from Postgres")
        }
        2 => {
            let (m, mut peers) = pick(&c.masters, rng.below(c.masters.len()));
            peers.extend(hosts(&c.workers));
            (
                m,
                peers,
                "master cut from the other masters and the workers",
            )
        }
        3 => {
            let (w, _) = pick(&c.workers, rng.below(c.workers.len()));
            (w, vec![c.etcd_peer()], "worker cut from etcd")
        }
        4 => {
            let (w, _) = pick(&c.workers, rng.below(c.workers.len()));
            (w, hosts(&c.masters), "worker cut from the masters")
        }
        _ => {
            let (w, _) = pick(&c.workers, rng.below(c.workers.len()));
            let mut peers = hosts(&c.masters);
            peers.push(c.etcd_peer());
            (w, peers, "worker cut from etcd and the masters")
        }
    };
    let host = c.host(&node);
    for p in &peers {
        c.net().cut(&host, *p, way);
    }
    let held = rng.millis(500, 8000);
    c.log(&format!("cut {node}: {what}, {how}, for {held:?}"));
    std::thread::sleep(held);
    c.net().heal_all();
    format!("{what}, {how}")
}
