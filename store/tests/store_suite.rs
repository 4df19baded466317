//! The store suite: every test runs against SQLite (a temp file), against Postgres (a
//! fresh database of the test kit on 127.0.0.1:5432) and against MySQL/MariaDB (a fresh
//! database on 127.0.0.1:3306), each dropped afterwards, like quickwit's
//! `metastore_test_suite!`. A server being unreachable fails its part; none is skipped.

use shoal_common::Error;
use shoal_common::definition::WorkflowDef;
use shoal_common::start::*;
use shoal_common::types::{CommandKind, Priority, TaskState, WorkflowState, now_ms};
use shoal_store::*;
use sqlx::Connection;
use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::time::Duration;

/// How long a test waits for a wake-up before failing instead of hanging.
const WAKE_TIMEOUT: Duration = Duration::from_secs(10);

macro_rules! store_suite {
    ($($test:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    crate::run(crate::Backend::Sqlite, crate::$test).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    crate::run(crate::Backend::Postgres, crate::$test).await;
                }
            )*
        }
        mod mysql {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    crate::run(crate::Backend::Mysql, crate::$test).await;
                }
            )*
        }
    };
}

store_suite!(
    definitions_are_versioned,
    concurrent_puts_never_collide,
    a_command_becomes_exactly_one_instance,
    a_command_due_later_waits_and_a_pending_one_is_cancelled_once,
    a_command_due_after_its_workflow_went_offline_is_refused,
    command_priority_overrides_the_definition,
    concurrent_claimers_take_disjoint_commands,
    a_missing_definition_version_becomes_an_error_command,
    new_task_ids_come_back_in_input_order,
    a_retried_write_adds_no_attempt_twice,
    task_updates_keep_the_fields_they_leave_out,
    instance_updates_are_fenced_by_epoch,
    list_instances_filters_and_orders_newest_first,
    command_signal_wakes_after_insert,
    corrupt_rows_are_errors_not_panics,
    unknown_ids_read_as_none,
    a_recovery_command_takes_over_the_instance_once,
    all_writes_of_a_lost_instance_are_fenced,
    a_child_run_is_withdrawn_until_a_master_claims_it,
    schedules_are_one_per_workflow_and_checked,
    a_schedule_time_fires_once,
    fire_records_far_behind_the_cursor_are_dropped,
    dependent_checks_use_the_schedule_time,
    a_serial_backfill_runs_one_date_after_another,
    a_backfill_stops_on_failure_when_asked_and_runs_n_at_once,
    a_chained_backfill_waits_for_the_stages_before_it,
    a_dependent_backfill_starts_only_while_its_maker_may_start_runs_there,
    serial_starts_run_wait_or_are_discarded_by_execution_type,
    ending_a_serial_run_starts_the_next_one_once,
    concurrent_claims_start_one_run_of_a_serial_workflow,
    recovering_a_serial_run_is_refused_while_another_is_active,
    task_group_slots_go_to_the_best_waiters_and_free_when_attempts_end,
    concurrent_acquirers_never_exceed_a_groups_slots,
    task_group_mistakes_change_nothing,
    alerts_are_written_with_the_run_and_leased_to_one_sender,
    alert_channels_are_kept_and_mistakes_refused,
    instances_are_paged_and_counted_within_a_time_range,
    a_page_of_100000_instances_is_read_quickly,
    projects_versions_and_the_latest_run_of_each_workflow,
    the_first_admin_is_created_once_and_tokens_stop_when_revoked_expired_or_disabled,
    projects_hold_members_and_are_deleted_only_when_empty,
    a_mutation_and_its_audit_row_commit_together,
    a_child_run_in_another_project_needs_its_starters_role_there_now,
    secrets_are_kept_sealed_per_project,
    an_environment_is_kept_per_project_and_not_deleted_while_used,
    a_repeated_idempotency_key_returns_the_first_run_and_starts_nothing,
    concurrent_calls_with_one_key_start_one_run,
    a_rejected_command_and_the_triggers_of_the_latest_versions_are_read,
    retention_deletes_instances_ended_before_the_cutoff_with_their_rows,
    a_longer_kept_log_replaces_a_shorter_one_and_never_the_reverse,
    a_deleted_project_takes_its_runs_and_one_made_again_starts_empty,
    concurrent_polls_take_each_external_task_once,
    only_the_lease_holder_renews_and_completes_and_a_lapse_ends_it,
    thousands_of_offers_are_written_in_one_cycle,
    queues_count_their_offers_and_the_workers_seen_on_them,
    concurrent_events_complete_a_wait_once_and_the_rest_are_kept_for_one_wait_each,
    an_event_reaches_only_its_project_event_and_key_until_it_expires,
    concurrent_takers_of_one_message_start_one_run,
    a_batch_takes_each_identity_once_in_one_transaction,
    ignored_messages_and_consumers_are_kept_per_trigger,
);

#[path = "store_suite/schedules.rs"]
mod schedules;
use schedules::*;

#[path = "store_suite/listing.rs"]
mod listing;
use listing::*;

#[path = "store_suite/schema_parity.rs"]
mod schema_parity;

#[path = "store_suite/in_place.rs"]
mod in_place;

#[path = "store_suite/idle_connections.rs"]
mod idle_connections;

#[path = "store_suite/access.rs"]
mod access;
use access::*;

#[path = "store_suite/serial_groups_alerts.rs"]
mod serial_groups_alerts;
use serial_groups_alerts::*;

#[path = "store_suite/projects.rs"]
mod projects;
use projects::*;

#[path = "store_suite/triggers.rs"]
mod triggers;
use triggers::*;

#[path = "store_suite/external.rs"]
mod external;
use external::*;

#[path = "store_suite/events.rs"]
mod events;
use events::*;

#[path = "store_suite/broker_triggers.rs"]
mod broker_triggers;
use broker_triggers::*;

// ---- harness ----

