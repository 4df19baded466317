//! Clock skew: one master's wall clock 30 s ahead of the others' or 30 s behind
//! (libfaketime from Debian's `faketime` package, preloaded into that master only; its
//! monotonic clock moves by the same constant, so its timers run at the right rate). That
//! master is made the only one, so that it leads cron and drives the runs; then a master
//! with the right clock replaces it.
//!
//! What must hold: a cron schedule fires each slot once (none twice, none skipped across
//! the change of leader); a retry waits its interval (measured by the task itself, on the
//! worker's true clock); the skewed master's lease is not counted lost early, nor taken
//! from it.
//!
//! Where libfaketime is missing each test prints `SKIP:` and passes; `scripts/test`
//! installs it and sets `SHOAL_REQUIRE_FAKETIME`, which turns the skip into a failure.

#[path = "support/fault.rs"]
mod fault;
mod support;

use fault::*;
use serde_json::json;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::free_port;

/// Where Debian puts libfaketime.
const LIBFAKETIME: [&str; 2] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
];
const SLOT_MS: i64 = 2000;

#[test]
fn a_master_30_s_ahead_fires_each_slot_once_waits_its_retries_and_keeps_its_lease() {
    skewed_master("skew_ahead", 30);
}

#[test]
fn a_master_30_s_behind_fires_each_slot_once_waits_its_retries_and_keeps_its_lease() {
    skewed_master("skew_behind", -30);
}

fn libfaketime(test: &str) -> Option<&'static str> {
    let found = LIBFAKETIME
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    if found.is_none() {
        let why = format!("libfaketime not found at {LIBFAKETIME:?} (apt-get install faketime)");
        if std::env::var_os("SHOAL_REQUIRE_FAKETIME").is_some() {
            panic!("[{test}] SHOAL_REQUIRE_FAKETIME is set but: {why}");
        }
        eprintln!("SKIP: [{test}] {why}");
    }
    found
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Every fired slot of the schedule (instances and commands not claimed yet), in order.
fn fired(c: &Cluster) -> Vec<i64> {
    c.db.query(
        "SELECT schedule_time FROM (SELECT schedule_time FROM workflow_instance \
         WHERE schedule_time IS NOT NULL UNION ALL SELECT schedule_time FROM command \
         WHERE schedule_time IS NOT NULL) t ORDER BY schedule_time",
    )
    .lines()
    .filter_map(|l| l.trim().parse().ok())
    .collect()
}

fn skewed_master(test: &'static str, skew_s: i64) {
    let Some(lib) = libfaketime(test) else {
        return;
    };
    let mut c = Cluster::start(test, &["default"]);
    let (etcd, db) = c.urls();
    let (etcd, db) = (etcd.to_string(), db.to_string());
    let skew = format!("{skew_s:+}s");
    let env = [("LD_PRELOAD", lib), ("FAKETIME", skew.as_str())];
    let skewed = c.spawn_with_env(free_port(), "skewed", &["master"], &db, &etcd, &env);
    for m in c.masters.drain(..) {
        m.proc.signal("KILL");
    }
    c.log(&format!(
        "{} runs {skew} off; the other masters killed",
        skewed.addr
    ));
    support::wait_for("the skewed master to lead cron", TAKEOVER_TIMEOUT, || {
        skewed
            .proc
            .log_text()
            .contains("became leader")
            .then_some(())
    });

    // A schedule every two seconds, every missed slot fired (so a skipped slot shows).
    c.apply("name: tick\ntasks:\n- { name: tick, type: noop }\n");
    let (status, schedule) = c.api.post(
        "/projects/default/workflows/tick/schedules",
        r#"{"cron": "*/2 * * * * *", "misfire": "run_all"}"#,
    );
    assert_eq!(status, 201, "{schedule}");

    // A task that fails its first attempt and passes its retry 3 s later; each attempt
    // writes its start and end on the worker's (true) clock.
    let times = c.dir.path().join("attempts");
    let t = times.display();
    c.apply(&format!(
        "name: flaky\ntasks:\n- {{ name: flaky, type: shell, retries: 1, retry_interval: 3s,\n    \
         command: 'echo start $EPOCHREALTIME >> {t}; if [ ! -e {t}.failed ]; then touch {t}.failed; \
         echo fail $EPOCHREALTIME >> {t}; exit 1; fi; echo pass $EPOCHREALTIME >> {t}' }}\n"
    ));
    let id = c.instance_of(c.submit("flaky", json!({})));
    let insts = c.wait_all_end(&[id]);
    assert_eq!(insts[0]["state"], "success", "{}", c.describe(&[id]));
    assert_eq!(
        insts[0]["master"],
        skewed.addr.as_str(),
        "{}",
        c.describe(&[id])
    );
    let text = std::fs::read_to_string(&times).unwrap();
    let at = |what: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(what))
            .unwrap_or_else(|| panic!("no {what} in {text}"))
            .trim()
            .parse()
            .unwrap()
    };
    let waited = text
        .lines()
        .filter(|l| l.starts_with("start"))
        .nth(1)
        .map(|l| l[6..].trim().parse::<f64>().unwrap())
        .expect("a second attempt")
        - at("fail ");
    c.log(&format!(
        "the retry started {waited:.2} s after the first attempt failed"
    ));
    assert!(
        (3.0..8.0).contains(&waited),
        "a retry with a 3 s interval started {waited:.2} s after the failure: {text}"
    );

    // The skewed master fires on its own clock: 30 s early or late, each slot once.
    let slots = support::wait_for(
        "the skewed leader to fire a few slots",
        Duration::from_secs(45),
        || {
            let f = fired(&c);
            (f.len() >= 3).then_some(f)
        },
    );
    let newest = *slots.last().unwrap();
    let off = newest - now_ms();
    c.log(&format!(
        "{} slots fired by the skewed leader, the newest {:+.1} s from the true time",
        slots.len(),
        off as f64 / 1000.0
    ));
    // Proof that libfaketime took: the leader fired on its own clock.
    assert!(
        off.signum() == skew_s.signum() && off.abs() > 20_000,
        "the newest slot is {off} ms from the true time: the skew did not take"
    );

    // A master with the true clock replaces it: the slots go on, none twice or skipped.
    let log = skewed.proc.log_text();
    assert!(
        !log.contains("lease lapsed") && !log.contains("counted as lost"),
        "the skewed master counted its lease lost:\n{log}"
    );
    let fresh = c.spawn_on_db(free_port(), "master-true", &["master"], &db);
    skewed.proc.signal("KILL");
    drop(skewed);
    c.masters.push(fresh);
    let before = *fired(&c).last().unwrap();
    // Ahead, the cursor is 30 s ahead of the new leader's clock: it fires again once its
    // clock passed it. Behind, it fires the 15 slots it finds missed at once.
    let slots = support::wait_for(
        "the new leader to fire two more slots",
        Duration::from_secs(50),
        || {
            let f = fired(&c);
            (*f.last().unwrap() >= before + 2 * SLOT_MS).then_some(f)
        },
    );
    let (status, body) = c.api.post(
        &format!(
            "/projects/default/workflows/tick/schedules/{}/disable",
            schedule["id"]
        ),
        "",
    );
    assert_eq!(status, 200, "{body}");
    let steps: Vec<i64> = slots.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        steps.iter().all(|s| *s == SLOT_MS),
        "each slot must fire once, none skipped: {slots:?}"
    );
    c.log(&format!(
        "{} slots fired, each once, across the change of leader",
        slots.len()
    ));
}
