//! `shoal alert-channel create|list|delete` and `shoal alerts`.

use super::http::{Api, Body};
use super::inspect::json_out;
use super::table::{cell, render, time};
use super::{Connection, Output, print_out};
use serde_json::{Value, json};

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelType {
    /// A JSON POST to --url.
    Webhook,
    /// A line in the master's log.
    Log,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookFormat {
    /// The alert's fields as JSON.
    Json,
    /// `{"text": "..."}` for Slack's incoming webhooks.
    Slack,
}

#[derive(clap::Subcommand, Debug)]
pub enum AlertChannelCommand {
    /// Create an alert channel that workflows name in `alerts: [{on, channel}]`.
    Create {
        name: String,
        #[arg(long = "type", value_enum)]
        kind: ChannelType,
        /// Webhook address (http:// or https://).
        #[arg(long, required_if_eq("kind", "webhook"))]
        url: Option<String>,
        #[arg(long, value_enum)]
        format: Option<WebhookFormat>,
        #[command(flatten)]
        conn: Connection,
    },
    List {
        #[arg(long, short = 'o', value_enum, default_value_t)]
        output: Output,
        #[command(flatten)]
        conn: Connection,
    },
    Delete {
        name: String,
        #[command(flatten)]
        conn: Connection,
    },
}

#[derive(clap::Args, Debug)]
pub struct AlertsArgs {
    /// Only the alerts of this workflow instance.
    #[arg(long)]
    instance: Option<i64>,
    /// Only alerts in this state: pending, sent or failed.
    #[arg(long)]
    state: Option<String>,
    #[arg(long)]
    limit: Option<u32>,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    output: Output,
    #[command(flatten)]
    conn: Connection,
}

pub async fn channel(cmd: AlertChannelCommand) -> anyhow::Result<i32> {
    match cmd {
        AlertChannelCommand::Create {
            name,
            kind,
            url,
            format,
            conn,
        } => {
            let mut body = json!({ "name": name });
            body["type"] = json!(match kind {
                ChannelType::Webhook => "webhook",
                ChannelType::Log => "log",
            });
            if let Some(url) = url {
                body["url"] = json!(url);
            }
            if let Some(format) = format {
                body["format"] = json!(match format {
                    WebhookFormat::Json => "json",
                    WebhookFormat::Slack => "slack",
                });
            }
            let _: Value = Api::new(&conn)?
                .post(&["alert-channels"], Body::json(&body))
                .await?;
            print_out(format!("alert channel {name} created\n"))?;
        }
        AlertChannelCommand::List { output, conn } => {
            let channels: Vec<Value> = Api::new(&conn)?.get(&["alert-channels"], &[]).await?;
            if output == Output::Json {
                return json_out(&channels);
            }
            let rows: Vec<Vec<String>> = channels
                .iter()
                .map(|c| {
                    vec![
                        cell(&c["name"]),
                        cell(&c["type"]),
                        cell(&c["url"]),
                        cell(&c["format"]),
                    ]
                })
                .collect();
            print_out(render(&["name", "type", "url", "format"], &rows))?;
        }
        AlertChannelCommand::Delete { name, conn } => {
            let _: Value = Api::new(&conn)?.delete(&["alert-channels", &name]).await?;
            print_out(format!("alert channel {name} deleted\n"))?;
        }
    }
    Ok(0)
}

/// `shoal alerts`: the outbox with each alert's delivery state, attempts and last error.
pub async fn list(args: AlertsArgs) -> anyhow::Result<i32> {
    let api = Api::new(&args.conn)?;
    let query: Vec<(&str, String)> = [
        ("instance", args.instance.map(|i| i.to_string())),
        ("state", args.state),
        ("limit", args.limit.map(|n| n.to_string())),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| (k, v)))
    .collect();
    let alerts: Vec<Value> = api.get(&["alerts"], &query).await?;
    if args.output == Output::Json {
        return json_out(&alerts);
    }
    let rows: Vec<Vec<String>> = alerts
        .iter()
        .map(|a| {
            vec![
                cell(&a["id"]),
                cell(&a["workflow_instance_id"]),
                cell(&a["event"]),
                cell(&a["channel"]),
                cell(&a["state"]),
                cell(&a["attempts"]),
                time(&a["created_at"]),
                cell(&a["last_error"]),
            ]
        })
        .collect();
    let headers = [
        "id", "instance", "event", "channel", "state", "attempts", "created", "error",
    ];
    print_out(render(&headers, &rows))?;
    Ok(0)
}
