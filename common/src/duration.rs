//! Durations in definitions: `30s`, `5m`, `1h`, `500ms`, `1d`, or a bare number of seconds.

use serde::{Deserialize, Deserializer, Serializer};
use std::time::Duration;

pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration '{text}': use e.g. 30s, 5m, 1h, 500ms"))?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        other => {
            return Err(format!(
                "invalid duration unit '{other}' in '{text}': use ms, s, m, h or d"
            ));
        }
    };
    if !secs.is_finite() || !(0.0..=366.0 * 86400.0).contains(&secs) {
        return Err(format!("duration '{text}' is out of range (0 to 366d)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Renders `d` in the largest unit that holds it exactly (`30m`, `2h`, `1d`, `90s`,
/// `1500ms`), as people write durations; [`parse`] reads it back.
pub fn format(d: Duration) -> String {
    if d.subsec_millis() != 0 {
        return format!("{}ms", d.as_millis());
    }
    let secs = d.as_secs();
    let units = [(86_400, "d"), (3_600, "h"), (60, "m")];
    let (size, name) = units
        .into_iter()
        .find(|(size, _)| secs != 0 && secs.is_multiple_of(*size))
        .unwrap_or((1, "s"));
    format!("{}{name}", secs / size)
}

/// serde for `Option<Duration>` fields written as duration strings or numbers.
pub mod option {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Secs(f64),
        }
        match Option::<Raw>::deserialize(d)? {
            None => Ok(None),
            Some(Raw::Text(t)) => parse(&t).map(Some).map_err(serde::de::Error::custom),
            Some(Raw::Secs(s)) => parse(&s.to_string())
                .map(Some)
                .map_err(serde::de::Error::custom),
        }
    }

    pub fn serialize<S: Serializer>(v: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(d) => s.serialize_str(&format(*d)),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_rejects_garbage() {
        assert_eq!(parse("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("7").unwrap(), Duration::from_secs(7));
        assert!(parse("soon").unwrap_err().contains("soon"));
        assert!(parse("3 weeks").unwrap_err().contains("weeks"));
        assert!(parse("999d").is_err());
        for (d, text) in [
            (Duration::from_secs(30), "30s"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(1800), "30m"),
            (Duration::from_secs(7200), "2h"),
            (Duration::from_secs(86_400), "1d"),
            (Duration::from_millis(1500), "1500ms"),
            (Duration::ZERO, "0s"),
        ] {
            assert_eq!(format(d), text);
            assert_eq!(parse(text).unwrap(), d, "{text} reads back");
        }
    }
}
