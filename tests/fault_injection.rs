//! Fault injection on a real cluster: etcd, a fresh Postgres database, `shoal api-server`,
//! two masters and three workers, each its own process. A master or a worker is killed
//! with SIGKILL, a master is frozen with SIGSTOP past its lease and resumed, etcd is
//! killed and restarted, Postgres is crashed and restarted, and a task waits for a worker group that has no worker yet;
//! a master driving a serial workflow's run and a task-group slot holder is killed, one
//! driving a wait, a callback and a long delay is killed, one driving a foreach and a
//! do_while loop is killed, a worker is killed after a task ended but before its
//! master (frozen) acked the end, a worker is killed for good after its tasks ended (their
//! logs are read from the store), and a master's connection to Postgres is cut right after
//! its COMMITs reached the server (commits of unknown outcome); external tasks, taken and
//! not, outlive the master that offered them; a worker is cut from etcd (packets
//! dropped, connections open) while its master still reaches it.
//!
//! Every task appends `start <instance> <task> <task-instance id>` before its work and
//! `end ...` after it to one shared file, so the suite counts real executions and checks
//! them against the task rows the API reports (each attempt is its own row and id):
//! every instance ends `success`, each task has exactly one `success` row, that attempt
//! ran exactly once, no row is left in a non-final state, and each command became
//! exactly one instance. Where no worker died or lost its lease, nothing at all ran twice.
//!
//! The victims and the moments are drawn from a seed printed by every test; rerun with
//! `SHOAL_FAULT_SEED=<seed>` to repeat a draw (timing still varies), and with
//! `SHOAL_FAULT_KEEP=1` to keep every process log and the execution log.
//!
//! Postgres is restarted on a server of that test's own (the other tests share one server,
//! a database each).
//!
//! The harness (the cluster, faults, checks) is in `support/fault.rs`; this file holds the
//! scenarios.

#[path = "support/callback_server.rs"]
mod callback_server;
#[path = "support/fault.rs"]
mod fault;
mod support;

use fault::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use support::{Lcg, PgProxy, TcpHole, TestDb, free_port};

/// Two rounds: a master is killed while it drives instances whose tasks are out on the
/// workers and while both masters claim and dispatch a storm of short instances; a new
/// master joins; then the master that took over is killed the same way, so what it took
/// over is orphaned a second time, this time while the database stalls writes to task
/// rows (so that tasks it handed to workers are not recorded yet when it dies).
#[test]
fn a_killed_master_s_instances_are_taken_over_and_finish() {
    let mut rng = Lcg::for_test("master_kill");
    let mut c = Cluster::start("master_kill", &["default"; 3]);
    c.apply(&diamond(&c.execs));
    let mut live: Vec<usize> = vec![0, 1];
    let mut commands: Vec<i64> = vec![];
    // Per killed master: its address and when it died (ms since the epoch).
    let mut dead: Vec<(String, i64)> = vec![];
    // Per orphaned instance: its epoch when its master died.
    let mut orphaned: BTreeMap<i64, i64> = BTreeMap::new();
    for round in 1..=2 {
        let sleepy: Vec<i64> = (0..5).map(|_| c.submit_diamond(&mut rng)).collect();
        let sleepy_ids: Vec<i64> = sleepy.iter().map(|cmd| c.instance_of(*cmd)).collect();
        commands.extend(sleepy);
        c.wait_running(&sleepy_ids);
        // Scenario, not a wait: the fault lands at a random moment of the run.
        std::thread::sleep(rng.millis(0, 800));
        let driving: Vec<usize> = masters_driving(&c, &sleepy_ids)
            .into_iter()
            .filter(|m| live.contains(m))
            .collect();
        assert!(
            !driving.is_empty(),
            "no live master drives a running instance:{}",
            c.describe(&sleepy_ids)
        );
        let v = driving[rng.below(driving.len())];
        live.retain(|m| *m != v);
        let victim = c.masters[v].addr.clone();
        let survivors: Vec<String> = live.iter().map(|m| c.masters[*m].addr.clone()).collect();
        let kill_after = rng.millis(300, 1200);

        // The kill lands while the masters claim commands and dispatch at full speed: a
        // storm of instances whose tasks do not sleep is started around it.
        let (more, t_kill) = std::thread::scope(|s| {
            let storm = storm(s, &c);
            let late = submit_during(s, &c, &mut rng, 3);
            // Scenario: the kill lands this far into the storm.
            std::thread::sleep(kill_after);
            // Round 2: the database stalls writes to task rows around the kill (as an
            // fsync or lock stall would); dispatches go on, their records wait.
            let stall = (round == 2).then(|| {
                let stall = c.stall_task_writes(Duration::from_millis(800));
                // Not a wait for the lock (it is held): the kill lands mid-stall, after the
                // master handed tasks to workers whose records now wait.
                std::thread::sleep(Duration::from_millis(400));
                stall
            });
            c.masters[v].proc.signal("KILL");
            let t_kill = Instant::now();
            c.log(&format!(
                "round {round}: SIGKILL {} ({victim}); {survivors:?} survive",
                c.masters[v].name
            ));
            if let Some(mut stall) = stall {
                let status = stall.wait().unwrap();
                assert!(status.success(), "the stall transaction failed");
            }
            let mut more = storm.join().unwrap();
            more.extend(late.join().unwrap());
            (more, t_kill)
        });
        commands.extend(more);
        dead.push((
            victim.clone(),
            chrono::Utc::now().timestamp_millis() - t_kill.elapsed().as_millis() as i64,
        ));
        // A commit the victim had in flight settles within moments; after that, what it
        // drove is frozen until a survivor takes it. A grace period: nothing observable
        // says the dead process's last commit is through.
        std::thread::sleep(Duration::from_millis(300));
        let orphans = c.owned(&victim, "running");
        let orphan_ids: Vec<i64> = orphans.keys().copied().collect();
        c.log(&format!(
            "round {round}: orphaned instances (id: epoch): {orphans:?}"
        ));
        orphaned.extend(orphans);
        if orphan_ids.is_empty() {
            c.log("the victim's instances all ended before the kill: nothing to take over");
        } else {
            let taken = c.wait_until(
                &format!(
                    "a survivor {survivors:?} to take over an instance of the killed {victim}"
                ),
                TAKEOVER_TIMEOUT,
                &orphan_ids,
                || {
                    orphan_ids.iter().copied().find(|id| {
                        let m = c.instance(*id)["master"].as_str().unwrap_or("").to_string();
                        survivors.contains(&m)
                    })
                },
            );
            eprintln!(
                "[master_kill] round {round}: takeover of instance {taken} {:.2}s after the kill (lease TTL {LEASE_TTL}s)",
                t_kill.elapsed().as_secs_f64()
            );
        }
        if round == 1 {
            let m = c.spawn_node("master2", &["master"]);
            c.log(&format!("master2 joined: {}", m.addr));
            c.masters.push(m);
            live.push(2);
        }
    }

    let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    let t_end = Instant::now();
    let insts = c.check_runs(&ids, &DIAMOND_TASKS, true);
    eprintln!(
        "[master_kill] all {} instances checked {:.2}s after the last kill",
        ids.len(),
        t_end.elapsed().as_secs_f64()
    );
    c.check_commands("diamond", &commands, &ids);
    for (id, epoch) in &orphaned {
        assert!(
            c.epoch(*id) > *epoch,
            "instance {id} was orphaned at epoch {epoch}: taking it over bumps the epoch:{}",
            c.describe(&[*id])
        );
    }
    // What a killed master still owns, it finished before it died: everything else was
    // taken over and finished by a live master.
    for (master, died_ms) in &dead {
        for inst in insts.iter().filter(|i| i["master"] == master.as_str()) {
            let ended = chrono::DateTime::parse_from_rfc3339(inst["ended_at"].as_str().unwrap())
                .unwrap()
                .timestamp_millis();
            assert!(
                ended <= died_ms + 1000,
                "instance {} ended {}ms after its master {master} was killed, yet no master took it over: {inst}",
                inst["id"],
                ended - died_ms
            );
        }
    }
}

