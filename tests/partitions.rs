//! Network partitions on a cluster of separate hosts: etcd, the api-server, two masters and
//! two workers each in a network namespace of its own, Postgres through a proxy on the
//! bridge (`Cluster::start_hosts`, `testkit/src/netns.rs`). Links are cut with iptables
//! DROP rules (packets black-hole, connections stay open) and healed.
//!
//! Every task leaves a marker file per execution (start, a tick every 0.1 s, end): no two
//! executions of one task may overlap, each task of each run completes exactly once, and
//! every run ends `success` (the fault harness's checks of rows against executions too).
//!
//! Where this machine cannot make namespaces (not root), each test prints `SKIP:` with
//! the reason and passes; with `SHOAL_REQUIRE_NETNS` set (scripts/test sets it where
//! namespaces work) it fails instead.

#[path = "support/fault.rs"]
mod fault;
#[path = "support/partition.rs"]
mod partition;
mod support;

use fault::*;
use partition::*;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::{Peer, Way};

/// A cluster on hosts with two workers, the audit installed and the ticking diamond
/// applied; None where the test skips.
fn setup(test: &'static str) -> Option<(Cluster, PathBuf)> {
    prepare(Cluster::start_hosts(test, &["default", "default"])?)
}

/// The audit installed and the ticking diamond applied on `c`.
fn prepare(c: Cluster) -> Option<(Cluster, PathBuf)> {
    let markers = c.dir.path().join("markers");
    std::fs::create_dir(&markers).unwrap();
    install_audit(&c);
    c.apply(&ticking("diamond", &c.execs, &markers, &DIAMOND));
    Some((c, markers))
}

/// `n` diamonds whose tasks run `tenths` tenths of a second each; their instance ids.
fn diamonds(c: &Cluster, n: usize, tenths: u32) -> Vec<i64> {
    let t = tenths.to_string();
    let commands: Vec<i64> = (0..n)
        .map(|_| c.submit("diamond", json!({ "t_a": t, "t_b": t, "t_c": t, "t_d": t })))
        .collect();
    commands.iter().map(|cmd| c.instance_of(*cmd)).collect()
}

/// The index of the master driving the most running instances among `ids`, once one
/// drives some whose tasks are running.
fn busiest_master(c: &Cluster, ids: &[i64]) -> usize {
    c.wait_running(ids);
    (0..c.masters.len())
        .max_by_key(|m| c.owned(&c.masters[*m].addr, "running").len())
        .unwrap()
}

/// A worker running a task of `ids`, once one does: its address and its host.
fn busy_worker(c: &Cluster, ids: &[i64]) -> (String, support::Host) {
    let running = c.wait_running(ids);
    let addr = running[0]["worker"].as_str().unwrap().to_string();
    let worker = c.workers.iter().find(|w| w.addr == addr).unwrap();
    (addr, c.host(&worker.name))
}

/// Every master as the other end of a link.
fn master_peers(c: &Cluster) -> Vec<Peer> {
    c.masters
        .iter()
        .map(|m| Peer::host(&c.host(&m.name)))
        .collect()
}

/// The end every test checks: every run succeeded, each task once (rows and executions),
/// no two executions of a task overlap.
fn check_end(c: &Cluster, markers: &std::path::Path, ids: &[i64]) {
    c.check_runs(ids, &DIAMOND_TASKS, false);
    let execs = check_markers(c, markers, ids, &DIAMOND);
    c.log(&format!(
        "{} runs ended success; {} executions, {} completed, none overlapping",
        ids.len(),
        execs.len(),
        execs.iter().filter(|e| e.completed).count()
    ));
}

