//! Cluster high availability on the worker's side: graceful shutdown with a grace period,
//! no task processes left after a crash, tasks of a lost registry lease killed (with a real
//! etcd), one worker per data dir.

use super::*;
use shoal_common::registry::NodeInfo;
use shoal_testkit::{start_etcd, wait_for};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// Fields 3.. of `/proc/<pid>/stat` (after the command name): field n is at n - 3.
fn stat_fields(pid: i32) -> Vec<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(')').unwrap();
    rest.split_whitespace().map(str::to_string).collect()
}

fn start_time(pid: i32) -> u64 {
    stat_fields(pid)[22 - 3].parse().unwrap()
}

fn session(pid: i32) -> i32 {
    stat_fields(pid)[6 - 3].parse().unwrap()
}

/// Waits until the registry shows this worker as `check` wants it.
async fn wait_node(
    watch: &mut NodeWatch,
    addr: &str,
    what: &str,
    check: impl Fn(&NodeInfo) -> bool,
) {
    tokio::time::timeout(WAIT, async {
        loop {
            if watch.current().iter().any(|n| n.addr == addr && check(n)) {
                return;
            }
            watch.changed().await.unwrap();
        }
    })
    .await
    .unwrap_or_else(|_| panic!("worker {addr} never {what}"));
}

async fn wait_unregistered(watch: &mut NodeWatch, addr: &str) {
    tokio::time::timeout(WAIT, async {
        while watch.current().iter().any(|n| n.addr == addr) {
            watch.changed().await.unwrap();
        }
    })
    .await
    .expect("worker still registered");
}

/// The tasks recorded as running under `data/running` (`<task_instance_id>_<attempt>`).
fn running_records(data: &Path) -> Vec<String> {
    std::fs::read_dir(data.join("running"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        // Emptied when their task ended, kept for the next.
        .filter(|record| !record.is_empty())
        .map(|record| record.split_whitespace().nth(4).unwrap().to_string())
        .collect()
}

/// Two pids a task writes into a FIFO: `$$ $!`.
async fn read_pids(fifo: &Path) -> (i32, i32) {
    let text = read_fifo(fifo).await;
    let pids: Vec<i32> = text
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{text}");
    (pids[0], pids[1])
}

// ---------------------------------------------------------------- graceful shutdown

#[tokio::test]
async fn shutdown_lets_running_tasks_finish_within_the_grace_period_and_reports_them() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = launch(Launch {
        grace_period: Duration::from_secs(5),
        ..Launch::default()
    })
    .await;
    let mut nodes = w
        .registry
        .watch(Role::Worker, CancellationToken::new())
        .await
        .unwrap();
    let go = w.path("go");
    mkfifo(&go);
    let t = shell(
        300,
        &format!("read line < '{}'\necho \"finished $line\"", go.display()),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [300]);
    assert_eq!(master.next().await.kind, TaskEventKind::Running as i32);

    w.shutdown.cancel();
    // Draining: still registered (masters would re-run its tasks at once otherwise), but
    // with no free slot, and new attempts are refused.
    wait_node(&mut nodes, &w.addr, "drained", |n| {
        n.slots == 0 && n.running == 1
    })
    .await;
    let refused = w.dispatch(vec![task(301, "noop", "", &master.addr)]).await;
    assert_eq!(refused.rejected, [301]);
    assert!(
        refused.reason.contains("shutting down"),
        "{}",
        refused.reason
    );

    // The task finishes after shutdown was requested, within the grace period.
    write_fifo(&go, "late\n").await;
    let worker = w.worker.take().unwrap();
    tokio::time::timeout(WAIT, worker.join())
        .await
        .expect("join in time")
        .unwrap();

    // Its SUCCESS reached the master before join returned, and only then did the worker
    // leave the registry.
    let done = master
        .events
        .try_recv()
        .expect("success delivered before join");
    assert_eq!(done.task_instance_id, 300);
    assert_eq!(done.kind, TaskEventKind::Success as i32);
    let log = String::from_utf8(std::fs::read(w.path("data/logs/100/300_1.log")).unwrap()).unwrap();
    assert_eq!(log, "finished late\n");
    wait_unregistered(&mut nodes, &w.addr).await;
    master.assert_quiet().await;
    let stopped = w
        .client
        .dispatch(DispatchRequest {
            tasks: vec![task(302, "noop", "", &master.addr)],
            adopt_only: false,
        })
        .await;
    assert!(stopped.is_err(), "a stopped worker answered: {stopped:?}");
}

#[tokio::test]
async fn tasks_still_running_after_the_grace_period_are_killed_without_an_event() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let grace = Duration::from_secs(1);
    let mut w = launch(Launch {
        grace_period: grace,
        ..Launch::default()
    })
    .await;
    let mut nodes = w
        .registry
        .watch(Role::Worker, CancellationToken::new())
        .await
        .unwrap();
    let fifo = w.path("pids");
    mkfifo(&fifo);
    let t = shell(
        310,
        &format!("sleep 30 &\necho \"$$ $!\" > '{}'\nwait", fifo.display()),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [310]);
    let (bash, sleep) = read_pids(&fifo).await;
    assert_eq!(master.next().await.kind, TaskEventKind::Running as i32);
    assert_eq!(running_records(&w.path("data")), ["310_1"]);

    let asked = Instant::now();
    w.shutdown.cancel();
    let worker = w.worker.take().unwrap();
    tokio::time::timeout(WAIT, worker.join())
        .await
        .expect("join in time")
        .unwrap();
    assert!(asked.elapsed() >= grace, "stopped before the grace period");

    // Killed, with no KILLED event: the masters re-run it when the worker leaves.
    wait_gone(bash).await;
    wait_gone(sleep).await;
    master.assert_quiet().await;
    wait_unregistered(&mut nodes, &w.addr).await;
    assert!(running_records(&w.path("data")).is_empty());
    let log = String::from_utf8(std::fs::read(w.path("data/logs/100/310_1.log")).unwrap()).unwrap();
    assert!(log.contains("abandoned"), "{log}");
}

