//! Deleting a project: what its runs left goes with it.

use super::*;

pub(crate) async fn a_deleted_project_takes_its_runs_and_one_made_again_starts_empty(ctx: Ctx) {
    let store = &ctx.store;
    let ended = running_instance(store, "etl").await;
    end_with_a_task(store, &ended, WorkflowState::Failure, 1_000).await;
    let task = store.list_task_instances(ended.id).await.unwrap()[0].id;
    let live = running_instance(store, "live").await;
    store.delete_workflow("p", "etl").await.unwrap();
    let busy = store.delete_project("p").await.unwrap_err();
    assert!(busy.to_string().contains("still has workflows"), "{busy}");
    end_with_a_task(store, &live, WorkflowState::Success, 2_000).await;
    store.delete_workflow("p", "live").await.unwrap();
    // A run about to start (of a workflow gone meanwhile) holds the project too, and
    // becomes a refused command of it.
    store.insert_command(&command("p", "etl", 1)).await.unwrap();
    let pending = store.delete_project("p").await.unwrap_err();
    assert!(pending.to_string().contains("about to start"), "{pending}");
    assert!(store.claim_commands("m1", 7, 10).await.unwrap().is_empty());
    assert_eq!(
        ctx.count_raw("SELECT count(*) FROM error_command WHERE project = 'p'")
            .await,
        1
    );

    assert!(store.delete_project("p").await.unwrap());
    store.create_project("p", "", "ann", None).await.unwrap();
    for id in [ended.id, live.id] {
        assert_eq!(store.get_instance(id).await.unwrap(), None, "{id}");
        assert!(store.list_task_instances(id).await.unwrap().is_empty());
    }
    assert_eq!(store.kept_log(task).await.unwrap(), None);
    for (table, sql) in [
        (
            "instances",
            "SELECT count(*) FROM workflow_instance WHERE project = 'p'",
        ),
        ("tasks", "SELECT count(*) FROM task_instance"),
        ("kept logs", "SELECT count(*) FROM task_log"),
        (
            "refused commands",
            "SELECT count(*) FROM error_command WHERE project = 'p'",
        ),
    ] {
        assert_eq!(ctx.count_raw(sql).await, 0, "{table} of the old p");
    }
}
