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
