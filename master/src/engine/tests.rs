//! The engine over a real store and the in-process registry: messages in, one cycle,
//! then what it wrote, what it queued and what it sent itself. No worker runs: the tests
//! play the dispatcher's and the workers' part with the messages those send. The store
//! is an SQLite file of the test's own; a test that edits rows behind the engine's back,
//! or needs Postgres's refusal of a value, gets a fresh Postgres database.

use super::commit::Committed;
use super::cycle::Cycle;
use super::places::Place;
use super::{Engine, EngineMsg, RECORD_WAIT};
use crate::clients::Peers;
use crate::dispatch::DispatchMsg;
use crate::secrets::Secrets;
use shoal_common::cluster_secret::ClusterSecret;
use shoal_common::definition::WorkflowDef;
use shoal_common::proto::{TaskEvent, TaskEventKind, TaskSpec};
use shoal_common::registry::{NodeInfo, Registry, Role};
use shoal_common::start::{Params, StartOptions};
use shoal_common::types::{CommandKind, TaskState, WorkflowState, now_ms};
use shoal_store::{ClaimedInstance, NewCommand, Store, TaskUpdate};
use shoal_testkit::TestDb;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const ME: &str = "127.0.0.1:1";
const EPOCH: i64 = 1;

/// Where a harness's store keeps its data.
enum Db {
    /// The file's directory, removed with the harness.
    Sqlite {
        _dir: tempfile::TempDir,
    },
    Postgres(TestDb),
}

impl Db {
    /// Runs one SQL statement behind the engine's back (Postgres only).
    fn query(&self, sql: &str) -> String {
        match self {
            Db::Postgres(db) => db.query(sql),
            Db::Sqlite { .. } => panic!("a test that edits rows runs on Postgres"),
        }
    }
}

struct Harness {
    engine: Engine,
    inbox: mpsc::UnboundedReceiver<EngineMsg>,
    dispatcher: mpsc::UnboundedReceiver<DispatchMsg>,
    store: Store,
    registry: Registry,
    shutdown: CancellationToken,
    db: Db,
}

