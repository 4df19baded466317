//! `shoal backfill NAME --from DATE --to DATE | --dates D1,D2 [--with-dependents] [...] [--wait]`,
//! `shoal backfill status ID`, `shoal backfill cancel ID` and `shoal backfill list`. The server runs the backfill (the leader master starts each
//! date's run); the CLI only asks and, with `--wait`, watches.

use super::http::{Api, Body, Unreachable};
use super::start::{RunOptionArgs, parse_param};
use super::table::{cell, render, time};
use super::{Connection, Output, ProjectListArgs, print_out};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BackfillArgs {
    #[command(subcommand)]
    status: Option<StatusCommand>,
    #[command(flatten)]
    start: StartArgs,
}

#[derive(clap::Subcommand, Debug)]
enum StatusCommand {
    /// Show a backfill's progress: dates done/total and the failed ones.
    Status(StatusArgs),
    /// Skip the dates not started yet; started ones finish, then it ends `cancelled`.
    Cancel(CancelArgs),
    /// List backfills, newest first.
    List(ListArgs),
}

#[derive(clap::Args, Debug)]
struct ListArgs {
    /// Only the backfills of this workflow.
    #[arg(long)]
    workflow: Option<String>,
    #[command(flatten)]
    list: ProjectListArgs,
}

#[derive(clap::Args, Debug)]
struct CancelArgs {
    /// Backfill id (printed when it was created).
    id: i64,
    #[command(flatten)]
    conn: Connection,
}

#[derive(clap::Args, Debug)]
struct StatusArgs {
    /// Backfill id (printed when it was created).
    id: i64,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    output: Output,
    #[command(flatten)]
    conn: Connection,
}

#[derive(clap::Args, Debug)]
struct StartArgs {
    /// Name of the workflow.
    #[arg(required = true)]
    name: Option<String>,
    #[arg(long, env = "SHOAL_PROJECT", default_value = "default")]
    project: String,
    /// First day (YYYY-MM-DD).
    #[arg(long, requires = "to", conflicts_with = "dates")]
    from: Option<String>,
    /// Last day (YYYY-MM-DD), included.
    #[arg(long, requires = "from")]
    to: Option<String>,
    /// Single days instead of a range, comma separated.
    #[arg(long, value_delimiter = ',', required_unless_present = "from")]
    dates: Vec<String>,
    /// Runs at once [default: 1, one date after another].
    #[arg(long, default_value_t = 1)]
    parallel: u32,
    /// Oldest (asc) or newest (desc) date first.
    #[arg(long, default_value = "asc", value_parser = ["asc", "desc"])]
    order: String,
    /// A failed date stops the dates not yet started.
    #[arg(long)]
    stop_on_failure: bool,
    /// Zone of the days when the workflow has no schedule [default: UTC].
    #[arg(long)]
    timezone: Option<String>,
    /// Startup parameter of every run. Repeat for more.
    #[arg(long = "param", value_name = "KEY=VALUE", value_parser = parse_param)]
    params: Vec<(String, String)>,
    /// Also backfill the workflows whose dependent tasks wait for this one (and theirs),
    /// each after the one it waits for (DolphinScheduler's complement-dependent mode).
    #[arg(long)]
    with_dependents: bool,
    #[command(flatten)]
    options: RunOptionArgs,
    /// Wait until every date ran, showing dates done/total; exit 0 only if all succeeded.
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    conn: Connection,
}

pub async fn run(args: BackfillArgs) -> anyhow::Result<i32> {
    match args.status {
        Some(StatusCommand::Status(s)) => status(s).await,
        Some(StatusCommand::Cancel(c)) => cancel(c).await,
        Some(StatusCommand::List(l)) => list(l).await,
        None => start(args.start).await,
    }
}

async fn list(args: ListArgs) -> anyhow::Result<i32> {
    let ProjectListArgs {
        project,
        output,
        conn,
    } = args.list;
    let api = Api::new(&conn)?;
    let mut query = vec![("project", project)];
    if let Some(w) = args.workflow {
        query.push(("workflow", w));
    }
    let list: Value = api.get(&["backfills"], &query).await?;
    if output == Output::Json {
        print_out(format!("{list:#}\n"))?;
        return Ok(0);
    }
    let rows: Vec<Vec<String>> = list
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|b| {
            vec![
                cell(&b["id"]),
                format!("{}/{}", cell(&b["project"]), cell(&b["workflow"])),
                cell(&b["state"]),
                format!("{}/{}", cell(&b["done"]), cell(&b["total"])),
                failed(b).trim_start_matches("; failed: ").to_string(),
                time(&b["created_at"]),
            ]
        })
        .collect();
    print_out(render(
        &["id", "workflow", "state", "done", "failed", "created"],
        &rows,
    ))?;
    Ok(0)
}

async fn cancel(args: CancelArgs) -> anyhow::Result<i32> {
    let api = Api::new(&args.conn)?;
    let id = args.id.to_string();
    let answer: Value = api
        .post(&["backfills", &id, "cancel"], Body::json(&json!({})))
        .await?;
    eprintln!(
        "backfill {id}: {} dates not started are skipped; started ones finish",
        cell(&answer["skipped"])
    );
    Ok(0)
}

