//! A Postgres connection that died while idle in the pool (a Postgres restart, a failover):
//! the API's store pings a connection as it takes it and replaces a dead one unseen; a
//! master's store (`connect_retrying`) saves that round trip, so the dead connection fails
//! its first statement — transiently, which the engine retries — and the write then lands
//! once.

use super::*;

/// Ends every other connection to the test's database, as a Postgres restart would.
async fn cut_connections(url: &str) {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .execute(&mut conn)
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_died_idle_fails_a_master_transiently_and_the_retry_lands_once() {
    let db = shoal_testkit::TestDb::create("shoal_test");
    let master = Store::connect_retrying(&db.url).await.unwrap();
    let api = Store::connect(&db.url).await.unwrap();
    let instance = running_instance(&master, "w").await;
    api.get_instance(instance.id).await.unwrap();
    cut_connections(&db.url).await;

    // The API's next read goes through: its dead connection was replaced when taken.
    let read = api.get_instance(instance.id).await.unwrap();
    assert_eq!(read.map(|i| i.id), Some(instance.id));

    // The master's write fails only transiently, then lands.
    let batch = WriteBatch {
        new_tasks: vec![new_task(&instance, "after-restart")],
        epochs: vec![(instance.id, instance.owner_epoch)],
        ..Default::default()
    };
    let mut failures = Vec::new();
    let written = loop {
        match master.write_batch(&batch).await {
            Ok(written) => break written,
            Err(e) => {
                assert_eq!(e.failure(), shoal_common::Failure::Transient, "{e}");
                failures.push(e.to_string());
                assert!(failures.len() <= 16, "never got through: {failures:?}");
            }
        }
    };
    assert!(
        !failures.is_empty(),
        "the master's store took a dead connection without noticing it (pinged?)"
    );
    assert_eq!(written.new_task_ids.len(), 1);
    let tasks = master.list_task_instances(instance.id).await.unwrap();
    let names: Vec<&str> = tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["after-restart"], "written once");
}
