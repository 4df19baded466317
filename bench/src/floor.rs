//! The floor under shell tasks: spawning `sh -c true` straight from Rust, with no scheduler,
//! log or event around it, in the shapes of `shell-chain` and `shell-fanout`. What a shell
//! task costs in shoal above this is what shoal adds. A second floor spawns `bash -c true`:
//! a shell task runs bash, which starts slower than the `sh` (dash) of the first.

use anyhow::{Context, Result, ensure};
use std::process::Stdio;
use std::time::Instant;
use tokio::process::Command;
use tokio::task::JoinSet;

/// The shells a floor spawns, by full path (a bare name would search PATH on every spawn).
#[derive(Clone, Copy)]
pub enum Shell {
    Sh,
    Bash,
}

impl Shell {
    fn path(self) -> &'static str {
        match self {
            Shell::Sh => "/bin/sh",
            Shell::Bash => "/bin/bash",
        }
    }
}

/// `n` spawns, each waited for before the next starts: ms per spawn.
pub async fn chain(shell: Shell, n: usize) -> Result<f64> {
    let start = Instant::now();
    for _ in 0..n {
        run_true(shell).await?;
    }
    Ok(start.elapsed().as_secs_f64() * 1000.0 / n as f64)
}

/// `n` spawns, `at_once` of them running at any time (a worker's slots): spawns per second.
pub async fn fanout(shell: Shell, n: usize, at_once: usize) -> Result<f64> {
    let start = Instant::now();
    let mut running = JoinSet::new();
    for _ in 0..n {
        if running.len() >= at_once {
            running.join_next().await.context("no spawn running")???;
        }
        running.spawn(run_true(shell));
    }
    while let Some(done) = running.join_next().await {
        done??;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

async fn run_true(shell: Shell) -> Result<()> {
    let status = Command::new(shell.path())
        .args(["-c", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .with_context(|| format!("cannot run {}", shell.path()))?;
    ensure!(
        status.success(),
        "`{} -c true` exited with {status}",
        shell.path()
    );
    Ok(())
}
