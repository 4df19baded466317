//! URLs shown without their secrets: in task logs, in `--dump-config`, and to callers who may
//! not see a channel's target.

use url::Url;

/// What stands in for a secret.
pub const MASK: &str = "***";

/// Query parameters of a database URL that hold a password: the login's, and libpq's
/// (and sqlx's) password of the TLS client key.
const PASSWORD_PARAMS: [&str; 2] = ["password", "sslpassword"];

/// `url` with its passwords masked, in the userinfo (`u:***@h`) and in the query
/// parameters that hold one ([`PASSWORD_PARAMS`]). Text that is not a URL is masked whole:
/// it cannot be told which part is secret.
pub fn without_password(url: &str) -> String {
    let Ok(mut parsed) = Url::parse(url) else {
        return MASK.to_string();
    };
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some(MASK));
    }
    let is_password = |k: &str| PASSWORD_PARAMS.contains(&k);
    if parsed.query_pairs().any(|(k, _)| is_password(&k)) {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(k, v)| {
                let v = if is_password(&k) {
                    MASK.into()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string()
}

/// Whether `value` holds a secret masked by [`without_password`] (or a bare [`MASK`]): copied
/// from masked output, it must not be taken for the secret itself.
pub fn is_masked(value: &str) -> bool {
    value == MASK
        || value.contains(&format!(":{MASK}@"))
        || value.contains(&format!("password={MASK}"))
}

/// Only where `url` goes (scheme, host, port), its path and query masked: a webhook's path
/// is often its credential (Slack's, Teams').
pub fn origin_only(url: &str) -> String {
    match Url::parse(url) {
        Ok(parsed) if parsed.has_host() => {
            let origin = parsed.origin().ascii_serialization();
            match parsed.path() == "/" && parsed.query().is_none() {
                true => format!("{origin}/"),
                false => format!("{origin}/{MASK}"),
            }
        }
        _ => MASK.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked_wherever_a_url_carries_them() {
        assert_eq!(
            without_password("postgres://u:pw@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(
            without_password("postgres://u@h/db?sslmode=require&password=pw"),
            "postgres://u@h/db?sslmode=require&password=***"
        );
        assert_eq!(
            without_password("postgres://u@h/db?sslmode=verify-full&sslpassword=keypw&sslkey=/k"),
            "postgres://u@h/db?sslmode=verify-full&sslpassword=***&sslkey=%2Fk"
        );
        assert_eq!(without_password("sqlite:///tmp/x.db"), "sqlite:///tmp/x.db");
        assert_eq!(without_password("not a url: pw"), "***");
        for masked in [
            without_password("postgres://u:pw@h/db"),
            without_password("postgres://u@h/db?password=pw"),
            without_password("not a url"),
        ] {
            assert!(is_masked(&masked), "{masked}");
        }
        assert!(!is_masked("postgres://u:a***b@h/db"));
    }

    #[test]
    fn a_target_shown_by_its_origin_hides_path_and_query() {
        assert_eq!(
            origin_only("https://hooks.slack.com/services/T0/B0/XyZ"),
            "https://hooks.slack.com/***"
        );
        assert_eq!(origin_only("http://ops:8080/"), "http://ops:8080/");
        assert_eq!(
            origin_only("http://ops:8080/?k=secret"),
            "http://ops:8080/***"
        );
        assert_eq!(origin_only("nonsense"), "***");
    }
}
