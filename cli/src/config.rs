//! `--config FILE`: a TOML file whose keys are the flags' long names.
//!
//! Precedence is flag > environment > file > default. The file is applied by exporting
//! each key as its `SHOAL_*` variable when the environment does not set it already, so
//! that clap's own env handling does the merging and there is one source of truth for
//! every setting's name and default.

use anyhow::{Context, bail};

/// Finds `--config FILE` / `--config=FILE` in the raw arguments and applies the file.
pub fn apply_config_file(args: &[String]) -> anyhow::Result<()> {
    let mut path = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--config" {
            path = it.next().cloned();
        } else if let Some(p) = a.strip_prefix("--config=") {
            path = Some(p.to_string());
        }
    }
    let Some(path) = path.or_else(|| std::env::var("SHOAL_CONFIG").ok()) else {
        return Ok(());
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read config file {path}"))?;
    let table: toml::Table = text
        .parse()
        .with_context(|| format!("config file {path} is not valid TOML"))?;
    for (key, value) in table {
        let var = format!("SHOAL_{}", key.to_uppercase().replace('-', "_"));
        let value = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Array(items) => items
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string())
                })
                .collect::<Vec<_>>()
                .join(","),
            other => bail!("config file {path}: key '{key}' has an unsupported value {other}"),
        };
        if std::env::var_os(&var).is_none() {
            // SAFETY: called at start-up before any other thread exists.
            unsafe { std::env::set_var(&var, value) };
        }
    }
    Ok(())
}
