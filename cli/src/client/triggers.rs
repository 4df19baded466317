//! `shoal trigger list|call`: a project's webhook triggers, and calling one the way an
//! outside system does, with the trigger's own credential (never the user's API token).

use super::http::{Api, error_message};
use super::inspect::list_out;
use super::table::cell;
use super::{Connection, Endpoint, Output, ProjectListArgs, print_out};
use anyhow::{Context, bail};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::io::Read;
use std::time::Duration;

#[derive(clap::Subcommand, Debug)]
pub enum TriggerCommand {
    /// List the webhook triggers of a project's workflows, with the path to POST to.
    List(ProjectListArgs),
    /// Call a webhook trigger: prints the started run (async) or how it ended and its
    /// outputs (sync; exit 0 only if it succeeded).
    Call(CallArgs),
}

#[derive(clap::Args, Debug)]
pub struct CallArgs {
    /// The trigger, as PROJECT/WORKFLOW/TRIGGER.
    #[arg(value_parser = parse_target)]
    target: Target,
    /// The JSON payload, or @FILE to read it from a file (@- reads stdin); default `{}`.
    #[arg(long, short = 'd')]
    data: Option<String>,
    /// The trigger's token (sent as `Authorization: Bearer`; not your API token), from the
    /// variable only: other users of the machine can read a command's arguments.
    #[arg(long, env = "SHOAL_TRIGGER_TOKEN", hide_env_values = true, conflicts_with_all = ["user", "password"])]
    token: Option<String>,
    /// The user of a trigger that takes HTTP Basic credentials.
    #[arg(long, requires = "password")]
    user: Option<String>,
    /// The password that goes with `--user`, from the variable only, as the token.
    #[arg(
        long,
        env = "SHOAL_TRIGGER_PASSWORD",
        hide_env_values = true,
        requires = "user"
    )]
    password: Option<String>,
    /// A retried call with the same key gets the first call's run instead of a new one.
    #[arg(long)]
    idempotency_key: Option<String>,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    output: Output,
    #[command(flatten)]
    endpoint: Endpoint,
}

#[derive(Debug, Clone)]
struct Target {
    project: String,
    workflow: String,
    trigger: String,
}

fn parse_target(text: &str) -> Result<Target, String> {
    match text.split('/').collect::<Vec<_>>()[..] {
        [project, workflow, trigger] if ![project, workflow, trigger].contains(&"") => Ok(Target {
            project: project.to_string(),
            workflow: workflow.to_string(),
            trigger: trigger.to_string(),
        }),
        _ => Err(format!(
            "'{text}' does not name a trigger: write PROJECT/WORKFLOW/TRIGGER (`shoal trigger list` shows them)"
        )),
    }
}

/// A sync call may wait for the longest trigger timeout; the answer comes after it.
const CALL_TIMEOUT: Duration =
    shoal_common::trigger::MAX_TIMEOUT.saturating_add(Duration::from_secs(30));

pub async fn run(cmd: TriggerCommand) -> anyhow::Result<i32> {
    match cmd {
        TriggerCommand::List(ProjectListArgs {
            project,
            output,
            conn,
        }) => {
            let segments = ["projects", project.as_str(), "triggers"];
            let triggers: Vec<Value> = Api::new(&conn)?.get(&segments, &[]).await?;
            let headers = ["workflow", "trigger", "mode", "auth", "allow ips", "path"];
            list_out(&triggers, output, &headers, |t| {
                let ips = t["allow_ips"].as_array().map_or(Vec::new(), |a| {
                    a.iter().filter_map(Value::as_str).collect::<Vec<_>>()
                });
                vec![
                    cell(&t["workflow"]),
                    cell(&t["name"]),
                    cell(&t["mode"]),
                    cell(&t["auth"]),
                    if ips.is_empty() {
                        "any".into()
                    } else {
                        ips.join(",")
                    },
                    cell(&t["path"]),
                ]
            })
        }
        TriggerCommand::Call(args) => call(args).await,
    }
}

async fn call(args: CallArgs) -> anyhow::Result<i32> {
    let payload = payload(args.data.as_deref())?;
    let Target {
        project,
        workflow,
        trigger,
    } = &args.target;
    let api = Api::new(&Connection {
        endpoint: args.endpoint.clone(),
        token: None,
    })?;
    let segments = [
        "hooks",
        project.as_str(),
        workflow.as_str(),
        trigger.as_str(),
    ];
    let mut req = api
        .request(Method::POST, &segments, &[])
        .timeout(CALL_TIMEOUT)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(payload);
    req = match (&args.token, &args.user) {
        (Some(token), _) => req.bearer_auth(token),
        (None, Some(user)) => req.basic_auth(user, args.password.as_deref()),
        (None, None) => req,
    };
    if let Some(key) = &args.idempotency_key {
        req = req.header("Idempotency-Key", key);
    }
    let resp = api.execute(req).await?;
    let status = resp.status();
    if !status.is_success() {
        let message = error_message(resp).await;
        bail!(match status {
            StatusCode::UNAUTHORIZED => format!(
                "{message} (pass the trigger's credential in SHOAL_TRIGGER_TOKEN, or --user and SHOAL_TRIGGER_PASSWORD)"
            ),
            _ => message,
        });
    }
    let answer: Value = resp
        .json()
        .await
        .context("unexpected answer from the api: is it a shoal api of this version?")?;
    if args.output == Output::Json {
        print_out(serde_json::to_string_pretty(&answer)? + "\n")?;
    } else {
        print_out(describe(&answer))?;
    }
    let failed = answer["state"].as_str().is_some_and(|s| s != "success");
    Ok(i32::from(failed))
}

