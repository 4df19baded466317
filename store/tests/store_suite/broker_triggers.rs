//! Broker triggers: a message is taken once however many consumers race with it (and a
//! taken one leaves nothing behind when it was a duplicate), within a batch as across
//! batches and however batches that share messages race, ignored messages are kept
//! latest first, consumers' states are kept per trigger, and the triggers to consume are
//! those of online workflows' latest versions.

use super::*;

const CONSUMED: &str = "name: consumed\nproject: p\ntriggers:\n\
    - {name: orders, type: amqp, url: 'amqp://h/', queue: q}\n\
    - {name: hook, auth: {token: 0123456789abcdef-token}}\n\
    tasks:\n- {name: a, type: noop}\n";

/// Stores workflow `consumed`; its version.
async fn consumed(store: &Store) -> i32 {
    let def = WorkflowDef::parse(CONSUMED).unwrap();
    store.put_definition(&def).await.unwrap().0
}

fn message(id: &str) -> TriggerMessage<'_> {
    TriggerMessage {
        project: "p",
        workflow: "consumed",
        trigger: "orders",
        id,
    }
}

pub(crate) async fn concurrent_takers_of_one_message_start_one_run(ctx: Ctx) {
    let store = ctx.store.clone();
    let version = consumed(&store).await;
    let takers = (0..8).map(|_| {
        let store = store.clone();
        tokio::spawn(async move {
            let cmd = command("p", "consumed", version);
            let action = MessageAction::Start(&cmd);
            store
                .take_trigger_message(&message("m-1"), action)
                .await
                .unwrap()
        })
    });
    let mut started = 0;
    for taker in takers {
        match taker.await.unwrap() {
            MessageTaken::Started(_) => started += 1,
            MessageTaken::Duplicate => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(started, 1);
    assert_eq!(ctx.count_raw("SELECT COUNT(*) FROM command").await, 1);

    // An event or an ignored record is taken once too; a duplicate keeps nothing.
    let data = Params::from([("status".to_string(), "ok".to_string())]);
    let deliver = MessageAction::Deliver {
        event: "paid",
        key: "42",
        data: &data,
        keep: Duration::from_secs(60),
    };
    let first = store.take_trigger_message(&message("e-1"), deliver).await;
    assert!(matches!(first, Ok(MessageTaken::Delivered(_))), "{first:?}");
    let again = store.take_trigger_message(&message("e-1"), deliver).await;
    assert_eq!(again.unwrap(), MessageTaken::Duplicate);
    assert_eq!(ctx.count_raw("SELECT COUNT(*) FROM kept_event").await, 1);
    let ignore = MessageAction::Ignore {
        reason: "the body is not JSON",
        body: "{x",
    };
    for _ in 0..2 {
        store
            .take_trigger_message(&message("i-1"), ignore)
            .await
            .unwrap();
    }
    let ignored = store
        .ignored_messages("p", "consumed", "orders")
        .await
        .unwrap();
    assert_eq!(ignored.len(), 1, "{ignored:?}");
    assert_eq!(
        (ignored[0].reason.as_str(), ignored[0].body.as_str()),
        ("the body is not JSON", "{x")
    );
}

pub(crate) async fn a_batch_takes_each_identity_once_in_one_transaction(ctx: Ctx) {
    let store = ctx.store.clone();
    let version = consumed(&store).await;
    let cmd = command("p", "consumed", version);
    let start = MessageAction::Start(&cmd);
    let ignore = MessageAction::Ignore {
        reason: "the body is not JSON",
        body: "{x",
    };
    // Two copies of one message in the batch, and a bad one: one run per identity.
    let batch = [
        (message("b"), start),
        (message("a"), start),
        (message("b"), start),
        (message("bad"), ignore),
    ];
    let taken = store.take_trigger_messages(&batch).await.unwrap();
    let [
        MessageTaken::Started(b),
        MessageTaken::Started(a),
        MessageTaken::Duplicate,
        MessageTaken::Ignored,
    ] = taken[..]
    else {
        panic!("{taken:?}")
    };
    assert_ne!(a, b);
    assert_eq!(ctx.count_raw("SELECT COUNT(*) FROM command").await, 2);
    // Each record names its run's start command; the ignored one names none.
    assert_eq!(
        ctx.count_raw("SELECT COUNT(*) FROM trigger_message WHERE command_id IS NOT NULL")
            .await,
        2
    );
    let recorded = ctx
        .count_raw(
            "SELECT COUNT(*) FROM trigger_message t JOIN command c ON c.id = t.command_id \
             WHERE t.message_id IN ('a', 'b')",
        )
        .await;
    assert_eq!(recorded, 2);
    assert_eq!(
        store
            .ignored_messages("p", "consumed", "orders")
            .await
            .unwrap()
            .len(),
        1
    );

    // Across batches: what was taken is a duplicate, the rest is taken.
    let again = [(message("a"), start), (message("c"), start)];
    let taken = store.take_trigger_messages(&again).await.unwrap();
    assert!(
        matches!(
            taken[..],
            [MessageTaken::Duplicate, MessageTaken::Started(_)]
        ),
        "{taken:?}"
    );
    // A batch of duplicates only writes nothing.
    let taken = store.take_trigger_messages(&again).await.unwrap();
    assert_eq!(taken, [MessageTaken::Duplicate, MessageTaken::Duplicate]);
    assert_eq!(ctx.count_raw("SELECT COUNT(*) FROM command").await, 3);

    // Concurrent batches sharing identities, in opposite orders: each identity starts one
    // run, and neither batch deadlocks on the other.
    let ids: Vec<String> = (0..40).map(|n| format!("m-{n:02}")).collect();
    let takers = (0..4).map(|n| {
        let store = store.clone();
        let mut ids = ids.clone();
        if n % 2 == 1 {
            ids.reverse();
        }
        tokio::spawn(async move {
            let cmd = command("p", "consumed", version);
            let batch: Vec<_> = ids
                .iter()
                .map(|id| (message(id), MessageAction::Start(&cmd)))
                .collect();
            store.take_trigger_messages(&batch).await.unwrap()
        })
    });
    let mut started = 0;
    for taker in takers {
        for taken in taker.await.unwrap() {
            match taken {
                MessageTaken::Started(_) => started += 1,
                MessageTaken::Duplicate => {}
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(started, ids.len());
    assert_eq!(ctx.count_raw("SELECT COUNT(*) FROM command").await, 43);
}

pub(crate) async fn ignored_messages_and_consumers_are_kept_per_trigger(ctx: Ctx) {
    let store = ctx.store.clone();
    consumed(&store).await;
    for n in 0..KEPT_IGNORED + 5 {
        let id = format!("i-{n}");
        let reason = format!("reason {n}");
        let ignore = MessageAction::Ignore {
            reason: &reason,
            body: "b",
        };
        store
            .take_trigger_message(&message(&id), ignore)
            .await
            .unwrap();
    }
    let ignored = store
        .ignored_messages("p", "consumed", "orders")
        .await
        .unwrap();
    assert_eq!(ignored.len() as u64, KEPT_IGNORED);
    assert_eq!(ignored[0].reason, format!("reason {}", KEPT_IGNORED + 4));
    assert!(
        store
            .ignored_messages("p", "consumed", "hook")
            .await
            .unwrap()
            .is_empty()
    );

    let mut state = ConsumerState {
        project: "p".into(),
        workflow: "consumed".into(),
        trigger_name: "orders".into(),
        master: "m1".into(),
        state: "failed".into(),
        error: Some("no queue 'q'".into()),
        since: 1,
        last_message_at: None,
        counts: MessageCounts::default(),
    };
    store.set_consumer_state(&state).await.unwrap();
    state.state = "connected".into();
    state.error = None;
    state.last_message_at = Some(5);
    state.counts = MessageCounts {
        started: 3,
        filtered: 2,
        ignored: 1,
        duplicate: 4,
        delivered: 5,
    };
    store.set_consumer_state(&state).await.unwrap();
    assert_eq!(store.consumer_states("p").await.unwrap(), [state.clone()]);
    // Another master's consumer stays when this one stops.
    store
        .drop_consumer_state("p", "consumed", "orders", "m2")
        .await
        .unwrap();
    assert_eq!(store.consumer_states("p").await.unwrap().len(), 1);
    store
        .drop_consumer_state("p", "consumed", "orders", "m1")
        .await
        .unwrap();
    assert!(store.consumer_states("p").await.unwrap().is_empty());

    // The triggers to consume: online workflows' latest versions with a broker trigger.
    let names =
        |defs: Vec<StoredDefinition>| -> Vec<String> { defs.into_iter().map(|d| d.name).collect() };
    store
        .put_definition(&workflow("p", "plain", ""))
        .await
        .unwrap();
    assert_eq!(
        names(store.broker_trigger_definitions().await.unwrap()),
        ["consumed"]
    );
    store.set_online("p", "consumed", false).await.unwrap();
    assert!(store.broker_trigger_definitions().await.unwrap().is_empty());
    store.set_online("p", "consumed", true).await.unwrap();
    let without = CONSUMED.replace(
        "- {name: orders, type: amqp, url: 'amqp://h/', queue: q}\n",
        "",
    );
    store
        .put_definition(&WorkflowDef::parse(&without).unwrap())
        .await
        .unwrap();
    assert!(store.broker_trigger_definitions().await.unwrap().is_empty());
}
