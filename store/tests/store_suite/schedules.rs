//! Schedules, their fires and backfills, on both backends.

use super::*;
use shoal_common::access::Role;
use shoal_common::definition::DependResult;
use shoal_common::schedule::Misfire;
use shoal_common::start::StartOptions;
use shoal_common::types::{BackfillRunState, BackfillState, FailureStrategy};
use shoal_store::Cancel;

fn spec(cron: &str) -> ScheduleSpec {
    ScheduleSpec {
        cron: cron.to_string(),
        timezone: "Europe/Berlin".to_string(),
        start_time: None,
        end_time: None,
        enabled: true,
        misfire: Misfire::RunOnce,
        params: BTreeMap::from([("dt".to_string(), "x".to_string())]),
        priority: Some(Priority::High),
        worker_group: Some("etl".to_string()),
        failure_strategy: Some(FailureStrategy::Continue),
        alert_channels: vec!["ops".to_string()],
        timeout: Some(Duration::from_secs(90)),
        environment: Some("java17".to_string()),
    }
}

/// Workflow p/w with a one-second schedule.
async fn every_second(store: &Store) -> ScheduleRow {
    store.put_definition(&workflow("p", "w", "")).await.unwrap();
    store
        .create_schedule("p", "w", &spec("* * * * * *"))
        .await
        .unwrap()
}

/// Ends an instance the way its master would.
async fn end(store: &Store, instance: &InstanceRow, state: WorkflowState) {
    let batch = WriteBatch {
        instance_updates: vec![InstanceUpdate {
            id: instance.id,
            owner_epoch: instance.owner_epoch,
            state,
            ended_at: Some(now_ms()),
        }],
        epochs: vec![(instance.id, instance.owner_epoch)],
        ..Default::default()
    };
    write(store, batch).await;
}

pub(crate) async fn schedules_are_one_per_workflow_and_checked(ctx: Ctx) {
    let store = &ctx.store;
    store.put_definition(&workflow("p", "w", "")).await.unwrap();
    let before = now_ms();
    let created = store
        .create_schedule("p", "w", &spec("0 2 * * *"))
        .await
        .unwrap();
    assert_eq!(created.spec, spec("0 2 * * *"));
    assert!(created.fired_until >= before, "fires from its creation on");
    assert_eq!(
        store.get_schedule(created.id).await.unwrap(),
        Some(created.clone())
    );

    let again = store.create_schedule("p", "w", &spec("* * * * *")).await;
    assert!(matches!(again, Err(Error::Conflict(_))), "{again:?}");
    let bad = store.create_schedule("p", "w", &spec("61 * * * *")).await;
    assert!(
        matches!(&bad, Err(Error::Invalid(m)) if m.contains("minute field '61'")),
        "{bad:?}"
    );
    let mut zone = spec("0 2 * * *");
    zone.timezone = "Nowhere/City".into();
    let bad = store.update_schedule(created.id, &zone).await;
    assert!(
        matches!(&bad, Err(Error::Invalid(m)) if m.contains("Nowhere/City")),
        "{bad:?}"
    );
    let missing = store.create_schedule("p", "nope", &spec("0 2 * * *")).await;
    assert!(matches!(missing, Err(Error::NotFound(_))), "{missing:?}");
    assert_eq!(
        store.list_schedules("p", None).await.unwrap(),
        vec![created.clone()]
    );

    let off = store.set_schedule_enabled(created.id, false).await.unwrap();
    assert!(!off.spec.enabled);
    assert!(store.enabled_schedules().await.unwrap().is_empty());
    assert!(
        !store
            .fire_schedule(created.id, off.fired_until, off.fired_until + 1, &[1])
            .await
            .unwrap(),
        "a disabled schedule does not fire"
    );
    let on = store.set_schedule_enabled(created.id, true).await.unwrap();
    assert!(
        on.fired_until >= off.updated_at,
        "enabling restarts the cursor"
    );
    let twice = store.set_schedule_enabled(created.id, true).await.unwrap();
    assert_eq!(twice.fired_until, on.fired_until, "enabling twice keeps it");

    let updated = store
        .update_schedule(created.id, &spec("*/5 * * * * *"))
        .await
        .unwrap();
    assert_eq!(updated.spec.cron, "*/5 * * * * *");
    assert!(store.delete_schedule(created.id).await.unwrap());
    assert!(!store.delete_schedule(created.id).await.unwrap());
    assert_eq!(store.get_schedule(created.id).await.unwrap(), None);
}