/// A master cut from etcd (both ways) but not from Postgres while it drives runs: its
/// lease expires and the other master takes its instances over. The cut master still
/// reaches Postgres and its workers, yet the store shows no write of it to an instance
/// after the takeover's epoch bump: the epoch fences it, not a timer.
#[test]
fn a_master_cut_from_etcd_is_fenced_by_the_owner_epoch() {
    let Some((c, markers)) = setup("master_etcd_cut") else {
        return;
    };
    let ids = diamonds(&c, 6, 25);
    let v = busiest_master(&c, &ids);
    let (victim, other) = (&c.masters[v], &c.masters[1 - v]);
    let before = c.owned(&victim.addr, "running");
    let host = c.host(&victim.name);
    c.net().cut(&host, c.etcd_peer(), Way::Both);
    c.log(&format!(
        "cut {} from etcd while it drives {before:?}",
        victim.addr
    ));
    let taken = c.wait_until(
        "the other master to take the cut master's instances over",
        TAKEOVER_TIMEOUT,
        &ids,
        || {
            let now = c.owned(&other.addr, "running");
            let mine = c.owned(&victim.addr, "running");
            let ended = |id: &i64| c.instance(*id)["state"] != "running";
            let all = before.keys().all(|id| now.contains_key(id) || ended(id));
            (mine.is_empty() && all).then_some(now)
        },
    );
    c.log(&format!("taken over: {taken:?}"));
    // The cut master's tasks end meanwhile: it has ends to write, and is refused.
    std::thread::sleep(Duration::from_secs(5));
    c.net().heal(&host, c.etcd_peer(), Way::Both);
    c.log("healed");
    check_end(&c, &markers, &ids);

    assert_fenced(&c, victim, other, before.keys());
}

/// From the store: after the commit that moved an instance of `before` to `other`, no
/// write of `victim` to that instance or its tasks.
fn assert_fenced<'a>(
    c: &Cluster,
    victim: &Node,
    other: &Node,
    before: impl Iterator<Item = &'a i64>,
) {
    let rows = audit(c);
    let mut late = vec![];
    for id in before {
        let bumped = rows.iter().position(|r| {
            let f: Vec<&str> = r.split('|').collect();
            f[2] == "workflow_instance" && f[3] == id.to_string() && f[6] == other.addr
        });
        let Some(bumped) = bumped else {
            continue; // it ended before a takeover, or none happened
        };
        late.extend(rows[bumped..].iter().filter(|r| {
            let f: Vec<&str> = r.split('|').collect();
            f[1] == victim.name && f[3] == id.to_string()
        }));
    }
    assert!(
        late.is_empty(),
        "the cut master wrote after it was fenced:\n{}",
        late.iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    let writes = rows
        .iter()
        .filter(|r| r.split('|').nth(1) == Some(victim.name.as_str()))
        .count();
    c.log(&format!(
        "the cut master made {writes} writes in all, none after a takeover"
    ));
}

/// One way: a master whose packets reach etcd but who hears nothing back (its lease
/// renewals arrive, their answers do not) while it drives runs. etcd may keep its lease
/// alive the whole time, so nobody need take over; or it lapses and the other master does.
/// Either way: every run succeeds after the heal, each task completes once, no two
/// executions of a task overlap, and the cut master writes nothing to an instance after
/// another master took it over.
#[test]
fn a_master_that_hears_nothing_from_etcd_is_fenced_or_keeps_its_runs() {
    let Some((c, markers)) = setup("master_etcd_oneway") else {
        return;
    };
    let ids = diamonds(&c, 6, 25);
    let v = busiest_master(&c, &ids);
    let (victim, other) = (&c.masters[v], &c.masters[1 - v]);
    let before = c.owned(&victim.addr, "running");
    let host = c.host(&victim.name);
    c.net().cut(&host, c.etcd_peer(), Way::In);
    c.log(&format!(
        "{} hears nothing from etcd (its packets still arrive) while it drives {before:?}",
        victim.addr
    ));
    std::thread::sleep(Duration::from_secs(8));
    let moved: Vec<i64> = c.owned(&other.addr, "running").into_keys().collect();
    c.net().heal(&host, c.etcd_peer(), Way::In);
    c.log(&format!("healed; the other master drove {moved:?} by then"));
    check_end(&c, &markers, &ids);
    assert_fenced(&c, victim, other, before.keys());
}

/// One way: a worker whose packets to its masters are all dropped (its answers, its
/// acks, its reports) while the masters' calls still reach it, and it stays registered
/// in etcd. A dispatch it receives runs there; the master, hearing no answer, must not
/// run the task again beside it. Every run succeeds after the heal, each task completes
/// once and no two executions overlap.
#[test]
fn a_worker_whose_answers_to_its_masters_are_dropped_runs_each_task_once() {
    let Some((c, markers)) = setup("worker_master_oneway") else {
        return;
    };
    let ids = diamonds(&c, 6, 30);
    let (addr, host) = busy_worker(&c, &ids);
    let masters = master_peers(&c);
    for m in &masters {
        c.net().cut(&host, *m, Way::Out);
    }
    c.log(&format!(
        "{addr} cannot answer its masters (their calls still reach it)"
    ));
    std::thread::sleep(Duration::from_secs(8));
    c.net().heal_all();
    c.log("healed");
    check_end(&c, &markers, &ids);
}

/// etcd killed and started again on its data dir on another host (a new address) while a
/// master is cut from it (from the old address and the new): the nodes reach etcd by a
/// name, which every host resolves to the new address from then on. Once healed, every
/// node is registered again (the api-server lists them), every run succeeds, each task
/// completes once and nothing overlaps, and new runs go on.
#[test]
fn etcd_started_again_on_a_new_address_while_a_master_is_cut_is_found_by_its_name() {
    let Some((c, markers)) =
        Cluster::start_hosts_by_name("etcd_moved", &["default", "default"]).and_then(prepare)
    else {
        return;
    };
    let ids = diamonds(&c, 6, 20);
    let v = busiest_master(&c, &ids);
    let victim = &c.masters[v];
    let host = c.host(&victim.name);
    let old = c.etcd_peer();
    c.net().cut(&host, old, Way::Both);
    c.log(&format!("cut {} from etcd at {old:?}", victim.addr));
    std::thread::sleep(Duration::from_secs(1));
    c.move_etcd("etcd-b");
    let new = c.etcd_peer();
    c.net().cut(&host, new, Way::Both);
    c.log(&format!(
        "etcd moved to {new:?}; the master is cut from it there too"
    ));
    std::thread::sleep(Duration::from_secs(5));
    c.net().heal_all();
    c.log("healed");
    check_end(&c, &markers, &ids);
    let want: BTreeSet<String> = c
        .masters
        .iter()
        .chain(&c.workers)
        .map(|n| n.addr.clone())
        .collect();
    let nodes = c.wait_until(
        "every node to register with etcd at its new address",
        Duration::from_secs(30),
        &[],
        || {
            if c.api.status("/cluster") != 200 {
                return None;
            }
            let nodes = c.api.get("/cluster");
            let have: BTreeSet<String> = nodes
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| n["addr"].as_str().map(str::to_string))
                .collect();
            want.is_subset(&have).then_some(have)
        },
    );
    c.log(&format!("registered at etcd's new address: {nodes:?}"));
    let more = diamonds(&c, 2, 5);
    check_end(&c, &markers, &more);
}

