//! Names in request paths and queries brought to Unicode NFC before routing, so that
//! `/projects/cafe%CC%81` (a decomposed `é`) finds the project `café` that a definition
//! named with the composed `é` (definitions are normalised the same way when applied).

use axum::extract::Request;
use axum::http::Uri;
use axum::http::uri::PathAndQuery;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use shoal_common::definition::normalize;
use std::borrow::Cow;
use unicode_normalization::{IsNormalized, is_nfc_quick};

/// What a rewritten part encodes: everything but the characters no URL part gives meaning.
const PART: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The middleware (a `map_request` before routing): the request with every path segment
/// and query key or value that decodes to text not in NFC re-encoded in NFC. Anything else,
/// and a request whose text is NFC already (almost all), goes on untouched.
pub(crate) fn rewrite(mut req: Request) -> Request {
    if let Some(uri) = nfc_uri(req.uri()) {
        *req.uri_mut() = uri;
    }
    req
}

fn nfc_uri(uri: &Uri) -> Option<Uri> {
    let pq = uri.path_and_query()?;
    // Only percent-encoded text can be outside ASCII.
    if !pq.as_str().contains('%') {
        return None;
    }
    let path = rewrite_parts(pq.path(), &['/']);
    let query = pq.query().map(|q| rewrite_parts(q, &['&', '=']));
    if matches!(path, Cow::Borrowed(_)) && !matches!(query, Some(Cow::Owned(_))) {
        return None;
    }
    let text = match query {
        Some(q) => format!("{path}?{q}"),
        None => path.into_owned(),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(PathAndQuery::try_from(text).ok()?);
    Uri::from_parts(parts).ok()
}

/// `text` split at `separators`, each part that decodes to non-NFC UTF-8 re-encoded.
fn rewrite_parts<'a>(text: &'a str, separators: &[char]) -> Cow<'a, str> {
    let mut out = String::new();
    let mut changed = false;
    let mut start = 0;
    for (i, sep) in text
        .match_indices(separators)
        .map(|(i, s)| (i, Some(s)))
        .chain([(text.len(), None)])
    {
        let part = &text[start..i];
        match percent_decode_str(part).decode_utf8() {
            Ok(decoded) if is_nfc_quick(decoded.chars()) != IsNormalized::Yes => {
                let nfc = normalize(&decoded);
                changed |= nfc != decoded;
                out.extend(utf8_percent_encode(&nfc, PART));
            }
            _ => out.push_str(part),
        }
        out.push_str(sep.unwrap_or_default());
        start = i + 1;
    }
    match changed {
        true => Cow::Owned(out),
        false => Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nfc(uri: &str) -> Option<String> {
        nfc_uri(&uri.parse().unwrap()).map(|u| u.to_string())
    }

    #[test]
    fn decomposed_names_are_composed_and_the_rest_is_kept() {
        assert_eq!(
            nfc("/api/v1/projects/cafe%CC%81/workflows/a%2Fb?workflow=e%CC%81t%C3%A9&x=1"),
            Some("/api/v1/projects/caf%C3%A9/workflows/a%2Fb?workflow=%C3%A9t%C3%A9&x=1".into())
        );
        // Japanese: か + combining dakuten is が.
        assert_eq!(nfc("/p/%E3%81%8B%E3%82%99"), Some("/p/%E3%81%8C".into()));
    }

    #[test]
    fn nfc_and_undecodable_paths_are_untouched() {
        for uri in [
            "/api/v1/projects/%E5%B7%A5%E4%BD%9C%E6%B5%81/workflows",
            "/api/v1/projects/caf%C3%A9",
            "/api/v1/projects/%FF%FE",
            "/api/v1/projects/plain?state=running",
        ] {
            assert_eq!(nfc(uri), None, "{uri}");
        }
    }
}
