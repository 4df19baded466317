//! External tasks taken by polling clients the bench runs itself, over HTTP as any
//! external worker would: each client long-polls its queue (`max` 10, `wait` 20s) and
//! completes every task it took in one batch call (`POST /external/complete`).

use crate::api::{Api, Instance};
use anyhow::{Context, Result, bail};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Polling clients at once.
pub const CLIENTS: usize = 8;
/// Most tasks one poll takes.
pub const MAX_TAKE: usize = 10;
/// How long a poll waits for a task.
pub const WAIT: &str = "20s";

/// A task a poll answered with, as the bench reads it.
#[derive(Deserialize)]
struct Taken {
    task_instance_id: i64,
    workflow_instance_id: i64,
    lease_token: String,
}

/// What became of one completion of a batch.
#[derive(Deserialize)]
struct Outcome {
    task_instance_id: i64,
    status: u16,
}

/// A task a client took: its ids and when the poll's answer was read (the bench's clock,
/// the machine's wall clock the server stamps its rows with too).
pub struct Take {
    pub workflow_instance_id: i64,
    pub task_instance_id: i64,
    pub at: DateTime<Utc>,
}

/// `CLIENTS` clients polling `queue` until `done` reaches `n` (or they are aborted); each
/// task taken is reported on `taken` (when given) once it is completed.
fn clients(
    api: &Api,
    queue: &str,
    n: usize,
    done: Arc<AtomicUsize>,
    taken: Option<mpsc::UnboundedSender<Take>>,
) -> JoinSet<Result<()>> {
    let mut set = JoinSet::new();
    for c in 0..CLIENTS {
        let (api, done, taken) = (api.clone(), done.clone(), taken.clone());
        let poll = json!({
            "queues": [queue],
            "worker": format!("bench-{c}"),
            "max": MAX_TAKE,
            "wait": WAIT,
        });
        set.spawn(async move {
            while done.load(Ordering::Relaxed) < n {
                let tasks: Vec<Taken> = api.post("/external/poll", &poll).await?;
                let at = Utc::now();
                if tasks.is_empty() {
                    continue;
                }
                let batch = tasks.iter().map(|t| {
                    json!({ "task_instance_id": t.task_instance_id, "lease_token": t.lease_token })
                });
                let batch = Value::Array(batch.collect());
                let outcomes: Vec<Outcome> = api.post("/external/complete", &batch).await?;
                if let Some(o) = outcomes.iter().find(|o| o.status != 200) {
                    bail!(
                        "task instance {} was not completed: {}",
                        o.task_instance_id,
                        o.status
                    );
                }
                for t in tasks {
                    done.fetch_add(1, Ordering::Relaxed);
                    if let Some(taken) = &taken {
                        let _ = taken.send(Take {
                            workflow_instance_id: t.workflow_instance_id,
                            task_instance_id: t.task_instance_id,
                            at,
                        });
                    }
                }
            }
            Ok(())
        });
    }
    set
}

/// Stops the clients, failing with the first error one of them met.
async fn stop(mut set: JoinSet<Result<()>>) -> Result<()> {
    set.abort_all();
    while let Some(ended) = set.join_next().await {
        match ended {
            Ok(result) => result.context("an external client failed")?,
            Err(e) if e.is_cancelled() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// A task of an instance with its times, as `GET /instances/{id}` lists it.
#[derive(Deserialize)]
struct TaskTimes {
    id: i64,
    started_at: Option<DateTime<Utc>>,
    ended_at: Option<DateTime<Utc>>,
}

#[derive(Deserialize)]
struct WithTasks {
    tasks: Vec<TaskTimes>,
}

/// One instance of `n` independent external tasks on one queue, taken and completed by
/// the clients: tasks per second, first offered (the earliest `started_at`) to last
/// completed (the latest `ended_at`), both the server's.
pub async fn fanout(api: &Api, name: &str, n: usize, deadline: Instant) -> Result<f64> {
    let queue = format!("{name}-q");
    let tasks: Vec<Value> = (0..n)
        .map(|i| json!({ "name": format!("e{i}"), "type": "external", "queue": queue }))
        .collect();
    api.apply(&json!({ "name": name, "tasks": tasks })).await?;
    let done = Arc::new(AtomicUsize::new(0));
    let set = clients(api, &queue, n, done.clone(), None);
    let command = api.start(name).await?;
    let ran = async {
        let id = api.wait_command(command, deadline).await?;
        api.wait_instance(id, deadline).await?;
        anyhow::Ok(id)
    }
    .await;
    stop(set).await?;
    let id = ran?;
    let inst: WithTasks = api.get(&format!("/instances/{id}")).await?;
    let first = inst.tasks.iter().filter_map(|t| t.started_at).min();
    let last = inst.tasks.iter().filter_map(|t| t.ended_at).max();
    let (Some(first), Some(last)) = (first, last) else {
        bail!("instance {id} has no started or ended tasks");
    };
    if inst.tasks.len() != n {
        bail!("instance {id} has {} tasks, not {n}", inst.tasks.len());
    }
    Ok(n as f64 / (crate::scenarios::ms(last - first) / 1000.0))
}

/// `samples` single-external-task instances one after another, the clients waiting in
/// their polls: ready (the task's `started_at`, when the master offered it) → taken (the
/// poll's answer read by the bench), in ms: p50 and p99.
pub async fn latency(api: &Api, name: &str, samples: usize, deadline: Instant) -> Result<Vec<f64>> {
    let queue = format!("{name}-q");
    let task = json!({ "name": "only", "type": "external", "queue": queue });
    api.apply(&json!({ "name": name, "tasks": [task] })).await?;
    let done = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let set = clients(api, &queue, samples, done, Some(tx));
    let measured = async {
        let mut ms = Vec::with_capacity(samples);
        for _ in 0..samples {
            let command = api.start(name).await?;
            let id = api.wait_command(command, deadline).await?;
            let take = tokio::time::timeout_at(deadline.into(), rx.recv())
                .await
                .context("timed out waiting for a poll to take the task")?
                .context("every client ended")?;
            if take.workflow_instance_id != id {
                bail!(
                    "a client took a task of instance {}, not {id}",
                    take.workflow_instance_id
                );
            }
            let inst: Instance = api.wait_instance(id, deadline).await?;
            let full: WithTasks = api.get(&format!("/instances/{}", inst.id)).await?;
            let started = full
                .tasks
                .iter()
                .find(|t| t.id == take.task_instance_id)
                .and_then(|t| t.started_at)
                .with_context(|| format!("task {} has no started_at", take.task_instance_id))?;
            ms.push(crate::scenarios::ms(take.at - started));
        }
        anyhow::Ok(ms)
    }
    .await;
    stop(set).await?;
    let ms = measured?;
    let p = |q| crate::stats::percentile(&ms, q).unwrap_or(f64::NAN);
    Ok(vec![p(50.0), p(99.0)])
}
