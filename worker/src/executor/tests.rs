use super::*;
use shoal_common::metrics::{
    WORKER_EVENTS_UNACKED, WORKER_TASK_DURATION, WORKER_TASKS_FINISHED_FAILURE,
    WORKER_TASKS_FINISHED_KILLED, WORKER_TASKS_FINISHED_SUCCESS, WORKER_TASKS_RUNNING,
    WORKER_TASKS_STARTED,
};
use shoal_common::proto::{KillRequest, ProbeResponse, TaskAttempt, TaskSpec};
use std::path::Path;
use tokio_util::sync::CancellationToken;

fn spec(id: i64, task_type: &str, command: &str) -> TaskSpec {
    TaskSpec {
        task_instance_id: id,
        workflow_instance_id: 1,
        attempt: 1,
        name: format!("t{id}"),
        task_type: task_type.into(),
        definition_json: serde_json::json!({"type": task_type, "command": command}).to_string(),
        params: HashMap::new(),
        // Nothing listens there: the events stay in the outbox.
        master_addr: "127.0.0.1:9".into(),
        owner_epoch: 1,
        tenant: String::new(),
        ..Default::default()
    }
}

fn executor(dir: &Path, outbox: &Outbox) -> Arc<Executor> {
    let dirs = ExecutorDirs {
        logs: dir.join("logs"),
        work: dir.join("work"),
        running: dir.join("running"),
    };
    for dir in [&dirs.running, &dirs.work] {
        std::fs::create_dir_all(dir).unwrap();
    }
    Executor::new(
        ExecutorConfig {
            slots: 4,
            dirs,
            python: crate::DEFAULT_PYTHON.into(),
            spark_submit: "spark-submit".into(),
            containers: Default::default(),
            task_env: TaskEnvironment::of_worker(&[]).unwrap(),
            datasources: Datasources::new(&Default::default(), &Default::default(), true, 4)
                .unwrap(),
            tenants: Tenants {
                single_team: true,
                ..Tenants::default()
            },
            data_dir: dir.to_path_buf(),
            min_free_disk: 0,
        },
        outbox.clone(),
    )
}

#[tokio::test]
async fn a_probe_by_a_new_owner_refuses_the_old_owner_s_late_dispatch() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = Outbox::new("127.0.0.1:1".into(), Default::default(), None);
    let executor = executor(dir.path(), &outbox);
    let probe = |id: i64, epoch: i64| TaskAttempt {
        task_instance_id: id,
        attempt: 1,
        workflow_instance_id: 1,
        owner_epoch: epoch,
    };
    // The new owner (epoch 2) asks before queueing task 5 again: nobody has it.
    assert_eq!(executor.probe(&[probe(5, 2)]), ProbeResponse::default());

    // The frozen old owner's call for that attempt arrives afterwards.
    let late = executor.dispatch(vec![spec(5, "noop", "")], false);
    assert_eq!(late.rejected, vec![5]);
    assert!(late.reason.contains("newer owner"), "{}", late.reason);
    assert_eq!(
        executor.probe(&[probe(5, 2)]),
        ProbeResponse::default(),
        "never started"
    );

    // Adopting it where it never arrived refuses it: it was lost here, not running.
    let mut adopt = spec(5, "noop", "");
    adopt.owner_epoch = 2;
    let adopted = executor.dispatch(vec![adopt], true);
    assert_eq!(adopted.rejected, vec![5], "{}", adopted.reason);

    // The new owner's own dispatch goes through.
    let mut current = spec(5, "noop", "");
    current.owner_epoch = 2;
    assert_eq!(executor.dispatch(vec![current], false).accepted, vec![5]);
    assert_eq!(executor.probe(&[probe(5, 2)]).known, vec![5]);

    // Nor can the old owner kill what the new one drives.
    let mut sleeper = spec(6, "shell", "sleep 30");
    sleeper.owner_epoch = 2;
    assert_eq!(
        executor.dispatch(vec![sleeper.clone()], false).accepted,
        vec![6]
    );
    let mut stale = kill_of(&sleeper);
    stale.owner_epoch = 1;
    assert!(!executor.kill(&stale), "the old owner's kill is refused");
    assert!(
        executor.kill(&kill_of(&sleeper)),
        "the owner's kill goes through"
    );
    assert!(executor.wait_idle(Duration::from_secs(10)).await);
}

