//! Events that complete waiting tasks: concurrent events complete a wait once, an event
//! that completes none is kept for one wait that begins later, and only its project,
//! event and key count, until it expires.

use super::*;

/// New wait tasks of `instance`, one per key, waiting for `event` with it; their ids.
async fn waiting_for(
    store: &Store,
    instance: &InstanceRow,
    event: &str,
    keys: &[&str],
) -> Vec<i64> {
    // Task names are unique in a run: numbered across calls.
    static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let names: Vec<String> = (keys.iter())
        .map(|_| {
            format!(
                "wait{}",
                MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            )
        })
        .collect();
    let ids = write(
        store,
        WriteBatch {
            new_tasks: names.iter().map(|n| new_task(instance, n)).collect(),
            ..Default::default()
        },
    )
    .await
    .new_task_ids;
    let waits = ids.iter().zip(keys).map(|(id, key)| EventWait {
        task_instance_id: *id,
        workflow_instance_id: instance.id,
        project: instance.project.clone(),
        event: event.into(),
        key: key.to_string(),
    });
    write(
        store,
        WriteBatch {
            task_updates: (ids.iter())
                .map(|id| TaskUpdate::state(*id, TaskState::Waiting))
                .collect(),
            event_waits: waits.collect(),
            epochs: vec![(instance.id, instance.owner_epoch)],
            ..Default::default()
        },
    )
    .await;
    ids
}

fn data(n: usize) -> Params {
    Params::from([("n".to_string(), n.to_string())])
}

async fn task(store: &Store, id: i64) -> TaskInstanceRow {
    store.get_task_instance(id).await.unwrap().unwrap()
}

const HOUR: Duration = Duration::from_secs(3600);

pub(crate) async fn concurrent_events_complete_a_wait_once_and_the_rest_are_kept_for_one_wait_each(
    ctx: Ctx,
) {
    let store = ctx.store;
    let instance = running_instance(&store, "orders").await;
    let [paid] = waiting_for(&store, &instance, "order_paid", &["42"]).await[..] else {
        unreachable!()
    };
    let events = (0..8).map(|n| {
        let store = store.clone();
        tokio::spawn(async move {
            let delivered = store
                .deliver_event("p", "order_paid", "42", &data(n), HOUR)
                .await
                .unwrap();
            (n, delivered)
        })
    });
    let mut winners = Vec::new();
    for event in events {
        let (n, delivered) = event.await.unwrap();
        match delivered.completed[..] {
            [] => assert!(delivered.kept_until.is_some(), "{delivered:?}"),
            [id] => {
                assert_eq!(id, paid);
                assert_eq!(
                    delivered.kept_until, None,
                    "one that completed a wait is not kept"
                );
                winners.push(n);
            }
            _ => panic!("{delivered:?}"),
        }
    }
    assert_eq!(
        winners.len(),
        1,
        "exactly one event completed the wait: {winners:?}"
    );
    let row = task(&store, paid).await;
    assert_eq!(row.state, TaskState::Success);
    assert_eq!(
        row.output,
        data(winners[0]),
        "the winner's data are the outputs"
    );
    assert_eq!(
        row.message.as_deref(),
        Some("completed by event 'order_paid' (key '42')")
    );

    // Seven events are kept; each wait that begins takes one, oldest first, once.
    let later = waiting_for(&store, &instance, "order_paid", &["42", "42"]).await;
    let mut taken = store.take_kept_events(&later).await.unwrap();
    taken.sort_unstable();
    assert_eq!(taken, later);
    let outputs: HashSet<String> = [task(&store, later[0]).await, task(&store, later[1]).await]
        .into_iter()
        .map(|t| t.output["n"].clone())
        .collect();
    assert_eq!(
        outputs.len(),
        2,
        "two waits took two different events: {outputs:?}"
    );
    assert!(!outputs.contains(&winners[0].to_string()));
    assert!(
        store.take_kept_events(&later).await.unwrap().is_empty(),
        "an ended wait takes nothing more"
    );
}

pub(crate) async fn an_event_reaches_only_its_project_event_and_key_until_it_expires(ctx: Ctx) {
    let store = ctx.store;
    let instance = running_instance(&store, "orders").await;
    store
        .create_project("other", "", "test", None)
        .await
        .unwrap();
    let ids = waiting_for(&store, &instance, "order_paid", &["1", "2"]).await;
    for (project, event, key) in [
        ("other", "order_paid", "1"),
        ("p", "order_shipped", "1"),
        ("p", "order_paid", "9"),
    ] {
        let delivered = store
            .deliver_event(project, event, key, &data(0), HOUR)
            .await
            .unwrap();
        assert!(
            delivered.completed.is_empty(),
            "{project}/{event}/{key}: {delivered:?}"
        );
    }
    assert!(
        store.take_kept_events(&ids).await.unwrap().is_empty(),
        "no kept event is for these waits"
    );
    for id in &ids {
        assert_eq!(task(&store, *id).await.state, TaskState::Waiting);
    }
    let delivered = store
        .deliver_event("p", "order_paid", "1", &data(1), HOUR)
        .await
        .unwrap();
    assert_eq!(delivered.completed, vec![ids[0]]);

    // Not kept at all with no retention; kept past its time, it completes nothing.
    let unkept = store
        .deliver_event("p", "order_paid", "late", &data(2), Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(unkept.kept_until, None);
    let expiring = store
        .deliver_event("p", "order_paid", "4", &data(4), Duration::from_millis(1))
        .await
        .unwrap();
    let until = expiring.kept_until.unwrap();
    while now_ms() <= until {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let late = waiting_for(&store, &instance, "order_paid", &["4"]).await;
    assert!(store.take_kept_events(&late).await.unwrap().is_empty());
    assert_eq!(task(&store, late[0]).await.state, TaskState::Waiting);
    let swept = store.sweep_kept_events(until).await.unwrap();
    assert_eq!(swept, 1, "the expired event goes; the hour-long ones stay");
    let delivered = store
        .deliver_event("p", "order_paid", "2", &data(3), HOUR)
        .await
        .unwrap();
    assert_eq!(
        delivered.completed,
        vec![ids[1]],
        "a wait is found again after all that"
    );
}