/// A master cut from Postgres (both ways) but not from etcd while it drives runs: its
/// lease stays, so nobody takes over until it gives up or the link heals; either way
/// every run ends once the link heals and nothing runs twice.
#[test]
fn a_master_cut_from_postgres_resumes_or_is_taken_over() {
    let Some((c, markers)) = setup("master_pg_cut") else {
        return;
    };
    let ids = diamonds(&c, 6, 20);
    let v = busiest_master(&c, &ids);
    let victim = &c.masters[v];
    let before = c.owned(&victim.addr, "running");
    let host = c.host(&victim.name);
    c.net().cut(&host, c.postgres_peer(), Way::Both);
    c.log(&format!(
        "cut {} from Postgres while it drives {before:?}",
        victim.addr
    ));
    // Long enough for its tasks to end on the workers: their ends wait.
    std::thread::sleep(Duration::from_secs(8));
    c.net().heal(&host, c.postgres_peer(), Way::Both);
    c.log("healed");
    check_end(&c, &markers, &ids);
    let after: Vec<String> = before
        .keys()
        .map(|id| c.instance(*id)["master"].to_string())
        .collect();
    c.log(&format!(
        "the cut master's instances ended driven by {after:?}"
    ));
}

/// A worker cut from both masters (not from etcd) while its tasks run: the masters
/// cannot reach it nor it them, yet it stays registered. Its tasks end during the cut;
/// their ends arrive after the heal, exactly once; a task run again elsewhere never
/// overlaps its first execution.
#[test]
fn a_worker_cut_from_its_masters_reports_its_ends_once_after_the_heal() {
    let Some((c, markers)) = setup("worker_master_cut") else {
        return;
    };
    let ids = diamonds(&c, 6, 30);
    let (addr, host) = busy_worker(&c, &ids);
    let masters = master_peers(&c);
    for m in &masters {
        c.net().cut(&host, *m, Way::Both);
    }
    c.log(&format!("cut {addr} from both masters"));
    std::thread::sleep(Duration::from_secs(8));
    for m in &masters {
        c.net().heal(&host, *m, Way::Both);
    }
    c.log("healed");
    check_end(&c, &markers, &ids);
}

