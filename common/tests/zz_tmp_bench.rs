use shoal_common::definition::WorkflowDef;
use shoal_common::store::*;
use shoal_common::types::*;
use std::time::Instant;

async fn bench(url: &str) {
    let store = Store::connect(url).await.unwrap();
    let def = WorkflowDef::parse("name: w\ntasks:\n- {name: a, type: noop}\n").unwrap();
    store.put_definition(&def).await.unwrap();
    store.insert_command(&NewCommand { kind: CommandKind::Start, project: "default".into(), workflow: "w".into(), version: 1, params: Default::default(), priority: None }).await.unwrap();
    let inst = store.claim_commands("m", 1, 10).await.unwrap().remove(0).instance;
    let nt = |i: usize| NewTaskInstance { workflow_instance_id: inst.id, name: format!("t{i}"), task_type: "noop".into(), attempt: 1, priority: Priority::Medium, worker_group: "default".into(), state: TaskState::Submitted, submitted_at: 1 };
    let ids = store.write_batch(&WriteBatch { new_tasks: (0..5000).map(nt).collect(), ..Default::default() }).await.unwrap().new_task_ids;
    for n in [1usize, 10, 100, 500] {
    let t = Instant::now();
    for chunk in ids.chunks(n).take(10) {
        let b = WriteBatch { task_updates: chunk.iter().map(|&id| { let mut u = TaskUpdate::state(id, TaskState::Running); u.worker = Some("w1".into()); u.started_at = Some(3); u }).collect(), ..Default::default() };
        store.write_batch(&b).await.unwrap();
    }
    println!("{url}: batch {n}: {:?} per batch", t.elapsed() / 10);
    }
    let t = Instant::now();
    for i in 0..100 { store.write_batch(&WriteBatch { new_tasks: vec![nt(i)], ..Default::default() }).await.unwrap(); }
    println!("{url}: insert 1: {:?}", t.elapsed() / 100);
}

#[tokio::test]
async fn tmp_bench() {
    let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect("postgres://postgres@127.0.0.1:5432/postgres").await.unwrap();
    sqlx::query("DROP DATABASE IF EXISTS shoal_tmp_bench WITH (FORCE)").execute(&mut admin).await.unwrap();
    sqlx::query("CREATE DATABASE shoal_tmp_bench").execute(&mut admin).await.unwrap();
    bench("postgres://postgres@127.0.0.1:5432/shoal_tmp_bench").await;
    sqlx::query("DROP DATABASE IF EXISTS shoal_tmp_bench WITH (FORCE)").execute(&mut admin).await.unwrap();
}
