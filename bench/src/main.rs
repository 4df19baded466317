//! `shoal-bench`: drives a running shoal (or one it spawns) through its REST API and
//! reports the median, min and max of each scenario's figures over several runs.

mod api;
mod broker;
mod compare;
mod external;
mod floor;
mod report;
mod scenarios;
mod spawn;
mod stats;

use anyhow::{Context, Result};
use api::Api;
use clap::Parser;
use compare::Peer;
use report::Row;
use scenarios::{Scenario, Sizes};
use spawn::Mode;
use stats::Summary;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "shoal-bench",
    about = "Benchmarks a shoal through its REST API"
)]
struct Args {
    /// Base URL of the shoal to drive (ignored with --spawn).
    #[arg(long, default_value = "http://127.0.0.1:12345")]
    api: String,
    /// Start a shoal for the bench and stop it at the end.
    #[arg(long, value_enum)]
    spawn: Option<Mode>,
    /// The shoal binary --spawn runs.
    #[arg(long, default_value = "target/release/shoal")]
    shoal_bin: PathBuf,
    /// Runs per scenario; the report gives their median, min and max.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "chain,fanout,latency,diamonds,shell-chain,shell-fanout"
    )]
    scenarios: Vec<Scenario>,
    /// Multiplies every scenario's size (tasks, instances, samples); for quick trials.
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Run the chain of 100 and the fan-out to 500 (shell `true` and noop tasks) on shoal,
    /// then the same DAGs on this peer (bench/peers/<peer>, installed by its setup.sh),
    /// --runs times each, and write both side by side (instead of --scenarios).
    #[arg(long, value_enum, conflicts_with_all = ["scenarios", "scale"])]
    compare: Option<Peer>,
    /// Longest wait for any one run.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    /// Write the results into this markdown file, replacing the section of this mode.
    #[arg(long)]
    write: Option<PathBuf>,
    /// Masters of the cluster --spawn cluster starts; other than 2, --write writes a
    /// section of its own ("cluster, N masters"), to set instances/s side by side.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=8))]
    masters: u8,
    /// The database of the cluster --spawn cluster starts; other than postgres, --write
    /// writes a section of its own ("cluster on mysql").
    #[arg(long, value_enum, default_value = "postgres")]
    database: spawn::Database,
    /// The section --write replaces when the bench drives a shoal it did not spawn.
    #[arg(long, value_enum, default_value = "standalone")]
    mode: Mode,
}

#[tokio::main]
async fn main() -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    anyhow::ensure!(args.runs > 0, "--runs must be at least 1");
    anyhow::ensure!(args.scale > 0.0, "--scale must be positive");

    let (scenarios, sizes) = match args.compare {
        Some(_) => (compare::scenarios(), compare::sizes()),
        None => (args.scenarios.clone(), Sizes::scaled(args.scale)),
    };
    // A shoal the bench did not spawn is taken to have one worker of default slots.
    let (rows, mode, slots) = match args.spawn {
        None => {
            let rows = bench(&args, &scenarios, sizes, &args.api, &[], spawn::SLOTS).await?;
            (rows, args.mode, spawn::SLOTS)
        }
        Some(mode) => {
            let shoal =
                spawn::spawn(mode, &args.shoal_bin, args.masters.into(), args.database).await?;
            let slots = shoal.slots;
            let rows = bench(
                &args,
                &scenarios,
                sizes,
                &shoal.api_url,
                &shoal.engine_pids(),
                slots,
            )
            .await;
            // Stopped before a peer runs, so that it has the machine to itself.
            let logs = shoal.stop(rows.is_ok()).await;
            (
                rows.with_context(|| format!("shoal logs kept in {logs}"))?,
                mode,
                slots,
            )
        }
    };

    let table = report::table(&rows);
    println!("{table}");
    let (key, title, table, notes) = match args.compare {
        None => {
            let notes = notes(&args, slots);
            let (key, title) = match (mode, args.masters) {
                // Sections of their own, beside the one of the scheduling scenarios.
                _ if args.scenarios == [Scenario::External] => (
                    format!("external-{}", mode.name()),
                    format!("external tasks ({})", mode.name()),
                ),
                _ if args.scenarios == [Scenario::Broker] => (
                    format!("broker-{}", mode.name()),
                    format!("broker triggers ({})", mode.name()),
                ),
                (Mode::Cluster, _) if args.database == spawn::Database::Mysql => (
                    "cluster-mysql".to_string(),
                    "cluster on MySQL/MariaDB".to_string(),
                ),
                (Mode::Cluster, n) if n != 2 => (
                    format!("cluster-{n}-masters"),
                    format!("cluster, {n} master{}", if n == 1 { "" } else { "s" }),
                ),
                _ => (mode.name().to_string(), mode.name().to_string()),
            };
            (key, title, table, notes)
        }
        Some(Peer::Airflow) => {
            let airflow = compare::run_airflow(args.runs, args.timeout_secs)?;
            let side_by_side = compare::table(&rows, &airflow)?;
            println!("{side_by_side}");
            (
                format!("airflow-{}", mode.name()),
                format!(
                    "shoal against Apache Airflow {} ({})",
                    airflow.airflow,
                    mode.name()
                ),
                format!("{side_by_side}\n{table}"),
                compare::notes(&airflow, mode.name(), slots, args.runs),
            )
        }
    };
    if let Some(path) = &args.write {
        let section = report::section(&key, &title, mode.name(), &table, &notes);
        report::write_section(path, &key, &section)?;
        eprintln!("wrote the {key} section of {}", path.display());
    }
    Ok(())
}