pub(crate) async fn a_schedule_time_fires_once(ctx: Ctx) {
    let store = &ctx.store;
    let s = every_second(store).await;
    let c0 = s.fired_until;
    let (t1, t2) = (c0 + 1_000, c0 + 2_000);
    assert!(store.fire_schedule(s.id, c0, t2, &[t1, t2]).await.unwrap());
    // A second leader that read the old cursor writes nothing.
    assert!(!store.fire_schedule(s.id, c0, t2, &[t1, t2]).await.unwrap());
    // A cursor moved by mistake cannot fire an already fired time either.
    let twice = store.fire_schedule(s.id, t2, t2 + 1_000, &[t2]).await;
    assert!(twice.is_err(), "{twice:?}");
    assert_eq!(
        store.get_schedule(s.id).await.unwrap().unwrap().fired_until,
        t2,
        "the failed fire changed nothing"
    );

    let claimed = store.claim_commands("m1", 1, 10).await.unwrap();
    let mut times: Vec<Option<i64>> = claimed.iter().map(|c| c.instance.schedule_time).collect();
    times.sort();
    assert_eq!(times, vec![Some(t1), Some(t2)]);
    let run = &claimed[0].instance;
    assert_eq!(run.params["dt"], "x");
    assert_eq!(run.priority, Priority::High);
    assert_eq!(run.options.timezone.as_deref(), Some("Europe/Berlin"));
    assert_eq!(run.options.worker_group.as_deref(), Some("etl"));
    assert_eq!(
        run.options.failure_strategy,
        Some(FailureStrategy::Continue)
    );
    // Claimed, the fire still counts: its time cannot fire again.
    let after_claim = store.fire_schedule(s.id, t2, t2 + 1_000, &[t1]).await;
    assert!(after_claim.is_err(), "{after_claim:?}");
    assert!(store.claim_commands("m1", 1, 10).await.unwrap().is_empty());
}

pub(crate) async fn fire_records_far_behind_the_cursor_are_dropped(ctx: Ctx) {
    let store = &ctx.store;
    let s = every_second(store).await;
    let c0 = s.fired_until;
    let t1 = c0 + 1_000;
    assert!(store.fire_schedule(s.id, c0, t1, &[t1]).await.unwrap());
    let count = "SELECT COUNT(*) FROM schedule_fire";
    assert_eq!(ctx.count_raw(count).await, 1);
    // A week and a bit later (a misfire run_once after downtime): the old record goes.
    let later = t1 + FIRE_MEMORY_MS + 1_000;
    assert!(
        store
            .fire_schedule(s.id, t1, later, &[later])
            .await
            .unwrap()
    );
    assert_eq!(
        ctx.count_raw(count).await,
        1,
        "only the recent fire is kept"
    );
    // The cursor still keeps the old time from firing again.
    assert!(!store.fire_schedule(s.id, t1, later, &[t1]).await.unwrap());
}

pub(crate) async fn dependent_checks_use_the_schedule_time(ctx: Ctx) {
    let store = &ctx.store;
    let s = every_second(store).await;
    let day = 86_400_000;
    let scheduled = s.fired_until - 3 * day;
    // A backfill-like fire far before today: the run stands for three days ago.
    let mut cmd = command("p", "w", 1);
    cmd.schedule_time = Some(scheduled);
    store.insert_command(&cmd).await.unwrap();
    let instance = store
        .claim_commands("m1", 1, 10)
        .await
        .unwrap()
        .remove(0)
        .instance;
    end(store, &instance, WorkflowState::Success).await;
    let result = |from: i64, to: i64| async move {
        store
            .dependency_result("p", "w", None, from, to)
            .await
            .unwrap()
            .0
    };
    assert_eq!(
        result(scheduled - 1, scheduled + 1).await,
        DependResult::Success
    );
    assert_eq!(
        result(s.fired_until - day, s.fired_until + day).await,
        DependResult::Waiting,
        "the schedule time counts, not the start"
    );
    // A later run for the same time decides: running, it waits; failed, it failed.
    store.insert_command(&cmd).await.unwrap();
    let again = store
        .claim_commands("m1", 1, 10)
        .await
        .unwrap()
        .remove(0)
        .instance;
    assert_eq!(
        result(scheduled - 1, scheduled + 1).await,
        DependResult::Waiting
    );
    end(store, &again, WorkflowState::Failure).await;
    assert_eq!(
        result(scheduled - 1, scheduled + 1).await,
        DependResult::Failed
    );
}

