//! Store suite, continued: execution types, task groups and the alert outbox.

use crate::{Ctx, command, new_task, write};
use serde_json::json;
use shoal_common::Error;
use shoal_common::definition::WorkflowDef;
use shoal_common::types::{TaskState, WorkflowState};
use shoal_store::*;
use std::collections::HashSet;

async fn serial(store: &Store, name: &str, kind: &str) -> i32 {
    let def = WorkflowDef::parse(&format!(
        "name: {name}\nproject: p\nexecution_type: {kind}\ntasks:\n- {{ name: a, type: noop }}\n"
    ))
    .unwrap();
    store.put_definition(&def).await.unwrap().0
}

/// Writes `n` starts of `p/name` and claims them as `owner`; returns the claimed runs.
async fn start(store: &Store, name: &str, version: i32, n: usize, owner: &str) -> Vec<i64> {
    for _ in 0..n {
        store
            .insert_command(&command("p", name, version))
            .await
            .unwrap();
    }
    let claimed = store.claim_commands(owner, 1, 100).await.unwrap();
    claimed.into_iter().map(|c| c.instance.id).collect()
}

async fn runs(store: &Store, name: &str) -> Vec<InstanceRow> {
    let mut all = store
        .list_instances(&InstanceFilter {
            workflow: Some(name.to_string()),
            ..Default::default()
        })
        .await
        .unwrap();
    all.reverse();
    all
}

fn states(runs: &[InstanceRow]) -> Vec<WorkflowState> {
    runs.iter().map(|r| r.state).collect()
}

/// The write a master makes when a run ends.
fn end(run: &InstanceRow, owner: &str, state: WorkflowState) -> WriteBatch {
    WriteBatch {
        instance_updates: vec![InstanceUpdate {
            id: run.id,
            owner_epoch: run.owner_epoch,
            state,
            ended_at: Some(2_000),
        }],
        epochs: vec![(run.id, run.owner_epoch)],
        serial_ended: vec![SerialEnd {
            instance: run.id,
            project: run.project.clone(),
            workflow: run.workflow.clone(),
            owner: owner.to_string(),
        }],
        ..Default::default()
    }
}

pub async fn serial_starts_run_wait_or_are_discarded_by_execution_type(ctx: Ctx) {
    let store = &ctx.store;
    let v = serial(store, "waits", "serial_wait").await;
    let claimed = start(store, "waits", v, 3, "m1").await;
    let all = runs(store, "waits").await;
    assert_eq!(claimed, vec![all[0].id], "only the first runs");
    use WorkflowState::*;
    assert_eq!(states(&all), vec![Running, SerialWait, SerialWait]);
    assert_eq!(all[1].owner, None);
    assert!(
        all[2]
            .message
            .as_deref()
            .unwrap()
            .contains(&format!("instance {}", all[1].id)),
        "{:?}",
        all[2].message
    );

    let v = serial(store, "discards", "serial_discard").await;
    let claimed = start(store, "discards", v, 2, "m1").await;
    let all = runs(store, "discards").await;
    assert_eq!(claimed, vec![all[0].id]);
    assert_eq!(states(&all), vec![Running, Stopped]);
    assert!(all[1].message.as_deref().unwrap().starts_with("discarded"));
    assert!(all[1].ended_at.is_some() && all[1].started_at.is_none());

    let v = serial(store, "newest", "serial_priority").await;
    start(store, "newest", v, 3, "m1").await;
    start(store, "newest", v, 1, "m1").await;
    let all = runs(store, "newest").await;
    assert_eq!(states(&all), vec![Running, Stopped, Stopped, SerialWait]);
    assert!(
        all[1]
            .message
            .as_deref()
            .unwrap()
            .contains(&format!("newer instance {}", all[2].id)),
        "{:?}",
        all[1].message
    );
}

