//! Cron schedules and backfills over the real `shoal` binary: a one-second schedule on
//! `shoal standalone` and across a `kill -9` of the leader master of a cluster, backfills
//! over a week (serial and parallel), the CLI's preview and the API's refusals.

mod support;

use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;
use support::{
    Api, Env, Proc, SHOAL, Standalone, TestDb, cli, max_overlap, start_etcd, text, wait_for,
};

const LONG: Duration = Duration::from_secs(90);

fn apply(api: &Api, yaml: &str) {
    let (status, body) = api.post("/projects/default/workflows", yaml);
    assert!(status == 201 || status == 200, "apply: {status} {body}");
}

fn ms(rfc3339: &Value) -> i64 {
    DateTime::parse_from_rfc3339(rfc3339.as_str().unwrap())
        .unwrap()
        .timestamp_millis()
}

fn run_cli(api: &Api, args: &[&str]) -> (i32, String, String) {
    let out = cli(api, args);
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// The schedule times of every instance of `workflow`, oldest first.
fn schedule_times(api: &Api, workflow: &str) -> Vec<i64> {
    let list = api.get(&format!("/instances?workflow={workflow}&limit=10000"));
    let mut times: Vec<i64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|i| ms(&i["schedule_time"]))
        .collect();
    times.sort();
    times
}

/// Asserts that `times` are whole seconds, none twice, one second apart.
fn assert_each_second_once(times: &[i64]) {
    let distinct: BTreeSet<i64> = times.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        times.len(),
        "a second fired twice: {times:?}"
    );
    assert!(times.iter().all(|t| t % 1000 == 0), "{times:?}");
    for pair in times.windows(2) {
        assert_eq!(pair[1] - pair[0], 1000, "a second was skipped: {times:?}");
    }
}

#[test]
fn a_one_second_schedule_fires_each_second_once() {
    let s = Standalone::start();
    apply(&s.api, "name: tick\ntasks:\n- {name: a, type: noop}\n");
    let (code, out, err) = run_cli(
        &s.api,
        &["schedule", "create", "tick", "--cron", "* * * * * *"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("* * * * * *") && out.contains("yes"), "{out}");

    let (code, out, err) = run_cli(&s.api, &["schedule", "preview", "tick", "-n", "3"]);
    assert_eq!(code, 0, "{err}");
    let fires: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(fires.len(), 3, "{out}");
    let fires: Vec<i64> = fires
        .iter()
        .map(|f| DateTime::parse_from_rfc3339(f).unwrap().timestamp_millis())
        .collect();
    assert_each_second_once(&fires);

    // At least 4 fires within 7 s of the schedule's creation (it fires each second).
    wait_for("4 fires", Duration::from_secs(7), || {
        (schedule_times(&s.api, "tick").len() >= 4).then_some(())
    });
    let (code, _, err) = run_cli(&s.api, &["schedule", "disable", "tick"]);
    assert_eq!(code, 0, "{err}");
    let disabled_at = Utc::now().timestamp_millis();
    // A window, not a wait: fires already written become instances, and a fire after the
    // disable would show up in it.
    std::thread::sleep(Duration::from_millis(1_500));
    let times = schedule_times(&s.api, "tick");
    assert_each_second_once(&times);
    assert!(
        *times.last().unwrap() <= disabled_at,
        "no fire after disable"
    );
    for i in s.api.get("/instances?workflow=tick").as_array().unwrap() {
        let id = i["id"].as_i64().unwrap();
        assert_eq!(s.api.wait_instance(id, LONG)["state"], "success");
    }
}

/// A daily workflow whose task writes its biz date and start/end times (nanoseconds since
/// the epoch) to `out`, takes `sleep` seconds, and fails for biz date `fail`.
fn daily(out: &Path, sleep: &str, fail: &str) -> String {
    let out = out.display();
    format!(
        "name: daily\ntasks:\n- name: a\n  type: shell\n  command: |\n    start=$(date +%s%N); sleep {sleep}\n    echo \"${{system.biz.date}} $start $(date +%s%N)\" >> {out}\n    test \"${{system.biz.date}}\" != \"{fail}\"\n"
    )
}

/// (biz date, start, end) lines the task wrote, one per run (a date that ran twice shows
/// twice).
fn runs(out: &Path) -> Vec<(String, u128, u128)> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].to_string(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

fn week_of_biz_dates() -> Vec<String> {
    // Schedule days 2026-01-01 ..= 2026-01-07: biz dates are the days before.
    [
        "20251231", "20260101", "20260102", "20260103", "20260104", "20260105", "20260106",
    ]
    .map(String::from)
    .to_vec()
}

/// `shoal backfill daily` over 2026-01-01 ..= 2026-01-07 with `extra`.
fn backfill_week(e: &Env, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "backfill",
        "daily",
        "--from",
        "2026-01-01",
        "--to",
        "2026-01-07",
    ];
    args.extend_from_slice(extra);
    run_cli(e.api(), &args)
}

