//! A trigger's `rate`: how many calls it takes per second, minute or hour (`10/s`,
//! `600/m`, `100/h`), as a token bucket that holds that many and refills at that pace.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The most calls a rate names per period.
const MAX_COUNT: u32 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Rate {
    /// Calls per `per`, and the most taken at once after a quiet period.
    pub count: u32,
    pub per: Duration,
}

impl Rate {
    /// How long one call's share of the bucket takes to refill.
    pub fn interval(&self) -> Duration {
        self.per / self.count
    }
}

impl FromStr for Rate {
    type Err = String;

    fn from_str(text: &str) -> Result<Rate, String> {
        let bad = || {
            format!(
                "'{text}' is not a rate: write calls per second, minute or hour (10/s, 600/m, 100/h)"
            )
        };
        let (count, unit) = text.split_once('/').ok_or_else(bad)?;
        let count: u32 = count.trim().parse().map_err(|_| bad())?;
        let per = match unit.trim() {
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            _ => return Err(bad()),
        };
        if !(1..=MAX_COUNT).contains(&count) {
            return Err(format!("'{text}': the count must be 1 to {MAX_COUNT}"));
        }
        Ok(Rate { count, per })
    }
}

impl TryFrom<String> for Rate {
    type Error = String;
    fn try_from(text: String) -> Result<Rate, String> {
        text.parse()
    }
}

impl From<Rate> for String {
    fn from(rate: Rate) -> String {
        rate.to_string()
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "m",
            _ => "h",
        };
        write!(f, "{}/{unit}", self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_print_back() {
        for text in ["10/s", "600/m", "1/h"] {
            assert_eq!(text.parse::<Rate>().unwrap().to_string(), text);
        }
        let r: Rate = "4/s".parse().unwrap();
        assert_eq!(r.interval(), Duration::from_millis(250));
        for bad in ["10", "10/d", "x/s", "0/s", "-1/s", "2000000/s"] {
            assert!(bad.parse::<Rate>().is_err(), "{bad}");
        }
    }
}