pub async fn ending_a_serial_run_starts_the_next_one_once(ctx: Ctx) {
    let store = &ctx.store;
    let v = serial(store, "fifo", "serial_wait").await;
    start(store, "fifo", v, 3, "m1").await;
    let all = runs(store, "fifo").await;

    // A master that lost the first run cannot end it, nor wake the next.
    let mut stale = end(&all[0], "m9", WorkflowState::Success);
    stale.instance_updates[0].owner_epoch = 99;
    stale.epochs[0].1 = 99;
    let result = write(store, stale).await;
    assert!(result.woken.is_empty());
    assert_eq!(result.fenced_instances, vec![all[0].id]);

    let result = write(store, end(&all[0], "m2", WorkflowState::Failure)).await;
    assert_eq!(result.woken.len(), 1);
    let next = &result.woken[0];
    assert_eq!(next.instance.id, all[1].id, "oldest waiting first");
    assert_eq!(next.kind, shoal_common::types::CommandKind::Start);
    assert_eq!(next.instance.owner.as_deref(), Some("m2"));
    assert_eq!(next.instance.owner_epoch, all[1].owner_epoch + 1);
    assert_eq!(next.definition.name, "fifo");
    let now = runs(store, "fifo").await;
    use WorkflowState::*;
    assert_eq!(states(&now), vec![Failure, Running, SerialWait]);
    assert_eq!(now[1].message, None);

    // Ended without a wake (e.g. its version was parallel): the safety net starts the next.
    let mut quiet = end(&now[1], "m2", Success);
    quiet.serial_ended.clear();
    write(store, quiet).await;
    let woken = store.wake_stranded_runs("m3").await.unwrap();
    assert_eq!(woken.len(), 1);
    assert_eq!(woken[0].instance.id, all[2].id);
    assert!(
        store.wake_stranded_runs("m3").await.unwrap().is_empty(),
        "once"
    );

    // A waiting run an operator stops is gone from the queue.
    start(store, "fifo", v, 1, "m1").await;
    let last = runs(store, "fifo").await.pop().unwrap();
    assert_eq!(last.state, SerialWait);
    assert!(store.discard_waiting_run(last.id, "stopped").await.unwrap());
    assert!(!store.discard_waiting_run(last.id, "stopped").await.unwrap());
    assert_eq!(
        store.get_instance(last.id).await.unwrap().unwrap().state,
        Stopped
    );
}

/// Two masters claiming starts of one serial workflow at once: exactly one runs.
pub async fn concurrent_claims_start_one_run_of_a_serial_workflow(ctx: Ctx) {
    let store = &ctx.store;
    let v = serial(store, "contended", "serial_wait").await;
    for _ in 0..40 {
        store
            .insert_command(&command("p", "contended", v))
            .await
            .unwrap();
    }
    let claimers: Vec<_> = ["m1", "m2"]
        .into_iter()
        .map(|owner| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut started = 0;
                loop {
                    let (batch, taken) = store.claim_batch(owner, 1, 3).await.unwrap();
                    if taken == 0 {
                        return started;
                    }
                    started += batch.len();
                }
            })
        })
        .collect();
    let mut started = 0;
    for c in claimers {
        started += c.await.unwrap();
    }
    assert_eq!(started, 1);
    let all = runs(store, "contended").await;
    assert_eq!(all.len(), 40);
    assert_eq!(
        all.iter()
            .filter(|r| r.state == WorkflowState::Running)
            .count(),
        1
    );
}

/// A recovery action on a serial workflow's run waits for no one: it is refused while
/// another run is active.
pub async fn recovering_a_serial_run_is_refused_while_another_is_active(ctx: Ctx) {
    let store = &ctx.store;
    let v = serial(store, "again", "serial_wait").await;
    start(store, "again", v, 1, "m1").await;
    let first = runs(store, "again").await.remove(0);
    write(store, end(&first, "m1", WorkflowState::Failure)).await;
    start(store, "again", v, 1, "m1").await;
    let mut rerun = command("p", "again", v);
    rerun.kind = shoal_common::types::CommandKind::Rerun;
    rerun.workflow_instance_id = Some(first.id);
    let id = store.insert_command(&rerun).await.unwrap();
    assert!(store.claim_commands("m1", 1, 10).await.unwrap().is_empty());
    let Some(CommandStatus::Error { error }) = store.command_status(id).await.unwrap() else {
        panic!("the rerun is refused");
    };
    assert!(error.contains("one instance at a time"), "{error}");
}

fn grouped(instance: &InstanceRow, name: &str, group: &str, priority: i32) -> NewTaskInstance {
    NewTaskInstance {
        task_group: Some(group.to_string()),
        task_group_priority: priority,
        state: TaskState::WaitingTaskGroup,
        ..new_task(instance, name)
    }
}