// Backfills over `shoal standalone` and over a cluster (the leader master drives them).
support::deployments!(
    a_serial_backfill_runs_each_day_once_in_order_and_a_failure_does_not_stop_it,
    a_parallel_backfill_runs_up_to_n_at_once_newest_first,
    a_cancelled_backfill_skips_the_dates_not_started_and_lets_the_running_one_finish,
);

fn a_cancelled_backfill_skips_the_dates_not_started_and_lets_the_running_one_finish(e: Env) {
    let out = e.path("runs.txt");
    e.apply(&daily(&out, "1.5", "none"));
    let (code, stdout, stderr) = backfill_week(&e, &[]);
    assert_eq!(code, 0, "{stderr}");
    let id = stdout.trim().to_string();
    let path = format!("/backfills/{id}");
    wait_for("the first date to run", LONG, || {
        let b = e.api().get(&path);
        b["runs"][0]["state"].eq("running").then_some(())
    });
    let (code, _, stderr) = run_cli(e.api(), &["backfill", "cancel", &id]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("dates not started are skipped"), "{stderr}");
    let b = wait_for("the backfill to end", LONG, || {
        let b = e.api().get(&path);
        (b["state"] != "running").then_some(b)
    });
    assert_eq!(b["state"], "cancelled", "{b}");
    let states: Vec<&str> = b["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    let started = states.iter().filter(|s| **s == "success").count();
    assert!(started >= 1, "the running date finished: {b}");
    assert_eq!(
        states.iter().filter(|s| **s == "skipped").count(),
        7 - started,
        "every other date was skipped: {b}"
    );
    assert_eq!(runs(&out).len(), started, "skipped dates never ran");
    let (status, body) = e.api().post(&format!("{path}/cancel"), "");
    assert_eq!(status, 409, "a second cancel is refused: {body}");
    assert!(
        body["error"].as_str().unwrap().contains("cancelled"),
        "{body}"
    );

    let listed = e.api().get("/backfills?workflow=daily");
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["state"], "cancelled", "{listed}");
    assert!(
        e.api()
            .get("/backfills?workflow=other")
            .as_array()
            .unwrap()
            .is_empty()
    );
    let (code, table, err) = run_cli(e.api(), &["backfill", "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        table.contains("default/daily") && table.contains("cancelled") && table.contains("7/7"),
        "{table}"
    );
}

fn a_serial_backfill_runs_each_day_once_in_order_and_a_failure_does_not_stop_it(e: Env) {
    let out = e.path("runs.txt");
    e.apply(&daily(&out, "0.2", "20260102"));
    let (code, stdout, stderr) = backfill_week(&e, &["--wait"]);
    assert_eq!(code, 1, "one date failed: {stdout}{stderr}");
    assert!(stderr.contains("7/7 dates done"), "{stderr}");
    assert!(stderr.contains("failed: 2026-01-03T00:00:00Z"), "{stderr}");

    let runs = runs(&out);
    let dates: Vec<String> = runs.iter().map(|r| r.0.clone()).collect();
    assert_eq!(dates, week_of_biz_dates(), "each day once, oldest first");
    assert_eq!(max_overlap(&runs), 1, "serial runs never overlap: {runs:?}");

    let id = stdout.trim();
    let b = e.api().get(&format!("/backfills/{id}"));
    assert_eq!(b["state"], "failure", "{b}");
    assert_eq!(
        (b["done"].as_u64(), b["succeeded"].as_u64()),
        (Some(7), Some(6))
    );
    assert_eq!(b["failed"], serde_json::json!(["2026-01-03T00:00:00.000Z"]));
    let (code, status, err) = run_cli(e.api(), &["backfill", "status", id]);
    assert_eq!(code, 0, "{err}");
    assert!(
        status.contains("7/7 dates done") && status.contains("failed: 2026-01-03T00:00:00Z"),
        "{status}"
    );
    let times = schedule_times(e.api(), "daily");
    assert_eq!(times.len(), 7);
    assert_eq!(times[0], ms(&Value::from("2026-01-01T00:00:00Z")));
}

fn a_parallel_backfill_runs_up_to_n_at_once_newest_first(e: Env) {
    let out = e.path("runs.txt");
    e.apply(&daily(&out, "1.5", "none"));
    let (code, stdout, stderr) =
        backfill_week(&e, &["--wait", "--parallel", "3", "--order", "desc"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("7/7 dates done"), "{stderr}");
    let runs = runs(&out);
    let mut dates: Vec<String> = runs.iter().map(|r| r.0.clone()).collect();
    dates.sort();
    assert_eq!(dates, week_of_biz_dates(), "each day once");
    // Instances are created in start order.
    let list = e.api().get("/instances?workflow=daily");
    let mut started: Vec<(i64, i64)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["id"].as_i64().unwrap(), ms(&i["schedule_time"])))
        .collect();
    started.sort();
    let order: Vec<i64> = started.iter().map(|(_, t)| *t).collect();
    let mut newest_first = order.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    assert_eq!(order, newest_first, "newest first");
    let overlap = max_overlap(&runs);
    assert!(
        (2..=3).contains(&overlap),
        "up to 3 at once, got {overlap}: {runs:?}"
    );
}