async fn start(args: StartArgs) -> anyhow::Result<i32> {
    let api = Api::new(&args.conn)?;
    let name = args.name.unwrap_or_default();
    let params: BTreeMap<_, _> = args.params.into_iter().collect();
    let mut body = json!({
        "parallel": args.parallel,
        "order": args.order,
        "stop_on_failure": args.stop_on_failure,
        "params": params,
        "with_dependents": args.with_dependents,
    });
    if let (Some(from), Some(to)) = (args.from, args.to) {
        body["from"] = json!(from);
        body["to"] = json!(to);
    } else {
        body["dates"] = json!(args.dates);
    }
    if let Some(tz) = args.timezone {
        body["timezone"] = json!(tz);
    }
    args.options.add_to(&mut body);
    let path = ["projects", &args.project, "workflows", &name, "backfill"];
    let created: Value = api.post(&path, Body::json(&body)).await?;
    let id = created["id"].as_i64().unwrap_or_default();
    print_out(format!("{id}\n"))?;
    eprintln!(
        "backfill {id}: {} runs of {name}; `shoal backfill status {id}` shows progress",
        cell(&created["runs"])
    );
    let dependents = created["dependents"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for d in &dependents {
        eprintln!(
            "backfill {}: {} runs of {}/{} (stage {}, after the stage before it)",
            cell(&d["id"]),
            cell(&d["runs"]),
            cell(&d["project"]),
            cell(&d["workflow"]),
            cell(&d["stage"])
        );
    }
    for why in created["left_out"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        eprintln!("not backfilled: {}", cell(why));
    }
    if !args.wait {
        return Ok(0);
    }
    let mut code = watch(&api, id).await?;
    for d in dependents {
        code = code.max(watch(&api, d["id"].as_i64().unwrap_or_default()).await?);
    }
    Ok(code)
}

/// Shows dates done/total until the backfill ends; 0 only if every date succeeded.
async fn watch(api: &Api, id: i64) -> anyhow::Result<i32> {
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template(
            "{spinner} {prefix} [{bar:30}] {pos}/{len} dates done {wide_msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_prefix(format!("backfill {id}"));
    bar.enable_steady_tick(Duration::from_millis(120));
    let mut errors = 0;
    loop {
        let b: Value = match api.get(&["backfills", &id.to_string()], &[]).await {
            Ok(b) => {
                errors = 0;
                b
            }
            // A restarting api-server should not end a long wait.
            Err(e) if errors < 30 && e.is::<Unreachable>() => {
                errors += 1;
                bar.println(format!("warning: {e:#} (retrying)"));
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            }
            Err(e) => {
                bar.finish_and_clear();
                return Err(e);
            }
        };
        let (done, total) = (
            b["done"].as_u64().unwrap_or(0),
            b["total"].as_u64().unwrap_or(0),
        );
        bar.set_length(total);
        bar.set_position(done);
        bar.set_message(format!("({}{})", cell(&b["state"]), failed(&b)));
        if b["state"] != "running" {
            bar.finish_and_clear();
            eprintln!(
                "backfill {id} ended {}: {done}/{total} dates done{}",
                cell(&b["state"]),
                failed(&b)
            );
            return Ok(if b["state"] == "success" { 0 } else { 1 });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `; failed: t1, t2`, or nothing.
fn failed(b: &Value) -> String {
    let failed: Vec<String> = b["failed"]
        .as_array()
        .map(|a| a.iter().map(time).collect())
        .unwrap_or_default();
    match failed.is_empty() {
        true => String::new(),
        false => format!("; failed: {}", failed.join(", ")),
    }
}

async fn status(args: StatusArgs) -> anyhow::Result<i32> {
    let api = Api::new(&args.conn)?;
    let b: Value = api.get(&["backfills", &args.id.to_string()], &[]).await?;
    if args.output == Output::Json {
        print_out(format!("{b:#}\n"))?;
        return Ok(0);
    }
    let follows = match b["follows"].as_i64() {
        Some(id) => format!(
            "follows   backfill {id} (stage {}: starts when the stages before it ended)\n",
            cell(&b["stage"])
        ),
        None => String::new(),
    };
    let mut out = format!(
        "backfill {}  {}/{} version {}\nstate     {}  ({}/{} dates done, parallel {}){}\n{follows}\n",
        cell(&b["id"]),
        cell(&b["project"]),
        cell(&b["workflow"]),
        cell(&b["version"]),
        cell(&b["state"]),
        cell(&b["done"]),
        cell(&b["total"]),
        cell(&b["parallel"]),
        failed(&b),
    );
    let runs = b["runs"].as_array().map(Vec::as_slice).unwrap_or_default();
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                time(&r["schedule_time"]),
                cell(&r["state"]),
                cell(&r["workflow_instance_id"]),
                cell(&r["error"]),
            ]
        })
        .collect();
    out.push_str(&render(
        &["schedule time", "state", "instance", "error"],
        &rows,
    ));
    print_out(out)?;
    Ok(0)
}
