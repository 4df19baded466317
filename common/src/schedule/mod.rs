//! Cron math: parsing a cron expression in an IANA time zone, the fire times after an
//! instant or within a range, and which fires are due after downtime (misfire policy).
//!
//! Everything takes the current time as an argument (milliseconds since the epoch), so the
//! scheduler's decisions are tested without a clock.
//!
//! Daylight saving (croner's rules, those of Vixie cron and the Open Cron Pattern
//! Specification): a cron naming a fixed local time (`30 2 * * *`) fires once a day on
//! both transition days. When the clocks spring forward over 02:30, it fires at the first
//! instant after the gap (03:00 local); when they fall back over 01:30, it fires at the
//! first 01:30 only. Interval crons (`*/15 * * * *`, `0 * * * *`) follow real time: fires
//! inside the gap do not exist, and the repeated hour has its fires twice.

mod backfill;

pub use backfill::backfill_times;

use crate::error::{Error, Result};
use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::{Deserialize, Serialize};

/// A fire later than this after its time counts as missed (the `skip` policy drops it).
pub const MISFIRE_GRACE_MS: i64 = 5_000;

/// What a schedule does with fires it missed while no leader master was running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Misfire {
    /// Every missed fire runs, oldest first.
    RunAll,
    /// One run, for the latest missed fire.
    #[default]
    RunOnce,
    /// Missed fires are dropped; the schedule goes on from now.
    Skip,
}

impl Misfire {
    pub fn as_str(self) -> &'static str {
        match self {
            Misfire::RunAll => "run_all",
            Misfire::RunOnce => "run_once",
            Misfire::Skip => "skip",
        }
    }
}

impl std::str::FromStr for Misfire {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "run_all" => Ok(Misfire::RunAll),
            "run_once" => Ok(Misfire::RunOnce),
            "skip" => Ok(Misfire::Skip),
            other => Err(format!(
                "unknown misfire policy '{other}' (expected one of: run_all, run_once, skip)"
            )),
        }
    }
}

/// A parsed cron expression bound to a time zone.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    cron: Cron,
    tz: Tz,
}

/// Field names in the order of a 6-field expression.
const FIELDS: [&str; 6] = [
    "second",
    "minute",
    "hour",
    "day-of-month",
    "month",
    "day-of-week",
];

impl CronSchedule {
    /// Parses 5 fields (`minute hour day-of-month month day-of-week`) or 6 (a leading
    /// seconds field); `?` means `*` in the day fields. Errors name the bad field or the
    /// bad time zone.
    pub fn parse(expr: &str, timezone: &str) -> Result<CronSchedule> {
        let tz = parse_timezone(timezone)?;
        let fields: Vec<&str> = expr.split_whitespace().collect();
        let names = match fields.len() {
            5 => &FIELDS[1..],
            6 => &FIELDS[..],
            n => {
                return Err(Error::Invalid(format!(
                    "cron '{expr}' has {n} fields: use 5 (minute hour day-of-month month day-of-week) or 6 (with a leading second)"
                )));
            }
        };
        let parser = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build();
        let cron = parser.parse(expr).map_err(|whole| {
            // Parse each field alone (the others `*`) to say which one is wrong.
            let bad = (0..fields.len()).find(|&i| {
                let probe: Vec<&str> = (0..fields.len())
                    .map(|j| if j == i { fields[i] } else { "*" })
                    .collect();
                parser.parse(&probe.join(" ")).is_err()
            });
            match bad {
                Some(i) => Error::Invalid(format!(
                    "cron '{expr}': bad {} field '{}'",
                    names[i], fields[i]
                )),
                None => Error::Invalid(format!("cron '{expr}': {whole}")),
            }
        })?;
        Ok(CronSchedule { cron, tz })
    }

    pub fn timezone(&self) -> Tz {
        self.tz
    }

    /// An instant as RFC 3339 with the schedule zone's offset (how previews show fires).
    pub fn show(&self, ms: i64) -> String {
        DateTime::from_timestamp_millis(ms)
            .unwrap_or_default()
            .with_timezone(&self.tz)
            .to_rfc3339()
    }

    /// The first fire strictly after `after_ms`, if any.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let after = self.at(after_ms)?;
        self.cron
            .find_next_occurrence(&after, false)
            .ok()
            .map(|t| t.timestamp_millis())
    }

    /// The last fire at or before `at_ms`, if any.
    pub fn last_at_or_before(&self, at_ms: i64) -> Option<i64> {
        let at = self.at(at_ms)?;
        self.cron
            .find_previous_occurrence(&at, true)
            .ok()
            .map(|t| t.timestamp_millis())
    }

    /// Fires in (`after_ms`, `until_ms`], oldest first, at most `limit`.
    pub fn fires_between(&self, after_ms: i64, until_ms: i64, limit: usize) -> Vec<i64> {
        let mut fires = Vec::new();
        let mut cursor = after_ms;
        while fires.len() < limit {
            match self.next_after(cursor) {
                Some(t) if t <= until_ms => {
                    fires.push(t);
                    cursor = t;
                }
                _ => break,
            }
        }
        fires
    }

    /// An instant in the schedule's zone. Fire times are whole seconds, so the search
    /// starts from the second `ms` falls in (croner works on whole seconds).
    fn at(&self, ms: i64) -> Option<DateTime<Tz>> {
        let secs = ms.div_euclid(1000);
        Some(Utc.timestamp_opt(secs, 0).single()?.with_timezone(&self.tz))
    }
}