#[test]
fn bad_schedules_and_backfills_are_refused_and_change_nothing() {
    let s = Standalone::start();
    apply(&s.api, "name: w\ntasks:\n- {name: a, type: noop}\n");
    let post = |path: &str, body: &str| s.api.post(path, body);
    let schedules = "/projects/default/workflows/w/schedules";
    let (status, body) = post(schedules, r#"{"cron": "61 * * * *"}"#);
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("minute field '61'"),
        "{body}"
    );
    let (status, body) = post(
        schedules,
        r#"{"cron": "* * * * *", "timezone": "Moon/Base"}"#,
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("Moon/Base"),
        "{body}"
    );
    let (status, body) = post(
        "/projects/default/workflows/nope/schedules",
        r#"{"cron": "* * * * *"}"#,
    );
    assert_eq!(status, 404, "{body}");
    assert_eq!(
        s.api.get(schedules),
        serde_json::json!([]),
        "nothing stored"
    );

    let (status, body) = post(
        schedules,
        r#"{"cron": "0 3 * * ?", "timezone": "Europe/Berlin"}"#,
    );
    assert_eq!(status, 201, "{body}");
    let (status, body) = post(schedules, r#"{"cron": "0 4 * * *"}"#);
    assert_eq!(status, 409, "{body}");
    let (code, _, err) = run_cli(&s.api, &["schedule", "preview", "nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("no schedule"), "{err}");

    let backfill = "/projects/default/workflows/w/backfill";
    let (status, body) = post(backfill, r#"{"from": "2026-01-07", "to": "2026-01-01"}"#);
    assert_eq!(status, 400, "{body}");
    let (status, body) = post(backfill, r#"{"dates": ["2026-13-01"]}"#);
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("2026-13-01"),
        "{body}"
    );
    let (status, body) = post(backfill, r#"{"dates": ["2026-01-01"], "timezone": "UTC"}"#);
    assert_eq!(status, 400, "the schedule's zone rules: {body}");
    assert!(
        s.api
            .get("/instances?workflow=w")
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// A one-second schedule (misfire `run_once`) on a cluster of two masters: the leader is
/// killed with SIGKILL. What is asserted: no schedule time ever gets two runs (instances
/// and pending commands together); before the kill and after the takeover every second
/// fires; in between there is at most one gap, no longer than the failover (lease TTL plus
/// a campaign period), because `run_once` makes up only the latest missed second.
#[test]
fn a_one_second_schedule_fires_each_second_once_across_a_leader_kill() {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDb::create("shoal_sched_failover");
    let (_etcd, etcd_url) = start_etcd(dir.path());
    let env = [
        ("SHOAL_DATABASE_URL", db.url.as_str()),
        ("SHOAL_ETCD", etcd_url.as_str()),
        ("SHOAL_LEASE_TTL", "3"),
        ("SHOAL_METRICS_PORT", "0"),
        ("SHOAL_CLUSTER_SECRET", support::CLUSTER_SECRET),
    ];
    let (_api_server, api) = support::start_api_server(dir.path(), &env);
    let mut masters: Vec<Proc> = (0..2)
        .map(|i| {
            let args = ["master", "--port", "0"];
            Proc::spawn(&format!("master{i}"), dir.path(), SHOAL, &args, &env)
        })
        .collect();
    let data = dir.path().join("worker");
    let _worker = Proc::spawn(
        "worker",
        dir.path(),
        SHOAL,
        &[
            "worker",
            "--port",
            "0",
            "--data-dir",
            data.to_str().unwrap(),
        ],
        &env,
    );
    apply(&api, "name: tick\ntasks:\n- {name: a, type: noop}\n");
    let (status, body) = api.post(
        "/projects/default/workflows/tick/schedules",
        r#"{"cron": "* * * * * *", "misfire": "run_once"}"#,
    );
    assert_eq!(status, 201, "{body}");

    let leader = wait_for("a leader master", LONG, || {
        masters
            .iter()
            .position(|m| m.log_text().contains("became leader"))
    });
    // The leader fires a few seconds before it dies.
    wait_for("five fires", LONG, || (fired(&db).len() >= 5).then_some(()));
    masters[leader].kill();
    let killed_at = Utc::now().timestamp_millis();
    let other = 1 - leader;
    wait_for("the other master to lead", LONG, || {
        masters[other]
            .log_text()
            .contains("became leader")
            .then_some(())
    });
    // The new leader fires every second: at least 4 fires after the kill within 4 s of
    // the takeover.
    wait_for(
        "the new leader to fire 4 times",
        Duration::from_secs(4),
        || (fired(&db).iter().filter(|t| **t > killed_at).count() >= 4).then_some(()),
    );
    let (status, body) = api.post(
        &format!(
            "/projects/default/workflows/tick/schedules/{}/disable",
            body["id"]
        ),
        "",
    );
    assert_eq!(status, 200, "{body}");

    let times = fired(&db);
    let distinct: BTreeSet<i64> = times.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        times.len(),
        "a second fired twice: {times:?}"
    );
    let fires: i64 = db
        .query("SELECT count(*) FROM schedule_fire")
        .trim()
        .parse()
        .unwrap();
    assert_eq!(fires as usize, times.len(), "one fire record per run");
    let gaps: Vec<(i64, i64)> = times
        .windows(2)
        .filter(|p| p[1] - p[0] != 1000)
        .map(|p| (p[0], p[1]))
        .collect();
    assert!(
        gaps.len() <= 1,
        "one gap at most (the failover): {gaps:?} in {times:?}"
    );
    if let Some((before, after)) = gaps.first() {
        assert!(
            *before <= killed_at + 1000,
            "the gap starts at the kill: {gaps:?}"
        );
        assert!(
            after - before <= 10_000,
            "no longer than the takeover: {gaps:?}"
        );
    }
}

/// Schedule times of every run of the cluster test's schedule: instances and commands not
/// yet claimed.
fn fired(db: &TestDb) -> Vec<i64> {
    let rows = db.query(
        "SELECT schedule_time FROM workflow_instance WHERE schedule_time IS NOT NULL \
         UNION ALL SELECT schedule_time FROM command WHERE schedule_time IS NOT NULL",
    );
    let mut times: Vec<i64> = rows.lines().filter_map(|l| l.trim().parse().ok()).collect();
    times.sort();
    times
}
