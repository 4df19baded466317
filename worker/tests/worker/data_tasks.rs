//! spark and notebook tasks run by a real worker: a real Spark job in local mode through
//! PyPI's pyspark (its spark-submit, on the machine's Java 17), and real notebooks through
//! papermill and ipykernel. `scripts/test` installs the three with pip when missing and sets
//! SHOAL_REQUIRE_DATA_TOOLS, under which (and under CI) a missing tool fails these tests;
//! elsewhere they say they were skipped and why.

use super::task_types::def_task;
use super::*;
use serde_json::json;
use std::process::Command;
use std::time::Instant;

/// Spark starts a JVM, and on 2 busy cores a job takes most of a minute.
const SPARK_WAIT: Duration = Duration::from_secs(300);
const NOTEBOOK_WAIT: Duration = Duration::from_secs(120);

/// Whether python3 can import `module`; if not, a failure where the tool is required (CI,
/// scripts/test), else a line saying what was skipped.
fn have(module: &str, package: &str, test: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let required = ["CI", "SHOAL_REQUIRE_DATA_TOOLS"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
        let why =
            format!("python3 cannot import {module}: `pip install {package}` (scripts/test does)");
        assert!(!required, "{test}: {why}");
        eprintln!("SKIPPED {test}: {why}");
    }
    ok
}

/// The spark-submit pyspark ships.
fn pyspark_submit() -> PathBuf {
    let out = Command::new("python3")
        .args([
            "-c",
            "import os, pyspark; print(os.path.dirname(pyspark.__file__))",
        ])
        .output()
        .unwrap();
    let dir = String::from_utf8(out.stdout).unwrap();
    Path::new(dir.trim()).join("bin").join("spark-submit")
}

/// A master and a worker running pyspark's spark-submit; none without pyspark.
async fn spark_setup(test: &str) -> Option<(MasterProc, Setup)> {
    if !have("pyspark", "pyspark", test) {
        return None;
    }
    let master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let w = launch(Launch {
        spark_submit: Some(pyspark_submit()),
        ..Launch::default()
    })
    .await;
    Some((master, w))
}

impl MasterProc {
    /// [`MasterProc::until_done`] for tasks that take longer than [`WAIT`] to end.
    async fn done_within(&mut self, id: i64, wait: Duration) -> TaskEvent {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let e = tokio::time::timeout_at(deadline, self.events.recv())
                .await
                .expect("the task did not end in time")
                .expect("master channel closed");
            assert_eq!(e.task_instance_id, id, "unexpected event {e:?}");
            if ![TaskEventKind::Running as i32, TaskEventKind::Log as i32].contains(&e.kind) {
                return e;
            }
        }
    }
}

async fn log_of(w: &mut Setup, t: &TaskSpec) -> String {
    String::from_utf8_lossy(&w.read_log(t, 0, 0).await.expect("log found")).into_owned()
}

// ---------------------------------------------------------------- spark

#[tokio::test]
async fn a_spark_job_runs_in_local_mode_its_prints_in_the_log() {
    let Some((mut master, mut w)) = spark_setup("spark job").await else {
        return;
    };
    let job = w.path("sum.py");
    std::fs::write(
        &job,
        "import sys\n\
         from pyspark.sql import SparkSession\n\
         spark = SparkSession.builder.getOrCreate()\n\
         n = int(sys.argv[1])\n\
         total = spark.sparkContext.parallelize(range(1, n + 1), 2).sum()\n\
         print('app %s on %s' % (spark.sparkContext.appName, spark.sparkContext.master))\n\
         print('partitions=%s' % spark.conf.get('spark.sql.shuffle.partitions'))\n\
         print('argv=%r' % sys.argv[2:])\n\
         print('sum=%d' % total)\n\
         print('${setValue(total=%d)}' % total)\n\
         spark.stop()\n",
    )
    .unwrap();
    // The master expands `${...}` before the worker sees the task: these are its values.
    let t = def_task(
        501,
        json!({
            "type": "spark",
            "spark": {
                "py_file": job.to_str().unwrap(),
                "master": "local[1]",
                "name": "shoal-sum",
                "driver_memory": "512m",
                "conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "3"},
                "args": ["100", "a b; touch pwned", "$(id)"],
            },
        }),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [501]);
    let end = master.done_within(501, SPARK_WAIT).await;
    let log = log_of(&mut w, &t).await;
    assert_eq!(end.kind, TaskEventKind::Success as i32, "{end:?}\n{log}");
    assert_eq!(end.output.get("total").map(String::as_str), Some("5050"));
    for line in [
        "app shoal-sum on local[1]",
        "partitions=3",
        "argv=['a b; touch pwned', '$(id)']",
        "sum=5050",
    ] {
        assert!(log.contains(line), "{line:?} not in the log:\n{log}");
    }
}