/// What a test gets: the store and the URL it was opened with.
#[derive(Clone)]
struct Ctx {
    store: Store,
    url: String,
}

/// Runs `$body` with `$conn` a fresh connection of `$ctx`'s backend (each backend's
/// connection is its own type, so the body is written once and typed three times).
macro_rules! on_connection {
    ($ctx:expr, |$conn:ident| $body:expr) => {
        match $ctx.store.backend() {
            Backend::Sqlite => {
                let mut $conn = sqlx::SqliteConnection::connect(&$ctx.url).await.unwrap();
                $body
            }
            Backend::Postgres => {
                let mut $conn = sqlx::PgConnection::connect(&$ctx.url).await.unwrap();
                $body
            }
            Backend::Mysql => {
                let mut $conn = sqlx::MySqlConnection::connect(&$ctx.url).await.unwrap();
                $body
            }
        }
    };
}

impl Ctx {
    /// Runs one statement behind the store's back (to plant corrupt data, or to read a
    /// number the store does not expose); its first column of its first row, if any.
    async fn raw(&self, sql: &'static str) -> Option<i64> {
        on_connection!(self, |conn| sqlx::query_scalar::<_, i64>(sql)
            .fetch_optional(&mut conn)
            .await
            .unwrap())
    }

    async fn count_raw(&self, sql: &'static str) -> i64 {
        self.raw(sql).await.expect("a number")
    }

    /// Runs one statement behind the store's back, whatever it answers.
    async fn exec_raw(&self, sql: &'static str) {
        on_connection!(self, |conn| {
            sqlx::query(sql).execute(&mut conn).await.unwrap();
        })
    }
}

enum Cleanup {
    Sqlite(tempfile::TempDir),
    /// Dropping it drops the database.
    Postgres(shoal_testkit::TestDb),
    Mysql(shoal_testkit::TestMysqlDb),
}

async fn open(backend: Backend) -> (Ctx, Cleanup) {
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite://{}", dir.path().join("shoal.db").display());
            let store = Store::connect(&url).await.unwrap();
            (Ctx { store, url }, Cleanup::Sqlite(dir))
        }
        Backend::Postgres => {
            // The test kit's fresh database (`SHOAL_TEST_POSTGRES` picks another server).
            let db = shoal_testkit::TestDb::create("shoal_test");
            let url = db.url.clone();
            let store = Store::connect(&url).await.unwrap();
            (Ctx { store, url }, Cleanup::Postgres(db))
        }
        Backend::Mysql => {
            let db = shoal_testkit::TestMysqlDb::create("shoal_test");
            let url = db.url.clone();
            let store = Store::connect(&url).await.unwrap();
            (Ctx { store, url }, Cleanup::Mysql(db))
        }
    }
}

/// Removes a test's database. Best effort, like any cleanup.
async fn cleanup(cleanup: Cleanup) {
    match cleanup {
        Cleanup::Sqlite(dir) => {
            let _ = dir.close();
        }
        // DROP ... WITH (FORCE): it ends the connections the store's pool still holds.
        Cleanup::Postgres(db) => drop(db),
        Cleanup::Mysql(db) => drop(db),
    }
}

/// Runs one test body and always cleans up; a failure in the body is re-raised after.
async fn run<F, Fut>(backend: Backend, test: F)
where
    F: FnOnce(Ctx) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (ctx, cleanup_of) = open(backend).await;
    let outcome = tokio::spawn(test(ctx)).await;
    cleanup(cleanup_of).await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

// ---- fixtures ----

fn workflow(project: &str, name: &str, description: &str) -> WorkflowDef {
    WorkflowDef::parse(&format!(
        "name: {name}\nproject: {project}\ndescription: '{description}'\npriority: low\n\
         params: {{ dt: '2026-01-01' }}\ntasks:\n\
         - {{ name: a, type: shell, command: 'echo ${{dt}}' }}\n\
         - {{ name: b, type: noop, depends_on: [a] }}\n"
    ))
    .unwrap()
}

fn command(project: &str, workflow: &str, version: i32) -> NewCommand {
    NewCommand {
        kind: CommandKind::Start,
        project: project.to_string(),
        workflow: workflow.to_string(),
        version,
        params: BTreeMap::new(),
        priority: None,
        workflow_instance_id: None,
        options: Default::default(),
        parent_task_id: None,
        schedule_time: None,
        due_at: None,
    }
}

