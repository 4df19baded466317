//! DolphinScheduler's Quartz crons (`second minute hour day-of-month month day-of-week
//! [year]`, day-of-week 1 = Sunday) as shoal's six-field cron, and its schedule times
//! (wall-clock in the schedule's zone) as RFC 3339.

use chrono::{NaiveDateTime, TimeZone};
use chrono_tz::Tz;
use shoal_common::schedule::CronSchedule;

const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// The shoal cron firing when `quartz` does, or why there is none.
pub fn convert(quartz: &str, timezone: &str) -> Result<String, String> {
    let f: Vec<&str> = quartz.split_whitespace().collect();
    if !(6..=7).contains(&f.len()) {
        return Err(format!(
            "'{quartz}' is not a Quartz cron (second minute hour day-of-month month day-of-week [year])"
        ));
    }
    if let Some(year) = f.get(6).filter(|y| !matches!(**y, "*" | "?")) {
        return Err(format!(
            "'{quartz}' names years ({year}); shoal's cron has no year field"
        ));
    }
    let dow = day_of_week(f[5]).map_err(|why| format!("'{quartz}': {why}"))?;
    let cron = format!("{} {} {} {} {} {dow}", f[0], f[1], f[2], f[3], f[4]);
    CronSchedule::parse(&cron, timezone)
        .map_err(|e| format!("'{quartz}' has no shoal equivalent: {e}"))?;
    Ok(cron)
}

/// Quartz day-of-week numbers (1-7, Sunday first) as names, which mean the same in both.
fn day_of_week(field: &str) -> Result<String, String> {
    if field.contains('L') || field.contains('/') {
        return Err(format!(
            "the day-of-week '{field}' (last or stepped weekdays) has no equivalent"
        ));
    }
    let day = |d: &str| -> Result<String, String> {
        match d.parse::<usize>() {
            Ok(n) if (1..=7).contains(&n) => Ok(DAYS[n - 1].to_string()),
            Ok(_) => Err(format!("day-of-week '{d}' is not 1-7")),
            Err(_) => Ok(d.to_uppercase()),
        }
    };
    field
        .split(',')
        .map(|part| {
            if let Some((d, nth)) = part.split_once('#') {
                return Ok(format!("{}#{nth}", day(d)?));
            }
            match part.split_once('-') {
                Some((a, b)) => Ok(format!("{}-{}", day(a)?, day(b)?)),
                None => day(part),
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|parts| parts.join(","))
}

/// `yyyy-MM-dd HH:mm:ss` read in `timezone`, as RFC 3339.
pub fn local_to_rfc3339(text: &str, timezone: &str) -> Result<String, String> {
    let tz: Tz = timezone
        .parse()
        .map_err(|_| format!("unknown zone '{timezone}'"))?;
    let t = NaiveDateTime::parse_from_str(text.trim(), "%Y-%m-%d %H:%M:%S")
        .map_err(|_| "not a yyyy-MM-dd HH:mm:ss time".to_string())?;
    tz.from_local_datetime(&t)
        .earliest()
        .map(|t| t.to_rfc3339())
        .ok_or_else(|| "a local time skipped by a clock change".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quartz_crons_become_shoal_crons_or_say_why_not() {
        let ok = |q: &str| convert(q, "Europe/Berlin").unwrap();
        assert_eq!(ok("0 30 2 * * ? *"), "0 30 2 * * ?");
        assert_eq!(ok("0 0 * * * ?"), "0 0 * * * ?");
        assert_eq!(ok("0 15 10 ? * 2-6"), "0 15 10 ? * MON-FRI");
        assert_eq!(ok("0 0 8 ? * 1,7"), "0 0 8 ? * SUN,SAT");
        assert_eq!(ok("0 0 12 ? * 6#3"), "0 0 12 ? * FRI#3");
        assert_eq!(ok("0 0 6 ? * MON"), "0 0 6 ? * MON");
        let err = |q: &str| convert(q, "UTC").unwrap_err();
        assert!(err("0 0 0 1 1 ? 2027").contains("names years"));
        assert!(err("0 0 0 ? * 6L").contains("no equivalent"));
        assert!(err("0 0 0 * *").contains("is not a Quartz cron"));
        assert!(err("0 0 25 * * ?").contains("no shoal equivalent"));
    }

    #[test]
    fn schedule_times_are_wall_clock_in_the_zone() {
        assert_eq!(
            local_to_rfc3339("2024-03-12 00:00:00", "Europe/Berlin").unwrap(),
            "2024-03-12T00:00:00+01:00"
        );
        assert!(local_to_rfc3339("12/03/2024", "UTC").is_err());
    }
}
