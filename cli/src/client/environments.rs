//! `shoal env set|list|show|delete`: a project's environments, shell lines a worker runs in
//! the same bash before a shell or python task that names one (`environment: NAME`).

use super::http::{Api, Body};
use super::inspect::{json_out, list_out};
use super::table::{cell, time};
use super::{Connection, Output, ProjectListArgs, print_out};
use anyhow::Context;
use reqwest::Method;
use serde_json::{Value, json};
use std::io::Read;
use std::path::PathBuf;

#[derive(clap::Subcommand, Debug)]
pub enum EnvCommand {
    /// Set an environment from a file of shell lines (`-f env.sh`, `-f -` for stdin), e.g.
    /// `export JAVA_HOME=/opt/jdk17` or `source /opt/venv/bin/activate`; tasks and
    /// workflows of the project name it as `environment: NAME`.
    Set {
        name: String,
        /// The file of shell lines (`-` reads stdin).
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        #[arg(long, env = "SHOAL_PROJECT", default_value = "default")]
        project: String,
        #[arg(long, default_value = "")]
        description: String,
        #[command(flatten)]
        conn: Connection,
    },
    /// List a project's environments.
    List(ProjectListArgs),
    /// Print an environment's shell lines (`-o json`: with its description and times).
    Show {
        name: String,
        #[arg(long, env = "SHOAL_PROJECT", default_value = "default")]
        project: String,
        #[arg(long, short = 'o', value_enum, default_value_t)]
        output: Output,
        #[command(flatten)]
        conn: Connection,
    },
    /// Delete an environment (refused while a workflow's latest version names it).
    Delete {
        name: String,
        #[arg(long, env = "SHOAL_PROJECT", default_value = "default")]
        project: String,
        #[command(flatten)]
        conn: Connection,
    },
}

fn read_config(file: &PathBuf) -> anyhow::Result<String> {
    if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the environment from stdin")?;
        return Ok(text);
    }
    std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))
}

pub async fn run(cmd: EnvCommand) -> anyhow::Result<i32> {
    match cmd {
        EnvCommand::Set {
            name,
            file,
            project,
            description,
            conn,
        } => {
            let config = read_config(&file)?;
            let body = Body::json(&json!({ "config": config, "description": description }));
            let segments = ["projects", &project, "environments", &name];
            Api::new(&conn)?
                .send(Method::PUT, &segments, &[], Some(body))
                .await?;
            print_out(format!("environment {name} of project {project} set\n"))?;
        }
        EnvCommand::List(ProjectListArgs {
            project,
            output,
            conn,
        }) => {
            let segments = ["projects", project.as_str(), "environments"];
            let envs: Vec<Value> = Api::new(&conn)?.get(&segments, &[]).await?;
            let headers = ["name", "lines", "description", "updated by", "updated"];
            return list_out(&envs, output, &headers, |e| {
                vec![
                    cell(&e["name"]),
                    e["config"]
                        .as_str()
                        .map_or(0, |c| c.lines().count())
                        .to_string(),
                    cell(&e["description"]),
                    cell(&e["updated_by"]),
                    time(&e["updated_at"]),
                ]
            });
        }
        EnvCommand::Show {
            name,
            project,
            output,
            conn,
        } => {
            let segments = ["projects", project.as_str(), "environments", name.as_str()];
            let env: Value = Api::new(&conn)?.get(&segments, &[]).await?;
            if output == Output::Json {
                return json_out(&env);
            }
            let config = env["config"].as_str().unwrap_or_default();
            print_out(format!("{config}\n"))?;
        }
        EnvCommand::Delete {
            name,
            project,
            conn,
        } => {
            let segments = ["projects", &project, "environments", &name];
            Api::new(&conn)?
                .send(Method::DELETE, &segments, &[], None)
                .await?;
            print_out(format!("environment {name} of project {project} deleted\n"))?;
        }
    }
    Ok(0)
}