impl Harness {
    /// A harness over an SQLite file: no database server needed.
    async fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("shoal.db").display());
        Harness::over(&url, Db::Sqlite { _dir: dir }).await
    }

    /// A harness over a fresh Postgres database.
    async fn postgres() -> Harness {
        let db = TestDb::create("shoal_engine");
        let url = db.url.clone();
        Harness::over(&url, Db::Postgres(db)).await
    }

    async fn over(url: &str, db: Db) -> Harness {
        let store = Store::connect(url).await.unwrap();
        let registry = Registry::local();
        let shutdown = CancellationToken::new();
        let workers = registry
            .watch(Role::Worker, shutdown.clone())
            .await
            .unwrap();
        let (me, inbox) = mpsc::unbounded_channel();
        let (to_dispatcher, dispatcher) = mpsc::unbounded_channel();
        let engine = Engine::new(
            store.clone(),
            Secrets::new(store.clone(), None),
            ME.into(),
            to_dispatcher,
            me,
            Peers::new(ClusterSecret::default()),
            workers,
        );
        Harness {
            engine,
            inbox,
            dispatcher,
            store,
            registry,
            shutdown,
            db,
        }
    }

    /// One engine cycle over `msgs`: handled, committed, followed up.
    async fn cycle(&mut self, msgs: Vec<EngineMsg>) {
        let mut cycle = self.handled(msgs);
        cycle.seal();
        let committed = self
            .engine
            .commit(&cycle.batch, &self.shutdown)
            .await
            .unwrap();
        self.engine.after_commit(cycle, committed);
    }

    /// The cycle `msgs` make, handled but not committed.
    fn handled(&mut self, msgs: Vec<EngineMsg>) -> Cycle {
        let mut cycle = Cycle::default();
        for m in msgs {
            self.engine.handle(m, &mut cycle);
        }
        cycle
    }

    /// Whether the dispatcher was told, since the last look, that `id` freed its slot on
    /// `worker`.
    fn slot_freed(&mut self, id: i64, worker: &str) -> bool {
        std::iter::from_fn(|| self.dispatcher.try_recv().ok())
            .any(|m| matches!(m, DispatchMsg::Finished { worker: ref w, id: i } if i == id && w == worker))
    }

    /// Starts [`CHAIN`]: its instance id and its root task's, the one task queued.
    async fn start_chain(&mut self) -> (i64, i64) {
        let instance = self.start(CHAIN).await;
        let [a] = self.pushed()[..] else {
            panic!("the root alone is queued")
        };
        (instance, a)
    }

    /// Starts `yaml` (claimed by this master) and returns its instance id.
    async fn start(&mut self, yaml: &str) -> i64 {
        self.start_with(yaml, Params::new()).await
    }

    /// Starts `yaml` with start parameters `params`.
    async fn start_with(&mut self, yaml: &str, params: Params) -> i64 {
        let claimed = self.claim_with(yaml, params).await;
        let id = claimed[0].instance.id;
        self.cycle(vec![EngineMsg::Claimed(claimed)]).await;
        id
    }

    /// Writes a start command of `yaml` and claims it: the runs that start now.
    async fn claim(&mut self, yaml: &str) -> Vec<ClaimedInstance> {
        self.claim_with(yaml, Params::new()).await
    }

    async fn claim_with(&mut self, yaml: &str, params: Params) -> Vec<ClaimedInstance> {
        let def = WorkflowDef::parse(yaml).unwrap();
        let (version, _) = self.store.put_definition(&def).await.unwrap();
        self.store
            .insert_command(&NewCommand {
                kind: CommandKind::Start,
                project: def.project.clone(),
                workflow: def.name.clone(),
                version,
                params,
                priority: None,
                workflow_instance_id: None,
                options: StartOptions::default(),
                parent_task_id: None,
                schedule_time: None,
                due_at: None,
            })
            .await
            .unwrap();
        self.store.claim_commands(ME, EPOCH, 10).await.unwrap()
    }

    /// Task instance ids the dispatcher was asked to queue since the last call.
    fn pushed(&mut self) -> Vec<i64> {
        let specs = self.pushed_specs();
        specs.iter().map(|s| s.task_instance_id).collect()
    }

    /// What the dispatcher was asked to queue since the last look.
    fn pushed_specs(&mut self) -> Vec<TaskSpec> {
        let mut specs = Vec::new();
        while let Ok(m) = self.dispatcher.try_recv() {
            if let DispatchMsg::Push(t) = m {
                specs.push(t.spec);
            }
        }
        specs
    }

    fn place(&self, id: i64) -> Option<&Place> {
        self.engine.tasks.get(&id).map(|t| &t.place)
    }

    /// (name, attempt, state) of every row of an instance, by id.
    async fn rows(&self, instance: i64) -> Vec<(String, i32, TaskState)> {
        let mut rows = self
            .store
            .list_task_instances(instance)
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.id, r.name, r.attempt, r.state))
            .collect::<Vec<_>>();
        rows.sort_by_key(|r| r.0);
        rows.into_iter().map(|(_, n, a, s)| (n, a, s)).collect()
    }
}

const CHAIN: &str = "name: chain\nproject: p\ntasks:\n\
    - {name: a, type: shell, command: 'true'}\n\
    - {name: b, type: shell, command: 'true', depends_on: [a]}\n";

fn dispatched(id: i64, worker: &str) -> EngineMsg {
    EngineMsg::Dispatched {
        id,
        worker: worker.into(),
    }
}

