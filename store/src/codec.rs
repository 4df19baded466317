//! Stored text <-> domain values. Bad stored text is `Error::Corrupt` naming the row.

use serde::Serialize;
use serde::de::DeserializeOwned;
use shoal_common::error::{Error, Result};
use std::str::FromStr;

pub(super) fn to_json(value: &impl Serialize) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::Invalid(format!("cannot encode as JSON: {e}")))
}

/// `row` names the row for the error, e.g. "task_instance 42".
pub(super) fn from_json<T: DeserializeOwned>(row: &str, column: &str, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| Error::Corrupt(format!("{row}: {column}: {e}")))
}

pub(super) fn parse<T: FromStr<Err = String>>(row: &str, text: &str) -> Result<T> {
    text.parse()
        .map_err(|e| Error::Corrupt(format!("{row}: {e}")))
}
