//! The benchmark scenarios. Each run applies a workflow under a name of its own (so runs
//! never see each other's instances), starts it and computes its figures from the
//! server's timestamps, never from the bench's clock.

use crate::api::{Api, Instance, PROJECT};
use crate::floor::{self, Shell};
use crate::{broker, external};
use anyhow::{Context, Result, bail};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Requests in flight at once when the diamonds are started.
pub const START_CONCURRENCY: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// One instance of a chain of 1,000 noop tasks: overhead per task.
    Chain,
    /// One instance of a root fanning out to 10,000 noop tasks: tasks per second.
    Fanout,
    /// 200 single-task instances one after another: command written -> task running.
    Latency,
    /// 1,000 instances of a 5-task diamond started at once: instances per second.
    Diamonds,
    /// One instance of 10,000 tasks each waiting out a 1 h delay: memory of the masters
    /// (resident set, with --spawn only) per pending delayed task.
    Timers,
    /// One instance of a foreach task over 10,000 elements (noop children, all at once):
    /// children per second, to hold against `fanout`'s tasks written in the definition.
    Foreach,
    /// `chain` with 1,000 shell tasks running `true`: real work's cost per task, process
    /// start, log and event included; held against its floor, as many bare spawns of
    /// `sh -c true` one after another (and of `bash -c true`, the interpreter it runs).
    ShellChain,
    /// `fanout` to 2,000 shell tasks running `true`: real tasks per second; held against
    /// its floor, as many bare spawns of `sh -c true` (and of `bash -c true`), as many at
    /// once as the workers have slots.
    ShellFanout,
    /// 10,000 instances of a 100-task workflow, each waiting on an hour's delay at its root:
    /// memory of the masters (resident set, with --spawn only) per active instance, and
    /// `latency`'s command -> running while they are active. Run it with `--runs 1` (once
    /// per fresh server): a later run reuses the memory the first one's runs freed.
    Active,
    /// A 100,000-task definition (a root, each task waiting for one of the tasks before it,
    /// ten children each): seconds to apply it (the bench's clock), then to run it.
    BigDag,
    /// One instance of 10,000 external tasks on one queue, taken and completed by 8
    /// polling clients in the bench (10 a poll): external tasks per second; then 200
    /// single-external-task instances one after another, the clients waiting in their
    /// polls: ready (offered) -> taken (the poll answered).
    External,
    /// 1,000 messages published at once to RabbitMQ, each starting a run through an `amqp`
    /// trigger: runs started per second; then 200 messages one after another: published ->
    /// run running.
    Broker,
}

/// What the tasks of a chain or fan-out do.
#[derive(Clone, Copy)]
enum Work {
    Noop,
    /// A shell task running `true`.
    Shell,
}

/// A design target a figure is held against.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    AtMost(f64),
    AtLeast(f64),
}

pub struct Metric {
    pub name: &'static str,
    pub target: Option<Target>,
}

/// How big each scenario is; `--scale` shrinks them for quick trials.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    pub chain: usize,
    pub fanout: usize,
    pub latency: usize,
    pub diamonds: usize,
    pub timers: usize,
    pub foreach: usize,
    pub shell_chain: usize,
    pub shell_fanout: usize,
    pub active: usize,
    pub big_dag: usize,
    pub external: usize,
    pub broker: usize,
}

