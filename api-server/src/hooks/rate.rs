//! Triggers' `rate`: a token bucket per trigger, held by each api-server (behind several
//! api-servers a trigger takes its rate at each). A bucket holds `count` calls and refills
//! at `count` per period, so a quiet trigger takes a burst of that many at once.

use crate::error::{Error, Result};
use shoal_common::trigger::Rate;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Default)]
pub(crate) struct Rates(Mutex<HashMap<String, Bucket>>);

/// GCRA, the token bucket kept as one instant: when the bucket would be full again.
struct Bucket {
    rate: Rate,
    /// The theoretical arrival time of the next call at the steady rate.
    tat: Instant,
}

impl Rates {
    /// Takes one call from the bucket of `trigger` (`project/workflow/name`), or refuses
    /// it with 429 and when to try again.
    pub fn take(&self, trigger: &str, rate: Rate) -> Result<()> {
        self.take_at(trigger, rate, Instant::now()).map_err(|wait| {
            // Whole seconds, rounded up: `Retry-After: 0` would invite a retry at once.
            let retry_after = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            Error::TooManyRequests {
                message: format!(
                    "trigger '{trigger}' takes {rate} calls; try again in {retry_after}s"
                ),
                retry_after,
            }
        })
    }

    fn take_at(&self, trigger: &str, rate: Rate, now: Instant) -> Result<(), Duration> {
        let mut buckets = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = Bucket { rate, tat: now };
        let bucket = buckets.entry(trigger.to_string()).or_insert(fresh);
        if bucket.rate != rate {
            // The definition changed its rate: start afresh at the new one.
            *bucket = Bucket { rate, tat: now };
        }
        let interval = rate.interval();
        // How far ahead of the steady pace a burst may run: `count` calls at once.
        let burst = interval * (rate.count - 1);
        let tat = bucket.tat.max(now);
        let ahead = tat - now;
        if ahead > burst {
            return Err(ahead - burst);
        }
        bucket.tat = tat + interval;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_takes_a_burst_then_refills_at_its_rate() {
        let rates = Rates::default();
        let rate: Rate = "2/s".parse().unwrap();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(rates.take_at("p/w/t", rate, at(0)), Ok(()));
        assert_eq!(rates.take_at("p/w/t", rate, at(0)), Ok(()));
        assert_eq!(
            rates.take_at("p/w/t", rate, at(100)),
            Err(Duration::from_millis(400))
        );
        // Other triggers have buckets of their own.
        assert_eq!(rates.take_at("p/w/other", rate, at(100)), Ok(()));
        assert_eq!(rates.take_at("p/w/t", rate, at(500)), Ok(()));
        assert!(rates.take_at("p/w/t", rate, at(500)).is_err());
        // A quiet trigger is full again, never fuller.
        for _ in 0..2 {
            assert_eq!(rates.take_at("p/w/t", rate, at(60_000)), Ok(()));
        }
        assert!(rates.take_at("p/w/t", rate, at(60_000)).is_err());
        let e = rates.take("p/w/t", "1/h".parse().unwrap()).map(|_| ());
        assert_eq!(
            e.map_err(|e| e.to_string()),
            Ok(()),
            "a new rate starts full"
        );
        let Err(Error::TooManyRequests { retry_after, .. }) =
            rates.take("p/w/t", "1/h".parse().unwrap())
        else {
            panic!("the second call in an hour is refused");
        };
        assert!((3599..=3600).contains(&retry_after), "{retry_after}");
    }
}
