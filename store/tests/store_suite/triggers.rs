//! Webhook trigger calls: idempotency keys, the progress of a called run, and the
//! triggers of a project.

use super::*;

const TRIGGERED: &str = "name: hooked\nproject: p\ntriggers:\n\
    - {name: go, auth: {token: 0123456789abcdef-token}}\n\
    tasks:\n- {name: a, type: noop}\n";

/// Stores workflow `hooked`; its version.
async fn hooked(store: &Store) -> i32 {
    let def = WorkflowDef::parse(TRIGGERED).unwrap();
    store.put_definition(&def).await.unwrap().0
}

fn key(key: &str) -> Option<CallKey<'_>> {
    Some(CallKey { trigger: "go", key })
}

fn with_params(mut cmd: NewCommand, params: &[(&str, &str)]) -> NewCommand {
    cmd.params = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    cmd
}

pub(crate) async fn a_repeated_idempotency_key_returns_the_first_run_and_starts_nothing(ctx: Ctx) {
    let store = ctx.store.clone();
    let version = hooked(&store).await;
    let cmd = with_params(command("p", "hooked", version), &[("id", "7")]);
    let first = store.start_triggered(&cmd, key("k1")).await.unwrap();
    assert!(!first.replayed && first.workflow_instance_id.is_none());
    let again = store.start_triggered(&cmd, key("k1")).await.unwrap();
    assert_eq!((again.command_id, again.replayed), (first.command_id, true));
    let commands = "SELECT COUNT(*) FROM command";
    assert_eq!(ctx.count_raw(commands).await, 1);

    // Another payload under the same key is a mistake, not a retry.
    let other = with_params(command("p", "hooked", version), &[("id", "8")]);
    let e = store.start_triggered(&other, key("k1")).await.unwrap_err();
    assert!(
        matches!(&e, Error::Conflict(m) if m.contains("'k1'") && m.contains("new key")),
        "{e}"
    );
    // Keys are per trigger; calls without a key always start a run.
    let elsewhere = Some(CallKey {
        trigger: "other",
        key: "k1",
    });
    assert!(
        !store
            .start_triggered(&cmd, elsewhere)
            .await
            .unwrap()
            .replayed
    );
    let a = store.start_triggered(&cmd, None).await.unwrap();
    let b = store.start_triggered(&cmd, None).await.unwrap();
    assert_ne!(a.command_id, b.command_id);
    assert_eq!(ctx.count_raw(commands).await, 4);

    assert_eq!(
        store.run_progress(first.command_id, None).await.unwrap(),
        RunProgress::Pending
    );
    let claimed = store.claim_commands("m1", 1, 10).await.unwrap();
    let instance = claimed
        .iter()
        .find(|c| c.instance.command_id == first.command_id)
        .unwrap()
        .instance
        .id;
    assert_eq!(
        store.run_progress(first.command_id, None).await.unwrap(),
        RunProgress::Instance(instance, WorkflowState::Running)
    );
    store
        .remember_triggered_instance("p", "hooked", key("k1").unwrap(), instance)
        .await
        .unwrap();
    let replay = store.start_triggered(&cmd, key("k1")).await.unwrap();
    assert_eq!(replay.workflow_instance_id, Some(instance));
    assert_eq!(
        store
            .run_progress(replay.command_id, Some(instance))
            .await
            .unwrap(),
        RunProgress::Instance(instance, WorkflowState::Running)
    );
}

pub(crate) async fn concurrent_calls_with_one_key_start_one_run(ctx: Ctx) {
    let store = ctx.store.clone();
    let version = hooked(&store).await;
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let store = store.clone();
            let cmd = command("p", "hooked", version);
            tokio::spawn(async move { store.start_triggered(&cmd, key("same")).await.unwrap() })
        })
        .collect();
    let mut runs: Vec<TriggeredRun> = Vec::new();
    for call in calls {
        runs.push(call.await.unwrap());
    }
    let ids: HashSet<i64> = runs.iter().map(|r| r.command_id).collect();
    assert_eq!(ids.len(), 1, "{runs:?}");
    assert_eq!(runs.iter().filter(|r| !r.replayed).count(), 1, "{runs:?}");
    assert_eq!(ctx.count_raw("SELECT COUNT(*) FROM command").await, 1);
}

pub(crate) async fn a_rejected_command_and_the_triggers_of_the_latest_versions_are_read(ctx: Ctx) {
    let store = ctx.store.clone();
    hooked(&store).await;
    let v2 = TRIGGERED.replace("{name: go,", "{name: went, mode: async,");
    store
        .put_definition(&WorkflowDef::parse(&v2).unwrap())
        .await
        .unwrap();
    store
        .put_definition(&workflow("p", "plain", ""))
        .await
        .unwrap();
    let listed = store.project_triggers("p").await.unwrap();
    let names: Vec<(&str, &str)> = listed
        .iter()
        .flat_map(|(w, ts)| ts.iter().map(move |t| (w.as_str(), t.name.as_str())))
        .collect();
    assert_eq!(names, [("hooked", "went")], "the latest version only");
    assert!(store.project_triggers("q").await.unwrap().is_empty());

    // A version that does not exist: the claim rejects it, and the caller learns why.
    let run = store
        .start_triggered(&command("p", "hooked", 99), None)
        .await
        .unwrap();
    store.claim_commands("m1", 1, 10).await.unwrap();
    let progress = store.run_progress(run.command_id, None).await.unwrap();
    assert!(
        matches!(&progress, RunProgress::Rejected(e) if e.contains("version 99")),
        "{progress:?}"
    );
    assert!(store.sealed_secret("p", "pw").await.unwrap().is_none());
    store
        .put_secret("p", "pw", "sealed", "", "ann")
        .await
        .unwrap();
    assert_eq!(
        store.sealed_secret("p", "pw").await.unwrap().as_deref(),
        Some("sealed")
    );
}
