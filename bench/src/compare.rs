//! `--compare airflow`: shoal and Apache Airflow on the same four workloads, back to back
//! on the same machine. bench/peers/airflow installs Airflow (setup.sh) and runs its side
//! (run.py, which prints JSON); this module runs that and holds the figures side by side.

use crate::report::{Row, num};
use crate::scenarios::{Scenario, Sizes};
use crate::stats::Summary;
use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt::Write;
use std::path::Path;
use std::process::Stdio;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Peer {
    Airflow,
}

const AIRFLOW_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/peers/airflow");

/// The workloads: shoal's scenario, the Airflow DAG of the same shape, the shape, the
/// goal of shoal's lead over Airflow. Real (shell) tasks first.
const WORKLOADS: &[(Scenario, &str, Shape, Option<f64>)] = &[
    (
        Scenario::ShellChain,
        "chain_100_bash",
        Shape::Chain,
        Some(500.0),
    ),
    (
        Scenario::ShellFanout,
        "fanout_500_bash",
        Shape::Fanout,
        Some(100.0),
    ),
    (Scenario::Chain, "chain_100_empty", Shape::Chain, None),
    (Scenario::Fanout, "fanout_500_empty", Shape::Fanout, None),
];

#[derive(Clone, Copy)]
enum Shape {
    Chain,
    Fanout,
}

/// The sizes of the DAGs in bench/peers/airflow/dags.
pub fn sizes() -> Sizes {
    Sizes {
        chain: 100,
        fanout: 500,
        shell_chain: 100,
        shell_fanout: 500,
        ..Sizes::scaled(1.0)
    }
}

pub fn scenarios() -> Vec<Scenario> {
    WORKLOADS.iter().map(|w| w.0).collect()
}

/// What run.py prints.
#[derive(Deserialize)]
pub struct Airflow {
    pub airflow: String,
    python: String,
    postgres: String,
    executor: String,
    parallelism: u32,
    max_active_tasks_per_dag: u32,
    dags: HashMap<String, Dag>,
}

#[derive(Deserialize)]
struct Dag {
    tasks: usize,
    /// Trigger → success of each run.
    seconds: Vec<f64>,
}

/// Runs bench/peers/airflow/run.py with the venv's python; its progress goes to stderr.
pub fn run_airflow(runs: usize, timeout_secs: u64) -> Result<Airflow> {
    let dir = Path::new(AIRFLOW_DIR);
    let python = dir.join(".venv/bin/python");
    if !python.exists() {
        bail!(
            "no Airflow install at {}: run {}/setup.sh first",
            python.display(),
            dir.display()
        );
    }
    eprintln!("running Airflow ({runs} runs of each DAG; minutes per run)");
    let out = std::process::Command::new(&python)
        .arg(dir.join("run.py"))
        .args(["--runs", &runs.to_string()])
        .args(["--timeout", &timeout_secs.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run run.py")?;
    if !out.status.success() {
        bail!("{}/run.py failed ({})", dir.display(), out.status);
    }
    serde_json::from_slice(&out.stdout).context("run.py printed no results")
}

/// The table of the two side by side, with shoal's lead and its goal.
pub fn table(rows: &[Row], airflow: &Airflow) -> Result<String> {
    let mut out = format!(
        "| workload | metric | shoal: median (min–max) | Airflow {}: median (min–max) | shoal's lead | goal |\n\
         |---|---|--:|--:|--:|--:|\n",
        airflow.airflow
    );
    for &(scenario, dag, shape, goal) in WORKLOADS {
        // A scenario's first metric is shoal's own figure.
        let shoal = rows
            .iter()
            .find(|r| r.scenario == scenario.name())
            .with_context(|| format!("no figures for {}", scenario.name()))?
            .summary;
        let d = airflow
            .dags
            .get(dag)
            .with_context(|| format!("run.py gave no figures for {dag}"))?;
        // The formulas of shoal's chain and fanout scenarios, over Airflow's run times.
        let per_run: Vec<f64> = match shape {
            Shape::Chain => d
                .seconds
                .iter()
                .map(|s| s * 1000.0 / d.tasks as f64)
                .collect(),
            Shape::Fanout => d.seconds.iter().map(|s| d.tasks as f64 / s).collect(),
        };
        let theirs = Summary::of(&per_run).context("no Airflow runs")?;
        let (metric, lead) = match shape {
            Shape::Chain => ("ms per task", theirs.median / shoal.median),
            Shape::Fanout => ("tasks/s", shoal.median / theirs.median),
        };
        let goal = match goal {
            None => "—".to_string(),
            Some(g) => {
                let verdict = if lead >= g { "met" } else { "missed" };
                format!("≥ {g:.0}× ({verdict})")
            }
        };
        let work = match scenario {
            Scenario::ShellChain | Scenario::ShellFanout => "shell `true` / BashOperator",
            _ => "noop / EmptyOperator",
        };
        let shape = match shape {
            Shape::Chain => format!("chain of {}", d.tasks),
            Shape::Fanout => format!("fan-out to {} + root", d.tasks - 1),
        };
        let _ = writeln!(
            out,
            "| {shape}, {work} | {metric} | {} | {} | {lead:.0}× | {goal} |",
            spread(shoal),
            spread(theirs)
        );
    }
    Ok(out)
}

fn spread(s: Summary) -> String {
    format!("{} ({}–{})", num(s.median), num(s.min), num(s.max))
}

/// How both sides ran, printed under the tables.
pub fn notes(airflow: &Airflow, mode: &str, slots: usize, runs: usize) -> String {
    format!(
        "Both sides ran one after the other on this machine, {runs} runs of each workload \
         on each side (an Airflow run takes minutes: 3 are enough to see its spread); \
         medians, min–max in brackets; shoal's lead is the ratio of the medians. \
         shoal: `shoal {mode}` ({slots} slots), figures from its own timestamps after one \
         warm-up instance, instance started_at → ended_at, as in the sections below. \
         Airflow {} (Python {}, PostgreSQL {}) from `bench/peers/airflow/setup.sh`, run by \
         `bench/peers/airflow/run.py`: api-server, dag-processor and scheduler with the \
         {}, stock settings (parallelism {}, max_active_tasks_per_dag {}) apart from what \
         it takes to run (bench/peers/airflow/README.md); each run triggered by `airflow dags \
         trigger`, one at a time, timed by Airflow's own records from dag_run.queued_at \
         (the trigger) to end_date, so the trigger's wait for the scheduler counts on \
         Airflow's side only. The same formulas on both sides: a chain's time ÷ its tasks; \
         a fan-out's tasks, root included, ÷ its time.\n\n\
         The second table: shoal's runs of the four workloads; the shell ones with their \
         floors (the same count of `sh -c true`, and of `bash -c true`, spawned from the \
         bench, one after another on the chain, {slots} at once on the fan-out) and shoal's \
         figure over each, taken run by run.\n",
        airflow.airflow,
        airflow.python,
        airflow.postgres,
        airflow.executor,
        airflow.parallelism,
        airflow.max_active_tasks_per_dag,
    )
}