/// A worker's report of task `id` (attempt 1) of `instance`, and its acknowledgement.
fn report(
    instance: i64,
    id: i64,
    kind: TaskEventKind,
    message: &str,
) -> (EngineMsg, oneshot::Receiver<Vec<u64>>) {
    let (ack, acked) = oneshot::channel();
    let event = TaskEvent {
        seq: id as u64,
        task_instance_id: id,
        attempt: 1,
        workflow_instance_id: instance,
        kind: kind.into(),
        at_ms: now_ms(),
        exit_code: 0,
        message: message.into(),
        ..Default::default()
    };
    let msg = EngineMsg::WorkerEvents {
        worker: "w1".into(),
        events: vec![event],
        ack,
    };
    (msg, acked)
}

#[test]
fn several_changes_of_a_task_in_one_cycle_become_one_row_update() {
    let mut cycle = Cycle::default();
    let mut running = TaskUpdate::state(7, TaskState::Running);
    running.started_at = Some(10);
    running.worker = Some("w1".into());
    cycle.update(running);
    let mut done = TaskUpdate::state(7, TaskState::Success);
    done.ended_at = Some(20);
    done.exit_code = Some(0);
    cycle.update(done);
    cycle.update(TaskUpdate::state(8, TaskState::Running));
    assert_eq!(cycle.batch.task_updates.len(), 2, "one row update per task");
    let u = &cycle.batch.task_updates[0];
    assert_eq!(u.state, TaskState::Success, "the latest state wins");
    assert_eq!(
        (u.started_at, u.ended_at, u.worker.as_deref()),
        (Some(10), Some(20), Some("w1")),
        "what each change set is kept"
    );
}

#[tokio::test]
async fn a_task_moves_from_queue_to_worker_and_its_end_queues_the_next() {
    let mut h = Harness::new().await;
    let (instance, a) = h.start_chain().await;
    assert!(matches!(
        h.place(a),
        Some(Place::Queued { no_worker: false })
    ));

    h.cycle(vec![dispatched(a, "w1")]).await;
    assert!(matches!(h.place(a), Some(Place::OnWorker(w)) if w == "w1"));

    let (msg, acked) = report(instance, a, TaskEventKind::Success, "");
    h.cycle(vec![msg]).await;
    assert_eq!(acked.await.unwrap(), vec![a as u64], "acked once committed");
    assert!(h.place(a).is_none(), "an ended attempt leaves the engine");
    assert!(h.slot_freed(a, "w1"), "its slot on w1 is given back");
    let [b] = h.pushed()[..] else {
        panic!("b is queued after a")
    };
    assert_eq!(
        h.rows(instance).await,
        vec![
            ("a".into(), 1, TaskState::Success),
            ("b".into(), 1, TaskState::Submitted)
        ]
    );
    assert!(matches!(
        h.place(b),
        Some(Place::Queued { no_worker: false })
    ));
}

#[tokio::test]
async fn a_fenced_instance_is_dropped_with_its_creates_and_the_other_goes_on() {
    let mut h = Harness::new().await;
    let (lost, kept) = (h.start(CHAIN).await, h.start(CHAIN).await);
    let [a_lost, a_kept] = h.pushed()[..] else {
        panic!("both roots are queued")
    };
    h.cycle(vec![dispatched(a_lost, "w1"), dispatched(a_kept, "w1")])
        .await;
    // Another master took `lost` over meanwhile.
    let taken = h.store.take_over(lost, EPOCH, "other:1").await.unwrap();
    assert!(taken.is_some());
    let (m1, acked_lost) = report(lost, a_lost, TaskEventKind::Success, "");
    let (m2, acked_kept) = report(kept, a_kept, TaskEventKind::Success, "");
    h.cycle(vec![m1, m2]).await;

    assert_eq!(
        acked_lost.await.unwrap(),
        Vec::<u64>::new(),
        "not acked: its new owner needs it"
    );
    assert_eq!(acked_kept.await.unwrap(), vec![a_kept as u64]);
    assert!(!h.engine.runs.contains_key(&lost) && h.engine.ownership.is_lost(lost));
    assert!(h.engine.tasks.values().all(|t| t.instance != lost));
    assert_eq!(
        h.rows(lost).await,
        vec![("a".into(), 1, TaskState::Dispatched)],
        "nothing of the fenced cycle was written: no b"
    );
    assert_eq!(h.pushed().len(), 1, "only the kept instance's b goes out");
    assert_eq!(h.rows(kept).await.len(), 2);
}