impl Sizes {
    pub fn scaled(scale: f64) -> Sizes {
        let s = |n: f64| ((n * scale).round() as usize).max(1);
        Sizes {
            chain: s(1000.0),
            fanout: s(10_000.0),
            latency: s(200.0),
            diamonds: s(1000.0),
            timers: s(10_000.0),
            foreach: s(10_000.0),
            shell_chain: s(1000.0),
            shell_fanout: s(2000.0),
            active: s(10_000.0),
            big_dag: s(100_000.0),
            external: s(10_000.0),
            broker: s(1000.0),
        }
    }
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Chain => "chain",
            Scenario::Fanout => "fanout",
            Scenario::Latency => "latency",
            Scenario::Diamonds => "diamonds",
            Scenario::Timers => "timers",
            Scenario::Foreach => "foreach",
            Scenario::ShellChain => "shell-chain",
            Scenario::ShellFanout => "shell-fanout",
            Scenario::Active => "active",
            Scenario::BigDag => "big-dag",
            Scenario::External => "external",
            Scenario::Broker => "broker",
        }
    }

    /// What one run of the scenario measures, in the order [`Scenario::run`] returns it.
    pub fn metrics(self) -> &'static [Metric] {
        match self {
            Scenario::Chain => &[Metric {
                name: "overhead per task (ms)",
                target: Some(Target::AtMost(2.0)),
            }],
            Scenario::Fanout => &[Metric {
                name: "tasks/s",
                target: Some(Target::AtLeast(5000.0)),
            }],
            Scenario::Latency => &[
                Metric {
                    name: "command → running p50 (ms)",
                    target: Some(Target::AtMost(5.0)),
                },
                Metric {
                    name: "command → running p99 (ms)",
                    target: None,
                },
            ],
            Scenario::Diamonds => &[Metric {
                name: "instances/s",
                target: None,
            }],
            Scenario::Timers => &[Metric {
                name: "master RSS per delayed task (bytes)",
                target: None,
            }],
            Scenario::Foreach => &[Metric {
                name: "children/s",
                target: None,
            }],
            Scenario::Active => &[
                Metric {
                    name: "master RSS per active 100-task instance (KiB)",
                    target: Some(Target::AtMost(20.0)),
                },
                Metric {
                    name: "command → running p50 while active (ms)",
                    target: None,
                },
                Metric {
                    name: "command → running p99 while active (ms)",
                    target: Some(Target::AtMost(50.0)),
                },
            ],
            Scenario::BigDag => &[
                Metric {
                    name: "apply (s)",
                    target: Some(Target::AtMost(5.0)),
                },
                Metric {
                    name: "run (s)",
                    target: None,
                },
            ],
            Scenario::External => &[
                Metric {
                    name: "external tasks/s, 8 clients",
                    target: Some(Target::AtLeast(2000.0)),
                },
                Metric {
                    name: "ready → taken p50 (ms)",
                    target: Some(Target::AtMost(5.0)),
                },
                Metric {
                    name: "ready → taken p99 (ms)",
                    target: None,
                },
            ],
            Scenario::Broker => &[
                Metric {
                    name: "runs started/s from messages",
                    target: Some(Target::AtLeast(1000.0)),
                },
                Metric {
                    name: "message → running p50 (ms)",
                    target: None,
                },
                Metric {
                    name: "message → running p99 (ms)",
                    target: Some(Target::AtMost(50.0)),
                },
            ],
            Scenario::ShellChain => &[
                Metric {
                    name: "ms per shell task",
                    target: Some(Target::AtMost(1.5)),
                },
                Metric {
                    name: "floor: ms per `sh -c true`",
                    target: None,
                },
                Metric {
                    name: "shoal ÷ floor (×)",
                    target: None,
                },
                Metric {
                    name: "bash floor: ms per `bash -c true`",
                    target: None,
                },
                Metric {
                    name: "shoal ÷ bash floor (×)",
                    target: None,
                },
            ],
            Scenario::ShellFanout => &[
                Metric {
                    name: "shell tasks/s",
                    target: None,
                },
                Metric {
                    name: "floor: `sh -c true`/s, slots at once",
                    target: None,
                },
                Metric {
                    name: "shoal ÷ floor (%)",
                    target: None,
                },
                Metric {
                    name: "bash floor: `bash -c true`/s, slots at once",
                    target: None,
                },
                Metric {
                    name: "shoal ÷ bash floor (%)",
                    target: None,
                },
            ],
        }
    }

    /// One run under the workflow name `name`; every wait ends by `timeout`. `slots` is
    /// how many tasks the shoal's workers run at once, all of them together.
    pub async fn run(
        self,
        api: &Api,
        name: &str,
        sizes: Sizes,
        timeout: Duration,
        pids: &[u32],
        slots: usize,
    ) -> Result<Vec<f64>> {
        let deadline = Instant::now() + timeout;
        match self {
            Scenario::Chain => Ok(vec![
                chain(api, name, Work::Noop, sizes.chain, deadline).await?,
            ]),
            Scenario::Fanout => Ok(vec![
                fanout(api, name, Work::Noop, sizes.fanout, deadline).await?,
            ]),
            Scenario::Latency => latency(api, name, sizes.latency, deadline).await,
            Scenario::Diamonds => diamonds(api, name, sizes.diamonds, deadline).await,
            Scenario::Timers => timers(api, name, sizes.timers, deadline, pids).await,
            Scenario::Foreach => foreach(api, name, sizes.foreach, deadline).await,
            Scenario::Active => {
                active(api, name, sizes.active, sizes.latency, deadline, pids).await
            }
            Scenario::BigDag => big_dag(api, name, sizes.big_dag, deadline).await,
            Scenario::External => {
                let rate = external::fanout(api, name, sizes.external, deadline).await?;
                let lat = format!("{name}-latency");
                let latency = external::latency(api, &lat, sizes.latency, deadline).await?;
                Ok(vec![rate, latency[0], latency[1]])
            }
            Scenario::Broker => {
                let rate = broker::rate(api, name, sizes.broker, deadline).await?;
                let lat = format!("{name}-latency");
                let latency = broker::latency(api, &lat, sizes.latency, deadline).await?;
                Ok(vec![rate, latency[0], latency[1]])
            }
            // The floor right after shoal's run, so that each run's ratio is of figures
            // taken in the same moment of a machine whose speed drifts.
            Scenario::ShellChain => {
                let n = sizes.shell_chain;
                let shoal = chain(api, name, Work::Shell, n, deadline).await?;
                let sh = floor::chain(Shell::Sh, n).await?;
                let bash = floor::chain(Shell::Bash, n).await?;
                Ok(vec![shoal, sh, shoal / sh, bash, shoal / bash])
            }
            Scenario::ShellFanout => {
                let n = sizes.shell_fanout;
                let shoal = fanout(api, name, Work::Shell, n, deadline).await?;
                let sh = floor::fanout(Shell::Sh, n, slots).await?;
                let bash = floor::fanout(Shell::Bash, n, slots).await?;
                Ok(vec![
                    shoal,
                    sh,
                    100.0 * shoal / sh,
                    bash,
                    100.0 * shoal / bash,
                ])
            }
        }
    }
}