/// Runs the scenarios against `url`; `pids` are the processes that drive instances
/// (known when the bench spawned them), `slots` the tasks its workers run at once.
async fn bench(
    args: &Args,
    scenarios: &[Scenario],
    sizes: Sizes,
    url: &str,
    pids: &[u32],
    slots: usize,
) -> Result<Vec<Row>> {
    let api = Api::new(url)?;
    let timeout = Duration::from_secs(args.timeout_secs);
    eprintln!("warming up {url}");
    scenarios::warm_up(&api, timeout)
        .await
        .context("warm-up instance")?;

    // Names of their own per bench invocation and run: runs never see each other's instances.
    let stamp = chrono::Utc::now().format("%Y%m%d%H%M%S");
    let mut rows = Vec::new();
    for &scenario in scenarios {
        let metrics = scenario.metrics();
        let mut samples = vec![Vec::new(); metrics.len()];
        for i in 1..=args.runs {
            let name = format!("bench-{}-{stamp}-{i}", scenario.name());
            eprint!("{} run {i}/{}:", scenario.name(), args.runs);
            let figures = scenario
                .run(&api, &name, sizes, timeout, pids, slots)
                .await
                .inspect_err(|_| eprintln!(" failed"))
                .with_context(|| format!("{} run {i}/{} ({name})", scenario.name(), args.runs))?;
            for ((m, v), s) in metrics.iter().zip(figures).zip(&mut samples) {
                eprint!(" {} = {v:.2};", m.name);
                s.push(v);
            }
            eprintln!();
        }
        for (metric, s) in metrics.iter().zip(&samples) {
            let summary = Summary::of(s).context("no samples")?;
            rows.push(Row {
                scenario: scenario.name(),
                metric,
                summary,
            });
        }
    }
    Ok(rows)
}

/// How the figures were obtained, printed under the table in BENCHMARKS.md.
fn notes(args: &Args, slots: usize) -> String {
    let s = Sizes::scaled(args.scale);
    let mut notes = String::new();
    if !matches!(
        args.scenarios[..],
        [Scenario::External] | [Scenario::Broker]
    ) {
        notes = format!(
            "Figures come from the server's own timestamps (millisecond resolution), after one \
         warm-up instance. chain: one instance of {} noop tasks in a line, (ended_at − \
         started_at) / {}. fanout: one instance of a root and {} noop tasks depending on it, \
         {} / (ended_at − started_at). latency: {} single-noop instances one after another, \
         task started_at − instance created_at (= command written). diamonds: {} instances of \
         a → b, c, d → e started {} requests at a time, {} / (last ended_at − first command).\n",
            s.chain,
            s.chain,
            s.fanout,
            s.fanout + 1,
            s.latency,
            s.diamonds,
            scenarios::START_CONCURRENCY,
            s.diamonds,
        );
    }
    if args.scenarios.contains(&Scenario::ShellChain)
        || args.scenarios.contains(&Scenario::ShellFanout)
    {
        notes.push_str(&format!(
            "\nshell-chain and shell-fanout: chain and fanout of {} and {} shell tasks running \
             `true`. Their floor is the bare process start: as many `sh -c true` spawned from \
             the bench (by its clock) right after shoal's run, one after another for the \
             chain (ms per spawn), {slots} at once for the fan-out, as many as shoal's \
             workers have slots (spawns per second); shoal ÷ floor is taken run by run (the \
             fan-out's in per cent of the floor's rate). shoal's worker runs bash on a script \
             file and reads the task's output, which the floor does not; the bash floor \
             spawns `bash -c true` the same way, the interpreter a shell task starts.\n",
            s.shell_chain, s.shell_fanout,
        ));
    }
    if args.scenarios.contains(&Scenario::External) {
        notes.push_str(&format!(
            "{sep}external: {clients} polling clients in the bench process, each a loop of `POST \
             /external/poll` (`max` {max}, `wait` {wait}) and one `POST /external/complete` \
             completing the tasks the poll took in one batch, over HTTP on loopback. Tasks/s: one instance of {n} independent external tasks on one queue, \
             {n} / (last task ended_at − first task started_at), the server's timestamps: the \
             master's offer to the last completion written. Ready → taken: {lat} instances \
             of one external task started one after another, the clients waiting in their \
             polls; the task's started_at (the master's clock when it offered the task, ms, \
             written in the same commit as the offer) to the bench's wall clock when the \
             poll's answer was read (same machine, same clock).\n",
            sep = if notes.is_empty() { "" } else { "\n" },
            clients = external::CLIENTS,
            max = external::MAX_TAKE,
            wait = external::WAIT,
            n = s.external,
            lat = s.latency,
        ));
    }
    if args.scenarios.contains(&Scenario::Broker) {
        notes.push_str(&format!(
            "{sep}broker: a workflow of one noop task with an `amqp` trigger on a queue of its \
             own on the machine's RabbitMQ ({url}), the bench publishing to it on one channel. \
             Runs started/s: {n} messages published at once, {n} / (the last run's started_at \
             − the bench's clock at the first publish); every message must start exactly one \
             run, and every run succeed. Message → running: {lat} messages one after another, \
             each after the run of the one before ended; the bench's clock just before the \
             publish to the run's started_at (same machine, same clock).\n",
            sep = if notes.is_empty() { "" } else { "\n" },
            url = broker::URL,
            n = s.broker,
            lat = s.latency,
        ));
    }
    if args.scale != 1.0 {
        notes.push_str(&format!(
            "\n**Scaled run (--scale {}): sizes differ from the design scenarios.**\n",
            args.scale
        ));
    }
    notes
}
