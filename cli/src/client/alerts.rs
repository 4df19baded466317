//! `shoal alert-channel create|list|delete` and `shoal alerts`.

use super::http::{Api, Body};
use super::inspect::{filters, list_out};
use super::secrets::read_stdin;
use super::table::{cell, time};
use super::{Connection, ListArgs, NamedArgs, Output, print_out};
use anyhow::Context;
use serde_json::{Value, json};

#[derive(clap::ValueEnum, serde::Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ChannelType {
    /// A POST to --url, its body in --format.
    Webhook,
    /// An e-mail through --smtp.
    Email,
    /// A line in the master's log.
    Log,
}

#[derive(clap::ValueEnum, serde::Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WebhookFormat {
    /// The alert's fields as JSON.
    Json,
    /// `{"text": "..."}` for Slack's incoming webhooks.
    Slack,
    /// A DingTalk group robot's text message.
    Dingtalk,
    /// A WeCom group robot's text message.
    Wecom,
    /// A Feishu (Lark) custom bot's text message.
    Feishu,
    /// A Telegram bot's sendMessage (--url .../sendMessage?chat_id=CHAT).
    Telegram,
}

#[derive(clap::Subcommand, Debug)]
pub enum AlertChannelCommand {
    /// Create an alert channel that workflows name in `alerts: [{on, channel}]`.
    Create(CreateArgs),
    List(ListArgs),
    Delete(NamedArgs),
}

#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    name: String,
    #[arg(long = "type", value_enum)]
    kind: ChannelType,
    /// Webhook address (http:// or https://).
    #[arg(long, required_if_eq("kind", "webhook"))]
    url: Option<String>,
    #[arg(long, value_enum)]
    format: Option<WebhookFormat>,
    /// SMTP server: smtps://host[:465] (TLS), smtp://host[:587]?tls=required (STARTTLS) or
    /// smtp://host[:25] (plain).
    #[arg(long, required_if_eq("kind", "email"))]
    smtp: Option<String>,
    /// Sender address.
    #[arg(long, required_if_eq("kind", "email"))]
    from: Option<String>,
    /// Recipient address (repeat it, or separate with commas).
    #[arg(long, value_delimiter = ',', required_if_eq("kind", "email"))]
    to: Vec<String>,
    /// SMTP user.
    #[arg(long)]
    username: Option<String>,
    /// Read the SMTP password from stdin (stored encrypted, never shown).
    #[arg(long, requires = "username")]
    password_stdin: bool,
    /// A PEM CA certificate file to trust for the SMTP server (a private relay).
    #[arg(long)]
    ca: Option<std::path::PathBuf>,
    #[command(flatten)]
    conn: Connection,
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
        AlertChannelCommand::Create(a) => {
            let mut body = json!({ "name": a.name, "type": a.kind });
            let mut set = |field: &str, value: Option<Value>| {
                if let Some(value) = value {
                    body[field] = value;
                }
            };
            set("url", a.url.map(Value::from));
            set("format", a.format.map(|f| json!(f)));
            set("smtp", a.smtp.map(Value::from));
            set("from", a.from.map(Value::from));
            set("to", (!a.to.is_empty()).then(|| json!(a.to)));
            set("username", a.username.map(Value::from));
            if a.password_stdin {
                let what = format!("the SMTP password of alert channel {}", a.name);
                set("password", Some(read_stdin(&what)?.into()));
            }
            if let Some(ca) = a.ca {
                let pem = std::fs::read_to_string(&ca)
                    .with_context(|| format!("cannot read --ca {}", ca.display()))?;
                set("ca", Some(pem.into()));
            }
            let _: Value = Api::new(&a.conn)?
                .post(&["alert-channels"], Body::json(&body))
                .await?;
            print_out(format!("alert channel {} created\n", a.name))?;
        }
        AlertChannelCommand::List(ListArgs { output, conn }) => {
            let channels: Vec<Value> = Api::new(&conn)?.get(&["alert-channels"], &[]).await?;
            let headers = ["name", "type", "url", "format", "smtp", "to"];
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