#[tokio::test]
async fn a_write_the_store_refuses_fails_only_its_instance_with_the_reason() {
    let mut h = Harness::postgres().await;
    let serial = format!("{CHAIN}execution_type: serial_wait\n").replace("chain", "serial");
    let (bad, good) = (h.start(&serial).await, h.start(CHAIN).await);
    assert!(
        h.claim(&serial).await.is_empty(),
        "the next serial run waits"
    );
    let [a_bad, a_good] = h.pushed()[..] else {
        panic!("both roots are queued")
    };
    h.cycle(vec![dispatched(a_bad, "w1"), dispatched(a_good, "w1")])
        .await;
    // Postgres refuses a NUL in a text column, every time: retrying cannot help.
    let (m1, _) = report(bad, a_bad, TaskEventKind::Failure, "broken\0message");
    let (m2, acked_good) = report(good, a_good, TaskEventKind::Success, "");
    h.cycle(vec![m1, m2]).await;

    assert_eq!(acked_good.await.unwrap(), vec![a_good as u64]);
    assert_eq!(h.rows(good).await.len(), 2, "the other instance went on");
    assert!(
        !h.engine.runs.contains_key(&bad),
        "the refused instance is dropped"
    );
    let row = eventually(|| async {
        let row = h.store.get_instance(bad).await.unwrap().unwrap();
        (row.state == WorkflowState::Failure).then_some(row)
    })
    .await;
    let message = row.message.unwrap_or_default();
    assert!(
        message.contains("could not record") && message.contains("0x00"),
        "the reason is recorded: {message}"
    );
    // Its end wakes the next serial run, driven here.
    let woken = h.inbox.recv().await.unwrap();
    assert!(
        matches!(woken, EngineMsg::Claimed(ref c) if c.len() == 1 && c[0].instance.id > good),
        "the waiting serial run starts"
    );
}

#[tokio::test]
async fn an_unknown_commit_outcome_reloads_the_instance_instead_of_replaying() {
    let mut h = Harness::new().await;
    let (instance, a) = h.start_chain().await;
    h.cycle(vec![dispatched(a, "w1")]).await;

    // a's success is committed, but the connection broke before the answer came back.
    let (msg, acked) = report(instance, a, TaskEventKind::Success, "");
    let mut cycle = h.handled(vec![msg]);
    cycle.seal();
    h.store.write_batch(&cycle.batch).await.unwrap();
    let unsure = Committed {
        unsure: vec![instance],
        ..Committed::default()
    };
    h.engine.after_commit(cycle, unsure);
    assert_eq!(
        acked.await.unwrap(),
        Vec::<u64>::new(),
        "the worker keeps the event"
    );
    assert!(!h.engine.runs.contains_key(&instance));

    // Taken over again from the store (epoch bumped), b found as written, not twice.
    let claimed = h.inbox.recv().await.unwrap();
    assert!(matches!(claimed, EngineMsg::Claimed(ref c) if c[0].instance.owner_epoch > EPOCH));
    h.cycle(vec![claimed]).await;
    assert!(h.engine.runs.contains_key(&instance) && !h.engine.ownership.is_reloading(instance));
    let b_row = h.rows(instance).await;
    assert_eq!(
        b_row,
        vec![
            ("a".into(), 1, TaskState::Success),
            ("b".into(), 1, TaskState::Submitted)
        ],
        "no second row for b"
    );
    // b had no worker on record: the live workers (none) are asked, then it is queued.
    let probed = h.inbox.recv().await.unwrap();
    assert!(matches!(probed, EngineMsg::Probed { .. }));
    h.cycle(vec![probed]).await;
    assert_eq!(h.pushed().len(), 1, "b goes out once");
}

