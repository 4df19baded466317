//! URLs shown without their secrets: in task logs, in `--dump-config`, in the messages of
//! tasks and alerts, and to callers who may not see a channel's target.

use std::borrow::Cow;
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
    mask_password(&mut parsed);
    parsed.to_string()
}

/// Masks the password of `url` in place; false when it had none.
fn mask_password(url: &mut Url) -> bool {
    let in_userinfo = url.password().is_some();
    if in_userinfo {
        let _ = url.set_password(Some(MASK));
    }
    let is_password = |k: &str| PASSWORD_PARAMS.contains(&k);
    let in_query = url.query_pairs().any(|(k, _)| is_password(&k));
    if in_query {
        let pairs: Vec<(String, String)> = url
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
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    in_userinfo || in_query
}

/// `text` (a message) with the password of every URL in it masked as [`without_password`]
/// does; URLs without one, and the rest of the text, unchanged.
pub fn passwords_in(text: &str) -> Cow<'_, str> {
    urls_in(text, |url| match Url::parse(url) {
        Ok(mut parsed) => match mask_password(&mut parsed) {
            true => parsed.to_string(),
            false => url.to_string(),
        },
        Err(_) => url.to_string(),
    })
}

/// `text` with every URL in it (`scheme://…` up to a space, quote or bracket, without
/// trailing punctuation) replaced by what `shown` makes of it.
pub fn urls_in(text: &str, shown: impl Fn(&str) -> String) -> Cow<'_, str> {
    let is_scheme = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.');
    let ends_url = |c: char| c.is_whitespace() || "\"'<>()[]{}`".contains(c);
    let mut out = String::new();
    let mut copied = 0; // `text` up to here is in `out`, as is or replaced
    let mut from = 0;
    while let Some(found) = text[from..].find("://") {
        let sep = from + found;
        let start = text[..sep]
            .char_indices()
            .rev()
            .take_while(|&(_, c)| is_scheme(c))
            .last()
            .map_or(sep, |(i, _)| i);
        let end = text[sep..].find(ends_url).map_or(text.len(), |i| sep + i);
        let url = text[start..end].trim_end_matches(['.', ',', ';', ':', '!', '?']);
        from = (start + url.len()).max(sep + 3);
        if start < copied || !url.starts_with(|c: char| c.is_ascii_alphabetic()) {
            continue;
        }
        let replaced = shown(url);
        if replaced != url {
            out.push_str(&text[copied..start]);
            out.push_str(&replaced);
            copied = start + url.len();
        }
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
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
        assert_eq!(
            without_password("mysql://u:pw@h:3306/db?ssl-mode=REQUIRED"),
            "mysql://u:***@h:3306/db?ssl-mode=REQUIRED"
        );
        assert_eq!(
            passwords_in("cannot reach mariadb://u:pw@h/db."),
            "cannot reach mariadb://u:***@h/db."
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

    #[test]
    fn urls_in_a_message_are_masked_and_the_rest_kept() {
        assert_eq!(
            passwords_in("POST http://u:pw@h:1/x?a=1: refused (see postgres://h/db?password=pw)"),
            "POST http://u:***@h:1/x?a=1: refused (see postgres://h/db?password=***)"
        );
        let plain = "GET http://h/x failed; ftp://h/ too, and :// alone";
        assert!(matches!(passwords_in(plain), Cow::Borrowed(_)));
        assert_eq!(
            urls_in(
                "POST https://hooks.slack.com/services/T0/B0/XyZ: answered 500, \"http://ops/\"",
                origin_only
            ),
            "POST https://hooks.slack.com/***: answered 500, \"http://ops/\""
        );
        assert_eq!(urls_in("é(https://h/a)é", |_| "U".into()), "é(U)é");
    }
}