fn kill_of(spec: &TaskSpec) -> KillRequest {
    KillRequest {
        task_instance_id: spec.task_instance_id,
        attempt: spec.attempt,
        workflow_instance_id: spec.workflow_instance_id,
        owner_epoch: spec.owner_epoch,
    }
}

#[tokio::test]
async fn metrics_follow_tasks_from_start_to_their_final_state() {
    let _metrics = crate::tests::METRICS_LOCK.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let outbox = Outbox::new("127.0.0.1:1".into(), Default::default(), None);
    let executor = executor(dir.path(), &outbox);
    let started = WORKER_TASKS_STARTED.get();
    let running = WORKER_TASKS_RUNNING.get();
    let (success, failure, killed) = (
        WORKER_TASKS_FINISHED_SUCCESS.get(),
        WORKER_TASKS_FINISHED_FAILURE.get(),
        WORKER_TASKS_FINISHED_KILLED.get(),
    );
    let observed = WORKER_TASK_DURATION.count();
    let unacked = WORKER_EVENTS_UNACKED.get();

    let tasks = vec![
        spec(1, "noop", ""),
        spec(2, "bogus", ""),
        spec(3, "shell", "sleep 30"),
    ];
    assert_eq!(executor.dispatch(tasks, false).accepted, [1, 2, 3]);
    // A duplicate dispatch starts nothing.
    assert_eq!(
        executor
            .dispatch(vec![spec(3, "shell", "sleep 30")], false)
            .accepted,
        [3]
    );
    tokio::time::timeout(Duration::from_secs(10), async {
        while WORKER_TASKS_STARTED.get() < started + 3 {
            tokio::task::yield_now().await;
        }
        executor.running().wait_for(|n| *n == 1).await.unwrap();
    })
    .await
    .expect("noop and bogus finish, shell runs");
    assert_eq!(WORKER_TASKS_STARTED.get(), started + 3);
    assert_eq!(WORKER_TASKS_RUNNING.get(), running + 1);
    assert_eq!(WORKER_TASKS_FINISHED_SUCCESS.get(), success + 1);
    assert_eq!(WORKER_TASKS_FINISHED_FAILURE.get(), failure + 1);
    assert_eq!(WORKER_TASK_DURATION.count(), observed + 2);

    assert!(executor.kill(&kill_of(&spec(3, "shell", ""))));
    assert!(executor.wait_idle(Duration::from_secs(10)).await);
    assert_eq!(WORKER_TASKS_RUNNING.get(), running);
    assert_eq!(WORKER_TASKS_FINISHED_KILLED.get(), killed + 1);
    assert_eq!(WORKER_TASK_DURATION.count(), observed + 3);
    assert_eq!(WORKER_TASKS_STARTED.get(), started + 3);
    // noop: RUNNING + SUCCESS; bogus: FAILURE; shell: RUNNING + KILLED.
    assert_eq!(WORKER_EVENTS_UNACKED.get(), unacked + 5);
    outbox.stop().await;
    assert_eq!(WORKER_EVENTS_UNACKED.get(), unacked);
}

/// Polls (bounded) until `check` holds: another process's progress signals nothing we
/// could wait on.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn gone(pid: i32) -> bool {
    orphans::proc_stat(pid).is_none_or(|s| s.zombie)
}