#[tokio::test]
async fn a_failover_sorts_attempts_by_where_they_were() {
    let mut h = Harness::new().await;
    let _live = h
        .registry
        .register(
            NodeInfo {
                role: Role::Worker,
                addr: "live:1".into(),
                groups: vec!["default".into()],
                slots: 4,
                running: 0,
                weight: 100,
                started_at: 0,
                lapses: 0,
                overloaded: None,
            },
            h.shutdown.clone(),
        )
        .await
        .unwrap();
    let yaml = "name: five\nproject: p\ntasks:\n\
        - {name: delayed, type: shell, command: 'true', delay: 1h}\n\
        - {name: slot, type: shell, command: 'true', task_group: g}\n\
        - {name: queued, type: shell, command: 'true'}\n\
        - {name: on_live, type: shell, command: 'true'}\n\
        - {name: on_gone, type: shell, command: 'true'}\n";
    let instance = h.start(yaml).await;
    let rows: Vec<(&str, TaskState, Option<&str>)> = vec![
        ("delayed", TaskState::Delayed, None),
        ("slot", TaskState::WaitingTaskGroup, None),
        ("queued", TaskState::Submitted, None),
        ("on_live", TaskState::Running, Some("live:1")),
        ("on_gone", TaskState::Running, Some("gone:1")),
    ];
    let mut claimed = h
        .store
        .take_over(instance, EPOCH, ME)
        .await
        .unwrap()
        .unwrap();
    for (name, state, worker) in &rows {
        let row = claimed.tasks.iter_mut().find(|r| r.name == *name).unwrap();
        row.state = *state;
        row.worker = worker.map(str::to_string);
    }
    claimed.kind = CommandKind::RecoverFailover;
    h.engine.drop_run(instance);
    let cycle = h.handled(vec![EngineMsg::Claimed(vec![claimed])]);

    let id = |name: &str| {
        let t = h.engine.tasks.iter().find(|(_, t)| {
            h.engine.runs.get(&instance).unwrap().rt.definition().tasks[t.node].name == name
        });
        t.map(|(id, _)| *id).unwrap()
    };
    let node = |name: &str| h.engine.tasks[&id(name)].node;
    assert!(
        matches!(h.place(id("delayed")), Some(Place::Delayed)),
        "its timer runs again"
    );
    assert!(matches!(h.place(id("slot")), Some(Place::New)));
    assert_eq!(
        cycle.enqueues,
        vec![(instance, node("slot"))],
        "it waits for its slot again"
    );
    assert!(matches!(h.place(id("queued")), Some(Place::Probing)));
    assert_eq!(
        cycle.probes,
        vec![id("queued")],
        "the workers are asked first"
    );
    assert!(matches!(
        h.place(id("on_live")),
        Some(Place::OnWorker(w)) if w == "live:1"
    ));
    assert_eq!(
        cycle.adoptions,
        vec![(instance, node("on_live"))],
        "adopted where it runs"
    );
    let lost = cycle
        .batch
        .task_updates
        .iter()
        .find(|u| u.id == id("on_gone"))
        .expect("the attempt on a gone worker is settled");
    assert_eq!(lost.state, TaskState::NeedFaultTolerance);
}

