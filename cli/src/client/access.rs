//! `shoal user`, `shoal token`, `shoal project` and `shoal audit`: who may do what, and
//! who did what.

use super::http::{Api, Body};
use super::inspect::{filters, list_out};
use super::table::{cell, time};
use super::{Connection, ListArgs, NamedArgs, Output, print_out};
use reqwest::Method;
use serde_json::{Value, json};

#[derive(clap::Subcommand, Debug)]
pub enum UserCommand {
    /// Create a user (global admins only); `shoal token create --user NAME` gives them a token.
    Create {
        name: String,
        /// A global admin may do anything, in every project.
        #[arg(long)]
        admin: bool,
        #[command(flatten)]
        conn: Connection,
    },
    /// List users.
    List(ListArgs),
    /// Disable a user: their tokens are refused until `enable`.
    Disable(NamedArgs),
    /// Enable a disabled user again.
    Enable(NamedArgs),
}

#[derive(clap::Subcommand, Debug)]
pub enum TokenCommand {
    /// Create an API token and print it (shown this once).
    Create {
        /// What it is for, e.g. `ci`.
        name: String,
        /// Another user's token (global admins only).
        #[arg(long)]
        user: Option<String>,
        /// Days until it expires (default: never).
        #[arg(long)]
        expires_in_days: Option<u32>,
        #[command(flatten)]
        conn: Connection,
    },
    /// List your tokens (or, for a global admin, another user's).
    List {
        #[arg(long)]
        user: Option<String>,
        #[arg(long, short = 'o', value_enum, default_value_t)]
        output: Output,
        #[command(flatten)]
        conn: Connection,
    },
    /// Revoke a token by id: it is refused from now on.
    Revoke {
        id: i64,
        #[command(flatten)]
        conn: Connection,
    },
}

#[derive(clap::Subcommand, Debug)]
pub enum ProjectCommand {
    /// Create a project; you become its admin.
    Create {
        name: String,
        #[arg(long, default_value = "")]
        description: String,
        #[command(flatten)]
        conn: Connection,
    },
    /// List the projects you may see, with your role.
    List(ListArgs),
    /// Show a project and its members.
    Show {
        name: String,
        #[arg(long, short = 'o', value_enum, default_value_t)]
        output: Output,
        #[command(flatten)]
        conn: Connection,
    },
    /// Delete a project that has no workflows.
    Delete(NamedArgs),
    /// Give a user a role in a project: viewer, operator, editor or admin.
    Grant {
        project: String,
        user: String,
        role: String,
        #[command(flatten)]
        conn: Connection,
    },
    /// Take a user out of a project.
    Remove {
        project: String,
        user: String,
        #[command(flatten)]
        conn: Connection,
    },
}

#[derive(clap::Args, Debug)]
pub struct AuditArgs {
    #[arg(long)]
    actor: Option<String>,
    #[arg(long)]
    project: Option<String>,
    /// An API operation, e.g. startWorkflow.
    #[arg(long)]
    action: Option<String>,
    /// At or after this time (RFC 3339).
    #[arg(long)]
    from: Option<String>,
    #[arg(long, default_value_t = 100)]
    limit: u32,
    #[arg(long, short = 'o', value_enum, default_value_t)]
    output: Output,
    #[command(flatten)]
    conn: Connection,
}

pub async fn user(cmd: UserCommand) -> anyhow::Result<i32> {
    match cmd {
        UserCommand::Create { name, admin, conn } => {
            let body = json!({ "name": name, "admin": admin });
            let _: Value = Api::new(&conn)?.post(&["users"], Body::json(&body)).await?;
            let what = if admin { "global admin" } else { "user" };
            print_out(format!(
                "{what} {name} created; give them a token: shoal token create NAME --user {name}\n"
            ))?;
        }
        UserCommand::List(ListArgs { output, conn }) => {
            let users: Vec<Value> = Api::new(&conn)?.get(&["users"], &[]).await?;
            return list_out(
                &users,
                output,
                &["name", "admin", "disabled", "created"],
                |u| {
                    vec![
                        cell(&u["name"]),
                        cell(&u["admin"]),
                        cell(&u["disabled"]),
                        time(&u["created_at"]),
                    ]
                },
            );
        }
        UserCommand::Disable(NamedArgs { name, conn }) => {
            let _: Value = Api::new(&conn)?
                .post(&["users", &name, "disable"], Body::json(&json!({})))
                .await?;
            print_out(format!("user {name} disabled: their tokens are refused\n"))?;
        }
        UserCommand::Enable(NamedArgs { name, conn }) => {
            let _: Value = Api::new(&conn)?
                .post(&["users", &name, "enable"], Body::json(&json!({})))
                .await?;
            print_out(format!("user {name} enabled\n"))?;
        }
    }
    Ok(0)
}