// ---------------------------------------------------------------- crashes

#[tokio::test]
async fn a_restarted_worker_kills_what_its_crashed_predecessor_left() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pids");
    mkfifo(&fifo);
    let data = dir.path().join("data");
    // Nobody listens there: events just wait in the outbox.
    let t = shell(
        320,
        &format!("sleep 30 &\necho \"$$ $!\" > '{}'\nwait", fifo.display()),
        &free_addr().to_string(),
    );
    let config = worker_config(&Launch::default(), dir.path());

    // The first worker runs in a runtime of its own that is dropped without a shutdown: its
    // threads end as if the process had died, which fires the kernel's PDEATHSIG (it
    // follows the thread that spawned the task).
    let (bash, sleep) = std::thread::spawn({
        let (fifo, data) = (fifo.clone(), data.clone());
        move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let w = shoal_worker::start(config, Registry::local(), CancellationToken::new())
                    .await
                    .unwrap();
                let mut client = WorkerClient::connect(format!("http://{}", w.addr))
                    .await
                    .unwrap();
                let r = client
                    .dispatch(DispatchRequest {
                        tasks: vec![t],
                        adopt_only: false,
                    })
                    .await
                    .unwrap()
                    .into_inner();
                assert_eq!(r.accepted, [320]);
            });
            // The runtime's threads run the task on; read what it wrote.
            let pids = std::fs::read_to_string(&fifo).unwrap();
            // A plain thread, outside the runtime: a blocking poll stalls nothing.
            wait_for("the process group record", WAIT, || {
                (running_records(&data) == ["320_1"]).then_some(())
            });
            rt.shutdown_timeout(Duration::from_secs(5));
            let pids: Vec<i32> = pids
                .split_whitespace()
                .map(|p| p.parse().unwrap())
                .collect();
            (pids[0], pids[1])
        }
    })
    .join()
    .unwrap();

    // bash died with the worker; the sleep it started did not, and the record stayed.
    wait_gone(bash).await;
    assert!(alive(sleep), "the grandchild survives PDEATHSIG");
    assert_eq!(running_records(&data), ["320_1"]);

    // A worker starting on the same data dir kills it before it serves.
    let w = launch(Launch {
        dir: Some(dir),
        ..Launch::default()
    })
    .await;
    wait_gone(sleep).await;
    assert!(running_records(&w.path("data")).is_empty());
}

