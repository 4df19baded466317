//! RFC 3339 times of requests and answers.

use crate::error::{Error, Result};
use shoal_common::types::{ms_to_rfc3339, now_ms};
use shoal_store::ScheduleRow;

/// A time of an answer; null when unset.
pub(crate) fn time(ms: Option<i64>) -> Option<String> {
    ms.map(ms_to_rfc3339)
}

/// An optional RFC 3339 time of a query (empty is none); `field` names it in the error.
pub(crate) fn parse_optional_time(field: &str, text: Option<String>) -> Result<Option<i64>> {
    text.filter(|t| !t.is_empty())
        .map(|t| parse_time(field, &t))
        .transpose()
}

/// Parses an RFC 3339 time of the request; `field` names it in the error.
pub(crate) fn parse_time(field: &str, text: &str) -> Result<i64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|e| {
            Error::BadRequest(format!(
                "{field} '{text}' is not an RFC 3339 time (e.g. 2026-01-01T00:00:00Z): {e}"
            ))
        })
}

/// The schedule's next fire time (RFC 3339 in its zone), if enabled and not past its end.
pub(crate) fn next_fire(s: &ScheduleRow) -> Option<String> {
    s.spec
        .check()
        .ok()
        .filter(|_| s.spec.enabled)
        .and_then(|cron| {
            let t = cron.next_due(s.spec.window(), s.fired_until.max(now_ms()))?;
            Some(cron.show(t))
        })
}