pub async fn token(cmd: TokenCommand) -> anyhow::Result<i32> {
    match cmd {
        TokenCommand::Create {
            name,
            user,
            expires_in_days,
            conn,
        } => {
            let body = json!({ "name": name, "user": user, "expires_in_days": expires_in_days });
            let made: Value = Api::new(&conn)?
                .post(&["tokens"], Body::json(&body))
                .await?;
            // The token alone on stdout, so `export SHOAL_TOKEN=$(shoal token create ci)` works.
            print_out(format!("{}\n", cell(&made["token"])))?;
            eprintln!(
                "token {} (id {}) of {}: shown this once; send it as SHOAL_TOKEN",
                cell(&made["name"]),
                cell(&made["id"]),
                cell(&made["user"])
            );
        }
        TokenCommand::List { user, output, conn } => {
            let query = filters([("user", user)]);
            let tokens: Vec<Value> = Api::new(&conn)?.get(&["tokens"], &query).await?;
            let headers = [
                "id",
                "user",
                "name",
                "created",
                "expires",
                "last used",
                "revoked",
            ];
            return list_out(&tokens, output, &headers, |t| {
                vec![
                    cell(&t["id"]),
                    cell(&t["user"]),
                    cell(&t["name"]),
                    time(&t["created_at"]),
                    time(&t["expires_at"]),
                    time(&t["last_used_at"]),
                    time(&t["revoked_at"]),
                ]
            });
        }
        TokenCommand::Revoke { id, conn } => {
            let _: Value = Api::new(&conn)?
                .delete(&["tokens", &id.to_string()])
                .await?;
            print_out(format!("token {id} revoked\n"))?;
        }
    }
    Ok(0)
}

pub async fn project(cmd: ProjectCommand) -> anyhow::Result<i32> {
    match cmd {
        ProjectCommand::Create {
            name,
            description,
            conn,
        } => {
            let body = json!({ "name": name, "description": description });
            let _: Value = Api::new(&conn)?
                .post(&["projects"], Body::json(&body))
                .await?;
            print_out(format!("project {name} created\n"))?;
        }
        ProjectCommand::List(ListArgs { output, conn }) => {
            let projects: Vec<Value> = Api::new(&conn)?.get(&["projects"], &[]).await?;
            let headers = ["name", "workflows", "your role", "description"];
            return list_out(&projects, output, &headers, |p| {
                vec![
                    cell(&p["name"]),
                    cell(&p["workflows"]),
                    cell(&p["role"]),
                    cell(&p["description"]),
                ]
            });
        }
        ProjectCommand::Show { name, output, conn } => {
            let project: Value = Api::new(&conn)?.get(&["projects", &name], &[]).await?;
            if output == Output::Json {
                print_out(serde_json::to_string_pretty(&project)? + "\n")?;
                return Ok(0);
            }
            let by = match project["created_by"].as_str() {
                Some("") | None => String::new(),
                Some(user) => format!(" by {user}"),
            };
            print_out(format!(
                "project {}: {} workflow(s), created {}{by}\n{}\n",
                cell(&project["name"]),
                cell(&project["workflows"]),
                time(&project["created_at"]),
                cell(&project["description"]),
            ))?;
            let members = project["members"].as_array().cloned().unwrap_or_default();
            return list_out(&members, Output::Table, &["member", "role"], |m| {
                vec![cell(&m["user"]), cell(&m["role"])]
            });
        }
        ProjectCommand::Delete(NamedArgs { name, conn }) => {
            Api::new(&conn)?
                .send(Method::DELETE, &["projects", &name], &[], None)
                .await?;
            print_out(format!("project {name} deleted\n"))?;
        }
        ProjectCommand::Grant {
            project,
            user,
            role,
            conn,
        } => {
            let body = Body::json(&json!({ "role": role }));
            let segments = ["projects", &project, "members", &user];
            Api::new(&conn)?
                .send(Method::PUT, &segments, &[], Some(body))
                .await?;
            print_out(format!("{user} is {role} of project {project}\n"))?;
        }
        ProjectCommand::Remove {
            project,
            user,
            conn,
        } => {
            let segments = ["projects", &project, "members", &user];
            Api::new(&conn)?
                .send(Method::DELETE, &segments, &[], None)
                .await?;
            print_out(format!("{user} removed from project {project}\n"))?;
        }
    }
    Ok(0)
}

pub async fn audit(args: AuditArgs) -> anyhow::Result<i32> {
    let mut query = filters([
        ("actor", args.actor),
        ("project", args.project),
        ("action", args.action),
        ("from", args.from),
    ]);
    query.push(("limit", args.limit.to_string()));
    let rows: Vec<Value> = Api::new(&args.conn)?.get(&["audit"], &query).await?;
    let headers = [
        "at", "actor", "action", "target", "object", "from", "result",
    ];
    list_out(&rows, args.output, &headers, |r| {
        vec![
            time(&r["at"]),
            cell(&r["actor"]),
            cell(&r["action"]),
            cell(&r["target"]),
            cell(&r["object"]),
            cell(&r["address"]),
            cell(&r["result"]),
        ]
    })
}