pub async fn task_group_slots_go_to_the_best_waiters_and_free_when_attempts_end(ctx: Ctx) {
    let store = &ctx.store;
    let group = TaskGroup {
        name: "g".into(),
        slots: 2,
        description: "two".into(),
    };
    store.create_task_group(&group).await.unwrap();
    let run = crate::running_instance(store, "w").await;
    let ids = write(
        store,
        WriteBatch {
            new_tasks: vec![
                grouped(&run, "low", "g", 0),
                grouped(&run, "high", "g", 5),
                grouped(&run, "low2", "g", 0),
                grouped(&run, "nogroup", "gone", 0),
            ],
            epochs: vec![(run.id, run.owner_epoch)],
            ..Default::default()
        },
    )
    .await
    .new_task_ids;
    let waiting: Vec<(i64, String)> = ids
        .iter()
        .zip(["g", "g", "g", "gone"])
        .map(|(id, g)| (*id, g.to_string()))
        .collect();
    let grants = store.acquire_task_group_slots(&waiting).await.unwrap();
    assert_eq!(
        grants.granted,
        vec![ids[0], ids[1]],
        "priority, then submit order"
    );
    assert_eq!(grants.no_group, vec![(ids[3], "gone".to_string())]);
    let task = store.get_task_instance(ids[2]).await.unwrap().unwrap();
    assert_eq!(task.state, TaskState::WaitingTaskGroup);
    assert_eq!(task.task_group.as_deref(), Some("g"));
    let usage = &store.list_task_groups().await.unwrap()[0];
    assert_eq!((usage.in_use, usage.waiting), (2, 1));

    // Running holds the slot; the end of the attempt frees it in the same write.
    write(
        store,
        WriteBatch {
            task_updates: vec![
                TaskUpdate::state(ids[1], TaskState::Running),
                TaskUpdate::state(ids[0], TaskState::Killed),
            ],
            epochs: vec![(run.id, run.owner_epoch)],
            ..Default::default()
        },
    )
    .await;
    let grants = store
        .acquire_task_group_slots(&waiting[2..3])
        .await
        .unwrap();
    assert_eq!(grants.granted, vec![ids[2]]);
    let usage = &store.list_task_groups().await.unwrap()[0];
    assert_eq!((usage.in_use, usage.waiting), (2, 0));
}

/// Masters acquiring slots of one group at once never hand out more than it has.
pub async fn concurrent_acquirers_never_exceed_a_groups_slots(ctx: Ctx) {
    let store = &ctx.store;
    let group = TaskGroup {
        name: "tight".into(),
        slots: 3,
        description: String::new(),
    };
    store.create_task_group(&group).await.unwrap();
    let run = crate::running_instance(store, "w").await;
    let tasks = (0..20)
        .map(|i| grouped(&run, &format!("t{i}"), "tight", 0))
        .collect();
    let ids = write(
        store,
        WriteBatch {
            new_tasks: tasks,
            epochs: vec![(run.id, run.owner_epoch)],
            ..Default::default()
        },
    )
    .await
    .new_task_ids;
    let acquirers: Vec<_> = [&ids[..10], &ids[10..]]
        .into_iter()
        .map(|mine| {
            let store = store.clone();
            let mine: Vec<(i64, String)> = mine.iter().map(|id| (*id, "tight".into())).collect();
            tokio::spawn(async move {
                let mut granted = HashSet::new();
                for _ in 0..5 {
                    granted.extend(store.acquire_task_group_slots(&mine).await.unwrap().granted);
                }
                granted
            })
        })
        .collect();
    let mut granted = HashSet::new();
    for a in acquirers {
        granted.extend(a.await.unwrap());
    }
    assert_eq!(granted.len(), 3, "{granted:?}");
    assert_eq!(
        granted,
        ids[..3].iter().copied().collect(),
        "the oldest waiters"
    );
}

pub async fn task_group_mistakes_change_nothing(ctx: Ctx) {
    let store = &ctx.store;
    let group = |name: &str, slots| TaskGroup {
        name: name.into(),
        slots,
        description: String::new(),
    };
    let err = store.create_task_group(&group("a b", 1)).await.unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    let err = store.create_task_group(&group("g", 0)).await.unwrap_err();
    assert!(err.to_string().contains("at least 1 slot"), "{err}");
    store.create_task_group(&group("g", 2)).await.unwrap();
    let err = store.create_task_group(&group("g", 5)).await.unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err}");
    assert_eq!(store.list_task_groups().await.unwrap()[0].group.slots, 2);
    assert_eq!(
        store.missing_task_groups(&["g", "h"]).await.unwrap(),
        vec!["h".to_string()]
    );
    let err = store.delete_task_group("h").await.unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{err}");

    let run = crate::running_instance(store, "w").await;
    write(
        store,
        WriteBatch {
            new_tasks: vec![grouped(&run, "t", "g", 0)],
            epochs: vec![(run.id, run.owner_epoch)],
            ..Default::default()
        },
    )
    .await;
    let err = store.delete_task_group("g").await.unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err}");
    assert_eq!(store.list_task_groups().await.unwrap().len(), 1);
}

fn alert(instance: &InstanceRow, channel: &str) -> NewAlert {
    NewAlert {
        workflow_instance_id: instance.id,
        channel: channel.into(),
        event: "failure".into(),
        payload: json!({ "workflow_instance_id": instance.id, "state": "failure" }),
    }
}

