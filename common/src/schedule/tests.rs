use super::*;
use chrono::NaiveDate;

/// Milliseconds of a UTC time written as RFC 3339.
fn utc(s: &str) -> i64 {
    DateTime::parse_from_rfc3339(s).unwrap().timestamp_millis()
}

/// RFC 3339 in the schedule's zone, for readable assertions.
fn local(cron: &CronSchedule, ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .unwrap()
        .with_timezone(&cron.timezone())
        .to_rfc3339()
}

fn cron(expr: &str, tz: &str) -> CronSchedule {
    CronSchedule::parse(expr, tz).unwrap()
}

fn err(expr: &str, tz: &str) -> String {
    CronSchedule::parse(expr, tz).unwrap_err().to_string()
}

#[test]
fn five_and_six_fields_with_question_marks() {
    let c = cron("30 2 * * ?", "UTC");
    let t = c.next_after(utc("2026-03-01T10:00:00Z")).unwrap();
    assert_eq!(t, utc("2026-03-02T02:30:00Z"));
    let c = cron("*/10 * * ? * *", "UTC");
    let fires = c.fires_between(utc("2026-03-01T00:00:05Z"), utc("2026-03-01T00:00:40Z"), 10);
    assert_eq!(
        fires,
        [10, 20, 30, 40].map(|s| utc("2026-03-01T00:00:00Z") + s * 1000)
    );
}

#[test]
fn bad_expressions_and_zones_are_named() {
    let e = err("61 * * * *", "UTC");
    assert!(e.contains("minute field '61'"), "{e}");
    let e = err("0 0 25 * * *", "UTC");
    assert!(e.contains("hour field '25'"), "{e}");
    let e = err("* * * 13 *", "UTC");
    assert!(e.contains("month field '13'"), "{e}");
    let e = err("* * * *", "UTC");
    assert!(e.contains("4 fields"), "{e}");
    let e = err("0 0 0 1 1 * 2030", "UTC");
    assert!(e.contains("7 fields"), "{e}");
    let e = err("* * * * *", "Mars/Olympus");
    assert!(e.contains("timezone 'Mars/Olympus'"), "{e}");
}

#[test]
fn fires_follow_the_time_zone() {
    let c = cron("0 9 * * *", "Europe/Berlin");
    let t = c.next_after(utc("2026-01-10T00:00:00Z")).unwrap();
    assert_eq!(t, utc("2026-01-10T08:00:00Z"), "09:00 CET is 08:00 UTC");
    let t = c.next_after(utc("2026-07-10T00:00:00Z")).unwrap();
    assert_eq!(t, utc("2026-07-10T07:00:00Z"), "09:00 CEST is 07:00 UTC");
}

#[test]
fn spring_forward_fires_a_gap_time_once_right_after_the_gap() {
    // 2026-03-08, America/New_York: 02:00 EST jumps to 03:00 EDT.
    let c = cron("30 2 * * *", "America/New_York");
    let fires = c.fires_between(utc("2026-03-06T12:00:00Z"), utc("2026-03-10T12:00:00Z"), 10);
    let shown: Vec<String> = fires.iter().map(|t| local(&c, *t)).collect();
    assert_eq!(
        shown,
        [
            "2026-03-07T02:30:00-05:00",
            "2026-03-08T03:00:00-04:00",
            "2026-03-09T02:30:00-04:00",
            "2026-03-10T02:30:00-04:00",
        ],
        "one fire per day, the gap day's at the end of the gap"
    );
}

#[test]
fn fall_back_fires_a_repeated_time_once() {
    // 2026-11-01, America/New_York: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
    let c = cron("30 1 * * *", "America/New_York");
    let fires = c.fires_between(utc("2026-10-30T12:00:00Z"), utc("2026-11-02T12:00:00Z"), 10);
    let shown: Vec<String> = fires.iter().map(|t| local(&c, *t)).collect();
    assert_eq!(
        shown,
        [
            "2026-10-31T01:30:00-04:00",
            "2026-11-01T01:30:00-04:00",
            "2026-11-02T01:30:00-05:00",
        ],
        "the repeated 01:30 fires once, at its first occurrence"
    );
    // Planning from a cursor on that first 01:30 never fires the second one.
    let first = fires[1];
    let plan = c.plan(
        Window::default(),
        first,
        first + 3_600_000 + 60_000,
        Misfire::RunAll,
        10,
    );
    assert_eq!(plan.fires, Vec::<i64>::new());
}

#[test]
fn berlin_transitions_keep_one_fire_a_day() {
    // Europe/Berlin: 2026-03-29 02:00 -> 03:00, 2026-10-25 03:00 -> 02:00.
    let c = cron("0 30 2 * * *", "Europe/Berlin");
    for (from, to) in [
        ("2026-03-27T12:00:00Z", "2026-03-31T12:00:00Z"),
        ("2026-10-23T12:00:00Z", "2026-10-27T12:00:00Z"),
    ] {
        let fires = c.fires_between(utc(from), utc(to), 10);
        assert_eq!(fires.len(), 4, "{fires:?}");
        let days: std::collections::BTreeSet<String> = fires
            .iter()
            .map(|t| local(&c, *t)[..10].to_string())
            .collect();
        assert_eq!(days.len(), 4, "one fire per local day: {days:?}");
    }
}