#[tokio::test]
async fn a_failing_spark_job_fails_the_task_with_spark_submit_s_exit() {
    let Some((mut master, mut w)) = spark_setup("failing spark job").await else {
        return;
    };
    let job = w.path("fail.py");
    std::fs::write(&job, "import sys\nprint('giving up')\nsys.exit(3)\n").unwrap();
    let t = def_task(
        502,
        json!({"type": "spark", "spark": {"py_file": job.to_str().unwrap()}}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [502]);
    let end = master.done_within(502, SPARK_WAIT).await;
    let log = log_of(&mut w, &t).await;
    assert_eq!(end.kind, TaskEventKind::Failure as i32, "{end:?}\n{log}");
    assert_eq!(end.exit_code, 3);
    assert_eq!(end.message, "spark-submit exited with code 3");
    assert!(log.contains("giving up"), "{log}");
    assert!(log.ends_with("spark-submit exited with code 3\n"), "{log}");
}

#[tokio::test]
async fn a_missing_spark_submit_fails_the_task_saying_where_it_was_looked_for() {
    let mut master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let mut w = launch(Launch {
        spark_submit: Some("/nonexistent/spark/bin/spark-submit".into()),
        ..Launch::default()
    })
    .await;
    let t = def_task(
        503,
        json!({"type": "spark", "spark": {"py_file": "/jobs/a.py"}}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [503]);
    let end = master.done_within(503, WAIT).await;
    assert_eq!(end.kind, TaskEventKind::Failure as i32, "{end:?}");
    assert!(
        end.message
            .starts_with("cannot start /nonexistent/spark/bin/spark-submit")
            && end.message.contains("--spark-submit PATH"),
        "{}",
        end.message
    );
    // A bad expansion is refused before anything starts.
    let t = def_task(
        504,
        json!({"type": "spark", "spark": {"py_file": "/a.py", "deploy_mode": "sideways"}}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t]).await.accepted, [504]);
    let end = master.done_within(504, WAIT).await;
    assert!(
        end.message.contains("unknown deploy_mode 'sideways'"),
        "{}",
        end.message
    );
}

// ---------------------------------------------------------------- notebook

/// A notebook: a parameters cell (`rows`, `label`), a cell that prints, one that fails
/// when `rows` > 5, and one that writes the kernel's pid and sleeps when `nap` is set.
fn write_notebook(path: &Path) {
    let code = |source: &str, tags: &[&str]| {
        json!({"cell_type": "code", "metadata": {"tags": tags}, "source": source,
               "outputs": [], "execution_count": null})
    };
    let nb = json!({
        "cells": [
            code("rows = 1\nlabel = 'x'\nnap = ''", &["parameters"]),
            code("print('total', rows * 2, label, type(rows).__name__)", &[]),
            code("if rows > 5:\n    raise ValueError('too many rows: %d' % rows)", &[]),
            code(
                "import os, time\nif nap:\n    open(nap, 'w').write(str(os.getpid()))\n    time.sleep(120)",
                &[],
            ),
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 4,
    });
    std::fs::write(path, nb.to_string()).unwrap();
}

/// A master, a worker and [`write_notebook`]'s notebook (`report.ipynb` in the test's
/// directory); none without papermill and ipykernel.
async fn notebook_setup(test: &str) -> Option<(MasterProc, Setup, PathBuf)> {
    if !(have("papermill", "papermill", test) && have("ipykernel", "ipykernel", test)) {
        return None;
    }
    let master = start_master("127.0.0.1:0".parse().unwrap()).await;
    let w = start_worker(2).await;
    let nb = w.path("report.ipynb");
    write_notebook(&nb);
    Some((master, w, nb))
}

#[tokio::test]
async fn a_notebook_runs_with_its_parameters_and_is_kept_beside_the_log() {
    let Some((mut master, mut w, _)) = notebook_setup("notebook").await else {
        return;
    };
    let t = def_task(
        511,
        json!({
            "type": "notebook",
            "notebook": {"path": "report.ipynb", "cwd": w.dir.path().to_str().unwrap(),
                         "output": "out/report.ipynb",
                         "parameters": {"rows": "3", "label": "a b; $(id)"}},
        }),
        &master.addr,
    );
    std::fs::create_dir(w.path("out")).unwrap();
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [511]);
    let end = master.done_within(511, NOTEBOOK_WAIT).await;
    let log = log_of(&mut w, &t).await;
    assert_eq!(end.kind, TaskEventKind::Success as i32, "{end:?}\n{log}");
    // The cell's output, typed as papermill types it, in the log as it ran.
    assert!(log.contains("total 6 a b; $(id) int"), "{log}");
    let kept = w.path("data/logs/200/511_1.ipynb");
    assert!(
        log.contains(&format!("executed notebook: {}", kept.display())),
        "{log}"
    );
    let executed = std::fs::read_to_string(&kept).unwrap();
    assert!(executed.contains("total 6 a b; $(id) int"), "{executed}");
    assert_eq!(
        std::fs::read_to_string(w.path("out/report.ipynb")).unwrap(),
        executed,
        "written where the task asked too"
    );
}

#[tokio::test]
async fn a_failing_cell_fails_the_task_naming_its_error() {
    let Some((mut master, mut w, nb)) = notebook_setup("failing notebook").await else {
        return;
    };
    let t = def_task(
        512,
        json!({"type": "notebook", "notebook": {"path": nb.to_str().unwrap(), "parameters": {"rows": "9"}}}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [512]);
    let end = master.done_within(512, NOTEBOOK_WAIT).await;
    let log = log_of(&mut w, &t).await;
    assert_eq!(end.kind, TaskEventKind::Failure as i32, "{end:?}\n{log}");
    assert_eq!(
        end.message,
        "notebook cell In [4] raised ValueError: too many rows: 9"
    );
    assert_ne!(end.exit_code, 0);
    assert!(log.contains("papermill exited with code"), "{log}");
    assert!(
        log.ends_with("notebook cell In [4] raised ValueError: too many rows: 9\n"),
        "{log}"
    );
    assert!(w.path("data/logs/200/512_1.ipynb").is_file());
}

#[tokio::test]
async fn a_killed_notebook_takes_its_kernel_along() {
    let Some((mut master, mut w, nb)) = notebook_setup("killed notebook").await else {
        return;
    };
    let pid_file = w.path("kernel.pid");
    let t = def_task(
        513,
        json!({"type": "notebook", "notebook": {"path": nb.to_str().unwrap(),
               "parameters": {"nap": pid_file.to_str().unwrap()}}}),
        &master.addr,
    );
    assert_eq!(w.dispatch(vec![t.clone()]).await.accepted, [513]);
    let deadline = Instant::now() + NOTEBOOK_WAIT;
    let kernel = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|p| p.parse::<i32>().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the kernel never wrote its pid");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(w.kill(&t).await);
    let end = master.done_within(513, WAIT).await;
    assert_eq!(end.kind, TaskEventKind::Killed as i32, "{end:?}");
    // The kernel runs in a session of its own; it exits once papermill is gone.
    wait_gone(kernel).await;
}
