//! `shoal apply -f FILE`

use super::http::{Api, Body};
use super::{Connection, print_out};
use anyhow::Context;
use serde::Deserialize;
use shoal_common::definition::WorkflowDef;
use std::io::Read;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct ApplyArgs {
    /// Definition file (YAML or JSON); `-` reads standard input.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: PathBuf,
    /// Project to apply to [default: the file's `project`, else "default"].
    #[arg(long, env = "SHOAL_PROJECT")]
    project: Option<String>,
    #[command(flatten)]
    conn: Connection,
}

#[derive(Deserialize)]
pub(super) struct Applied {
    pub project: String,
    pub name: String,
    pub version: i32,
    pub created: bool,
}

pub async fn run(args: ApplyArgs) -> anyhow::Result<i32> {
    let api = Api::new(&args.conn)?;
    let text = read_definition(&args.file)?;
    // The server validates; reading the file here only finds the project it names, so
    // that a file with `project: etl` needs no --project. A file that does not parse is
    // sent anyway, to get the server's message.
    let project = args
        .project
        .or_else(|| WorkflowDef::parse(&text).ok().map(|d| d.project))
        .unwrap_or_else(|| shoal_common::definition::DEFAULT_PROJECT.to_string());
    let content_type = match args.file.extension().and_then(|e| e.to_str()) {
        Some("json") => "application/json",
        _ => "application/yaml",
    };
    let body = Body {
        content_type,
        bytes: text.into_bytes(),
    };
    let a: Applied = api.post(&["projects", &project, "workflows"], body).await?;
    let verb = if a.created { "applied" } else { "unchanged" };
    print_out(format!(
        "{verb} {}/{} version {}\n",
        a.project, a.name, a.version
    ))?;
    Ok(0)
}

fn read_definition(file: &PathBuf) -> anyhow::Result<String> {
    if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the definition from standard input")?;
        return Ok(text);
    }
    std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))
}