fn noop(name: String, depends_on: &[String]) -> Value {
    task(Work::Noop, name, depends_on)
}

fn task(work: Work, name: String, depends_on: &[String]) -> Value {
    match work {
        Work::Noop => json!({ "name": name, "type": "noop", "depends_on": depends_on }),
        Work::Shell => {
            json!({ "name": name, "type": "shell", "command": "true", "depends_on": depends_on })
        }
    }
}

/// Applies `tasks` as workflow `name`, starts one instance and waits for it to succeed.
async fn run_one(api: &Api, name: &str, tasks: Vec<Value>, deadline: Instant) -> Result<Instance> {
    api.apply(&json!({ "name": name, "tasks": tasks })).await?;
    let command = api.start(name).await?;
    api.wait_command(command, deadline).await?;
    let mut list = api.wait_workflow(name, 1, deadline).await?;
    list.pop().context("instance list is empty")
}

pub fn ms(d: chrono::TimeDelta) -> f64 {
    d.num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0
}

/// ms per task.
async fn chain(api: &Api, name: &str, work: Work, n: usize, deadline: Instant) -> Result<f64> {
    let names: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    let tasks = (0..n)
        .map(|i| task(work, names[i].clone(), &names[i.saturating_sub(1)..i]))
        .collect();
    let inst = run_one(api, name, tasks, deadline).await?;
    Ok(inst.run_time()?.as_secs_f64() * 1000.0 / n as f64)
}

/// Tasks per second, the root included.
async fn fanout(api: &Api, name: &str, work: Work, n: usize, deadline: Instant) -> Result<f64> {
    let root = vec!["root".to_string()];
    let tasks = std::iter::once(noop("root".into(), &[]))
        .chain((0..n).map(|i| task(work, format!("f{i}"), &root)))
        .collect();
    let inst = run_one(api, name, tasks, deadline).await?;
    Ok((n + 1) as f64 / inst.run_time()?.as_secs_f64())
}