/// Polls `f` until it yields, for at most 10 s.
async fn eventually<T, F: std::future::Future<Output = Option<T>>>(mut f: impl FnMut() -> F) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_delayed_task_is_queued_when_its_delay_is_over_and_not_before() {
    let mut h = Harness::new().await;
    let yaml = "name: later\nproject: p\ntasks:\n\
        - {name: a, type: shell, command: 'true', delay: 1h}\n";
    let instance = h.start(yaml).await;
    let a = *h.engine.tasks.keys().next().unwrap();
    assert!(matches!(h.place(a), Some(Place::Delayed)));
    assert!(h.pushed().is_empty(), "nothing goes out during the delay");

    // Paused after the store's round trips: only the engine's timer waits on this clock.
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(3599)).await;
    assert!(h.engine.timers.due().is_empty(), "not a second early");
    tokio::time::advance(Duration::from_secs(1)).await;
    let ready = h.engine.timers.due();
    assert!(
        matches!(ready[..], [EngineMsg::Ready { instance: i, attempt: 1, .. }] if i == instance)
    );
    tokio::time::resume();
    h.cycle(ready).await;
    assert_eq!(h.pushed(), vec![a], "queued once the delay is over");
    assert_eq!(
        h.rows(instance).await,
        vec![("a".into(), 1, TaskState::Submitted)]
    );
}

#[tokio::test]
async fn a_delay_resumes_on_the_new_owner_where_the_old_one_left_it() {
    let mut h = Harness::postgres().await;
    let yaml = "name: later\nproject: p\ntasks:\n\
        - {name: a, type: shell, command: 'true', delay: 60s}\n";
    let instance = h.start(yaml).await;
    // The old owner recorded the delayed attempt 40 s ago, then died.
    h.db.query(&format!(
        "UPDATE task_instance SET submitted_at = submitted_at - 40000 \
         WHERE workflow_instance_id = {instance}"
    ));
    h.engine.drop_run(instance);
    h.engine.timers = Default::default();
    let claimed = h
        .store
        .take_over(instance, EPOCH, ME)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.kind, CommandKind::RecoverFailover);
    h.cycle(vec![EngineMsg::Claimed(vec![claimed])]).await;

    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(19)).await;
    assert!(h.engine.timers.due().is_empty(), "20 s were left, not 60");
    tokio::time::advance(Duration::from_secs(2)).await;
    let ready = h.engine.timers.due();
    assert!(
        matches!(ready[..], [EngineMsg::Ready { attempt: 1, .. }]),
        "{}",
        ready.len()
    );
    tokio::time::resume();
    h.cycle(ready).await;
    assert_eq!(h.pushed().len(), 1);
    assert_eq!(
        h.rows(instance).await,
        vec![("a".into(), 1, TaskState::Submitted)]
    );
}

#[tokio::test]
async fn where_a_task_went_is_recorded_with_its_first_event_or_alone_soon_after() {
    let mut h = Harness::new().await;
    let (instance, a) = h.start_chain().await;
    let me = h.engine.ctx.me.clone();
    let Harness {
        engine,
        inbox,
        store,
        shutdown,
        ..
    } = h;
    let running = tokio::spawn(engine.run(inbox, shutdown.clone()));
    let row = |store: Store| async move {
        let rows = store.list_task_instances(instance).await.unwrap();
        let a = rows.into_iter().find(|r| r.id == a).unwrap();
        (a.state, a.worker)
    };

    // The dispatch alone: nothing follows, yet it lands (after the short hold).
    me.send(dispatched(a, "w1")).unwrap();
    let recorded = eventually(|| async {
        let (state, worker) = row(store.clone()).await;
        (state == TaskState::Dispatched).then_some(worker)
    })
    .await;
    assert_eq!(recorded.as_deref(), Some("w1"));

    // An end right behind a dispatch: both land, the end acknowledged once they have.
    let (msg, acked) = report(instance, a, TaskEventKind::Success, "");
    me.send(dispatched(a, "w1")).unwrap();
    me.send(msg).unwrap();
    assert_eq!(acked.await.unwrap(), vec![a as u64]);
    assert_eq!(
        row(store.clone()).await,
        (TaskState::Success, Some("w1".to_string()))
    );
    shutdown.cancel();
    running.await.unwrap();
}

