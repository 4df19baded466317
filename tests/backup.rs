//! Backup and restore of a cluster's store as docs/reference.md describes it: `pg_dump`
//! taken while a run is in the middle of its DAG, restored with `pg_restore` into a new
//! database under a new cluster (new etcd, masters and workers, as after losing the
//! machines). The restored run is taken over and finishes: what ended before the backup
//! is not run again, what was running then runs again, and nothing is lost.

#[path = "support/fault.rs"]
mod fault;
mod support;

use fault::*;
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::TestDb;

/// Runs a PostgreSQL client tool, which must succeed.
fn pg(tool: &str, args: &[&str]) {
    let out = Command::new(tool).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{tool} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The tasks of instance `id` whose start the execution log at `log` records, in order.
fn starts(log: &Path, id: i64) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("start {id} ")))
        .map(|rest| rest.split_whitespace().next().unwrap().to_string())
        .collect()
}

#[test]
fn a_cluster_restored_from_a_backup_taken_mid_run_finishes_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("executions");
    let dump = dir.path().join("shoal.dump");
    let chain = dag(
        "chain",
        &log,
        &[("a", &[], ""), ("b", &["a"], ""), ("c", &["b"], "")],
    );

    let id = {
        let c = Cluster::start("backup", &["default"]);
        c.apply(&chain);
        let command = c.submit("chain", json!({ "n_b": "4" }));
        let id = c.instance_of(command);
        c.wait_until("task b to run", Duration::from_secs(60), &[id], || {
            let rows = c.rows_in(&[id], "running");
            rows.iter().any(|r| r["name"] == "b").then_some(())
        });
        pg(
            "pg_dump",
            &["-Fc", "-d", &c.db.url, "-f", dump.to_str().unwrap()],
        );
        c.log("backup taken; the whole cluster goes");
        id
    };

    let db = TestDb::create("shoal_restored");
    pg(
        "pg_restore",
        &["--no-owner", "-d", &db.url, dump.to_str().unwrap()],
    );
    let c = Cluster::start_on(db, "restored", &["default"]);
    let end = c.wait_all_end(&[id]).remove(0);
    assert_eq!(end["state"], "success", "{}", c.describe(&[id]));
    let ran = starts(&log, id);
    let times = |task: &str| ran.iter().filter(|t| *t == task).count();
    assert_eq!(
        (times("a"), times("b"), times("c")),
        (1, 2, 1),
        "a ended before the backup and is not run again; b was running and runs again; c runs once: {ran:?}"
    );
}