async fn foreach(api: &Api, name: &str, n: usize, deadline: Instant) -> Result<Vec<f64>> {
    let list: Vec<usize> = (0..n).collect();
    let each = json!({
        "name": "each",
        "type": "foreach",
        "params": { "list": serde_json::to_string(&list)? },
        "foreach": { "items": "list", "task": { "type": "noop" } },
    });
    let inst = run_one(api, name, vec![each], deadline).await?;
    Ok(vec![(n + 1) as f64 / inst.run_time()?.as_secs_f64()])
}

async fn latency(api: &Api, name: &str, n: usize, deadline: Instant) -> Result<Vec<f64>> {
    api.apply(&json!({ "name": name, "tasks": [noop("only".into(), &[])] }))
        .await?;
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let command = api.start(name).await?;
        let id = api.wait_command(command, deadline).await?;
        let inst = api.wait_instance(id, deadline).await?;
        let task = inst.tasks.iter().find(|t| t.name == "only");
        let Some(started) = task.and_then(|t| t.started_at) else {
            bail!("instance {id} succeeded without a started task 'only'");
        };
        samples.push(ms(started - inst.created_at));
    }
    let p = |q| crate::stats::percentile(&samples, q).unwrap_or(f64::NAN);
    Ok(vec![p(50.0), p(99.0)])
}

