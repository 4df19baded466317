//! `shoal import dolphinscheduler` over `shoal standalone` and a cluster: the fixtures under
//! tests/fixtures/dolphinscheduler (a DolphinScheduler 3.2.2 export of a warehouse workflow,
//! its sub-process child and the workflow its dependent task waits for) are imported, and
//! the imported workflows run to success, every supported task type included, on runs made
//! by a backfill with dependents.

mod support;

#[path = "support/callback_server.rs"]
mod callback_server;

use serde_json::Value;
use support::{Env, LONG, attempts, cli, text, wait_for};

support::deployments!(an_imported_dolphinscheduler_export_applies_and_runs);

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/dolphinscheduler"
);

/// Both fixture files as one export, the HTTP task's URL pointing at `url`, and no
/// one-minute delay before `publish_done` (it would only slow the test).
fn export(url: &str) -> String {
    let mut all: Vec<Value> = Vec::new();
    for file in ["warehouse_daily.json", "child_and_dependency.json"] {
        let text = std::fs::read_to_string(format!("{FIXTURES}/{file}")).unwrap();
        let list: Vec<Value> = serde_json::from_str(&text).unwrap();
        all.extend(list);
    }
    for workflow in &mut all {
        for task in workflow["taskDefinitionList"].as_array_mut().unwrap() {
            task["delayTime"] = Value::from(0);
        }
    }
    serde_json::to_string_pretty(&all)
        .unwrap()
        .replace("http://127.0.0.1:0/health", url)
}

fn run_cli(e: &Env, args: &[&str]) -> (String, String) {
    let out = cli(e.api(), args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{args:?}: {stdout}\n{stderr}");
    (stdout, stderr)
}

fn an_imported_dolphinscheduler_export_applies_and_runs(e: Env) {
    let server = callback_server::CallbackServer::start(None);
    let file = e.path("export.json");
    std::fs::write(&file, export(&server.url)).unwrap();
    let file = file.to_str().unwrap();
    // DolphinScheduler's environment list (its API's answer): the PYTHON task's
    // environment comes along with its config.
    let envs = e.path("environments.json");
    let listed = serde_json::json!({"code": 0, "msg": "success", "data": [{
        "id": 1, "code": 13092870001024_i64, "name": "etl venv",
        "config": "echo \"sourced the etl venv\"\nexport ETL_HOME=/opt/etl",
        "description": "", "workerGroups": ["default"],
    }]});
    std::fs::write(&envs, listed.to_string()).unwrap();
    let envs = envs.to_str().unwrap();

    // A dry run prints the definitions and the report, and changes nothing.
    let (yaml, report) = run_cli(
        &e,
        &[
            "import",
            "dolphinscheduler",
            file,
            "--dry-run",
            "--environments",
            envs,
        ],
    );
    assert!(
        yaml.contains(
            "# environment etl_venv (set with `shoal env set`):\n#   echo \"sourced the etl venv\""
        ),
        "{yaml}"
    );
    assert!(yaml.contains("environment: etl_venv"), "{yaml}");
    assert_eq!(
        yaml.matches("\nname: ").count() + usize::from(yaml.starts_with("name:")),
        3,
        "{yaml}"
    );
    assert!(yaml.contains("# schedule (created disabled): cron '0 30 2 * * ?' in Europe/Berlin"));
    assert!(
        report.contains("task 'aggregate_big_day' (SPARK): 'file:/dolphinscheduler/etl/resources/jobs/wh-aggregate.jar' is a DolphinScheduler resource"),
        "{report}"
    );
    assert_eq!(
        e.api()
            .status("/projects/default/workflows/warehouse_daily"),
        404
    );

    run_cli(
        &e,
        &["task-group", "create", "ds_task_group_2", "--slots", "1"],
    );
    let (done, report) = run_cli(
        &e,
        &[
            "import",
            "dolphinscheduler",
            file,
            "--datasource",
            "7=pg",
            "--worker-group",
            "etl=default",
            "--environments",
            envs,
        ],
    );
    assert!(done.contains("environment etl_venv imported"), "{done}");
    let env = e.api().get("/projects/default/environments/etl_venv");
    assert_eq!(
        env["config"],
        "echo \"sourced the etl venv\"\nexport ETL_HOME=/opt/etl"
    );
    assert!(
        done.contains("imported default/warehouse_daily version 1 (13 tasks); schedule"),
        "{done}"
    );
    assert!(
        done.contains("imported default/upstream_ingest version 1"),
        "{done}"
    );
    assert!(
        !report.contains("postgresql_7"),
        "the datasource was mapped: {report}"
    );
    let schedules = e
        .api()
        .get("/projects/default/workflows/warehouse_daily/schedules");
    assert_eq!(schedules[0]["cron"], "0 30 2 * * ?", "{schedules}");
    assert_eq!(schedules[0]["timezone"], "Europe/Berlin");
    assert_eq!(schedules[0]["enabled"], false, "created disabled");

    // The day before, then the day with its dependents: warehouse_daily's dependent task
    // finds upstream_ingest's runs of that day and of the day before.
    let (id, _) = run_cli(
        &e,
        &[
            "backfill",
            "upstream_ingest",
            "--dates",
            "2026-01-14",
            "--wait",
        ],
    );
    assert!(!id.trim().is_empty());
    run_cli(
        &e,
        &[
            "backfill",
            "upstream_ingest",
            "--dates",
            "2026-01-15",
            "--with-dependents",
            "--wait",
        ],
    );
    let list = e.api().get("/instances?workflow=warehouse_daily");
    let id = list[0]["id"].as_i64().unwrap();
    let inst = wait_for("warehouse_daily to end", LONG, || {
        let inst = e.api().get(&format!("/instances/{id}"));
        (inst["state"] != "running").then_some(inst)
    });
    assert_eq!(inst["state"], "success", "{inst:#}");
    let state = |task: &str| attempts(&inst, task).last().map(|t| t["state"].clone());
    for task in [
        "wait_upstream_ingest",
        "extract_orders",
        "clean_orders",
        "load_check",
        "notify_api",
        "quality_gate",
        "route_by_region",
        "run_load_child",
        "publish_done",
    ] {
        assert_eq!(state(task), Some("success".into()), "{task}: {inst:#}");
    }
    assert_eq!(state("debug_dump_env"), Some("skipped".into()), "flag NO");
    assert_eq!(
        state("aggregate_big_day"),
        None,
        "the switch chose the child run"
    );
    assert_eq!(state("alert_quality_failure"), None, "the gate passed");
    assert_eq!(attempts(&inst, "load_check")[0]["output"]["n"], "1");
    assert!(
        !server.requests().is_empty(),
        "the HTTP task called the server"
    );
    // The python task ran in its environment.
    let clean = attempts(&inst, "clean_orders")[0]["id"].as_i64().unwrap();
    let (_, log) = e.api().log(clean);
    assert!(log.contains("sourced the etl venv"), "{log}");
    // The dependent task passed upstream_ingest's outputs on (parameterPassing).
    let extract = attempts(&inst, "extract_orders")[0]["id"].as_i64().unwrap();
    let (_, log) = e.api().log(extract);
    assert!(log.contains("ingest batch from upstream: b001"), "{log}");
    let child = e.api().get("/instances?workflow=warehouse_load_child");
    assert_eq!(child[0]["state"], "success", "{child}");
}