#[tokio::test]
async fn where_a_task_went_waits_for_its_end_in_a_later_cycle_and_is_written_with_it() {
    let mut h = Harness::new().await;
    let (instance, a) = h.start_chain().await;

    // The dispatch's cycle writes nothing for the task: its record waits.
    let mut first = h.handled(vec![dispatched(a, "w1")]);
    let waiting = first.defer_records(Instant::now());
    assert_eq!(waiting.len(), 1);
    assert!(first.batch.task_updates.is_empty());

    // The end, a cycle later: one row update carries both.
    let mut second = h.engine.carrying(waiting.clone());
    let (msg, _acked) = report(instance, a, TaskEventKind::Success, "");
    h.engine.handle(msg, &mut second);
    assert!(second.defer_records(Instant::now()).is_empty());
    let [u] = &second.batch.task_updates[..] else {
        panic!("one row update: {:?}", second.batch.task_updates)
    };
    assert_eq!(
        (u.id, u.state, u.worker.as_deref()),
        (a, TaskState::Success, Some("w1"))
    );

    // With no update of the task in time, the record is written alone.
    let mut alone = h.engine.carrying(waiting);
    let late = Instant::now() + RECORD_WAIT;
    assert!(alone.defer_records(late).is_empty());
    let [u] = &alone.batch.task_updates[..] else {
        panic!("the record alone: {:?}", alone.batch.task_updates)
    };
    assert_eq!(
        (u.state, u.worker.as_deref()),
        (TaskState::Dispatched, Some("w1"))
    );
    let epoch = h.engine.runs.get(&instance).unwrap().epoch;
    assert_eq!(
        alone.epochs.get(&instance),
        Some(&epoch),
        "fenced like any write"
    );
}

#[tokio::test]
async fn a_task_start_waits_for_its_end_and_is_written_with_it_or_alone_soon_after() {
    let mut h = Harness::new().await;
    let (instance, a) = h.start_chain().await;
    let mut first = h.handled(vec![dispatched(a, "w1")]);
    let dispatch = first.defer_records(Instant::now());

    // The start, a cycle later, joins the dispatch's record: nothing is written yet, and
    // the event is acknowledged (a start lost to a failover only leaves the row dispatched,
    // and the new master asks the worker).
    let mut second = h.engine.carrying(dispatch);
    let (msg, _acked) = report(instance, a, TaskEventKind::Running, "");
    h.engine.handle(msg, &mut second);
    let started = second.defer_records(Instant::now());
    assert_eq!(started.len(), 1);
    assert!(second.batch.task_updates.is_empty());
    let started_at = started[0].0.started_at;
    assert!(started_at.is_some(), "the start's time is kept");

    // The end, a cycle later: one row update with the start's time.
    let mut third = h.engine.carrying(started.clone());
    let (msg, _acked) = report(instance, a, TaskEventKind::Success, "");
    h.engine.handle(msg, &mut third);
    assert!(third.defer_records(Instant::now()).is_empty());
    let [u] = &third.batch.task_updates[..] else {
        panic!("one row update: {:?}", third.batch.task_updates)
    };
    assert_eq!(
        (u.state, u.worker.as_deref(), u.started_at),
        (TaskState::Success, Some("w1"), started_at)
    );
    assert!(u.ended_at.is_some());

    // A task still running when the wait is up: its start is written alone.
    let mut alone = h.engine.carrying(started);
    assert!(alone.defer_records(Instant::now() + RECORD_WAIT).is_empty());
    let [u] = &alone.batch.task_updates[..] else {
        panic!("the start alone: {:?}", alone.batch.task_updates)
    };
    assert_eq!(
        (u.state, u.worker.as_deref(), u.started_at),
        (TaskState::Running, Some("w1"), started_at)
    );
}

