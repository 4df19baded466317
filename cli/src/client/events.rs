//! `shoal event send PROJECT EVENT --key K --data JSON`: completes the wait tasks waiting
//! for an event with that business key.

use super::http::{Api, Body};
use super::{Connection, Output, print_out};
use anyhow::Context;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(clap::Subcommand, Debug)]
pub enum EventCommand {
    /// Send an event: every wait task of the project waiting for it with this key ends
    /// as succeeded, the data as its outputs. One that completes none is kept for a wait
    /// that begins later (the server's --event-retention).
    Send {
        project: String,
        /// The event's name, as wait tasks name it (`event: order_paid`).
        event: String,
        /// The business key the waits expect (their `key`, e.g. an order id).
        #[arg(long)]
        key: String,
        /// Outputs of the completed tasks, a JSON object of strings, numbers or booleans.
        #[arg(long, value_name = "JSON")]
        data: Option<String>,
        #[arg(long, short = 'o', value_enum, default_value_t)]
        output: Output,
        #[command(flatten)]
        conn: Connection,
    },
}

#[derive(Deserialize)]
struct Delivered {
    completed: Vec<i64>,
    kept_until: Option<String>,
}

pub async fn run(cmd: EventCommand) -> anyhow::Result<i32> {
    let EventCommand::Send {
        project,
        event,
        key,
        data,
        output,
        conn,
    } = cmd;
    let data: Value = match data {
        Some(text) => {
            serde_json::from_str(&text).with_context(|| format!("--data is not JSON: {text}"))?
        }
        None => json!({}),
    };
    let body = json!({ "key": key, "data": data });
    let path = ["projects", &project, "events", &event];
    let answer: Value = Api::new(&conn)?.post(&path, Body::json(&body)).await?;
    if output == Output::Json {
        print_out(serde_json::to_string_pretty(&answer)? + "\n")?;
        return Ok(0);
    }
    let d: Delivered = serde_json::from_value(answer)
        .context("unexpected answer from the api: is it a shoal api of this version?")?;
    let said = match (&d.completed[..], d.kept_until) {
        ([], Some(until)) => {
            format!("no task waits for it; kept until {until} for a wait that begins")
        }
        ([], None) => "no task waits for it (the server keeps no events)".to_string(),
        (ids, _) => {
            let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
            format!("completed task instances {}", ids.join(", "))
        }
    };
    print_out(format!("event {event} (key {key}): {said}\n"))?;
    Ok(0)
}