#[tokio::test]
async fn a_lost_lease_abandons_the_tasks_accepted_under_it() {
    let _metrics = crate::tests::METRICS_LOCK.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let outbox = Outbox::new("127.0.0.1:1".into(), Default::default(), None);
    let executor = executor(dir.path(), &outbox);
    let (lost_tx, lost) = watch::channel(0u64);
    let (_renewed, renewed) = watch::channel(tokio::time::Instant::now());
    let gate = LeaseGate::new(renewed, Duration::from_secs(3600));
    executor.follow_lease(lost.clone(), gate);
    let stop = CancellationToken::new();
    let reaction = tokio::spawn(abandon_on_lease_loss(executor.clone(), lost, stop.clone()));

    // A task that finished before the loss: its events stay queued.
    assert_eq!(
        executor.dispatch(vec![spec(1, "noop", "")], false).accepted,
        [1]
    );
    let pid_file = dir.path().join("pid");
    let sleeper = spec(
        2,
        "shell",
        &format!("sleep 30 & echo $! > '{}'; wait", pid_file.display()),
    );
    assert_eq!(
        executor.dispatch(vec![sleeper.clone()], false).accepted,
        [2]
    );
    // The first script task's record file.
    let record = dir.path().join("running/1.pgid");
    eventually("the task starts", || {
        std::fs::read_to_string(&record).is_ok_and(|r| !r.is_empty())
            && std::fs::read_to_string(&pid_file).is_ok_and(|p| p.ends_with('\n'))
    })
    .await;
    let sleep: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let rec = orphans::Record::parse(&std::fs::read_to_string(&record).unwrap()).unwrap();
    assert!(!gone(sleep) && !gone(rec.pgid));
    // noop: RUNNING + SUCCESS; shell: RUNNING.
    eventually("events queued", || outbox.pending() == 3).await;

    lost_tx.send_modify(|n| *n += 1);
    assert!(executor.wait_idle(Duration::from_secs(10)).await);
    eventually("the task's processes are killed", || {
        gone(sleep) && gone(rec.pgid)
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(&record).unwrap(),
        "",
        "record emptied"
    );
    // Its RUNNING event was dropped and no KILLED event was queued.
    assert_eq!(outbox.pending(), 2);
    let log = std::fs::read_to_string(dir.path().join("logs/1/2_1.log")).unwrap();
    assert!(log.contains("abandoned"), "{log}");

    // A master asking learns it was given up (and runs it again).
    let asked = executor.probe(&[TaskAttempt {
        task_instance_id: 2,
        attempt: 1,
        workflow_instance_id: sleeper.workflow_instance_id,
        owner_epoch: sleeper.owner_epoch,
    }]);
    assert_eq!((asked.known, asked.abandoned), (vec![], vec![2]));

    // The abandoned attempt is not taken again; a new attempt is.
    let again = executor.dispatch(vec![sleeper.clone()], false);
    assert_eq!(again.rejected, [2]);
    assert!(again.reason.contains("abandoned"), "{}", again.reason);
    let mut retry = sleeper.clone();
    retry.attempt = 2;
    retry.definition_json = serde_json::json!({"type": "shell", "command": "sleep 30"}).to_string();
    assert_eq!(executor.dispatch(vec![retry], false).accepted, [2]);
    // It belongs to the current lease: only a later loss abandons it.
    assert_eq!(executor.abandon_older(1), 0);
    assert_eq!(executor.abandon_older(2), 1);
    assert!(executor.wait_idle(Duration::from_secs(10)).await);
    assert_eq!(outbox.pending(), 2);

    stop.cancel();
    reaction.await.unwrap();
    outbox.stop().await;
}

#[tokio::test]
async fn a_worker_that_cannot_renew_its_lease_refuses_new_attempts() {
    let _metrics = crate::tests::METRICS_LOCK.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let outbox = Outbox::new("127.0.0.1:1".into(), Default::default(), None);
    let executor = executor(dir.path(), &outbox);
    let (_lost_tx, lost) = watch::channel(0u64);
    let (renewed_tx, renewed) = watch::channel(tokio::time::Instant::now());
    // Fresh for 2/3 of the TTL after each renewal.
    executor.follow_lease(lost, LeaseGate::new(renewed, Duration::from_millis(600)));
    assert_eq!(
        executor.dispatch(vec![spec(1, "noop", "")], false).accepted,
        [1]
    );

    // Renewals stopped: a task taken now would be killed with the lease, or run twice.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let refused = executor.dispatch(vec![spec(2, "noop", "")], false);
    assert_eq!(refused.rejected, [2]);
    assert!(
        refused.reason.contains("registry lease"),
        "{}",
        refused.reason
    );

    renewed_tx.send_replace(tokio::time::Instant::now());
    assert_eq!(
        executor.dispatch(vec![spec(2, "noop", "")], false).accepted,
        [2]
    );
    assert!(executor.wait_idle(Duration::from_secs(10)).await);
    outbox.stop().await;
}