/// Spawns `program args` as the leader of a new process group.
fn spawn_group(program: &str, args: &[&str]) -> Child {
    Command::new(program)
        .args(args)
        .process_group(0)
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

#[tokio::test]
async fn leftover_groups_are_killed_only_while_they_are_still_the_tasks() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let running = dir.path().join("data/running");
    std::fs::create_dir_all(&running).unwrap();
    let write = |name: &str, text: String| std::fs::write(running.join(name), text).unwrap();

    // A group whose leader still runs, recorded with its start time: killed.
    let mut ours = spawn_group("sleep", &["30"]);
    let ours_pid = ours.id() as i32;
    write("1_1.pgid", format!("{ours_pid} {}\n", start_time(ours_pid)));

    // A group whose id matches but whose start time does not (the id was reused): spared.
    let mut other = spawn_group("sleep", &["30"]);
    let other_pid = other.id() as i32;
    write(
        "2_1.pgid",
        format!("{other_pid} {}\n", start_time(other_pid) + 1),
    );

    // A group whose leader is gone while a process it started lives on in the group (what a
    // crash leaves once PDEATHSIG killed the task's shell): killed.
    let mut shell_proc = Command::new("bash")
        .args(["-c", "sleep 30 & echo $!; read line; exit 0"])
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let leader = shell_proc.id() as i32;
    let (leader_start, leader_session) = (start_time(leader), session(leader));
    let mut line = String::new();
    BufReader::new(shell_proc.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let orphan: i32 = line.trim().parse().unwrap();
    drop(shell_proc.stdin.take());
    assert!(shell_proc.wait().unwrap().success());
    assert!(!Path::new(&format!("/proc/{leader}")).exists());
    write(
        "3_1.pgid",
        format!("{leader} {leader_start} {leader_session}\n"),
    );

    // Junk is cleared too.
    write("4_1.pgid", "not a record".into());
    write("stray.tmp", String::new());

    let w = launch(Launch {
        dir: Some(dir),
        ..Launch::default()
    })
    .await;
    wait_gone(ours_pid).await;
    wait_gone(orphan).await;
    assert!(alive(other_pid), "a reused group id must not be killed");
    assert!(running_records(&w.path("data")).is_empty());

    other.kill().unwrap();
    other.wait().unwrap();
    ours.wait().unwrap();
}

#[tokio::test]
async fn a_data_dir_serves_one_worker_at_a_time() {
    let first = start_worker(1).await;
    let second = shoal_worker::start(
        worker_config(&Launch::default(), first.dir.path()),
        Registry::local(),
        CancellationToken::new(),
    )
    .await;
    match second {
        Err(e @ shoal_worker::Error::DataDirInUse { .. }) => {
            assert!(e.to_string().contains("another running worker"), "{e}")
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(w) => panic!("a second worker started on the same data dir at {}", w.addr),
    }
}

// ---------------------------------------------------------------- lease loss (real etcd)

/// A registry with `ttl_secs` leases on the etcd at `url` (serving: see [`start_etcd`]).
async fn etcd_registry(url: &str, ttl_secs: i64) -> Registry {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Ok(r) = Registry::etcd(&[url.to_string()], ttl_secs).await
            && r.nodes().await.is_ok()
        {
            return r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no registry on etcd at {url}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_lost_etcd_lease_kills_the_tasks_of_the_worker() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let (mut etcd, url) = start_etcd(dir.path());
    let registry = etcd_registry(&url, 2).await;
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = launch(Launch {
        registry: Some(registry.clone()),
        ..Launch::default()
    })
    .await;
    let fifo = w.path("pids");
    mkfifo(&fifo);
    let t = shell(
        330,
        &format!("sleep 30 &\necho \"$$ $!\" > '{}'\nwait", fifo.display()),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [330]);
    let (bash, sleep) = read_pids(&fifo).await;
    assert_eq!(master.next().await.kind, TaskEventKind::Running as i32);

    // Freeze etcd for longer than the TTL: the worker cannot renew, and when etcd resumes
    // the lease has expired (masters would have seen the worker leave). The worker
    // registers again and kills what it was running.
    etcd.signal("STOP");
    // The outage itself (longer than the TTL), not a wait for something.
    tokio::time::sleep(Duration::from_secs(3)).await;
    etcd.signal("CONT");
    assert!(!etcd.exited(), "etcd is gone");
    wait_gone(bash).await;
    wait_gone(sleep).await;
    // Nothing is reported for the abandoned attempt, and it is not taken again.
    master.assert_quiet().await;
    let again = w.dispatch(vec![t.clone()]).await;
    assert_eq!(again.rejected, [330]);
    assert!(again.reason.contains("abandoned"), "{}", again.reason);

    // Registered again, the worker runs new work as usual.
    let mut nodes = registry
        .watch(Role::Worker, w.shutdown.clone())
        .await
        .unwrap();
    wait_node(&mut nodes, &w.addr, "registered again", |_| true).await;
    let next = task(331, "noop", "", &master.addr);
    assert_eq!(w.dispatch(vec![next]).await.accepted, [331]);
    assert_eq!(
        kinds(&master.until_done(331).await),
        [TaskEventKind::Running, TaskEventKind::Success]
    );
}