#[tokio::test]
async fn an_ended_task_gives_its_worker_slot_back_before_its_end_is_committed() {
    let mut h = Harness::new().await;
    let (instance, a) = h.start_chain().await;
    h.cycle(vec![dispatched(a, "w1")]).await;

    let (msg, _acked) = report(instance, a, TaskEventKind::Success, "");
    let _uncommitted = h.handled(vec![msg]);
    assert!(
        h.slot_freed(a, "w1"),
        "the slot on w1 is free while the end is still being written"
    );
    assert!(
        matches!(h.place(a), Some(Place::OnWorker(w)) if w == "w1"),
        "the attempt stays in the engine until its end is committed"
    );
}

#[tokio::test]
async fn a_start_value_reaches_a_container_s_shell_script_as_a_variable_not_as_code() {
    let mut h = Harness::new().await;
    let hostile = "$(touch pwned); echo";
    let yaml = r#"name: boxes
tasks:
  - name: string
    type: container
    container: { image: "img:${tag}", command: "echo ${p} ${tag}", env: { P: "${p}" } }
  - name: argv
    type: container
    container: { image: img, command: [bash, -ec, "echo ${p}", "${p}"] }
  - name: pod
    type: kubernetes
    kubernetes: { pod: { containers: [{ name: m, image: img, command: [sh], args: [-c, "echo ${p}"] }] } }
"#;
    let params: Params = [("p", hostile), ("tag", "1.2")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    h.start_with(yaml, params).await;
    let specs = h.pushed_specs();
    let def = |name: &str| -> serde_json::Value {
        let s = specs.iter().find(|s| s.name == name).unwrap();
        assert_eq!(
            s.params.get("SHOAL_PARAM_p").map(String::as_str),
            Some(hostile),
            "the value goes in the task's environment"
        );
        serde_json::from_str(&s.definition_json).unwrap()
    };
    let string = def("string");
    assert_eq!(
        string["container"]["command"],
        r#"echo "${SHOAL_PARAM_p}" 1.2"#
    );
    assert_eq!(
        string["container"]["image"], "img:1.2",
        "a plain value is pasted"
    );
    assert_eq!(
        string["container"]["env"]["P"], hostile,
        "an env value is no code"
    );
    assert_eq!(
        def("argv")["container"]["command"],
        serde_json::json!(["bash", "-ec", r#"echo "${SHOAL_PARAM_p}""#, hostile]),
        "the script is guarded, a positional argument is one argument"
    );
    assert_eq!(
        def("pod")["kubernetes"]["pod"]["containers"][0]["args"],
        serde_json::json!(["-c", r#"echo "${SHOAL_PARAM_p}""#])
    );
}

#[tokio::test]
async fn a_retry_waits_its_interval_on_this_masters_clock_whatever_the_workers_says() {
    let mut h = Harness::new().await;
    let yaml = "name: flaky\nproject: p\ntasks:\n\
        - {name: a, type: shell, command: 'false', retries: 1, retry_interval: 60s}\n";
    let instance = h.start(yaml).await;
    let a = *h.engine.tasks.keys().next().unwrap();
    // The worker's clock is 30 s behind this master's: its failure is stamped 30 s ago.
    let (msg, _) = report(instance, a, TaskEventKind::Failure, "exit 1");
    let EngineMsg::WorkerEvents {
        worker,
        mut events,
        ack,
    } = msg
    else {
        unreachable!()
    };
    events[0].at_ms -= 30_000;
    let msg = EngineMsg::WorkerEvents {
        worker,
        events,
        ack,
    };
    h.cycle(vec![msg]).await;

    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(59)).await;
    assert!(
        h.engine.timers.due().is_empty(),
        "the interval counts from when this master took the failure in, not 30 s earlier"
    );
    tokio::time::advance(Duration::from_secs(2)).await;
    let ready = h.engine.timers.due();
    tokio::time::resume();
    assert!(
        matches!(ready[..], [EngineMsg::Ready { attempt: 2, .. }]),
        "{}",
        ready.len()
    );
}
