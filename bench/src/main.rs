//! `shoal-bench`: drives a running shoal (or one it spawns) through its REST API and
//! reports the median, min and max of each scenario's figures over several runs.

mod api;
mod report;
mod scenarios;
mod spawn;
mod stats;

use anyhow::{Context, Result};
use api::Api;
use clap::Parser;
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
        default_value = "chain,fanout,latency,diamonds"
    )]
    scenarios: Vec<Scenario>,
    /// Multiplies every scenario's size (tasks, instances, samples); for quick trials.
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Longest wait for any one run.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    /// Write the results into this markdown file, replacing the section of this mode.
    #[arg(long)]
    write: Option<PathBuf>,
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

    let (rows, mode) = match args.spawn {
        None => (bench(&args, &args.api, &[]).await?, args.mode),
        Some(mode) => {
            let shoal = spawn::spawn(mode, &args.shoal_bin).await?;
            let rows = bench(&args, &shoal.api_url, &shoal.engine_pids()).await;
            let logs = shoal.stop(rows.is_ok()).await;
            (
                rows.with_context(|| format!("shoal logs kept in {logs}"))?,
                mode,
            )
        }
    };

    let table = report::table(&rows);
    println!("{table}");
    if let Some(path) = &args.write {
        let section = report::section(mode.name(), &table, &notes(&args));
        report::write_section(path, mode.name(), &section)?;
        eprintln!("wrote the {} section of {}", mode.name(), path.display());
    }
    Ok(())
}

/// Runs the scenarios against `url`; `pids` are the processes that drive instances
/// (known when the bench spawned them).
async fn bench(args: &Args, url: &str, pids: &[u32]) -> Result<Vec<Row>> {
    let api = Api::new(url)?;
    let timeout = Duration::from_secs(args.timeout_secs);
    let sizes = Sizes::scaled(args.scale);
    eprintln!("warming up {url}");
    scenarios::warm_up(&api, timeout)
        .await
        .context("warm-up instance")?;

    // Names of their own per bench invocation and run: runs never see each other's instances.
    let stamp = chrono::Utc::now().format("%Y%m%d%H%M%S");
    let mut rows = Vec::new();
    for &scenario in &args.scenarios {
        let metrics = scenario.metrics();
        let mut samples = vec![Vec::new(); metrics.len()];
        for i in 1..=args.runs {
            let name = format!("bench-{}-{stamp}-{i}", scenario.name());
            eprint!("{} run {i}/{}:", scenario.name(), args.runs);
            let figures = scenario
                .run(&api, &name, sizes, timeout, pids)
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
fn notes(args: &Args) -> String {
    let s = Sizes::scaled(args.scale);
    let mut notes = format!(
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
    if args.scale != 1.0 {
        notes.push_str(&format!(
            "\n**Scaled run (--scale {}): sizes differ from the design scenarios.**\n",
            args.scale
        ));
    }
    notes
}