#[test]
fn an_interval_cron_follows_real_time_across_fall_back() {
    let c = cron("0 * * * *", "America/New_York");
    let fires = c.fires_between(utc("2026-11-01T04:30:00Z"), utc("2026-11-01T07:30:00Z"), 10);
    assert_eq!(
        fires,
        [5, 6, 7].map(|h| utc("2026-11-01T00:00:00Z") + h * 3_600_000),
        "hourly: 01:00 EDT, 01:00 EST, 02:00 EST"
    );
}

#[test]
fn an_on_time_fire_runs_under_every_policy() {
    let c = cron("* * * * * *", "UTC");
    let t = utc("2026-01-01T00:00:10Z");
    for policy in [Misfire::RunAll, Misfire::RunOnce, Misfire::Skip] {
        let plan = c.plan(Window::default(), t - 1000, t + 20, policy, 100);
        assert_eq!(
            plan,
            Plan {
                fires: vec![t],
                cursor: t
            },
            "{policy:?}"
        );
    }
    // Nothing is due before the next second.
    let plan = c.plan(Window::default(), t, t + 999, Misfire::RunAll, 100);
    assert_eq!(
        plan,
        Plan {
            fires: vec![],
            cursor: t
        }
    );
}

#[test]
fn misfires_after_downtime_follow_the_policy() {
    let c = cron("0 * * * *", "UTC");
    let cursor = utc("2026-01-01T00:00:00Z");
    let now = utc("2026-01-01T03:30:00Z"); // fires at 01:00, 02:00, 03:00 were missed
    let hour = 3_600_000;
    let all = c.plan(Window::default(), cursor, now, Misfire::RunAll, 100);
    assert_eq!(
        all.fires,
        vec![cursor + hour, cursor + 2 * hour, cursor + 3 * hour]
    );
    assert_eq!(all.cursor, cursor + 3 * hour);
    let once = c.plan(Window::default(), cursor, now, Misfire::RunOnce, 100);
    assert_eq!(
        once,
        Plan {
            fires: vec![cursor + 3 * hour],
            cursor: cursor + 3 * hour
        }
    );
    let skip = c.plan(Window::default(), cursor, now, Misfire::Skip, 100);
    assert_eq!(
        skip,
        Plan {
            fires: vec![],
            cursor: cursor + 3 * hour
        }
    );
    // run_all comes back for more when the limit cut it short.
    let first = c.plan(Window::default(), cursor, now, Misfire::RunAll, 2);
    assert_eq!(first.fires.len(), 2);
    let rest = c.plan(Window::default(), first.cursor, now, Misfire::RunAll, 2);
    assert_eq!(rest.fires, vec![cursor + 3 * hour]);
}

#[test]
fn the_window_bounds_fires() {
    let c = cron("0 * * * *", "UTC");
    let day = utc("2026-01-01T00:00:00Z");
    let hour = 3_600_000;
    let window = Window {
        start_ms: Some(day + 2 * hour),
        end_ms: Some(day + 4 * hour),
    };
    let plan = c.plan(window, day, day + 10 * hour, Misfire::RunAll, 100);
    assert_eq!(
        plan.fires,
        vec![day + 2 * hour, day + 3 * hour, day + 4 * hour]
    );
    assert_eq!(
        c.next_due(window, plan.cursor),
        None,
        "nothing after the end"
    );
    assert_eq!(
        c.next_due(window, day),
        Some(day + 2 * hour),
        "waits for the start"
    );
}

#[test]
fn backfill_days_without_a_cron_run_at_midnight() {
    let days: Vec<NaiveDate> = (1..=3)
        .map(|d| NaiveDate::from_ymd_opt(2026, 1, d).unwrap())
        .collect();
    let times = backfill_times(None, chrono_tz::UTC, &days, 100).unwrap();
    assert_eq!(
        times,
        [1, 2, 3].map(|d| utc(&format!("2026-01-0{d}T00:00:00Z")))
    );
    let berlin: Tz = "Europe/Berlin".parse().unwrap();
    let times = backfill_times(None, berlin, &days[..1], 100).unwrap();
    assert_eq!(times, vec![utc("2025-12-31T23:00:00Z")]);
}

#[test]
fn backfill_days_with_a_cron_run_each_fire_of_the_day() {
    let c = cron("0 6,18 * * *", "UTC");
    let days = [
        NaiveDate::from_ymd_opt(2026, 1, 2).unwrap(),
        NaiveDate::from_ymd_opt(2026, 1, 1).unwrap(),
    ];
    let times = backfill_times(Some(&c), c.timezone(), &days, 100).unwrap();
    let shown: Vec<String> = times.iter().map(|t| local(&c, *t)).collect();
    assert_eq!(
        shown,
        [
            "2026-01-01T06:00:00+00:00",
            "2026-01-01T18:00:00+00:00",
            "2026-01-02T06:00:00+00:00",
            "2026-01-02T18:00:00+00:00",
        ]
    );
    let e = backfill_times(Some(&c), c.timezone(), &days, 3).unwrap_err();
    assert!(e.to_string().contains("more than 3 runs"), "{e}");
}