/// A worker cut from everything (etcd and both masters) while its tasks run: its lease
/// lapses and the masters run its tasks again elsewhere; it must have killed them first,
/// on its own clock (no two executions of a task overlap), and each task completes once.
#[test]
fn a_worker_cut_from_everything_kills_its_tasks_before_they_run_elsewhere() {
    let Some((c, markers)) = setup("worker_all_cut") else {
        return;
    };
    let ids = diamonds(&c, 4, 40);
    let (addr, host) = busy_worker(&c, &ids);
    let mut peers = vec![c.etcd_peer()];
    peers.extend(master_peers(&c));
    for p in &peers {
        c.net().cut(&host, *p, Way::Both);
    }
    c.log(&format!("cut {addr} from etcd and both masters"));
    std::thread::sleep(Duration::from_secs(10));
    c.net().heal_all();
    c.log("healed");
    check_end(&c, &markers, &ids);
    let worker = c.workers.iter().find(|w| w.addr == addr).unwrap();
    let log = worker.proc.log_text();
    assert!(log.contains("tasks of the lost lease killed"), "{log}");
}

/// The api-server cut from Postgres, etcd and the masters: a start call answers with an
/// error within a bound (not a hang); cut from its clients too, the CLI fails within its
/// connect timeout; a command it accepted just before the cut is not lost.
#[test]
fn an_api_server_cut_from_everything_errs_and_keeps_what_it_accepted() {
    let Some((c, markers)) = setup("api_cut") else {
        return;
    };
    let accepted = c.submit(
        "diamond",
        json!({ "t_a": "5", "t_b": "5", "t_c": "5", "t_d": "5" }),
    );
    let host = c.host("api-server");
    let mut peers = vec![c.postgres_peer(), c.etcd_peer()];
    peers.extend(master_peers(&c));
    for p in &peers {
        c.net().cut(&host, *p, Way::Both);
    }
    c.log(&format!(
        "cut the api-server from {peers:?}; command {accepted} accepted before"
    ));

    // Its client still reaches it: an answer, an error one, within the bound.
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let t = Instant::now();
    let resp = http
        .post(format!(
            "{}/api/v1/projects/default/workflows/diamond/start",
            c.api.base
        ))
        .bearer_auth(support::API_TOKEN)
        .header("content-type", "application/json")
        .body("{}")
        .send();
    let took = t.elapsed();
    let answer = match resp {
        Ok(r) => format!("{} {}", r.status(), r.text().unwrap_or_default()),
        Err(e) => format!("no answer: {e}"),
    };
    c.log(&format!("start while cut: {answer} after {took:?}"));
    // The store's acquire timeout (30 s) bounds it, under the CLI's 60 s.
    assert!(
        answer.starts_with('5'),
        "a start call on a cut api-server must get an error answer: {answer}"
    );
    assert!(took < Duration::from_secs(45), "answered after {took:?}");

    // Cut from its clients too: the CLI fails, and says so, within its connect timeout.
    c.net().cut(
        &host,
        Peer {
            ip: c.net().gateway(),
            port: None,
        },
        Way::Both,
    );
    let t = Instant::now();
    let out = support::cli(&c.api, &["start", "diamond"]);
    let took = t.elapsed();
    c.log(&format!(
        "shoal start, cut from the client too: {:?} after {took:?}: {}",
        out.status.code(),
        support::text(&out.stderr).trim()
    ));
    assert!(
        !out.status.success(),
        "shoal start succeeded on a cut api-server"
    );
    assert!(took < Duration::from_secs(20), "shoal start took {took:?}");

    c.net().heal_all();
    c.log("healed");
    let id = c.instance_of(accepted);
    check_end(&c, &markers, &[id]);
}