/// A running instance of a fresh workflow, owned by "m1" at epoch 7.
async fn running_instance(store: &Store, name: &str) -> InstanceRow {
    let (version, _) = store
        .put_definition(&workflow("p", name, ""))
        .await
        .unwrap();
    store
        .insert_command(&command("p", name, version))
        .await
        .unwrap();
    let mut claimed = store.claim_commands("m1", 7, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    claimed.remove(0).instance
}

fn new_task(instance: &InstanceRow, name: &str) -> NewTaskInstance {
    NewTaskInstance {
        workflow_instance_id: instance.id,
        run: instance.run,
        name: name.to_string(),
        task_type: "shell".to_string(),
        attempt: 1,
        priority: Priority::Medium,
        worker_group: "default".to_string(),
        state: TaskState::Submitted,
        submitted_at: 1_000,
        task_group: None,
        task_group_priority: 0,
        message: None,
    }
}

async fn write(store: &Store, batch: WriteBatch) -> WriteResult {
    store.write_batch(&batch).await.unwrap()
}

// ---- tests ----

async fn a_child_run_is_withdrawn_until_a_master_claims_it(ctx: Ctx) {
    let store = &ctx.store;
    let parent = running_instance(store, "parent").await;
    store
        .put_definition(&workflow("p", "kid", ""))
        .await
        .unwrap();
    let ids = write(
        store,
        WriteBatch {
            new_tasks: vec![new_task(&parent, "one"), new_task(&parent, "two")],
            epochs: vec![(parent.id, parent.owner_epoch)],
            ..Default::default()
        },
    )
    .await
    .new_task_ids;
    let child = |parent_task_id| ChildStart {
        parent_instance_id: parent.id,
        parent_task_id,
        project: "p".into(),
        workflow: "kid".into(),
        params: Params::new(),
        priority: Priority::Medium,
        schedule_time: None,
        options: StartOptions::default(),
    };
    let batch = WriteBatch {
        children: vec![child(ids[0]), child(ids[1])],
        epochs: vec![(parent.id, parent.owner_epoch)],
        ..Default::default()
    };
    write(store, batch).await;

    assert_eq!(
        store.withdraw_child(ids[0]).await.unwrap(),
        ChildRun::Withdrawn,
        "an unclaimed child command is taken back"
    );
    assert_eq!(store.withdraw_child(ids[0]).await.unwrap(), ChildRun::None);
    let claimed = store.claim_commands("m2", 1, 10).await.unwrap();
    assert_eq!(claimed.len(), 1, "only the other child is left to claim");
    assert_eq!(
        store.withdraw_child(ids[1]).await.unwrap(),
        ChildRun::Instance {
            id: claimed[0].instance.id,
            owner: Some("m2".into()),
            state: WorkflowState::Running,
        },
        "a claimed child is an instance to stop through its owner"
    );
}

async fn definitions_are_versioned(ctx: Ctx) {
    let store = ctx.store;
    let v1 = workflow("p", "w", "first");
    let v2 = workflow("p", "w", "second");
    assert_eq!(store.put_definition(&v1).await.unwrap(), (1, true));
    assert_eq!(
        store.put_definition(&v1).await.unwrap(),
        (1, false),
        "same spec, same version"
    );
    assert_eq!(store.put_definition(&v2).await.unwrap(), (2, true));
    // Only the latest version counts as "unchanged".
    assert_eq!(store.put_definition(&v1).await.unwrap(), (3, true));

    let latest = store.get_definition("p", "w", None).await.unwrap().unwrap();
    assert_eq!((latest.version, &latest.definition), (3, &v1));
    let second = store
        .get_definition("p", "w", Some(2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((second.project.as_str(), second.name.as_str()), ("p", "w"));
    assert_eq!((second.version, &second.definition), (2, &v2));
    assert!(second.created_at > 0);
    assert_eq!(store.get_definition("p", "w", Some(4)).await.unwrap(), None);
    assert_eq!(
        store.get_definition("p", "ghost", None).await.unwrap(),
        None
    );

    store
        .put_definition(&workflow("p", "another", ""))
        .await
        .unwrap();
    store.put_definition(&workflow("q", "w", "")).await.unwrap();
    let listed = store.list_definitions("p").await.unwrap();
    let summary: Vec<_> = listed
        .iter()
        .map(|d| (d.project.as_str(), d.name.as_str(), d.latest_version))
        .collect();
    assert_eq!(summary, [("p", "another", 1), ("p", "w", 3)]);
    assert!(listed[1].updated_at >= latest.created_at);
    assert!(store.list_definitions("nobody").await.unwrap().is_empty());
}

async fn concurrent_puts_never_collide(ctx: Ctx) {
    let store = ctx.store;
    let same = workflow("p", "w", "same");
    let puts: Vec<_> = (0..8)
        .map(|_| {
            let (store, def) = (store.clone(), same.clone());
            tokio::spawn(async move { store.put_definition(&def).await })
        })
        .collect();
    let mut created = 0;
    for put in puts {
        let (version, new) = put.await.unwrap().unwrap();
        assert_eq!(version, 1);
        created += usize::from(new);
    }
    assert_eq!(created, 1, "one of the identical puts creates version 1");

    let puts: Vec<_> = (0..8)
        .map(|i| {
            let (store, def) = (store.clone(), workflow("p", "w", &format!("edit {i}")));
            tokio::spawn(async move { store.put_definition(&def).await })
        })
        .collect();
    let mut versions = Vec::new();
    for put in puts {
        let (version, new) = put.await.unwrap().unwrap();
        assert!(new);
        versions.push(version);
    }
    versions.sort();
    assert_eq!(versions, (2..=9).collect::<Vec<_>>());
}

async fn a_command_becomes_exactly_one_instance(ctx: Ctx) {
    let store = ctx.store;
    let def = workflow("p", "w", "");
    let (version, _) = store.put_definition(&def).await.unwrap();
    let mut cmd = command("p", "w", version);
    cmd.params
        .insert("dt".to_string(), "2026-02-02".to_string());
    let before = now_ms();
    let id = store.insert_command(&cmd).await.unwrap();
    assert_eq!(
        store.command_status(id).await.unwrap(),
        Some(CommandStatus::Pending)
    );

    let claimed = store.claim_commands("master-1:5678", 7, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let ClaimedInstance {
        kind,
        instance,
        definition,
        tasks,
    } = &claimed[0];
    assert_eq!(*kind, CommandKind::Start);
    assert!(tasks.is_empty());
    assert_eq!(definition, &def);
    assert_eq!(instance.command_id, id);
    assert_eq!(
        (instance.project.as_str(), instance.workflow.as_str()),
        ("p", "w")
    );
    assert_eq!(instance.version, version);
    assert_eq!(instance.state, WorkflowState::Running);
    assert_eq!(
        instance.priority,
        Priority::Low,
        "the definition's priority"
    );
    assert_eq!(instance.params, cmd.params);
    assert_eq!(instance.owner.as_deref(), Some("master-1:5678"));
    assert_eq!((instance.owner_epoch, instance.run), (7, 1));
    assert!(instance.created_at >= before && instance.started_at >= Some(instance.created_at));
    assert_eq!(instance.ended_at, None);

    assert_eq!(
        store.command_status(id).await.unwrap(),
        Some(CommandStatus::Done {
            workflow_instance_id: instance.id
        })
    );
    assert!(
        store
            .claim_commands("master-2:5678", 1, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.get_instance(instance.id).await.unwrap().as_ref(),
        Some(instance)
    );
    assert_eq!(
        store
            .list_instances(&InstanceFilter::default())
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(store.claim_commands("m", 1, 0).await.unwrap().is_empty());
}

async fn a_command_due_after_its_workflow_went_offline_is_refused(ctx: Ctx) {
    let store = ctx.store;
    let (version, _) = store.put_definition(&workflow("p", "w", "")).await.unwrap();
    let due = |ms| NewCommand {
        due_at: Some(now_ms() + ms),
        ..command("p", "w", version)
    };
    let later = store.insert_command(&due(300)).await.unwrap();
    store.set_online("p", "w", false).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(store.claim_commands("m", 1, 10).await.unwrap().is_empty());
    match store.command_status(later).await.unwrap() {
        Some(CommandStatus::Error { error }) => {
            assert!(
                error.contains("taken offline before this run became due"),
                "{error}"
            )
        }
        other => panic!("{other:?}"),
    }
    // Online again, a run at a later time runs as usual.
    store.set_online("p", "w", true).await.unwrap();
    let again = store.insert_command(&due(0)).await.unwrap();
    let claimed = store.claim_commands("m", 1, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].instance.command_id, again);
}

async fn a_command_due_later_waits_and_a_pending_one_is_cancelled_once(ctx: Ctx) {
    let store = ctx.store;
    let (version, _) = store.put_definition(&workflow("p", "w", "")).await.unwrap();
    let due = now_ms() + 1500;
    let later = store
        .insert_command(&NewCommand {
            due_at: Some(due),
            ..command("p", "w", version)
        })
        .await
        .unwrap();
    let now = store
        .insert_command(&command("p", "w", version))
        .await
        .unwrap();
    assert_eq!(store.next_due_at().await.unwrap(), Some(due));
    let listed = store.pending_commands("p").await.unwrap();
    let ids: Vec<(i64, Option<i64>)> = listed.iter().map(|c| (c.id, c.due_at)).collect();
    assert_eq!(ids, [(now, None), (later, Some(due))], "soonest due first");
    assert!(store.pending_commands("other").await.unwrap().is_empty());

    let claimed = store.claim_commands("m", 1, 10).await.unwrap();
    assert_eq!(claimed.len(), 1, "only the one due now");
    assert_eq!(claimed[0].instance.command_id, now);
    assert_eq!(
        store.cancel_command(now, "ann").await.unwrap(),
        Err(CancelRefused::Started {
            workflow_instance_id: claimed[0].instance.id
        })
    );
    tokio::time::sleep(Duration::from_millis(1600)).await;
    assert_eq!(store.next_due_at().await.unwrap(), None);
    let claimed = store.claim_commands("m", 1, 10).await.unwrap();
    assert_eq!(claimed.len(), 1, "due now");
    assert_eq!(claimed[0].instance.command_id, later);

    let doomed = store
        .insert_command(&NewCommand {
            due_at: Some(now_ms() + 60_000),
            ..command("p", "w", version)
        })
        .await
        .unwrap();
    assert_eq!(store.cancel_command(doomed, "ann").await.unwrap(), Ok(()));
    match store.command_status(doomed).await.unwrap() {
        Some(CommandStatus::Error { error }) => {
            assert!(error.contains("cancelled by ann"), "{error}")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        store.cancel_command(doomed, "ann").await.unwrap(),
        Err(CancelRefused::Ended { .. })
    ));
    assert_eq!(
        store.cancel_command(999_999, "ann").await.unwrap(),
        Err(CancelRefused::Missing)
    );
    assert!(store.pending_commands("p").await.unwrap().is_empty());
    assert_eq!(store.next_due_at().await.unwrap(), None);
}

async fn command_priority_overrides_the_definition(ctx: Ctx) {
    let store = ctx.store;
    store.put_definition(&workflow("p", "w", "")).await.unwrap();
    let mut cmd = command("p", "w", 1);
    cmd.priority = Some(Priority::Highest);
    store.insert_command(&cmd).await.unwrap();
    let claimed = store.claim_commands("m", 1, 10).await.unwrap();
    assert_eq!(claimed[0].instance.priority, Priority::Highest);
}

async fn concurrent_claimers_take_disjoint_commands(ctx: Ctx) {
    let store = ctx.store;
    store.put_definition(&workflow("p", "w", "")).await.unwrap();
    let mut command_ids = HashSet::new();
    for _ in 0..200 {
        command_ids.insert(store.insert_command(&command("p", "w", 1)).await.unwrap());
    }
    let claimers: Vec<_> = ["m1", "m2"]
        .into_iter()
        .map(|owner| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let batch = store.claim_commands(owner, 1, 7).await.unwrap();
                    if batch.is_empty() {
                        return mine;
                    }
                    mine.extend(batch.into_iter().map(|c| c.instance));
                }
            })
        })
        .collect();
    let mut instance_ids = HashSet::new();
    let mut claimed_commands = HashSet::new();
    for claimer in claimers {
        for instance in claimer.await.unwrap() {
            assert!(
                instance_ids.insert(instance.id),
                "instance {} twice",
                instance.id
            );
            assert!(
                claimed_commands.insert(instance.command_id),
                "command claimed twice"
            );
        }
    }
    assert_eq!(claimed_commands, command_ids);
    let all = store
        .list_instances(&InstanceFilter {
            limit: Some(1000),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 200);
    for id in command_ids {
        assert!(matches!(
            store.command_status(id).await.unwrap(),
            Some(CommandStatus::Done { .. })
        ));
    }
}

async fn a_missing_definition_version_becomes_an_error_command(ctx: Ctx) {
    let store = ctx.store;
    store.put_definition(&workflow("p", "w", "")).await.unwrap();
    let good = store.insert_command(&command("p", "w", 1)).await.unwrap();
    let bad = store.insert_command(&command("p", "w", 3)).await.unwrap();
    let ghost = store
        .insert_command(&command("p", "ghost", 1))
        .await
        .unwrap();

    let claimed = store.claim_commands("m", 1, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].instance.command_id, good);
    for (id, reason) in [
        (bad, "workflow 'p/w' version 3 does not exist"),
        (ghost, "workflow 'p/ghost' version 1 does not exist"),
    ] {
        match store.command_status(id).await.unwrap() {
            Some(CommandStatus::Error { error }) => assert!(error.contains(reason), "{error}"),
            other => panic!("command {id}: expected an error status, got {other:?}"),
        }
    }
    assert!(
        store.claim_commands("m", 1, 10).await.unwrap().is_empty(),
        "all commands gone"
    );
    assert_eq!(
        store
            .list_instances(&InstanceFilter::default())
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(store.command_status(ghost + 1000).await.unwrap(), None);
}

/// A batch written again (its first commit's outcome was lost, and it landed) finds its
/// attempts there: the same ids come back and no row is added twice; new attempts in the
/// same batch are added.
async fn a_retried_write_adds_no_attempt_twice(ctx: Ctx) {
    let store = ctx.store;
    let (one, two) = (
        running_instance(&store, "w1").await,
        running_instance(&store, "w2").await,
    );
    let batch = |names: &[(&InstanceRow, &str)]| WriteBatch {
        new_tasks: names.iter().map(|(i, n)| new_task(i, n)).collect(),
        ..Default::default()
    };
    let first = write(&store, batch(&[(&one, "a"), (&two, "a"), (&one, "b")])).await;
    let again = write(
        &store,
        batch(&[(&one, "a"), (&one, "c"), (&two, "a"), (&one, "b")]),
    )
    .await;
    let ids = &first.new_task_ids;
    assert_eq!(again.new_task_ids[0], ids[0]);
    assert_eq!(
        again.new_task_ids[2], ids[1],
        "by instance, not by name alone"
    );
    assert_eq!(again.new_task_ids[3], ids[2]);
    assert!(
        !ids.contains(&again.new_task_ids[1]),
        "a new attempt is added"
    );
    let listed = store.list_task_instances(one.id).await.unwrap();
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"], "one row per attempt");
    assert_eq!(store.list_task_instances(two.id).await.unwrap().len(), 1);
}

async fn new_task_ids_come_back_in_input_order(ctx: Ctx) {
    let store = ctx.store;
    let instance = running_instance(&store, "w").await;
    let names = ["extract", "b", "a", "load", "c"];
    let result = write(
        &store,
        WriteBatch {
            new_tasks: names.iter().map(|n| new_task(&instance, n)).collect(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(result.new_task_ids.len(), names.len());
    assert!(result.fenced_instances.is_empty());
    for (id, name) in result.new_task_ids.iter().zip(names) {
        let task = store.get_task_instance(*id).await.unwrap().unwrap();
        assert_eq!(task.name, name);
        assert_eq!(task.workflow_instance_id, instance.id);
        assert_eq!(
            (task.state, task.attempt, task.submitted_at),
            (TaskState::Submitted, 1, 1_000)
        );
        assert_eq!(
            (task.worker, task.started_at, task.exit_code),
            (None, None, None)
        );
        assert!(task.output.is_empty());
    }
    let listed = store.list_task_instances(instance.id).await.unwrap();
    let listed: Vec<_> = listed.iter().map(|t| (t.id, t.name.as_str())).collect();
    let written: Vec<_> = result.new_task_ids.iter().copied().zip(names).collect();
    assert_eq!(listed, written, "listed by id, which follows input order");

    // More rows than one statement may bind on SQLite (8 values per row): several chunks.
    let many: Vec<_> = (0..5_000)
        .map(|i| new_task(&instance, &format!("t{i}")))
        .collect();
    let result = write(
        &store,
        WriteBatch {
            new_tasks: many,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(result.new_task_ids.len(), 5_000);
    for i in [0, 4_095, 4_096, 4_999] {
        let task = store
            .get_task_instance(result.new_task_ids[i])
            .await
            .unwrap()
            .unwrap();
        assert_eq!(task.name, format!("t{i}"));
    }
    assert!(result.new_task_ids.windows(2).all(|w| w[0] < w[1]));
}

async fn task_updates_keep_the_fields_they_leave_out(ctx: Ctx) {
    let store = ctx.store;
    let instance = running_instance(&store, "w").await;
    let ids = write(
        &store,
        WriteBatch {
            new_tasks: vec![new_task(&instance, "a"), new_task(&instance, "b")],
            ..Default::default()
        },
    )
    .await
    .new_task_ids;
    let (a, b) = (ids[0], ids[1]);

    let mut dispatched = TaskUpdate::state(a, TaskState::Dispatched);
    dispatched.worker = Some("worker-1:1234".to_string());
    let mut running = TaskUpdate::state(a, TaskState::Running);
    running.started_at = Some(2_000);
    write(
        &store,
        WriteBatch {
            // Two updates of one task in one batch: both apply, in order.
            task_updates: vec![
                dispatched,
                running,
                TaskUpdate::state(b, TaskState::Delayed),
            ],
            ..Default::default()
        },
    )
    .await;
    let task = store.get_task_instance(a).await.unwrap().unwrap();
    assert_eq!(task.state, TaskState::Running);
    assert_eq!(task.worker.as_deref(), Some("worker-1:1234"));
    assert_eq!(task.started_at, Some(2_000));
    assert_eq!(
        store.get_task_instance(b).await.unwrap().unwrap().state,
        TaskState::Delayed
    );

    let mut done = TaskUpdate::state(a, TaskState::Success);
    done.ended_at = Some(3_000);
    done.exit_code = Some(0);
    done.output = Some(BTreeMap::from([("rows".to_string(), "42".to_string())]));
    done.message = Some("ok".to_string());
    write(
        &store,
        WriteBatch {
            task_updates: vec![done],
            ..Default::default()
        },
    )
    .await;
    let task = store.get_task_instance(a).await.unwrap().unwrap();
    assert_eq!(task.state, TaskState::Success);
    assert_eq!(task.worker.as_deref(), Some("worker-1:1234"), "kept");
    assert_eq!(task.started_at, Some(2_000), "kept");
    assert_eq!((task.ended_at, task.exit_code), (Some(3_000), Some(0)));
    assert_eq!(task.output["rows"], "42");
    assert_eq!(task.message.as_deref(), Some("ok"));

    // A state-only update leaves everything else as it was.
    write(
        &store,
        WriteBatch {
            task_updates: vec![TaskUpdate::state(a, TaskState::ForcedSuccess)],
            ..Default::default()
        },
    )
    .await;
    let after = store.get_task_instance(a).await.unwrap().unwrap();
    assert_eq!(
        after,
        TaskInstanceRow {
            state: TaskState::ForcedSuccess,
            ..task
        }
    );
}

async fn instance_updates_are_fenced_by_epoch(ctx: Ctx) {
    let store = ctx.store;
    let mine = running_instance(&store, "mine").await;
    let lost = running_instance(&store, "lost").await;
    assert_eq!((mine.owner_epoch, lost.owner_epoch), (7, 7));

    let result = write(
        &store,
        WriteBatch {
            new_tasks: vec![new_task(&mine, "a")],
            instance_updates: vec![
                InstanceUpdate {
                    id: mine.id,
                    owner_epoch: 7,
                    state: WorkflowState::Success,
                    ended_at: Some(9_000),
                },
                InstanceUpdate {
                    id: lost.id,
                    owner_epoch: 6,
                    state: WorkflowState::Failure,
                    ended_at: Some(9_000),
                },
            ],
            ..Default::default()
        },
    )
    .await;
    assert_eq!(result.fenced_instances, [lost.id]);
    assert_eq!(result.new_task_ids.len(), 1);
    let updated = store.get_instance(mine.id).await.unwrap().unwrap();
    assert_eq!(
        (updated.state, updated.ended_at),
        (WorkflowState::Success, Some(9_000))
    );
    assert_eq!(
        store.get_instance(lost.id).await.unwrap().unwrap(),
        lost,
        "unchanged"
    );

    // ended_at None keeps the stored value.
    let result = write(
        &store,
        WriteBatch {
            instance_updates: vec![InstanceUpdate {
                id: mine.id,
                owner_epoch: 7,
                state: WorkflowState::Failure,
                ended_at: None,
            }],
            ..Default::default()
        },
    )
    .await;
    assert!(result.fenced_instances.is_empty());
    let updated = store.get_instance(mine.id).await.unwrap().unwrap();
    assert_eq!(
        (updated.state, updated.ended_at),
        (WorkflowState::Failure, Some(9_000))
    );
}

async fn list_instances_filters_and_orders_newest_first(ctx: Ctx) {
    let store = ctx.store;
    for (project, name) in [("p", "etl"), ("p", "report"), ("q", "etl")] {
        store
            .put_definition(&workflow(project, name, ""))
            .await
            .unwrap();
    }
    for (project, name) in [("p", "etl"), ("p", "report"), ("q", "etl"), ("p", "etl")] {
        store
            .insert_command(&command(project, name, 1))
            .await
            .unwrap();
    }
    let claimed = store.claim_commands("m", 7, 10).await.unwrap();
    let ids: Vec<i64> = claimed.iter().map(|c| c.instance.id).collect();
    write(
        &store,
        WriteBatch {
            instance_updates: vec![InstanceUpdate {
                id: ids[1],
                owner_epoch: 7,
                state: WorkflowState::Failure,
                ended_at: Some(5),
            }],
            ..Default::default()
        },
    )
    .await;

    let list = |filter: InstanceFilter| {
        let store = store.clone();
        async move {
            let rows = store.list_instances(&filter).await.unwrap();
            rows.into_iter().map(|r| r.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(
        list(InstanceFilter::default()).await,
        [ids[3], ids[2], ids[1], ids[0]]
    );
    let by_project = InstanceFilter {
        project: Some("p".into()),
        ..Default::default()
    };
    assert_eq!(list(by_project.clone()).await, [ids[3], ids[1], ids[0]]);
    let by_workflow = InstanceFilter {
        workflow: Some("etl".into()),
        ..Default::default()
    };
    assert_eq!(list(by_workflow).await, [ids[3], ids[2], ids[0]]);
    let both = InstanceFilter {
        workflow: Some("etl".into()),
        ..by_project
    };
    assert_eq!(list(both).await, [ids[3], ids[0]]);
    let failed = InstanceFilter {
        state: Some(WorkflowState::Failure),
        ..Default::default()
    };
    assert_eq!(list(failed).await, [ids[1]]);
    let limited = InstanceFilter {
        limit: Some(2),
        ..Default::default()
    };
    assert_eq!(list(limited).await, [ids[3], ids[2]]);

    // The default limit is 100.
    for _ in 0..100 {
        store.insert_command(&command("p", "etl", 1)).await.unwrap();
    }
    assert_eq!(store.claim_commands("m", 7, 1000).await.unwrap().len(), 100);
    assert_eq!(list(InstanceFilter::default()).await.len(), 100);
    let more = InstanceFilter {
        limit: Some(500),
        ..Default::default()
    };
    assert_eq!(list(more).await.len(), 104);
}

async fn command_signal_wakes_after_insert(ctx: Ctx) {
    let store = ctx.store;
    let mut signal = store.command_signal().await.unwrap();

    // Written while nobody waits: the next recv still returns.
    store.insert_command(&command("p", "w", 1)).await.unwrap();
    tokio::time::timeout(WAKE_TIMEOUT, signal.recv())
        .await
        .expect("recv returns for a command written before it was called");

    // Written while waiting.
    let writer = store.clone();
    let insert = tokio::spawn(async move {
        // Meant to land while recv waits; nothing shows that it waits, and landing before
        // is the case above, so this only steers the order, it waits for nothing.
        tokio::time::sleep(Duration::from_millis(100)).await;
        writer.insert_command(&command("p", "w", 1)).await.unwrap();
    });
    tokio::time::timeout(WAKE_TIMEOUT, signal.recv())
        .await
        .expect("recv returns for a command written while waiting");
    insert.await.unwrap();
}

async fn corrupt_rows_are_errors_not_panics(ctx: Ctx) {
    let store = ctx.store.clone();
    let instance = running_instance(&store, "w").await;
    let task = write(
        &store,
        WriteBatch {
            new_tasks: vec![new_task(&instance, "a")],
            ..Default::default()
        },
    )
    .await
    .new_task_ids[0];

    ctx.exec_raw("UPDATE workflow_instance SET state = 'melted'")
        .await;
    match store.get_instance(instance.id).await {
        Err(Error::Corrupt(what)) => assert!(what.contains("melted"), "{what}"),
        other => panic!("expected a corrupt-data error, got {other:?}"),
    }
    assert!(matches!(
        store.list_instances(&InstanceFilter::default()).await,
        Err(Error::Corrupt(_))
    ));

    ctx.exec_raw("UPDATE task_instance SET output = 'not json'")
        .await;
    match store.get_task_instance(task).await {
        Err(Error::Corrupt(what)) => assert!(what.contains("output"), "{what}"),
        other => panic!("expected a corrupt-data error, got {other:?}"),
    }

    ctx.exec_raw("UPDATE workflow_definition SET spec = '{'")
        .await;
    assert!(matches!(
        store.get_definition("p", "w", None).await,
        Err(Error::Corrupt(_))
    ));
    // A claim rejects the command whose definition is unreadable instead of failing.
    let id = store.insert_command(&command("p", "w", 1)).await.unwrap();
    assert!(store.claim_commands("m", 1, 10).await.unwrap().is_empty());
    assert!(matches!(
        store.command_status(id).await.unwrap(),
        Some(CommandStatus::Error { .. })
    ));
    // Putting a definition again repairs it with a new version.
    assert_eq!(
        store.put_definition(&workflow("p", "w", "")).await.unwrap(),
        (2, true)
    );
}

async fn unknown_ids_read_as_none(ctx: Ctx) {
    let store = ctx.store;
    assert_eq!(store.get_instance(12345).await.unwrap(), None);
    assert_eq!(store.get_task_instance(12345).await.unwrap(), None);
    assert_eq!(store.command_status(12345).await.unwrap(), None);
    assert!(store.list_task_instances(12345).await.unwrap().is_empty());
    assert_eq!(
        store.write_batch(&WriteBatch::default()).await.unwrap(),
        WriteResult::default()
    );
}

/// Resubmit-failed on a failed instance: the claim re-points the instance at the command,
/// bumps its epoch (fencing the old owner), returns the current run's attempts, and a
/// second pending action on the same instance is refused.
async fn a_recovery_command_takes_over_the_instance_once(ctx: Ctx) {
    let store = &ctx.store;
    let instance = running_instance(store, "recover").await;
    let ids = write(
        store,
        WriteBatch {
            new_tasks: vec![new_task(&instance, "a"), new_task(&instance, "b")],
            ..Default::default()
        },
    )
    .await
    .new_task_ids;
    let mut failed = TaskUpdate::state(ids[1], TaskState::Failure);
    failed.ended_at = Some(2_000);
    write(
        store,
        WriteBatch {
            task_updates: vec![TaskUpdate::state(ids[0], TaskState::Success), failed],
            instance_updates: vec![InstanceUpdate {
                id: instance.id,
                owner_epoch: instance.owner_epoch,
                state: WorkflowState::Failure,
                ended_at: Some(3_000),
            }],
            ..Default::default()
        },
    )
    .await;

    let mut cmd = command("p", "recover", instance.version);
    cmd.kind = CommandKind::ResubmitFailed;
    cmd.workflow_instance_id = Some(instance.id);
    let command_id = store.insert_command(&cmd).await.unwrap();
    let again = store.insert_command(&cmd).await.unwrap_err();
    assert!(matches!(again, Error::Conflict(_)), "{again}");

    let claimed = store.claim_commands("m2", 1, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let c = &claimed[0];
    assert_eq!(c.kind, CommandKind::ResubmitFailed);
    assert_eq!(c.instance.id, instance.id);
    assert_eq!(c.instance.owner.as_deref(), Some("m2"));
    assert_eq!(c.instance.owner_epoch, instance.owner_epoch + 1);
    assert_eq!(c.instance.state, WorkflowState::Running);
    let states: Vec<_> = c.tasks.iter().map(|t| (t.name.as_str(), t.state)).collect();
    assert_eq!(
        states,
        vec![("a", TaskState::Success), ("b", TaskState::Failure)]
    );
    assert_eq!(
        store.command_status(command_id).await.unwrap(),
        Some(CommandStatus::Done {
            workflow_instance_id: instance.id
        })
    );

    // The old owner is fenced out.
    let stale = write(
        store,
        WriteBatch {
            instance_updates: vec![InstanceUpdate {
                id: instance.id,
                owner_epoch: instance.owner_epoch,
                state: WorkflowState::Success,
                ended_at: Some(4_000),
            }],
            ..Default::default()
        },
    )
    .await;
    assert_eq!(stale.fenced_instances, vec![instance.id]);

    // A resume of a running instance is turned down with the reason.
    let mut resume = command("p", "recover", instance.version);
    resume.kind = CommandKind::Resume;
    resume.workflow_instance_id = Some(instance.id);
    let resume_id = store.insert_command(&resume).await.unwrap();
    assert!(store.claim_commands("m2", 1, 10).await.unwrap().is_empty());
    match store.command_status(resume_id).await.unwrap() {
        Some(CommandStatus::Error { error }) => assert!(error.contains("paused"), "{error}"),
        other => panic!("expected an error command, got {other:?}"),
    }
}

/// A master that lost an instance (its epoch moved on) can neither add attempts nor
/// change existing ones, while its writes for instances it still holds go through.
async fn all_writes_of_a_lost_instance_are_fenced(ctx: Ctx) {
    let store = &ctx.store;
    let mine = running_instance(store, "kept").await;
    let lost = running_instance(store, "taken").await;
    let ids = write(
        store,
        WriteBatch {
            new_tasks: vec![new_task(&lost, "a")],
            epochs: vec![(lost.id, lost.owner_epoch)],
            ..Default::default()
        },
    )
    .await
    .new_task_ids;
    assert!(
        store
            .take_over(lost.id, lost.owner_epoch, "m2")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .take_over(lost.id, lost.owner_epoch, "m3")
            .await
            .unwrap()
            .is_none(),
        "one winner"
    );

    let result = write(
        store,
        WriteBatch {
            new_tasks: vec![new_task(&lost, "b"), new_task(&mine, "c")],
            task_updates: vec![TaskUpdate::state(ids[0], TaskState::Success)],
            epochs: vec![(lost.id, lost.owner_epoch), (mine.id, mine.owner_epoch)],
            ..Default::default()
        },
    )
    .await;
    assert_eq!(result.fenced_instances, vec![lost.id]);
    assert_eq!(
        result.new_task_ids.len(),
        1,
        "only the kept instance's task was written"
    );
    let lost_tasks = store.list_task_instances(lost.id).await.unwrap();
    assert_eq!(
        lost_tasks.len(),
        1,
        "no attempt was added to the lost instance"
    );
    assert_eq!(
        lost_tasks[0].state,
        TaskState::Submitted,
        "its attempt was not changed"
    );
    assert_eq!(store.list_task_instances(mine.id).await.unwrap().len(), 1);
}

/// Ends `instance` as `state` at `ended_at`, with one task row and its kept log.
async fn end_with_a_task(
    store: &Store,
    instance: &InstanceRow,
    state: WorkflowState,
    ended_at: i64,
) {
    let tasks = write(
        store,
        WriteBatch {
            new_tasks: vec![new_task(instance, "a")],
            ..Default::default()
        },
    )
    .await;
    let task = tasks.new_task_ids[0];
    write(
        store,
        WriteBatch {
            instance_updates: vec![InstanceUpdate {
                id: instance.id,
                owner_epoch: instance.owner_epoch,
                state,
                ended_at: Some(ended_at),
            }],
            task_logs: vec![(
                instance.id,
                KeptLog {
                    task_instance_id: task,
                    content: b"done".to_vec(),
                    size: 4,
                },
            )],
            ..Default::default()
        },
    )
    .await;
}

async fn retention_deletes_instances_ended_before_the_cutoff_with_their_rows(ctx: Ctx) {
    let store = &ctx.store;
    let mut old = Vec::new();
    for name in ["old1", "old2", "old3"] {
        let i = running_instance(store, name).await;
        end_with_a_task(store, &i, WorkflowState::Success, 1_000).await;
        old.push(i.id);
    }
    let failed = running_instance(store, "old_failed").await;
    end_with_a_task(store, &failed, WorkflowState::Failure, 2_000).await;
    let paused = running_instance(store, "old_paused").await;
    end_with_a_task(store, &paused, WorkflowState::Paused, 1_000).await;
    let recent = running_instance(store, "recent").await;
    end_with_a_task(store, &recent, WorkflowState::Success, 50_000).await;
    let running = running_instance(store, "running").await;

    // Batches of two, oldest first: the third old success and the failure come next.
    let first = store.prune_ended(10_000, 2).await.unwrap();
    assert_eq!((first.instances, first.tasks), (2, 2));
    let second = store.prune_ended(10_000, 2).await.unwrap();
    assert_eq!((second.instances, second.tasks), (2, 2));
    let last = store.prune_ended(10_000, 2).await.unwrap();
    assert_eq!(last.instances, 0, "nothing else is old and ended");

    for id in old.iter().chain([&failed.id]) {
        assert_eq!(store.get_instance(*id).await.unwrap(), None);
        assert!(store.list_task_instances(*id).await.unwrap().is_empty());
    }
    for kept in [paused.id, recent.id, running.id] {
        assert!(store.get_instance(kept).await.unwrap().is_some(), "{kept}");
    }
    let task = store.list_task_instances(recent.id).await.unwrap()[0].id;
    assert!(store.kept_log(task).await.unwrap().is_some());
    assert_eq!(
        ctx.count_raw("SELECT count(*) FROM task_log").await,
        2,
        "the kept logs of the paused and the recent instance"
    );
}

async fn a_longer_kept_log_replaces_a_shorter_one_and_never_the_reverse(ctx: Ctx) {
    let store = &ctx.store;
    let i = running_instance(store, "w").await;
    let task = write(
        store,
        WriteBatch {
            new_tasks: vec![new_task(&i, "a")],
            ..Default::default()
        },
    )
    .await
    .new_task_ids[0];
    let log = |text: &str| KeptLog {
        task_instance_id: task,
        content: text.as_bytes().to_vec(),
        size: text.len() as u64,
    };
    let keep = |logs: Vec<KeptLog>| WriteBatch {
        task_logs: logs.into_iter().map(|l| (i.id, l)).collect(),
        epochs: vec![(i.id, i.owner_epoch)],
        ..Default::default()
    };
    // While it runs: the log so far; two in one batch (the end overtook a shipment).
    write(store, keep(vec![log("one\n")])).await;
    write(store, keep(vec![log("one\ntwo\n"), log("one\ntwo\nend\n")])).await;
    let kept = store.kept_log(task).await.unwrap().unwrap();
    assert_eq!(kept.content, b"one\ntwo\nend\n");
    // A late shipment of less changes nothing.
    write(store, keep(vec![log("one\n")])).await;
    assert_eq!(store.kept_log(task).await.unwrap().unwrap(), kept);
}
