//! `shoal alert-channel create|list|delete` and `shoal alerts`.

use super::http::{Api, Body};
use super::inspect::{filters, list_out};
use super::table::{cell, time};
use super::{Connection, ListArgs, NamedArgs, Output, print_out};
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
    List(ListArgs),
    Delete(NamedArgs),
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
        AlertChannelCommand::List(ListArgs { output, conn }) => {
            let channels: Vec<Value> = Api::new(&conn)?.get(&["alert-channels"], &[]).await?;
            let headers = ["name", "type", "url", "format"];
            return list_out(&channels, output, &headers, |c| {
                headers.iter().map(|h| cell(&c[*h])).collect()
            });
        }
        AlertChannelCommand::Delete(NamedArgs { name, conn }) => {
            let _: Value = Api::new(&conn)?.delete(&["alert-channels", &name]).await?;
            print_out(format!("alert channel {name} deleted\n"))?;
        }
    }
    Ok(0)
}

/// `shoal alerts`: the outbox with each alert's delivery state, attempts and last error.
pub async fn list(args: AlertsArgs) -> anyhow::Result<i32> {
    let api = Api::new(&args.conn)?;
    let query = filters([
        ("instance", args.instance.map(|i| i.to_string())),
        ("state", args.state),
        ("limit", args.limit.map(|n| n.to_string())),
    ]);
    let alerts: Vec<Value> = api.get(&["alerts"], &query).await?;
    let headers = [
        "id", "instance", "event", "channel", "state", "attempts", "created", "error",
    ];
    list_out(&alerts, args.output, &headers, |a| {
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
}
