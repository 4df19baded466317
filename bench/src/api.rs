//! The one HTTP client the bench uses, the few response shapes it reads, and the bounded
//! waits for commands and instances.

use anyhow::{Context, Result, bail};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The project every bench workflow is applied to.
pub const PROJECT: &str = "bench";

/// Workflow states after which an instance never changes again.
const TERMINAL: &[&str] = &["success", "failure", "stopped", "paused"];

#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
}

/// An instance as `GET /instances` lists it (and `GET /instances/{id}` with `tasks`).
#[derive(Debug, Deserialize)]
pub struct Instance {
    pub id: i64,
    pub state: String,
    /// When the command was written (the instance inherits it).
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub tasks: Vec<Task>,
}

#[derive(Debug, Deserialize)]
pub struct Task {
    pub name: String,
    pub started_at: Option<DateTime<Utc>>,
}

impl Instance {
    fn is_terminal(&self) -> bool {
        TERMINAL.contains(&self.state.as_str())
    }

    /// `ended_at - started_at`, for an instance that finished.
    pub fn run_time(&self) -> Result<Duration> {
        match (self.started_at, self.ended_at) {
            (Some(s), Some(e)) => Ok((e - s).to_std().unwrap_or_default()),
            _ => bail!("instance {} has no started_at/ended_at", self.id),
        }
    }
}

#[derive(Deserialize)]
struct CommandStatus {
    status: String,
    workflow_instance_id: Option<i64>,
    error: Option<String>,
}

/// The admin token (SHOAL_TOKEN) of the servers the bench starts; a standalone without
/// auth ignores it.
pub const TOKEN: &str = "bench-admin-token";

impl Api {
    pub fn new(base: &str) -> Result<Api> {
        let mut headers = reqwest::header::HeaderMap::new();
        let bearer = format!("Bearer {TOKEN}");
        headers.insert(reqwest::header::AUTHORIZATION, bearer.parse()?);
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .default_headers(headers)
            .build()?;
        Ok(Api {
            http,
            base: format!("{}/api/v1", base.trim_end_matches('/')),
        })
    }

    async fn call<T: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> Result<T> {
        let resp = req.send().await?;
        let status = resp.status();
        let body = resp.text().await?;
        if !status.is_success() {
            bail!("HTTP {status}: {body}");
        }
        serde_json::from_str(&body).with_context(|| format!("unexpected response: {body:.200}"))
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let url = format!("{}{path}", self.base);
        self.call(self.http.get(&url))
            .await
            .with_context(|| format!("GET {url}"))
    }

    pub async fn post<T: DeserializeOwned>(&self, path: &str, body: &Value) -> Result<T> {
        let url = format!("{}{path}", self.base);
        let req = self.http.post(&url).json(body);
        self.call(req).await.with_context(|| format!("POST {url}"))
    }

    /// How many instances match `query` (the listing's `X-Total-Count`).
    pub async fn count(&self, query: &str) -> Result<u64> {
        let url = format!("{}/instances?project={PROJECT}&limit=1&{query}", self.base);
        let resp = self.http.get(&url).send().await?;
        let total = resp
            .headers()
            .get("x-total-count")
            .and_then(|v| v.to_str().ok()?.parse().ok());
        total.with_context(|| format!("GET {url} answered without X-Total-Count"))
    }

    /// Applies a definition (a JSON object with `name` and `tasks`) to the bench project.
    pub async fn apply(&self, def: &Value) -> Result<()> {
        self.post::<Value>(&format!("/projects/{PROJECT}/workflows"), def)
            .await?;
        Ok(())
    }

    /// Starts the latest version of `workflow`; returns the command id.
    pub async fn start(&self, workflow: &str) -> Result<i64> {
        let path = format!("/projects/{PROJECT}/workflows/{workflow}/start");
        let answer: Value = self.post(&path, &json!({ "params": {} })).await?;
        answer["command_id"]
            .as_i64()
            .context("start answered without command_id")
    }

    /// Waits until a master turned the command into an instance; returns its id.
    pub async fn wait_command(&self, command_id: i64, deadline: Instant) -> Result<i64> {
        let mut poll = Poll::new();
        loop {
            let c: CommandStatus = self.get(&format!("/commands/{command_id}")).await?;
            match (c.status.as_str(), c.workflow_instance_id) {
                ("done", Some(id)) => return Ok(id),
                ("error", _) => bail!(
                    "command {command_id} failed: {}",
                    c.error.unwrap_or_default()
                ),
                _ if Instant::now() >= deadline => {
                    bail!("timed out: command {command_id} is still {}", c.status)
                }
                _ => poll.wait().await,
            }
        }
    }

    /// Waits until instance `id` finished successfully; returns it with its tasks.
    pub async fn wait_instance(&self, id: i64, deadline: Instant) -> Result<Instance> {
        let mut poll = Poll::new();
        loop {
            let inst: Instance = self.get(&format!("/instances/{id}")).await?;
            if inst.is_terminal() || Instant::now() >= deadline {
                return succeeded(inst);
            }
            poll.wait().await;
        }
    }

    /// Waits until `n` instances of `workflow` exist and all finished successfully.
    /// Polls the summary list, which stays cheap however many tasks the instances have.
    pub async fn wait_workflow(
        &self,
        workflow: &str,
        n: usize,
        deadline: Instant,
    ) -> Result<Vec<Instance>> {
        let path = format!("/instances?project={PROJECT}&workflow={workflow}&limit={n}");
        let mut poll = Poll::new();
        loop {
            let list: Vec<Instance> = self.get(&path).await?;
            let done = list.len() == n && list.iter().all(Instance::is_terminal);
            if done || Instant::now() >= deadline {
                if list.len() < n {
                    bail!(
                        "timed out: only {} of {n} instances of {workflow} exist",
                        list.len()
                    );
                }
                return list.into_iter().map(succeeded).collect();
            }
            poll.wait().await;
        }
    }
}

/// The instance if it succeeded, otherwise an error naming it and its state.
fn succeeded(inst: Instance) -> Result<Instance> {
    match inst.state.as_str() {
        "success" => Ok(inst),
        s if TERMINAL.contains(&s) => bail!("instance {} ended in state {s}", inst.id),
        s => bail!("timed out: instance {} is still {s}", inst.id),
    }
}

/// Poll interval that starts short (quick instances are seen quickly) and backs off to
/// 250 ms (long ones are not hammered). The figures come from server timestamps, so the
/// interval only affects the wall time of a run.
struct Poll(Duration);

impl Poll {
    fn new() -> Poll {
        Poll(Duration::from_millis(5))
    }

    async fn wait(&mut self) {
        tokio::time::sleep(self.0).await;
        self.0 = (self.0 * 2).min(Duration::from_millis(250));
    }
}