pub async fn alerts_are_written_with_the_run_and_leased_to_one_sender(ctx: Ctx) {
    let store = &ctx.store;
    let run = crate::running_instance(store, "w").await;
    let lost = crate::running_instance(store, "lost").await;
    let mut batch = end(&run, "m1", WorkflowState::Failure);
    batch.serial_ended.clear();
    batch.alerts = vec![alert(&run, "hook"), alert(&lost, "hook")];
    batch.epochs.push((lost.id, lost.owner_epoch + 1));
    write(store, batch).await;
    let all = store.list_alerts(&AlertFilter::default()).await.unwrap();
    assert_eq!(all.len(), 1, "a fenced instance's alert is not written");
    assert_eq!(all[0].workflow_instance_id, run.id);
    assert_eq!((all[0].state.as_str(), all[0].attempts), (ALERT_PENDING, 0));

    let leased = store.lease_alerts("m1", 10, 60_000).await.unwrap();
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].attempts, 1);
    assert_eq!(leased[0].payload["state"], "failure");
    assert!(
        store
            .lease_alerts("m2", 10, 60_000)
            .await
            .unwrap()
            .is_empty(),
        "leased to m1"
    );
    let failed = Delivery::Failed {
        error: "POST http://x: refused".into(),
        retry_at: Some(0),
    };
    assert!(
        !store
            .record_delivery(leased[0].id, "m2", &failed)
            .await
            .unwrap(),
        "not m2's"
    );
    assert!(
        store
            .record_delivery(leased[0].id, "m1", &failed)
            .await
            .unwrap()
    );

    let again = store.lease_alerts("m2", 10, 60_000).await.unwrap();
    assert_eq!(again.len(), 1, "due again after the failed attempt");
    assert_eq!(
        again[0].last_error.as_deref(),
        Some("POST http://x: refused")
    );
    assert!(
        store
            .record_delivery(again[0].id, "m2", &Delivery::Sent)
            .await
            .unwrap()
    );
    let sent = store
        .list_alerts(&AlertFilter {
            workflow_instance_id: Some(run.id),
            state: Some(ALERT_SENT.into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].attempts, 2);
    assert!(sent[0].sent_at.is_some());
    assert!(
        store
            .lease_alerts("m1", 10, 60_000)
            .await
            .unwrap()
            .is_empty()
    );

    // An expired lease (its sender died mid-delivery) is taken over.
    write(
        store,
        WriteBatch {
            alerts: vec![alert(&run, "hook")],
            epochs: vec![(run.id, run.owner_epoch)],
            ..Default::default()
        },
    )
    .await;
    assert_eq!(store.lease_alerts("m1", 10, -1).await.unwrap().len(), 1);
    let retaken = store.lease_alerts("m2", 10, 60_000).await.unwrap();
    assert_eq!(retaken.len(), 1);
    let gave_up = Delivery::Failed {
        error: "boom".into(),
        retry_at: None,
    };
    assert!(
        store
            .record_delivery(retaken[0].id, "m2", &gave_up)
            .await
            .unwrap()
    );
    let failed = store
        .list_alerts(&AlertFilter {
            state: Some(ALERT_FAILED.into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(failed.len(), 1);
}

pub async fn alert_channels_are_kept_and_mistakes_refused(ctx: Ctx) {
    let store = &ctx.store;
    let hook = AlertChannel {
        name: "hook".into(),
        target: ChannelTarget::Webhook {
            url: "https://example.com/h".into(),
            format: WebhookFormat::Slack,
        },
    };
    store.create_alert_channel(&hook).await.unwrap();
    let log = AlertChannel {
        name: "log".into(),
        target: ChannelTarget::Log,
    };
    store.create_alert_channel(&log).await.unwrap();
    assert_eq!(
        store.list_alert_channels().await.unwrap(),
        vec![hook.clone(), log]
    );
    let err = store.create_alert_channel(&hook).await.unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err}");
    let bad = AlertChannel {
        name: "bad".into(),
        target: ChannelTarget::Webhook {
            url: "file:///etc/passwd".into(),
            format: WebhookFormat::Json,
        },
    };
    let err = store.create_alert_channel(&bad).await.unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    assert_eq!(
        store
            .missing_alert_channels(&["hook", "bad"])
            .await
            .unwrap(),
        vec!["bad".to_string()]
    );
    store.delete_alert_channel("hook").await.unwrap();
    let err = store.delete_alert_channel("hook").await.unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{err}");
    assert_eq!(store.list_alert_channels().await.unwrap().len(), 1);
}
