//! On Postgres a task's updates (where it went, running, its end) are made in place (HOT):
//! no column they change is indexed and the table's pages keep room for the new versions,
//! so a cycle's batch update writes no index entries. An index that keys on a column the
//! engine updates, such as `state`, would make every task update write one entry per index.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_updates_a_fan_outs_task_rows_in_place() {
    let (ctx, cleanup_of) = open(Backend::Postgres).await;
    let url = ctx.url.clone();
    let store = ctx.store;
    let instance = running_instance(&store, "w").await;
    // A fan-out's neighbouring rows, updated together, as the engine's cycles do.
    let new_tasks = (0..200)
        .map(|i| new_task(&instance, &format!("t{i}")))
        .collect();
    let ids = write(
        &store,
        WriteBatch {
            new_tasks,
            ..Default::default()
        },
    )
    .await
    .new_task_ids;
    for state in [
        TaskState::Dispatched,
        TaskState::Running,
        TaskState::Success,
    ] {
        let task_updates = ids
            .iter()
            .map(|&id| {
                let mut u = TaskUpdate::state(id, state);
                u.worker = (state == TaskState::Dispatched).then(|| "worker-1:5681".to_string());
                u.ended_at = (state == TaskState::Success).then_some(2_000);
                u
            })
            .collect();
        write(
            &store,
            WriteBatch {
                task_updates,
                epochs: vec![(instance.id, instance.owner_epoch)],
                ..Default::default()
            },
        )
        .await;
    }
    // A backend reports its table counts when idle or when it ends: end them all.
    drop(store);
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
        .execute(&mut conn)
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let (updated, in_place) = loop {
        let counts: (i64, i64) = sqlx::query_as(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'task_instance'",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        if counts.0 >= 600 || std::time::Instant::now() > deadline {
            break counts;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    drop(conn);
    cleanup(cleanup_of).await;
    assert_eq!(updated, 600, "three updates of 200 rows");
    // Most, not all (497 here): a page's rows updated in one statement need their room at
    // once. Without it none are (every update changed the indexed `state`).
    assert!(
        in_place >= 400,
        "{in_place} of {updated} task updates in place (HOT)"
    );
}