/// Starts `n` instances of `name`, START_CONCURRENCY requests at once.
async fn start_many(api: &Api, name: &str, n: usize) -> Result<()> {
    let mut senders = JoinSet::new();
    for first in 0..START_CONCURRENCY.min(n) {
        let (api, name) = (api.clone(), name.to_string());
        senders.spawn(async move {
            for _ in (first..n).step_by(START_CONCURRENCY) {
                api.start(&name).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(sent) = senders.join_next().await {
        sent??;
    }
    Ok(())
}

/// A task per index, each after the task ten places up the tree (`t{i}` after `t{i / 10}`),
/// under `root`.
fn tree(n: usize, root: Value) -> Vec<Value> {
    let mut tasks = vec![root];
    tasks.extend((1..n).map(|i| {
        let up = if i < 10 {
            "root".to_string()
        } else {
            format!("t{}", i / 10)
        };
        noop(format!("t{i}"), &[up])
    }));
    tasks
}

async fn active(
    api: &Api,
    name: &str,
    n: usize,
    samples: usize,
    deadline: Instant,
    pids: &[u32],
) -> Result<Vec<f64>> {
    if pids.is_empty() {
        bail!("the active scenario reads the masters' memory: run it with --spawn");
    }
    let root = json!({ "name": "root", "type": "delay", "delay": "1h" });
    api.apply(&json!({ "name": name, "tasks": tree(100, root) }))
        .await?;
    // One run first: what any number of runs needs once (the definition) is not counted.
    let first = api.start(name).await?;
    api.wait_command(first, deadline).await?;
    let before = rss_bytes(pids)?;
    start_many(api, name, n).await?;
    let running = format!("workflow={name}&state=running");
    while api.count(&running).await? < n as u64 + 1 {
        if Instant::now() >= deadline {
            bail!("timed out: not all {n} instances of {name} are running");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let after = rss_bytes(pids)?;
    let per_instance = after.saturating_sub(before) as f64 / n as f64 / 1024.0;
    let latency = latency(api, &format!("{name}-probe"), samples, deadline).await?;
    stop_all(api, name).await?;
    Ok(vec![per_instance, latency[0], latency[1]])
}

/// Stops every running instance of `name`, START_CONCURRENCY requests at once.
async fn stop_all(api: &Api, name: &str) -> Result<()> {
    loop {
        let path = format!("/instances?project={PROJECT}&workflow={name}&state=running&limit=1000");
        let page: Vec<Value> = api.get(&path).await?;
        if page.is_empty() {
            return Ok(());
        }
        let ids: Vec<i64> = page.iter().filter_map(|i| i["id"].as_i64()).collect();
        let mut stops = JoinSet::new();
        for chunk in ids.chunks(ids.len().div_ceil(START_CONCURRENCY)) {
            let (api, chunk) = (api.clone(), chunk.to_vec());
            stops.spawn(async move {
                for id in chunk {
                    // One that ended meanwhile answers 409: nothing to stop.
                    let _ = api
                        .post::<Value>(&format!("/instances/{id}/stop"), &json!({}))
                        .await;
                }
            });
        }
        while stops.join_next().await.is_some() {}
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn big_dag(api: &Api, name: &str, n: usize, deadline: Instant) -> Result<Vec<f64>> {
    let def = json!({ "name": name, "tasks": tree(n, noop("root".into(), &[])) });
    let applying = Instant::now();
    api.apply(&def).await?;
    let apply = applying.elapsed().as_secs_f64();
    let command = api.start(name).await?;
    let id = api.wait_command(command, deadline).await?;
    let inst = api.wait_instance(id, deadline).await?;
    Ok(vec![apply, inst.run_time()?.as_secs_f64()])
}

async fn diamonds(api: &Api, name: &str, n: usize, deadline: Instant) -> Result<Vec<f64>> {
    let deps = |d: &[&str]| d.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let tasks = json!([
        noop("a".into(), &[]),
        noop("b".into(), &deps(&["a"])),
        noop("c".into(), &deps(&["a"])),
        noop("d".into(), &deps(&["a"])),
        noop("e".into(), &deps(&["b", "c", "d"])),
    ]);
    api.apply(&json!({ "name": name, "tasks": tasks })).await?;

    start_many(api, name, n).await?;

    let list = api.wait_workflow(name, n, deadline).await?;
    let first: DateTime<Utc> = list
        .iter()
        .map(|i| i.created_at)
        .min()
        .context("no instances")?;
    let last = list
        .iter()
        .filter_map(|i| i.ended_at)
        .max()
        .context("no ended_at")?;
    Ok(vec![n as f64 / (ms(last - first) / 1000.0)])
}

/// One single-task instance, so that the first measured run does not pay for start-up
/// (connections, workers registering, caches).
pub async fn warm_up(api: &Api, timeout: Duration) -> Result<()> {
    let name = "bench-warm-up";
    api.apply(&json!({ "name": name, "tasks": [noop("only".into(), &[])] }))
        .await?;
    let deadline = Instant::now() + timeout;
    let command = api.start(name).await?;
    let id = api.wait_command(command, deadline).await?;
    api.wait_instance(id, deadline)
        .await
        .context("warm-up instance")?;
    Ok(())
}

/// Resident set of these processes, in bytes (Linux `/proc`).
fn rss_bytes(pids: &[u32]) -> Result<u64> {
    let mut total = 0;
    for pid in pids {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .with_context(|| format!("no VmRSS for process {pid}"))?;
        total += kib * 1024;
    }
    Ok(total)
}

async fn timers(
    api: &Api,
    name: &str,
    n: usize,
    deadline: Instant,
    pids: &[u32],
) -> Result<Vec<f64>> {
    if pids.is_empty() {
        bail!("the timers scenario reads the masters' memory: run it with --spawn");
    }
    let tasks: Vec<Value> = (0..n)
        .map(|i| json!({ "name": format!("d{i}"), "type": "noop", "delay": "1h" }))
        .collect();
    api.apply(&json!({ "name": name, "tasks": tasks })).await?;
    let before = rss_bytes(pids)?;
    let command = api.start(name).await?;
    let id = api.wait_command(command, deadline).await?;
    loop {
        let inst: Value = api.get(&format!("/instances/{id}")).await?;
        let tasks = inst["tasks"].as_array().map_or(&[][..], Vec::as_slice);
        if tasks.iter().filter(|t| t["state"] == "delayed").count() == n {
            break;
        }
        if Instant::now() >= deadline {
            bail!("timed out: instance {id} has not recorded its {n} delayed tasks");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = rss_bytes(pids)?;
    api.post::<Value>(&format!("/instances/{id}/stop"), &json!({}))
        .await?;
    Ok(vec![after.saturating_sub(before) as f64 / n as f64])
}