async fn backfill(store: &Store, parallel: u32, stop_on_failure: bool) -> (i64, Vec<i64>) {
    chained_backfill(store, "w", parallel, stop_on_failure, None).await
}

async fn chained_backfill(
    store: &Store,
    name: &str,
    parallel: u32,
    stop_on_failure: bool,
    chained: Option<Chained>,
) -> (i64, Vec<i64>) {
    store
        .put_definition(&workflow("p", name, ""))
        .await
        .unwrap();
    let times: Vec<i64> = (0..3).map(|d| 1_767_225_600_000 + d * 86_400_000).collect();
    let id = store
        .create_backfill(&NewBackfill {
            project: "p".into(),
            workflow: name.into(),
            version: 1,
            params: BTreeMap::new(),
            priority: None,
            options: Default::default(),
            parallel,
            stop_on_failure,
            times: times.clone(),
            chained,
        })
        .await
        .unwrap();
    (id, times)
}

fn run_states(b: &BackfillRow) -> Vec<BackfillRunState> {
    b.runs.iter().map(|r| r.state).collect()
}

pub(crate) async fn a_serial_backfill_runs_one_date_after_another(ctx: Ctx) {
    use BackfillRunState::*;
    let store = &ctx.store;
    let (id, times) = backfill(store, 1, false).await;
    assert_eq!(store.advance_backfills().await.unwrap(), 1);
    assert_eq!(
        store.advance_backfills().await.unwrap(),
        1,
        "no double start"
    );
    let b = store.get_backfill(id).await.unwrap().unwrap();
    assert_eq!(run_states(&b), [Running, Pending, Pending]);
    let mut claimed = store.claim_commands("m1", 1, 10).await.unwrap();
    assert_eq!(claimed.len(), 1, "one run at a time");
    let first = claimed.remove(0).instance;
    assert_eq!(first.schedule_time, Some(times[0]));
    store.advance_backfills().await.unwrap();
    assert!(store.claim_commands("m1", 1, 10).await.unwrap().is_empty());

    end(store, &first, WorkflowState::Failure).await;
    store.advance_backfills().await.unwrap();
    let b = store.get_backfill(id).await.unwrap().unwrap();
    assert_eq!(
        run_states(&b),
        [Failure, Running, Pending],
        "a failure does not stall"
    );
    assert_eq!(b.runs[0].workflow_instance_id, Some(first.id));
    let second = store
        .claim_commands("m1", 1, 10)
        .await
        .unwrap()
        .remove(0)
        .instance;
    assert_eq!(second.schedule_time, Some(times[1]));
    end(store, &second, WorkflowState::Success).await;
    store.advance_backfills().await.unwrap();
    let third = store
        .claim_commands("m1", 1, 10)
        .await
        .unwrap()
        .remove(0)
        .instance;
    end(store, &third, WorkflowState::Success).await;
    assert_eq!(store.advance_backfills().await.unwrap(), 0);
    let b = store.get_backfill(id).await.unwrap().unwrap();
    assert_eq!(run_states(&b), [Failure, Success, Success]);
    assert_eq!(b.state, BackfillState::Failure);
    assert_eq!(store.get_backfill(id + 1).await.unwrap(), None);
}

pub(crate) async fn a_backfill_stops_on_failure_when_asked_and_runs_n_at_once(ctx: Ctx) {
    use BackfillRunState::*;
    let store = &ctx.store;
    let (id, _) = backfill(store, 2, true).await;
    store.advance_backfills().await.unwrap();
    let claimed = store.claim_commands("m1", 1, 10).await.unwrap();
    assert_eq!(claimed.len(), 2, "two at once");
    end(store, &claimed[0].instance, WorkflowState::Stopped).await;
    store.advance_backfills().await.unwrap();
    let b = store.get_backfill(id).await.unwrap().unwrap();
    let ended = b.runs.iter().position(|r| r.state == Failure).unwrap();
    assert_eq!(b.runs[2].state, Skipped, "the rest is not started");
    end(store, &claimed[1].instance, WorkflowState::Success).await;
    assert_eq!(store.advance_backfills().await.unwrap(), 0);
    let b = store.get_backfill(id).await.unwrap().unwrap();
    assert_eq!(b.state, BackfillState::Failure);
    assert_eq!(b.runs[ended].error.as_deref(), Some("instance stopped"));
    assert!(store.claim_commands("m1", 1, 10).await.unwrap().is_empty());
}

