//! Which schedule times a backfill runs.

use super::{CronSchedule, day_start};
use crate::error::{Error, Result};
use chrono::NaiveDate;
use chrono_tz::Tz;

/// The schedule times of a backfill over `days` (local dates in `tz`), oldest first: each
/// day's cron fires, or 00:00 of each day when the workflow has no schedule (`cron` None).
/// More than `limit` times is an error rather than a silent cut.
pub fn backfill_times(
    cron: Option<&CronSchedule>,
    tz: Tz,
    days: &[NaiveDate],
    limit: usize,
) -> Result<Vec<i64>> {
    let mut days = days.to_vec();
    days.sort_unstable();
    days.dedup();
    let mut times = Vec::new();
    for day in days {
        let start = day_start(tz, day);
        match cron {
            Some(cron) => {
                let end = day_start(tz, day.succ_opt().unwrap_or(day));
                times.extend(cron.fires_between(start - 1, end - 1, limit + 1));
            }
            None => times.push(start),
        }
        if times.len() > limit {
            return Err(Error::Invalid(format!(
                "the backfill would start more than {limit} runs; pick a shorter range"
            )));
        }
    }
    Ok(times)
}