/// The JSON body to send: `--data` itself, or the file `@PATH` names; `{}` without one.
fn payload(data: Option<&str>) -> anyhow::Result<String> {
    let text = match data {
        None => return Ok("{}".into()),
        Some("@-") => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the payload from stdin")?;
            text
        }
        Some(data) => match data.strip_prefix('@') {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the payload file {path}"))?,
            None => data.to_string(),
        },
    };
    serde_json::from_str::<Value>(&text).context("--data is not JSON")?;
    Ok(text)
}

/// An answer for a person: the run, and for a sync call its state and outputs.
fn describe(answer: &Value) -> String {
    if answer["started"] == false {
        return format!(
            "nothing started: {} (the trigger's `when` does not match this payload)\n",
            cell(&answer["reason"])
        );
    }
    let command = cell(&answer["command_id"]);
    let Some(state) = answer["state"].as_str() else {
        return match answer["workflow_instance_id"].as_i64() {
            Some(id) => format!("instance {id} started (command {command})\n"),
            None => format!("command {command} written; no master has claimed it yet\n"),
        };
    };
    let mut text = format!(
        "instance {} {state}\n",
        cell(&answer["workflow_instance_id"])
    );
    if let Some(outputs) = answer["outputs"].as_object() {
        for (name, value) in outputs {
            text.push_str(&format!("{name}={}\n", cell(value)));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_target_names_project_workflow_and_trigger() {
        let t = parse_target("sales/etl/deploy").unwrap();
        assert_eq!(
            (t.project, t.workflow, t.trigger),
            ("sales".into(), "etl".into(), "deploy".into())
        );
        for bad in ["etl/deploy", "a/b/c/d", "a//c", ""] {
            assert!(
                parse_target(bad)
                    .unwrap_err()
                    .contains("PROJECT/WORKFLOW/TRIGGER"),
                "{bad}"
            );
        }
    }

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        cmd: TriggerCommand,
    }

    #[test]
    fn a_call_takes_a_token_or_a_user_and_password() {
        use clap::Parser;
        let parse = |args: &str| {
            let argv = std::iter::once("shoal").chain(args.split_whitespace());
            Cli::try_parse_from(argv)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        assert!(parse("call p/w/t --token T -d {} --idempotency-key k").is_ok());
        assert!(parse("call p/w/t --user u --password p").is_ok());
        assert!(parse("call p/w/t").is_ok());
        assert!(parse("call p/w/t --token T --user u --password p").is_err());
        assert!(
            parse("call p/w/t --user u")
                .unwrap_err()
                .contains("--password")
        );
        assert!(
            parse("call w/t")
                .unwrap_err()
                .contains("PROJECT/WORKFLOW/TRIGGER")
        );
        assert!(parse("list --project sales -o json").is_ok());
    }

    #[test]
    fn answers_are_described() {
        assert_eq!(
            describe(&json!({"workflow_instance_id": 7, "command_id": 12})),
            "instance 7 started (command 12)\n"
        );
        assert_eq!(
            describe(&json!({"workflow_instance_id": null, "command_id": 12})),
            "command 12 written; no master has claimed it yet\n"
        );
        assert_eq!(
            describe(
                &json!({"workflow_instance_id": 7, "state": "success", "outputs": {"url": "http://x", "n": "2"}})
            ),
            "instance 7 success\nn=2\nurl=http://x\n"
        );
        assert_eq!(
            describe(&json!({"started": false, "reason": "filtered"})),
            "nothing started: filtered (the trigger's `when` does not match this payload)\n"
        );
    }

    #[test]
    fn a_payload_is_json_given_or_read_from_a_file() {
        assert_eq!(payload(None).unwrap(), "{}");
        assert_eq!(payload(Some(r#"{"a": 1}"#)).unwrap(), r#"{"a": 1}"#);
        let e = payload(Some("a=1")).unwrap_err();
        assert!(format!("{e:#}").contains("--data is not JSON"), "{e:#}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.json");
        std::fs::write(&file, "[1, 2]").unwrap();
        assert_eq!(
            payload(Some(&format!("@{}", file.display()))).unwrap(),
            "[1, 2]"
        );
        let e = payload(Some("@/nonexistent/p.json")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/p.json"), "{e}");
    }
}