/// An IANA time zone; an unknown name is an error that says what is expected.
pub fn parse_timezone(name: &str) -> Result<Tz> {
    name.parse().map_err(|_| {
        Error::Invalid(format!(
            "timezone '{name}' is not an IANA time zone name (e.g. UTC, Europe/Berlin, America/New_York)"
        ))
    })
}

/// When a schedule may fire: fires before `start_ms` or after `end_ms` do not happen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    pub start_ms: Option<i64>,
    pub end_ms: Option<i64>,
}

impl Window {
    /// An end before the start is `Error::Invalid`.
    pub fn check(self) -> Result<Window> {
        match (self.start_ms, self.end_ms) {
            (Some(start), Some(end)) if end < start => {
                Err(Error::Invalid("end_time is before start_time".into()))
            }
            _ => Ok(self),
        }
    }
}

/// What a schedule does now: the fire times to run and the new cursor (the latest fire
/// time dealt with, run or dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub fires: Vec<i64>,
    pub cursor: i64,
}

impl CronSchedule {
    /// The fires due at `now_ms` for a schedule that has dealt with every fire up to
    /// `cursor_ms`, under `policy`, at most `limit` of them (a caller with more to do comes
    /// back with the new cursor). A fire is due once its time has come; it is missed when
    /// it is more than [`MISFIRE_GRACE_MS`] late.
    pub fn plan(
        &self,
        window: Window,
        cursor_ms: i64,
        now_ms: i64,
        policy: Misfire,
        limit: usize,
    ) -> Plan {
        let after = match window.start_ms {
            Some(start) => cursor_ms.max(start - 1),
            None => cursor_ms,
        };
        let until = window.end_ms.map_or(now_ms, |end| end.min(now_ms));
        let unchanged = Plan {
            fires: Vec::new(),
            cursor: cursor_ms,
        };
        if until <= after {
            return unchanged;
        }
        match policy {
            Misfire::RunAll => {
                let fires = self.fires_between(after, until, limit.max(1));
                let cursor = fires.last().copied().unwrap_or(cursor_ms);
                Plan { fires, cursor }
            }
            Misfire::RunOnce | Misfire::Skip => {
                let Some(latest) = self.last_at_or_before(until).filter(|t| *t > after) else {
                    return unchanged;
                };
                let on_time = latest >= now_ms - MISFIRE_GRACE_MS;
                let fires = match policy {
                    Misfire::Skip if !on_time => Vec::new(),
                    _ => vec![latest],
                };
                Plan {
                    fires,
                    cursor: latest,
                }
            }
        }
    }

    /// When the scheduler next has something to do for a schedule at `cursor_ms`: its next
    /// fire inside the window, if any.
    pub fn next_due(&self, window: Window, cursor_ms: i64) -> Option<i64> {
        let after = match window.start_ms {
            Some(start) => cursor_ms.max(start - 1),
            None => cursor_ms,
        };
        self.next_after(after)
            .filter(|t| window.end_ms.is_none_or(|end| *t <= end))
    }
}

/// The wall-clock time of instant `ms` in `timezone` (UTC when None or not a zone name):
/// what `${system.biz.date}` and time expressions of a run are computed from.
pub fn local_time(ms: i64, timezone: Option<&str>) -> NaiveDateTime {
    let tz: Tz = timezone.and_then(|t| t.parse().ok()).unwrap_or(Tz::UTC);
    DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .with_timezone(&tz)
        .naive_local()
}

/// [start, end) of local day `day` in `timezone` (UTC when None or not a zone name), ms.
pub fn day_bounds(day: NaiveDate, timezone: Option<&str>) -> (i64, i64) {
    let tz: Tz = timezone.and_then(|t| t.parse().ok()).unwrap_or(Tz::UTC);
    let start = day_start(tz, day);
    let end = day_start(tz, day.succ_opt().unwrap_or(day));
    (start, end)
}

/// The first instant of a local day (a day whose midnight falls in a DST gap starts when
/// the gap ends).
fn day_start(tz: Tz, day: NaiveDate) -> i64 {
    let midnight = day.and_hms_opt(0, 0, 0).unwrap_or_default();
    (0..=3)
        .find_map(|hours| {
            tz.from_local_datetime(&(midnight + chrono::TimeDelta::hours(hours)))
                .earliest()
        })
        .map_or_else(
            || midnight.and_utc().timestamp_millis(),
            |t| t.timestamp_millis(),
        )
}

#[cfg(test)]
mod tests;
