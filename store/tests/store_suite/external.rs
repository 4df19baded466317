//! External tasks: offers written with the cycle, taken by concurrent polls without
//! overlap, renewed and completed only under their lease, lapsed by the master.

use super::*;

/// An instance with `n` external tasks waiting on queue `q`; their ids.
async fn offered(store: &Store, n: usize) -> (InstanceRow, Vec<i64>) {
    let instance = running_instance(store, "ext").await;
    let names: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    let written = write(
        store,
        WriteBatch {
            new_tasks: names.iter().map(|name| new_task(&instance, name)).collect(),
            ..Default::default()
        },
    )
    .await;
    let ids = written.new_task_ids;
    let offers = ids.iter().map(|id| ExternalOffer {
        task_instance_id: *id,
        workflow_instance_id: instance.id,
        project: instance.project.clone(),
        queue: "q".into(),
        params: format!(r#"{{"n": "{id}"}}"#),
        sealed: false,
        lease_ms: 60_000,
    });
    write(
        store,
        WriteBatch {
            task_updates: ids
                .iter()
                .map(|id| TaskUpdate::state(*id, TaskState::Waiting))
                .collect(),
            external_offers: offers.collect(),
            epochs: vec![(instance.id, instance.owner_epoch)],
            ..Default::default()
        },
    )
    .await;
    (instance, ids)
}

pub(crate) async fn concurrent_polls_take_each_external_task_once(ctx: Ctx) {
    let store = ctx.store;
    let (_, ids) = offered(&store, 12).await;
    let polls = (0..8).map(|w| {
        let store = store.clone();
        tokio::spawn(async move {
            let queues = ["q".to_string(), "other".to_string()];
            let hash = format!("hash-{w}");
            store
                .take_external(&queues, None, &format!("w{w}"), &hash, 3)
                .await
                .unwrap()
        })
    });
    let mut taken = Vec::new();
    for poll in polls {
        taken.extend(poll.await.unwrap());
    }
    let mut got: Vec<i64> = taken.iter().map(|t| t.task_instance_id).collect();
    got.sort_unstable();
    assert_eq!(got, ids, "every task taken exactly once");
    let t = &taken[0];
    assert_eq!(t.params, format!(r#"{{"n": "{}"}}"#, t.task_instance_id));
    assert_eq!((t.queue.as_str(), t.task.starts_with('t')), ("q", true));
    let none = store
        .take_external(&["q".into()], None, "late", "h", 10)
        .await
        .unwrap();
    assert!(none.is_empty(), "nothing is offered twice");
    let other_project = Some(&["elsewhere".to_string()][..]);
    assert!(
        store
            .take_external(&["q".into()], other_project, "x", "h", 10)
            .await
            .unwrap()
            .is_empty()
    );
}

pub(crate) async fn only_the_lease_holder_renews_and_completes_and_a_lapse_ends_it(ctx: Ctx) {
    let store = ctx.store;
    let (_, ids) = offered(&store, 2).await;
    let taken = store
        .take_external(&["q".into()], None, "w", "good", 2)
        .await
        .unwrap();
    assert_eq!(taken.len(), 2);
    let (a, b) = (ids[0], ids[1]);
    assert!(store.renew_lease(a, "stale").await.unwrap().is_none());
    let renewed = store
        .renew_lease(a, "good")
        .await
        .unwrap()
        .expect("renewed");
    assert!(renewed >= taken[0].lease_expires_at);
    assert!(!store.append_external_log(a, "stale", "x").await.unwrap());
    assert!(
        store
            .append_external_log(a, "good", "line 1\n")
            .await
            .unwrap()
    );
    assert!(
        store
            .append_external_log(a, "good", "line 2\n")
            .await
            .unwrap()
    );
    let log = store.kept_log(a).await.unwrap().unwrap();
    assert_eq!(log.content, b"line 1\nline 2\n");
    assert_eq!(log.size, 14);

    let out = Params::from([("k".to_string(), "v".to_string())]);
    let end = |id, holder| store.end_waiting(id, TaskState::Success, &out, "done", holder);
    assert!(
        !end(a, Holder::Lease("stale")).await.unwrap(),
        "not its lease"
    );
    assert!(end(a, Holder::Lease("good")).await.unwrap());
    assert!(
        !end(a, Holder::Lease("good")).await.unwrap(),
        "one completion counts"
    );
    assert!(
        store.renew_lease(a, "good").await.unwrap().is_none(),
        "ended"
    );
    assert!(
        store.external_lease(a).await.unwrap().is_none(),
        "its offer is gone"
    );

    // A lease renewed after the master's look is not lapsed by it.
    let before = taken[1].lease_expires_at;
    assert!(!end(b, Holder::LapsedBefore(before - 1)).await.unwrap());
    let lapsed = store.lapsed_leases(&[a, b], before + 1).await.unwrap();
    assert_eq!(lapsed, [(b, "w".to_string(), before)]);
    assert!(end(b, Holder::LapsedBefore(before + 1)).await.unwrap());
}

pub(crate) async fn queues_count_their_offers_and_the_workers_seen_on_them(ctx: Ctx) {
    let store = ctx.store;
    let start = now_ms();
    let (instance, ids) = offered(&store, 3).await;
    let project = instance.project.clone();
    let queues = store.external_queues(None, start).await.unwrap();
    assert_eq!(
        queues,
        [ExternalQueue {
            project: project.clone(),
            queue: "q".into(),
            waiting: 3,
            taken: 0,
            workers: vec![],
        }]
    );
    let offers = store.external_offers(&ids).await.unwrap();
    assert_eq!(offers.len(), 3);
    assert!(offers.iter().all(|o| o.queue == "q" && o.worker.is_none()));

    let taken = store
        .take_external(&["q".into()], None, "w1", "h1", 2)
        .await
        .unwrap();
    let (a, b) = (taken[0].task_instance_id, taken[1].task_instance_id);
    let offer = &store.external_offers(&[a]).await.unwrap()[0];
    assert_eq!(
        (offer.worker.as_deref(), offer.lease_expires_at),
        (Some("w1"), Some(taken[0].lease_expires_at))
    );
    let q = &store.external_queues(None, start).await.unwrap()[0];
    assert_eq!((q.waiting, q.taken), (1, 2));
    assert_eq!(q.workers.len(), 1);
    let w = &q.workers[0];
    assert_eq!((w.name.as_str(), w.holding), ("w1", 2));
    assert!(w.last_seen_at >= start);

    // A heartbeat is a sighting too; another worker's take is listed first, the latest.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let before_heartbeat = now_ms();
    store.renew_lease(a, "h1").await.unwrap().expect("renewed");
    tokio::time::sleep(Duration::from_millis(5)).await;
    store
        .take_external(&["q".into()], None, "w2", "h2", 1)
        .await
        .unwrap();
    let q = &store.external_queues(None, start).await.unwrap()[0];
    assert_eq!((q.waiting, q.taken), (0, 3));
    let seen: Vec<(&str, i64)> = q
        .workers
        .iter()
        .map(|w| (w.name.as_str(), w.holding))
        .collect();
    assert_eq!(seen, [("w2", 1), ("w1", 2)]);
    assert!(q.workers[1].last_seen_at >= before_heartbeat);

    let mine = [project.clone()];
    let elsewhere = ["elsewhere".to_string()];
    assert_eq!(
        store
            .external_queues(Some(&mine), start)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        store
            .external_queues(Some(&elsewhere), start)
            .await
            .unwrap()
            .is_empty()
    );

    // Ended attempts leave the counts; their worker stays seen until the window passes.
    let out = Params::new();
    for id in [a, b] {
        let ended = store.end_waiting(id, TaskState::Success, &out, "done", Holder::Lease("h1"));
        assert!(ended.await.unwrap());
    }
    assert!(store.external_offers(&[a, b]).await.unwrap().is_empty());
    let q = &store.external_queues(None, start).await.unwrap()[0];
    assert_eq!((q.waiting, q.taken), (0, 1));
    assert_eq!(
        (q.workers[1].name.as_str(), q.workers[1].holding),
        ("w1", 0)
    );
    let later = store.external_queues(None, now_ms() + 1).await.unwrap();
    assert_eq!(later.len(), 1, "the queue still has w2's task");
    assert!(later[0].workers.is_empty(), "nobody seen since");
}

pub(crate) async fn thousands_of_offers_are_written_in_one_cycle(ctx: Ctx) {
    let store = ctx.store;
    // More offers than SQLite's bound values allow in one statement (8 a row).
    let (_, ids) = offered(&store, 5_000).await;
    let taken = store
        .take_external(&["q".into()], None, "w", "h", 100)
        .await
        .unwrap();
    assert_eq!(taken.len(), 100);
    assert!(store.ended_waits(&ids).await.unwrap().is_empty());
    assert!(store.lapsed_leases(&ids, 0).await.unwrap().is_empty());
}