pub(crate) async fn a_chained_backfill_waits_for_the_stages_before_it(ctx: Ctx) {
    use BackfillRunState::*;
    let store = &ctx.store;
    let (root, _) = backfill(store, 3, false).await;
    let follows = |stage| {
        Some(Chained {
            follows: root,
            stage,
        })
    };
    let (mid, _) = chained_backfill(store, "mid", 3, false, follows(1)).await;
    let (last, _) = chained_backfill(store, "last", 3, false, follows(2)).await;
    store.advance_backfills().await.unwrap();
    let claimed = store.claim_commands("m1", 1, 10).await.unwrap();
    assert_eq!(claimed.len(), 3, "only the first stage starts");
    assert!(claimed.iter().all(|c| c.instance.workflow == "w"));
    for c in &claimed {
        end(store, &c.instance, WorkflowState::Success).await;
    }
    store.advance_backfills().await.unwrap();
    let b = store.get_backfill(mid).await.unwrap().unwrap();
    assert_eq!(b.chained, follows(1));
    // Backfills advance in id order: the root's end is recorded before the second stage
    // looks (this call or the one before).
    store.advance_backfills().await.unwrap();
    let claimed = store.claim_commands("m1", 1, 10).await.unwrap();
    assert!(
        claimed.iter().all(|c| c.instance.workflow == "mid"),
        "stage 2 waits"
    );
    assert_eq!(claimed.len(), 3);
    // A later stage the caller may not cancel refuses the whole cancel, naming it.
    let refused = store.cancel_backfill(mid, |_| false).await.unwrap();
    let Cancel::Refused { backfill, .. } = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(backfill, last);
    let untouched = store.get_backfill(mid).await.unwrap().unwrap();
    assert_eq!(untouched.state, BackfillState::Running);
    // Cancelling the middle stage skips the last one's runs too.
    assert_eq!(
        store.cancel_backfill(mid, |_| true).await.unwrap(),
        Cancel::Skipped(3)
    );
    for c in &claimed {
        end(store, &c.instance, WorkflowState::Success).await;
    }
    store.advance_backfills().await.unwrap();
    store.advance_backfills().await.unwrap();
    let last = store.get_backfill(last).await.unwrap().unwrap();
    assert_eq!(run_states(&last), [Skipped, Skipped, Skipped]);
    assert_eq!(last.state, BackfillState::Cancelled);
    assert!(store.claim_commands("m1", 1, 10).await.unwrap().is_empty());
}

pub(crate) async fn a_dependent_backfill_starts_only_while_its_maker_may_start_runs_there(
    ctx: Ctx,
) {
    let store = &ctx.store;
    let ann = store.create_user("ann", false).await.unwrap();
    let (root, times) = backfill(store, 3, false).await;
    store
        .put_definition(&workflow("q", "after", ""))
        .await
        .unwrap();
    store.set_member("q", "ann", Role::Viewer).await.unwrap();
    let dependent = store
        .create_backfill(&NewBackfill {
            project: "q".into(),
            workflow: "after".into(),
            version: 1,
            params: BTreeMap::new(),
            priority: None,
            options: StartOptions {
                started_by: Some(ann.id),
                ..Default::default()
            },
            parallel: 3,
            stop_on_failure: false,
            times,
            chained: Some(Chained {
                follows: root,
                stage: 1,
            }),
        })
        .await
        .unwrap();
    store.advance_backfills().await.unwrap();
    for c in store.claim_commands("m1", 1, 10).await.unwrap() {
        end(store, &c.instance, WorkflowState::Success).await;
    }
    // The root's end is recorded, then the dependent's turn comes: ann may only view q.
    store.advance_backfills().await.unwrap();
    store.advance_backfills().await.unwrap();
    assert!(store.claim_commands("m1", 1, 10).await.unwrap().is_empty());
    let b = store.get_backfill(dependent).await.unwrap().unwrap();
    assert_eq!(b.state, BackfillState::Failure);
    for run in &b.runs {
        assert_eq!(run.state, BackfillRunState::Failure);
        assert_eq!(
            run.error.as_deref(),
            Some(
                "backfill of 'q/after' was not started: user 'ann' who started it needs the \
                 operator role in project 'q' (has viewer); a project admin can grant it"
            )
        );
    }
}