#[test]
fn a_killed_worker_s_tasks_run_again_elsewhere() {
    let mut rng = Lcg::for_test("worker_kill");
    let c = Cluster::start("worker_kill", &["default"; 3]);
    c.apply(&diamond(&c.execs));
    let mut commands: Vec<i64> = (0..6).map(|_| c.submit_slow_diamond(&mut rng)).collect();
    let sleepy: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    c.wait_running(&sleepy);
    // Scenario, not a wait: the fault lands at a random moment of the run.
    std::thread::sleep(rng.millis(0, 600));
    // The worker dies while tasks run on it and while a storm of short instances is being
    // dispatched to every worker.
    let kill_after = rng.millis(300, 1200);
    let (more, victim, lost, sure, t_kill) = std::thread::scope(|s| {
        let storm = storm(s, &c);
        // Scenario: the kill lands this far into the storm.
        std::thread::sleep(kill_after);
        // The victim runs a task that still sleeps for a while: that attempt is surely lost.
        let (running, now) = c.wait_until(
            "a task with at least 300 ms of sleep left",
            Duration::from_secs(30),
            &sleepy,
            || {
                let running = c.running_attempts(&sleepy);
                let now = chrono::Utc::now().timestamp_millis();
                running
                    .iter()
                    .any(|r| r.sleeps_until_ms > now + 300)
                    .then_some((running, now))
            },
        );
        let busy: Vec<usize> = (0..c.workers.len())
            .filter(|w| {
                running
                    .iter()
                    .any(|r| r.sleeps_until_ms > now + 300 && r.worker == c.workers[*w].addr)
            })
            .collect();
        let v = busy[rng.below(busy.len())];
        let victim = c.workers[v].addr.clone();
        c.workers[v].proc.signal("KILL");
        let t_kill = Instant::now();
        let killed_ms = chrono::Utc::now().timestamp_millis();
        let lost: Vec<&Running> = running.iter().filter(|r| r.worker == victim).collect();
        let sure: Vec<i64> = lost
            .iter()
            .filter(|r| r.sleeps_until_ms > killed_ms + 100)
            .map(|r| r.id)
            .collect();
        let lost: Vec<(i64, i64)> = lost.iter().map(|r| (r.id, r.instance)).collect();
        c.log(&format!(
            "SIGKILL {} ({victim}) while it ran attempts (id, instance) {lost:?}, of which {sure:?} still sleep",
            c.workers[v].name
        ));
        (storm.join().unwrap(), victim, lost, sure, t_kill)
    });
    commands.extend(more);
    let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    let lost_instances: Vec<i64> = lost.iter().map(|l| l.1).collect();
    let state_of = |id: i64| -> String {
        c.api.get(&format!("/task-instances/{id}"))["state"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    c.wait_until(
        &format!("the attempts {sure:?} of the killed worker to become need_fault_tolerance"),
        TAKEOVER_TIMEOUT,
        &lost_instances,
        || {
            sure.iter()
                .all(|id| state_of(*id) == "need_fault_tolerance")
                .then_some(())
        },
    );
    eprintln!(
        "[worker_kill] lost attempts marked need_fault_tolerance {:.2}s after the kill (lease TTL {LEASE_TTL}s)",
        t_kill.elapsed().as_secs_f64()
    );

    let insts = c.check_runs(&ids, &DIAMOND_TASKS, false);
    c.check_commands("diamond", &commands, &ids);
    let execs = c.executions();
    for (id, instance) in &lost {
        let state = state_of(*id);
        assert!(
            state == "success" || state == "need_fault_tolerance",
            "attempt {id} running on the killed worker ended {state}:{}",
            c.describe(&[*instance])
        );
        assert!(
            execs.iter().any(|e| e.start && e.tid == *id),
            "attempt {id} was reported running, so it started:{}",
            c.describe(&[*instance])
        );
    }
    let mut lost_count = 0;
    for inst in &insts {
        let rows = inst["tasks"].as_array().unwrap();
        for r in rows.iter().filter(|r| r["state"] == "need_fault_tolerance") {
            lost_count += 1;
            assert_eq!(
                r["worker"],
                victim.as_str(),
                "only the killed worker's attempts are lost: {inst}"
            );
            let next = rows
                .iter()
                .find(|n| {
                    n["name"] == r["name"] && n["attempt"] == r["attempt"].as_i64().unwrap() + 1
                })
                .unwrap_or_else(|| {
                    panic!(
                        "attempt {} was lost: a new attempt follows it: {inst}",
                        r["id"]
                    )
                });
            assert_ne!(
                next["worker"],
                victim.as_str(),
                "the new attempt runs on a live worker: {inst}"
            );
        }
    }
    assert!(
        lost_count >= 1,
        "tasks were running on the killed worker, some attempt is need_fault_tolerance: {lost:?}"
    );
    eprintln!(
        "[worker_kill] {lost_count} attempts ran again; all {} instances ended {:.2}s after the kill",
        ids.len(),
        t_kill.elapsed().as_secs_f64()
    );
}

#[test]
fn a_master_frozen_past_its_lease_is_fenced_out_when_it_resumes() {
    let mut rng = Lcg::for_test("master_stop");
    let c = Cluster::start("master_stop", &["default"; 3]);
    c.apply(&diamond(&c.execs));
    let mut commands: Vec<i64> = (0..6).map(|_| c.submit_diamond(&mut rng)).collect();
    let first: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    c.wait_running(&first);
    // Scenario, not a wait: the fault lands at a random moment of the run.
    std::thread::sleep(rng.millis(0, 600));
    let driving = masters_driving(&c, &first);
    assert!(
        !driving.is_empty(),
        "no master drives a running instance:{}",
        c.describe(&first)
    );
    let v = driving[rng.below(driving.len())];
    let (victim, survivor) = (c.masters[v].addr.clone(), c.masters[1 - v].addr.clone());
    // The master freezes in the middle of claiming and dispatching a storm of short
    // instances: when it resumes, it still holds queued tasks and unsent writes.
    let stop_after = rng.millis(300, 1200);
    let (storm, t_stop) = std::thread::scope(|s| {
        let storm = storm(s, &c);
        // Scenario: the stop lands this far into the storm.
        std::thread::sleep(stop_after);
        c.masters[v].proc.signal("STOP");
        let t_stop = Instant::now();
        c.log(&format!(
            "SIGSTOP {} ({victim}); {survivor} should take over",
            c.masters[v].name
        ));
        (storm.join().unwrap(), t_stop)
    });
    commands.extend(storm);
    // A grace period, as for a kill: a commit the frozen master had in flight settles,
    // and nothing observable says when.
    std::thread::sleep(Duration::from_millis(300).saturating_sub(t_stop.elapsed()));
    let frozen = c.owned(&victim, "running");
    let frozen_ids: Vec<i64> = frozen.keys().copied().collect();
    c.log(&format!("frozen instances (id: epoch): {frozen:?}"));
    c.wait_until(
        &format!("{survivor} to take over every instance of the frozen {victim}"),
        TAKEOVER_TIMEOUT,
        &frozen_ids,
        || {
            frozen_ids
                .iter()
                .all(|id| c.instance(*id)["master"] == survivor.as_str())
                .then_some(())
        },
    );
    eprintln!(
        "[master_stop] {} instances taken over {:.2}s after SIGSTOP (lease TTL {LEASE_TTL}s)",
        frozen_ids.len(),
        t_stop.elapsed().as_secs_f64()
    );
    for (id, epoch) in &frozen {
        assert_eq!(
            c.epoch(*id),
            epoch + 1,
            "the takeover bumped the epoch of {id}"
        );
    }
    // Tasks end while the frozen master cannot answer, so calls wait for it in its
    // socket. It resumes before the workers' 10 s call timeout gives up on them. The
    // sleep is how long it stays frozen: scenario, not a wait.
    let more = rng.millis(300, 2000);
    std::thread::sleep(more.min(Duration::from_secs(8).saturating_sub(t_stop.elapsed())));
    c.masters[v].proc.signal("CONT");
    c.log(&format!(
        "SIGCONT {} after {:.2}s",
        c.masters[v].name,
        t_stop.elapsed().as_secs_f64()
    ));
    // The resumed master is a master again: it registers anew and claims work.
    std::thread::scope(|s| {
        let late = submit_during(s, &c, &mut rng, 4);
        commands.extend(late.join().unwrap());
    });

    let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    let insts = c.check_runs(&ids, &DIAMOND_TASKS, true);
    c.check_commands("diamond", &commands, &ids);
    for (id, epoch) in &frozen {
        assert_eq!(
            find(&insts, *id)["master"],
            survivor.as_str(),
            "instance {id} stays with the master that took it over:{}",
            c.describe(&ids)
        );
        assert_eq!(c.epoch(*id), epoch + 1, "nobody took {id} back");
    }
    // Late writes of the resumed master would show up as changes after the end: a window
    // in which nothing may change, not a wait.
    std::thread::sleep(Duration::from_millis(1500));
    for (before, id) in insts.iter().zip(&ids) {
        let after = c.instance(*id);
        assert_eq!(
            &after, before,
            "instance {id} changed after it ended: was {before}, is {after}"
        );
    }
    c.check_runs(&ids, &DIAMOND_TASKS, true);
}

#[test]
fn the_cluster_recovers_from_an_etcd_restart() {
    let mut rng = Lcg::for_test("etcd_restart");
    let mut c = Cluster::start("etcd_restart", &["default"; 3]);
    c.apply(&diamond(&c.execs));
    let mut commands: Vec<i64> = (0..6).map(|_| c.submit_diamond(&mut rng)).collect();
    let first: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    c.wait_running(&first);
    // Scenario, not a wait: the fault lands at a random moment of the run.
    std::thread::sleep(rng.millis(0, 600));
    c.kill_etcd();
    let t_kill = Instant::now();
    // Down for longer than a lease TTL, while commands keep arriving and the restart
    // comes in the middle of a storm of short instances.
    let ttl_ms = lease_ttl().as_millis() as u64;
    let down = rng.millis(ttl_ms + 500, ttl_ms + 2500);
    c.log(&format!("SIGKILL etcd for {down:?}"));
    std::thread::scope(|s| {
        let late = submit_during(s, &c, &mut rng, 2);
        // Scenario: etcd stays down for `down`; the storm comes shortly before it returns.
        std::thread::sleep(down.saturating_sub(Duration::from_millis(500)));
        let storm = storm(s, &c);
        // The rest of the outage.
        std::thread::sleep(down.saturating_sub(t_kill.elapsed()));
        c.restart_etcd();
        commands.extend(late.join().unwrap());
        commands.extend(storm.join().unwrap());
    });
    let t_back = Instant::now();
    c.log("etcd restarted on the same ports and data");
    std::thread::scope(|s| {
        let late = submit_during(s, &c, &mut rng, 3);
        commands.extend(late.join().unwrap());
    });
    let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    // etcd stays down longer than the lease TTL, so every worker gives up what it ran
    // (it cannot know whether masters already count it dead): those attempts run again as
    // new attempts, each attempt at most once.
    c.check_runs(&ids, &DIAMOND_TASKS, false);
    eprintln!(
        "[etcd_restart] all {} instances ended {:.2}s after etcd came back",
        ids.len(),
        t_back.elapsed().as_secs_f64()
    );
    c.check_commands("diamond", &commands, &ids);

    // The masters follow the registry again: a worker that joins now gets work.
    let fresh = c.add_worker("worker_fresh", "fresh");
    c.apply(&dag("fresh", &c.execs, &[("f", &[], "fresh")]));
    let cmd = c.submit_naps("fresh", &["f"], &mut rng);
    let id = c.instance_of(cmd);
    let insts = c.check_runs(&[id], &["f"], true);
    assert_eq!(
        insts[0]["tasks"][0]["worker"],
        fresh.as_str(),
        "the task of group fresh ran on the worker that joined after the restart"
    );
    for n in c.masters.iter_mut().chain(c.workers.iter_mut()) {
        assert!(!n.proc.exited(), "{} died during the etcd outage", n.name);
    }
}

#[test]
fn a_task_waits_for_a_worker_of_its_group_and_runs_when_one_joins() {
    let mut rng = Lcg::for_test("group_join");
    let mut c = Cluster::start("group_join", &["default"; 3]);
    let tasks = ["a", "g", "d"];
    c.apply(&dag(
        "gpu",
        &c.execs,
        &[("a", &[], ""), ("g", &["a"], "gpu"), ("d", &["g"], "")],
    ));
    let commands: Vec<i64> = (0..2)
        .map(|_| c.submit_naps("gpu", &tasks, &mut rng))
        .collect();
    let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    c.wait_until(
        "task g (group gpu) of every instance to be submitted",
        Duration::from_secs(60),
        &ids,
        || {
            (c.rows_in(&ids, "submitted")
                .iter()
                .filter(|r| r["name"] == "g")
                .count()
                == ids.len())
            .then_some(())
        },
    );
    // A window, not a wait: g must stay queued while no gpu worker exists.
    std::thread::sleep(rng.millis(1500, 3000));
    for id in &ids {
        let inst = c.instance(*id);
        assert_eq!(inst["state"], "running", "{inst}");
        let g: Vec<&Value> = inst["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"] == "g")
            .collect();
        assert!(
            g.len() == 1 && g[0]["state"] == "submitted" && g[0]["worker"].is_null(),
            "with no gpu worker, g waits in the queue: {inst}"
        );
        assert!(
            g[0]["message"]
                .as_str()
                .is_some_and(|m| m.contains("group 'gpu'")),
            "the waiting task says why it waits: {inst}"
        );
    }
    assert!(
        !c.executions().iter().any(|e| e.task == "g"),
        "g did not run anywhere"
    );
    let gpu = c.add_worker("worker_gpu", "gpu");
    let t_join = Instant::now();
    c.log(&format!("gpu worker joined: {gpu}"));
    let insts = c.check_runs(&ids, &tasks, true);
    eprintln!(
        "[group_join] instances ended {:.2}s after the gpu worker joined",
        t_join.elapsed().as_secs_f64()
    );
    c.check_commands("gpu", &commands, &ids);
    for inst in &insts {
        for t in inst["tasks"].as_array().unwrap() {
            assert_eq!(
                t["worker"] == gpu.as_str(),
                t["name"] == "g",
                "g and only g runs on the gpu worker: {inst}"
            );
        }
    }
}

#[test]
fn a_worker_restarted_under_its_address_has_its_lost_attempts_run_again() {
    let mut rng = Lcg::for_test("worker_restart");
    let mut c = Cluster::start("worker_restart", &["default"]);
    c.apply(&dag("slow", &c.execs, &[("s", &[], ""), ("t", &["s"], "")]));
    let cmd = c.submit("slow", serde_json::json!({"n_s": "3"}));
    let id = c.instance_of(cmd);
    c.wait_until("task s to run", Duration::from_secs(30), &[id], || {
        (!c.rows_in(&[id], "running").is_empty()).then_some(())
    });
    // Scenario, not a wait: the fault lands at a random moment of the run.
    std::thread::sleep(rng.millis(0, 500));
    // Back on the same address well within the lease TTL: its registry entry never goes
    // away, so nothing says "worker left"; only its new start time tells.
    let old = c.workers.remove(0);
    let port: u16 = old.addr.rsplit(':').next().unwrap().parse().unwrap();
    old.proc.signal("KILL");
    drop(old);
    let t_kill = Instant::now();
    let again = c.spawn_worker(port, "worker0", "default");
    c.log(&format!(
        "worker0 restarted on {} {:.2}s after SIGKILL",
        again.addr,
        t_kill.elapsed().as_secs_f64()
    ));
    c.workers.push(again);
    let insts = c.check_runs(&[id], &["s", "t"], false);
    let s: Vec<&Value> = insts[0]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "s")
        .collect();
    assert_eq!(s.len(), 2, "s ran again as a second attempt: {}", insts[0]);
    assert_eq!(s[0]["state"], "need_fault_tolerance", "{}", insts[0]);
    assert!(
        s[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no longer had this attempt")),
        "the lost attempt says why: {}",
        insts[0]
    );
    eprintln!(
        "[worker_restart] instance ended {:.2}s after the worker was killed",
        t_kill.elapsed().as_secs_f64()
    );
}

#[test]
fn the_cluster_rides_out_a_postgres_crash_and_restart() {
    let mut rng = Lcg::for_test("postgres_restart");
    let mut c = Cluster::start_on(TestDb::private(), "postgres_restart", &["default"; 3]);
    c.apply(&diamond(&c.execs));
    let mut commands: Vec<i64> = (0..6).map(|_| c.submit_slow_diamond(&mut rng)).collect();
    let sleepy: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    c.wait_running(&sleepy);
    // Scenario, not a wait: the fault lands at a random moment of the run.
    std::thread::sleep(rng.millis(0, 800));
    // Tasks keep running on the workers while the database is gone; their events wait in
    // the workers' outboxes, the masters' commits fail and are tried again.
    let down = rng.millis(500, 4000);
    let server = c.db.server.as_ref().unwrap();
    c.log(&format!("Postgres stopped (immediate) for {down:?}"));
    server.stop();
    // Scenario: the outage lasts `down`.
    std::thread::sleep(down);
    server.start_again();
    let t_back = Instant::now();
    c.log("Postgres started again");
    std::thread::scope(|s| {
        let late = submit_during(s, &c, &mut rng, 4);
        commands.extend(late.join().unwrap());
    });
    let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    c.check_runs(&ids, &DIAMOND_TASKS, true);
    eprintln!(
        "[postgres_restart] all {} instances ended {:.2}s after Postgres came back",
        ids.len(),
        t_back.elapsed().as_secs_f64()
    );
    c.check_commands("diamond", &commands, &ids);
    for n in c.masters.iter_mut().chain(c.workers.iter_mut()) {
        assert!(
            !n.proc.exited(),
            "{} died during the Postgres outage",
            n.name
        );
    }
}

/// A waiting serial run and a task waiting for a task-group slot outlive the master that
/// drives what they wait for: the survivor takes the running instances over, and when
/// they end the waiting ones start, one at a time, each exactly once.
#[test]
fn serial_runs_and_task_group_waiters_survive_a_master_kill() {
    let c = Cluster::start("serial_kill", &["default"]);
    let (runs, slots) = (c.dir.path().join("runs"), c.dir.path().join("slots"));
    let (status, body) = c.api.post("/task-groups", r#"{"name": "one", "slots": 1}"#);
    assert_eq!(status, 201, "{body}");
    let task = |file: &Path, group: &str| {
        let command = support::timed(file, "${system.workflow.instance.id}", "2");
        format!("- {{ name: t, type: shell, {group}command: '{command}' }}\n")
    };
    c.apply(&format!(
        "name: queue\nexecution_type: serial_wait\ntasks:\n{}",
        task(&runs, "")
    ));
    c.apply(&format!(
        "name: grouped\ntasks:\n{}",
        task(&slots, "task_group: one, ")
    ));
    let commands: Vec<i64> = ["queue", "queue", "grouped", "grouped"]
        .iter()
        .map(|w| c.submit(w, json!({})))
        .collect();
    let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    c.wait_until(
        "a run waiting its turn",
        Duration::from_secs(30),
        &ids,
        || (c.instance(ids[1])["state"] == "serial_wait").then_some(()),
    );
    let running = c.wait_running(&[ids[0]]);
    assert_eq!(running.len(), 1);
    let owner = c.instance(ids[0])["master"].as_str().unwrap().to_string();
    let victim = c.masters.iter().find(|m| m.addr == owner).unwrap();
    victim.proc.signal("KILL");
    c.log(&format!(
        "SIGKILL {} ({owner}), which drives instance {}",
        victim.name, ids[0]
    ));

    for inst in c.wait_all_end(&ids) {
        assert_eq!(inst["state"], "success", "{}", c.describe(&ids));
    }
    for file in [&runs, &slots] {
        let spans = support::intervals(file);
        assert_eq!(spans.len(), 2, "{spans:?}");
        assert_eq!(support::max_overlap(&spans), 1, "{spans:?}");
    }
}

/// Milliseconds between two RFC 3339 times of a task row.
fn between(row: &Value, from: &str, to: &str) -> i64 {
    let at = |k: &str| {
        let t = row[k].as_str().unwrap_or_else(|| panic!("{k} of {row}"));
        chrono::DateTime::parse_from_rfc3339(t)
            .unwrap()
            .timestamp_millis()
    };
    at(to) - at(from)
}

/// A wait, a callback and a 12 s delay are out when the master driving them is killed
/// 5 s in: the master that takes over keeps their deadlines (counted from when they
/// began, so they end about 12 s in, not 12 s after the takeover), does not send the
/// callback request again, and runs the delayed task once.
#[test]
fn waits_callbacks_and_delays_keep_their_deadlines_across_a_master_kill() {
    let c = Cluster::start("deadlines", &["default"]);
    let silent = callback_server::CallbackServer::start(None);
    let ran = c.dir.path().join("ran");
    c.apply(&format!(
        r#"
name: deadlines
tasks:
  - {{ name: gate, type: wait, timeout: 12s, on_timeout: succeed }}
  - {{ name: ask, type: callback, timeout: 12s, on_timeout: succeed, callback: {{ url: "{url}" }} }}
  - {{ name: later, type: shell, delay: 12s, command: "echo later >> {f}" }}
"#,
        url = silent.url,
        f = ran.display()
    ));
    let id = c.instance_of(c.submit("deadlines", json!({})));
    c.wait_until(
        "gate and ask to wait",
        Duration::from_secs(30),
        &[id],
        || {
            let inst = c.instance(id);
            let tasks = inst["tasks"].as_array().unwrap();
            let waiting = tasks.iter().filter(|t| t["state"] == "waiting").count();
            (waiting == 2 && silent.requests().len() == 1).then_some(())
        },
    );
    std::thread::sleep(Duration::from_secs(5));
    let owner = c.instance(id)["master"].as_str().unwrap().to_string();
    let victim = c.masters.iter().find(|m| m.addr == owner).unwrap();
    victim.proc.signal("KILL");
    c.log(&format!(
        "SIGKILL {} ({owner}), which drives instance {id}",
        victim.name
    ));

    c.wait_all_end(&[id]);
    let inst = c.instance(id);
    assert_eq!(inst["state"], "success", "{}", c.describe(&[id]));
    assert_ne!(inst["master"], owner, "another master finished it");
    let row = |name: &str| {
        let tasks = inst["tasks"].as_array().unwrap();
        let rows: Vec<&Value> = tasks.iter().filter(|t| t["name"] == name).collect();
        assert_eq!(rows.len(), 1, "one attempt of {name}: {inst}");
        rows[0].clone()
    };
    // A deadline restarted by the new owner would end at least 5 + 2 (lease) + 12 s in.
    for (name, from, to) in [
        ("gate", "started_at", "ended_at"),
        ("ask", "started_at", "ended_at"),
        ("later", "submitted_at", "started_at"),
    ] {
        let took = between(&row(name), from, to);
        assert!(
            (12_000..16_000).contains(&took),
            "{name}: {took} ms from {from} to {to}: {inst}"
        );
    }
    assert!(
        row("gate")["message"]
            .as_str()
            .unwrap()
            .contains("timed out")
    );
    assert_eq!(
        silent.requests().len(),
        1,
        "the callback request was not sent again"
    );
    assert_eq!(
        std::fs::read_to_string(&ran).unwrap(),
        "later\n",
        "ran once"
    );
}

/// External tasks outlive the master that offered them: taken ones stay with their worker
/// (its heartbeats and completions go to the store, not to a master), untaken ones are
/// offered still, the master that takes the run over learns each completion, and every
/// task is completed exactly once; a repeated completion is refused.
#[test]
fn external_tasks_are_completed_exactly_once_across_a_master_kill() {
    let c = Cluster::start("external", &["default"]);
    let ran = c.dir.path().join("ran");
    let tasks: String = (0..6)
        .map(|i| format!("  - {{ name: x{i}, type: external, queue: ext, lease: 20s, params: {{ n: '{i}' }} }}\n"))
        .collect();
    let after: Vec<String> = (0..6).map(|i| format!("x{i}")).collect();
    c.apply(&format!(
        "name: external\ntasks:\n{tasks}  - {{ name: sum, type: shell, depends_on: [{}], command: 'echo ${{x0_out}} ${{x5_out}} >> {}' }}\n",
        after.join(", "),
        ran.display()
    ));
    let id = c.instance_of(c.submit("external", json!({})));
    let poll = |max: u64| -> Vec<Value> {
        let body = json!({"queues": ["ext"], "worker": "far", "max": max, "wait": "10s"});
        let (status, taken) = c.api.post("/external/poll", &body.to_string());
        assert_eq!(status, 200, "{taken}");
        taken.as_array().unwrap().clone()
    };
    let call = |task: &Value, what: &str, mut body: Value| {
        let tid = task["task_instance_id"].as_i64().unwrap();
        body["lease_token"] = task["lease_token"].clone();
        c.api
            .post(&format!("/external/{tid}/{what}"), &body.to_string())
    };
    let complete = |task: &Value| {
        let n = task["params"]["n"].as_str().unwrap();
        let out = json!({"outputs": {format!("{}_out", task["task"].as_str().unwrap()): n}});
        call(task, "complete", out)
    };
    let mut taken = Vec::new();
    while taken.len() < 3 {
        taken.extend(poll(3 - taken.len() as u64));
    }
    assert_eq!(complete(&taken[0]).0, 200);

    let owner = c.instance(id)["master"].as_str().unwrap().to_string();
    let victim = c.masters.iter().find(|m| m.addr == owner).unwrap();
    victim.proc.signal("KILL");
    c.log(&format!(
        "SIGKILL {} ({owner}), which drives instance {id}",
        victim.name
    ));

    for t in &taken[1..] {
        let (status, body) = call(t, "heartbeat", json!({}));
        assert_eq!(status, 200, "a lease outlives its master: {body}");
        assert_eq!(complete(t).0, 200);
    }
    let mut rest = Vec::new();
    while rest.len() < 3 {
        rest.extend(poll(3));
    }
    for t in &rest {
        assert_eq!(
            complete(t).0,
            200,
            "offered before the kill, taken after it"
        );
    }
    let (status, body) = complete(&taken[1]);
    assert_eq!(status, 409, "a repeated completion does not count: {body}");

    c.wait_all_end(&[id]);
    let inst = c.instance(id);
    assert_eq!(inst["state"], "success", "{}", c.describe(&[id]));
    assert_ne!(inst["master"], owner, "another master finished it");
    for name in &after {
        let rows: Vec<&Value> = (inst["tasks"].as_array().unwrap().iter())
            .filter(|t| t["name"] == name.as_str())
            .collect();
        assert_eq!(rows.len(), 1, "one attempt of {name}: {inst}");
        assert_eq!(rows[0]["state"], "success", "{inst}");
        assert_eq!(rows[0]["worker"], "far");
    }
    assert_eq!(
        std::fs::read_to_string(&ran).unwrap(),
        "0 5\n",
        "ran once, with the outputs"
    );
}

/// A foreach of 24 sleeping children (4 at once) and a do_while of 8 iterations run side
/// by side when the master driving them is killed: the master that takes over goes on
/// with the same children and the next iteration, and no child or iteration runs twice.
#[test]
fn a_foreach_and_a_loop_go_on_across_a_master_kill() {
    let c = Cluster::start("fanout_kill", &["default"]);
    let child = recorded(&c.execs, "each[${n}]", "nap");
    let step = recorded(&c.execs, "poll[${iteration}].step", "nap");
    c.apply(&format!(
        r#"
name: fan_loop
params: {{ nap: '0.4' }}
tasks:
  - {{ name: each, type: foreach,
       foreach: {{ items: "[{items}]", as: n, max_parallel: 4, task: {{ type: shell, command: '{child}' }} }} }}
  - {{ name: poll, type: do_while,
       do_while: {{ condition: "iteration < 8", max_iterations: 10,
                   tasks: [ {{ name: step, type: shell, command: '{step}' }} ] }} }}
"#,
        items = (0..24).map(|i| i.to_string()).collect::<Vec<_>>().join(", "),
    ));
    let id = c.instance_of(c.submit("fan_loop", json!({})));
    c.wait_until(
        "a few children and iterations to pass",
        Duration::from_secs(30),
        &[id],
        || {
            let passed = c.rows_in(&[id], "success");
            let named = |p: &str| {
                passed
                    .iter()
                    .filter(|r| r["name"].as_str().unwrap().starts_with(p))
                    .count()
            };
            (named("each[") >= 4 && named("poll[") >= 2).then_some(())
        },
    );
    let owner = c.instance(id)["master"].as_str().unwrap().to_string();
    let victim = c.masters.iter().find(|m| m.addr == owner).unwrap();
    victim.proc.signal("KILL");
    c.log(&format!(
        "SIGKILL {} ({owner}), which drives instance {id}",
        victim.name
    ));

    let mut tasks: Vec<String> = (0..24).map(|i| format!("each[{i}]")).collect();
    tasks.extend((1..=8).map(|k| format!("poll[{k}].step")));
    let names: Vec<&str> = tasks.iter().map(String::as_str).collect();
    let inst = c.check_runs(&[id], &names, true).remove(0);
    assert_ne!(inst["master"], owner, "another master finished it");
    let row = |name: &str| {
        let rows = inst["tasks"].as_array().unwrap();
        rows.iter().find(|r| r["name"] == name).unwrap().clone()
    };
    assert_eq!(row("each")["message"], "24 of 24 items passed");
    assert_eq!(
        row("poll")["message"],
        "8 iterations; the condition no longer holds"
    );
    let spans: Vec<Value> = inst["tasks"].as_array().unwrap().to_vec();
    assert_eq!(
        spans.len(),
        2 + 24 + 8,
        "one row per child and iteration: {inst}"
    );
}

/// A task ends while the master it reports to is frozen, and its worker is killed before
/// the end could be delivered: started again on its data dir, the worker reports the end
/// from its journal, so the task does not run again (without the journal the master finds
/// the attempt unknown and runs it a second time).
#[test]
fn a_worker_killed_before_its_task_s_end_was_acked_reports_it_after_a_restart() {
    let mut c = Cluster::start("journal_restart", &["default"]);
    c.apply(&dag("ends", &c.execs, &[("s", &[], ""), ("t", &["s"], "")]));
    let id = c.instance_of(c.submit("ends", json!({"n_s": "3"})));
    c.wait_until("task s to run", Duration::from_secs(30), &[id], || {
        (!c.rows_in(&[id], "running").is_empty()).then_some(())
    });
    // Frozen for less than its lease (2 s) if all goes to plan: s ends 0.7 s in, the
    // worker is back about a second later. Should the lease lapse anyway, the other
    // master adopts s from the restarted worker, which knows it too.
    std::thread::sleep(Duration::from_millis(2300));
    let owner = c.instance(id)["master"].as_str().unwrap().to_string();
    let frozen = c.masters.iter().find(|m| m.addr == owner).unwrap();
    frozen.proc.signal("STOP");
    c.log(&format!("SIGSTOP {} ({owner})", frozen.name));
    let ended = || c.executions().iter().any(|e| !e.start && e.task == "s");
    c.wait_until(
        "s to end on its worker",
        Duration::from_secs(10),
        &[id],
        || ended().then_some(()),
    );
    // The process has printed its end; wait until the worker has journaled it.
    let journal = c.dir.path().join("worker0").join("outbox.journal");
    c.wait_until(
        "s's end in the journal",
        Duration::from_secs(10),
        &[id],
        || {
            let len = std::fs::metadata(&journal).map_or(0, |m| m.len());
            (len > 0).then_some(())
        },
    );
    let old = c.workers.remove(0);
    let port: u16 = old.addr.rsplit(':').next().unwrap().parse().unwrap();
    old.proc.signal("KILL");
    drop(old);
    let again = c.spawn_worker(port, "worker0", "default");
    c.workers.push(again);
    let frozen = c.masters.iter().find(|m| m.addr == owner).unwrap();
    frozen.proc.signal("CONT");
    c.log("worker0 restarted; master resumed");
    let insts = c.check_runs(&[id], &["s", "t"], true);
    let s = &insts[0]["tasks"].as_array().unwrap()[0];
    assert_eq!(s["name"], "s");
    assert_eq!(s["state"], "success", "the journaled end: {}", insts[0]);
}

/// The logs of tasks that ended on a worker stay readable once that worker is gone: the
/// master kept each log's end (its last 256 KiB) with the attempt's end, and serves a log
/// kept whole from there from the start.
#[test]
fn the_logs_of_a_killed_worker_s_tasks_are_read_from_the_store() {
    let mut c = Cluster::start("kept_logs", &["default"]);
    c.apply(
        "name: chatty\ntasks:\n- { name: small, type: shell, command: 'seq 1 2000' }\n- { name: big, type: shell, command: 'seq 1 100000' }\n",
    );
    let id = c.instance_of(c.submit("chatty", json!({})));
    let inst = c.wait_all_end(&[id]).remove(0);
    assert_eq!(inst["state"], "success", "{}", c.describe(&[id]));
    let task = |name: &str| {
        let tasks = inst["tasks"].as_array().unwrap();
        tasks.iter().find(|t| t["name"] == name).unwrap()["id"]
            .as_i64()
            .unwrap()
    };
    let (small, big) = (task("small"), task("big"));
    let whole = |n: usize| (1..=n).map(|i| format!("{i}\n")).collect::<String>();
    let (source, text) = c.api.log(small);
    assert_eq!(source, "store", "an ended log kept whole needs no worker");
    assert!(text.contains(&whole(2000)), "{text}");
    let (source, text) = c.api.log(big);
    assert_eq!(
        source, "worker",
        "a log longer than its kept end is the worker's"
    );
    assert!(
        text.contains(&whole(100_000)),
        "whole while the worker is there"
    );

    let worker = c.workers.remove(0);
    worker.proc.signal("KILL");
    drop(worker);
    c.log("worker0 killed for good");
    let (source, text) = c.api.log(small);
    assert_eq!(source, "store", "the worker is gone");
    assert!(
        text.contains(&whole(2000)),
        "a small log is kept whole: {text}"
    );
    let (source, text) = c.api.log(big);
    assert_eq!(source, "store");
    let full = whole(100_000);
    assert!(full.len() > 256 * 1024);
    assert!(
        text.starts_with("[the first ") && text.contains("are only on its worker"),
        "{}",
        &text[..200]
    );
    assert!(text.ends_with("99999\n100000\n"), "the end is kept");
    let kept = &text[text.find('\n').unwrap() + 1..];
    assert_eq!(kept.len(), 256 * 1024, "the last 256 KiB");
    assert!(full.ends_with(kept));
}

/// The log of a task that was running when its worker died is not lost with it: the
/// worker sent what the log held every few seconds while it grew, and the master kept it.
#[test]
fn the_log_of_a_task_running_when_its_worker_died_is_kept() {
    let mut c = Cluster::start("running_log", &["default"]);
    c.apply(
        "name: chatty\ntasks:\n- { name: slow, type: shell, command: 'for i in $(seq 1 30); do echo line $i; sleep 0.5; done' }\n",
    );
    let id = c.instance_of(c.submit("chatty", json!({})));
    let running = c.wait_running(&[id]).remove(0);
    let tid = running["id"].as_i64().unwrap();
    // Past the first shipment (5 s after the start).
    c.wait_until(
        "the log to reach line 12",
        Duration::from_secs(30),
        &[id],
        || {
            let (_, log) = c.api.log(tid);
            log.contains("line 12\n").then_some(())
        },
    );
    let worker = c.workers.remove(0);
    worker.proc.signal("KILL");
    drop(worker);
    c.log("worker0 killed mid-task");
    c.wait_until("the attempt to be lost", TAKEOVER_TIMEOUT, &[id], || {
        let rows = c.rows_in(&[id], "need_fault_tolerance");
        rows.iter().any(|r| r["id"] == tid).then_some(())
    });
    let (source, log) = c.api.log(tid);
    assert_eq!(source, "store", "the worker is gone");
    let lines: Vec<&str> = log.lines().collect();
    assert!(
        lines.len() >= 9
            && lines
                .iter()
                .enumerate()
                .all(|(i, l)| *l == format!("line {}", i + 1)),
        "the log as it was at the last shipment, whole and in order: {log}"
    );
}

/// Commits of unknown outcome: the only master reaches Postgres through a proxy that cuts
/// its connection right after a COMMIT reached the server, eight times while diamonds
/// run. Each time the master cannot know whether its writes landed; it takes those
/// instances up again from the store, so nothing is written or run twice: every task has
/// one attempt row, and it ran once.
#[test]
fn commits_cut_after_they_reached_postgres_write_and_run_nothing_twice() {
    let mut rng = Lcg::for_test("commit_cut");
    let mut c = Cluster::start("commit_cut", &["default"]);
    let proxy = PgProxy::start(&c.db.url);
    for old in c.masters.drain(..) {
        old.proc.signal("KILL");
    }
    let through = proxy.url(&c.db.url);
    let master = c.spawn_on_db(free_port(), "master-proxied", &["master"], &through);
    c.masters.push(master);
    c.apply(&diamond(&c.execs));
    let commands: Vec<i64> = (0..6).map(|_| c.submit_diamond(&mut rng)).collect();
    let ids: Vec<i64> = commands.iter().map(|cmd| c.instance_of(*cmd)).collect();
    for _ in 0..8 {
        proxy.cut_commits(1);
        // Scenario, not a wait: the cuts land at random moments of the runs.
        std::thread::sleep(rng.millis(100, 400));
    }
    c.check_runs(&ids, &DIAMOND_TASKS, true);
    c.check_commands("diamond", &commands, &ids);
    c.log(&format!("{} commits cut", proxy.cut()));
    assert!(proxy.cut() >= 4, "only {} commits were cut", proxy.cut());
}

/// A worker cut from etcd while its master still reaches it (the partition DolphinScheduler
/// users hit: its lease lapses, a master runs its task elsewhere) kills its task before
/// the lease can lapse, so the task's work is done once; healed, it takes work again.
#[test]
fn a_worker_cut_from_etcd_kills_its_task_before_it_runs_elsewhere() {
    let c = Cluster::start("etcd_cut", &[]);
    let hole = TcpHole::start(&c.etcd_addr());
    let via_hole = format!("http://127.0.0.1:{}", hole.port);
    let cut = c.spawn_worker_via(free_port(), "cut", "edge", &via_hole);
    c.apply(&dag("cut", &c.execs, &[("long", &[], "edge")]));
    // Long enough to outlive the lease (TTL 2 s) and the takeover by far.
    let id = c.instance_of(c.submit("cut", json!({ "n_long": "8" })));
    let first = c.wait_until(
        "the task to start on the worker to be cut",
        TAKEOVER_TIMEOUT,
        &[id],
        || {
            let execs = c.executions();
            execs
                .iter()
                .find(|e| e.start && e.instance == id)
                .map(|e| e.tid)
        },
    );
    let spare = c.spawn_worker(free_port(), "spare", "edge");
    hole.cut();
    c.log(&format!(
        "cut {} from etcd while it runs attempt {first}",
        cut.addr
    ));

    let inst = c.wait_all_end(&[id]).remove(0);
    assert_eq!(inst["state"], "success", "{inst}");
    let rows = inst["tasks"].as_array().unwrap();
    let on_cut = rows.iter().find(|r| r["id"] == first).unwrap();
    assert_eq!(on_cut["worker"], cut.addr.as_str(), "{inst}");
    assert_eq!(on_cut["state"], "need_fault_tolerance", "{inst}");
    let won = rows.iter().find(|r| r["state"] == "success").unwrap();
    assert_eq!(won["worker"], spare.addr.as_str(), "{inst}");
    // The cut worker's copy was killed before its end: the work was done once.
    let execs = c.executions();
    let ends: Vec<i64> = execs.iter().filter(|e| !e.start).map(|e| e.tid).collect();
    assert_eq!(
        ends,
        [won["id"].as_i64().unwrap()],
        "one execution reached its end"
    );
    let log = cut.proc.log_text();
    assert!(log.contains("tasks of the lost lease killed"), "{log}");

    // Healed, the worker registers again and runs the next run alone.
    hole.heal();
    spare.proc.signal("KILL");
    let next = c.instance_of(c.submit("cut", json!({ "n_long": "0.1" })));
    let inst = c.wait_all_end(&[next]).remove(0);
    assert_eq!(inst["state"], "success", "{inst}");
    let ran = inst["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["state"] == "success");
    assert_eq!(ran.unwrap()["worker"], cut.addr.as_str(), "{inst}");
}
