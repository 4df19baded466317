//! `shoal secret set|list|delete`: a project's secrets. A value is read from stdin, so it
//! stays out of shell history and process lists, and is never printed back.

use super::http::{Api, Body};
use super::inspect::list_out;
use super::table::{cell, time};
use super::{Connection, ProjectListArgs, print_out};
use anyhow::Context;
use reqwest::Method;
use serde_json::{Value, json};
use std::io::{IsTerminal, Read};

#[derive(clap::Subcommand, Debug)]
pub enum SecretCommand {
    /// Set a secret's value, read from stdin (e.g. `shoal secret set db < url.txt`); tasks
    /// of the project use it as `${secret.NAME}`, or as a sql task's `datasource: NAME`.
    Set {
        name: String,
        #[arg(long, env = "SHOAL_PROJECT", default_value = "default")]
        project: String,
        #[arg(long, default_value = "")]
        description: String,
        #[command(flatten)]
        conn: Connection,
    },
    /// List a project's secrets (names only: values are never shown).
    List(ProjectListArgs),
    /// Delete a secret; tasks that name it fail from then on.
    Delete {
        name: String,
        #[arg(long, env = "SHOAL_PROJECT", default_value = "default")]
        project: String,
        #[command(flatten)]
        conn: Connection,
    },
}

/// `what` (a secret's value, a password) read from stdin, without the line end a shell or
/// editor adds.
pub(super) fn read_stdin(what: &str) -> anyhow::Result<String> {
    let mut stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprintln!("{what}, then Enter and Ctrl-D:");
    }
    let mut value = String::new();
    stdin
        .read_to_string(&mut value)
        .with_context(|| format!("cannot read {what} from stdin"))?;
    let value = value.strip_suffix('\n').unwrap_or(&value);
    let value = value.strip_suffix('\r').unwrap_or(value);
    anyhow::ensure!(!value.is_empty(), "no {what} on stdin");
    Ok(value.to_string())
}

pub async fn run(cmd: SecretCommand) -> anyhow::Result<i32> {
    match cmd {
        SecretCommand::Set {
            name,
            project,
            description,
            conn,
        } => {
            let value = read_stdin(&format!("value of secret {name}"))?;
            let body = Body::json(&json!({ "value": value, "description": description }));
            let segments = ["projects", &project, "secrets", &name];
            Api::new(&conn)?
                .send(Method::PUT, &segments, &[], Some(body))
                .await?;
            print_out(format!("secret {name} of project {project} set\n"))?;
        }
        SecretCommand::List(ProjectListArgs {
            project,
            output,
            conn,
        }) => {
            let segments = ["projects", project.as_str(), "secrets"];
            let secrets: Vec<Value> = Api::new(&conn)?.get(&segments, &[]).await?;
            let headers = ["name", "description", "updated by", "updated"];
            return list_out(&secrets, output, &headers, |s| {
                vec![
                    cell(&s["name"]),
                    cell(&s["description"]),
                    cell(&s["updated_by"]),
                    time(&s["updated_at"]),
                ]
            });
        }
        SecretCommand::Delete {
            name,
            project,
            conn,
        } => {
            let segments = ["projects", &project, "secrets", &name];
            Api::new(&conn)?
                .send(Method::DELETE, &segments, &[], None)
                .await?;
            print_out(format!("secret {name} of project {project} deleted\n"))?;
        }
    }
    Ok(0)
}
