//! The floor under shell tasks: spawning `sh -c true` straight from Rust, with no scheduler,
//! log or event around it, in the shapes of `shell-chain` and `shell-fanout`. What a shell
//! task costs in shoal above this is what shoal adds.

use anyhow::{Context, Result, ensure};
use std::process::Stdio;
use std::time::Instant;
use tokio::process::Command;
use tokio::task::JoinSet;

/// `n` spawns, each waited for before the next starts: ms per spawn.
pub async fn chain(n: usize) -> Result<f64> {
    let start = Instant::now();
    for _ in 0..n {
        sh_true().await?;
    }
    Ok(start.elapsed().as_secs_f64() * 1000.0 / n as f64)
}

/// `n` spawns, `at_once` of them running at any time (a worker's slots): spawns per second.
pub async fn fanout(n: usize, at_once: usize) -> Result<f64> {
    let start = Instant::now();
    let mut running = JoinSet::new();
    for _ in 0..n {
        if running.len() >= at_once {
            running.join_next().await.context("no spawn running")???;
        }
        running.spawn(sh_true());
    }
    while let Some(done) = running.join_next().await {
        done??;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

async fn sh_true() -> Result<()> {
    // By full path: a bare name would search PATH on every spawn.
    let status = Command::new("/bin/sh")
        .args(["-c", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .context("cannot run /bin/sh")?;
    ensure!(status.success(), "`sh -c true` exited with {status}");
    Ok(())
}
