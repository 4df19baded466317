//! Webhook triggers: `POST /hooks/{project}/{workflow}/{trigger}` starts a run of the
//! workflow from any JSON payload; `GET /projects/{project}/triggers` lists them and broker
//! triggers with their consumers' state ([`listing`]; [`ignored`] lists what those could
//! not use). A call
//! authenticates itself with the trigger's own credential and address allowlist ([`auth`]),
//! so the access guard lets it through without a user's token; once authenticated, it is
//! audited like any other mutation (unauthenticated refusals are not, as for the guard).
//!
//! An `async` call answers 202 as soon as a master has claimed the run's command, or after
//! [`CLAIM_WAIT`] with a null instance id (`GET /commands/{id}` tells later). A `sync` call
//! answers 200 when the run has ended, or 504 with its instance when the trigger's timeout
//! passes first; the run goes on either way.

pub(crate) mod auth;
pub(crate) mod ignored;
pub(crate) mod listing;
mod rate;

pub(crate) use rate::Rates;

use crate::Ctx;
use crate::access::audit;
use crate::commands::refuse_undefined;
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, Body};
use axum::Json;
use axum::extract::Query;
use axum::extract::{FromRequest, Request, State};
use axum::http::header::{ALLOW, AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use shoal_common::metrics::{self, TriggerOutcome};
use shoal_common::start::Params;
use shoal_common::trigger::{TriggerDef, TriggerMode};
use shoal_common::types::{CommandKind, WorkflowState};
use shoal_store::{AuditEntry, CallKey, NewCommand, RunProgress, StoredDefinition, TriggeredRun};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;
use utoipa::{IntoParams, ToSchema};

/// How long an async call waits for a master to claim its run, to answer with the instance.
const CLAIM_WAIT: Duration = Duration::from_secs(2);
/// How often a waiting call reads its run's state (one indexed row).
const POLL: Duration = Duration::from_millis(150);
/// The longest `Idempotency-Key` taken.
const MAX_KEY_LEN: usize = 255;

#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct HookPath {
    /// Project name.
    project: String,
    /// Workflow name.
    workflow: String,
    /// The trigger's name (its `name` in the workflow's `triggers`).
    trigger: String,
}

/// An `async` trigger's run was started.
#[derive(Serialize, ToSchema)]
pub struct TriggerStarted {
    /// The run; null when no master claimed its command within 2 s
    /// (`GET /commands/{command_id}` tells it later).
    #[schema(required = true)]
    pub workflow_instance_id: Option<i64>,
    pub command_id: i64,
}

/// A 200 answer.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum TriggerAnswer {
    Finished(TriggerFinished),
    Skipped(TriggerSkipped),
}

/// The call started nothing: its trigger's `when` did not match the payload.
#[derive(Serialize, ToSchema)]
pub struct TriggerSkipped {
    /// Always false.
    pub started: bool,
    /// Why: `filtered`.
    #[schema(example = "filtered")]
    pub reason: &'static str,
}

/// A `sync` trigger's run ended.
#[derive(Serialize, ToSchema)]
pub struct TriggerFinished {
    pub workflow_instance_id: i64,
    pub state: WorkflowState,
    /// The trigger's `outputs` that the run's succeeded tasks set (by name).
    pub outputs: BTreeMap<String, String>,
}

/// `POST /hooks/{project}/{workflow}/{trigger}`: starts a run of the workflow's latest
/// version, its parameters mapped from the JSON payload by the trigger's `params`.
/// `Idempotency-Key` makes a retried call return the run the first call started.
#[utoipa::path(
    post,
    path = "/hooks/{project}/{workflow}/{trigger}",
    operation_id = "callTrigger",
    tag = "workflows",
    params(
        HookPath,
        ("Idempotency-Key" = Option<String>, Header, description = "A call repeating the key (per trigger, with the same parameters) gets the first call's run instead of starting another"),
    ),
    security(("bearer" = []), ("basic" = []), ()),
    request_body(content = Option<Object>, description = "Any JSON; an empty body is `{}`. A GET's payload is its query parameters, as an object of strings"),
    responses(
        (status = 202, description = "`async`: the run was started", body = TriggerStarted),
        (status = 200, description = "`sync`: the run ended; or, any mode, the trigger's `when` did not match and nothing was started", body = TriggerAnswer),
        (status = 400, description = "The body is not JSON, lacks a value the trigger's `params` map (the message names the JSONPath and the param), or its `when` cannot be decided for it", body = ErrorBody),
        (status = 401, description = "The trigger's token or basic credentials are missing or wrong (with `WWW-Authenticate`)", body = ErrorBody),
        (status = 403, description = "The caller's address is not in the trigger's `allow_ips`", body = ErrorBody),
        (status = 404, description = "No such project, workflow or trigger", body = ErrorBody),
        (status = 405, description = "The trigger does not take this method (its `methods`, default POST; with `Allow`)", body = ErrorBody),
        (status = 409, description = "The `Idempotency-Key` was sent before with other parameters", body = ErrorBody),
        (status = 413, description = "The body is larger than the limit", body = ErrorBody),
        (status = 429, description = "The trigger's `rate` is used up (with `Retry-After`)", body = ErrorBody),
        (status = 503, description = "A secret the trigger's credential names cannot be read, or the server is shutting down (a started run goes on)", body = ErrorBody),
        (status = 504, description = "`sync`: the run did not end within the trigger's timeout; it goes on (`workflow_instance_id`)", body = ErrorBody),
    )
)]
pub async fn call(
    State(ctx): State<Ctx>,
    ApiPath((project, workflow, trigger)): ApiPath<(String, String, String)>,
    req: Request,
) -> Result<Response> {
    // One answer whether the project, the workflow or the trigger is missing: an
    // unauthenticated caller learns nothing of what exists.
    let def = ctx.store.get_definition(&project, &workflow, None).await?;
    let found = def.as_ref().and_then(|d| {
        let triggers = &d.definition.triggers;
        // A broker trigger is not called over HTTP, a form is submitted at /forms.
        triggers
            .iter()
            .find(|t| t.name == trigger && t.is_webhook())
    });
    let (Some(def), Some(t)) = (&def, found) else {
        return Err(Error::NotFound(format!(
            "no trigger '{project}/{workflow}/{trigger}': check the project, workflow and \
             trigger names (`shoal trigger list --project {project}`)"
        )));
    };
    let client = crate::client_address::request_client(&req, &ctx.trusted_proxies);
    auth::check_address(t, client)?;
    if let Some(rate) = t.rate {
        // Before the credential: a flood of guesses costs no hashing beyond the rate.
        ctx.rates
            .take(&format!("{project}/{workflow}/{trigger}"), rate)?;
    }
    if let Err(refused) =
        auth::check_credential(&ctx, &project, &workflow, t, req.headers()).await?
    {
        return Ok(refused.into_response());
    }
    let method = req.method().clone();
    if !t.methods().iter().any(|m| method == m.as_str()) {
        return Ok(wrong_method(t, &method));
    }
    let entry = AuditEntry {
        actor: format!("trigger {workflow}/{trigger}"),
        action: "callTrigger".into(),
        target: format!("{method} /api/v1/hooks/{project}/{workflow}/{trigger}"),
        project: Some(project.clone()),
        object: None,
        address: client.map_or_else(|| "unknown".into(), |ip| ip.to_string()),
    };
    let answer = async {
        match start(&ctx, def, t, req).await {
            Ok(response) => response,
            Err(e) => e.into_response(),
        }
    };
    Ok(audit(&ctx, entry, answer).await)
}

/// `GET` of a trigger whose `methods` list it: the payload is the query parameters, as
/// an object of strings; answered as a POST is.
#[utoipa::path(
    get,
    path = "/hooks/{project}/{workflow}/{trigger}",
    operation_id = "callTriggerGet",
    tag = "workflows",
    params(HookPath),
    security(("bearer" = []), ("basic" = []), ()),
    responses(
        (status = 202, description = "`async`: the run was started", body = TriggerStarted),
        (status = 200, description = "As for POST", body = TriggerAnswer),
        (status = 400, description = "As for POST", body = ErrorBody),
        (status = 401, description = "As for POST", body = ErrorBody),
        (status = 405, description = "The trigger does not take GET", body = ErrorBody),
        (status = 429, description = "The trigger's `rate` is used up", body = ErrorBody),
    )
)]
pub async fn call_get(
    state: State<Ctx>,
    names: ApiPath<(String, String, String)>,
    req: Request,
) -> Result<Response> {
    call(state, names, req).await
}

/// `PUT` of a trigger whose `methods` list it: as a POST.
#[utoipa::path(
    put,
    path = "/hooks/{project}/{workflow}/{trigger}",
    operation_id = "callTriggerPut",
    tag = "workflows",
    params(HookPath),
    security(("bearer" = []), ("basic" = []), ()),
    request_body(content = Option<Object>, description = "Any JSON; an empty body is `{}`"),
    responses(
        (status = 202, description = "`async`: the run was started", body = TriggerStarted),
        (status = 200, description = "As for POST", body = TriggerAnswer),
        (status = 400, description = "As for POST", body = ErrorBody),
        (status = 401, description = "As for POST", body = ErrorBody),
        (status = 405, description = "The trigger does not take PUT", body = ErrorBody),
        (status = 429, description = "The trigger's `rate` is used up", body = ErrorBody),
    )
)]
pub async fn call_put(
    state: State<Ctx>,
    names: ApiPath<(String, String, String)>,
    req: Request,
) -> Result<Response> {
    call(state, names, req).await
}

/// Maps the payload, writes the start command and answers as the trigger's mode says.
async fn start(
    ctx: &Ctx,
    def: &StoredDefinition,
    t: &TriggerDef,
    req: Request,
) -> Result<Response> {
    ctx.store.check_online(&def.project, &def.name).await?;
    let key = idempotency_key(req.headers())?;
    let counted = format!("{}/{}/{}", def.project, def.name, t.name);
    let count = |outcome| metrics::trigger_message(&counted, outcome);
    let headers = rule_headers(req.headers());
    let admitted = match payload(ctx, req).await {
        Ok(payload) => admit(def, t, &payload, &headers),
        Err(e) => Err(e),
    };
    let params = match admitted {
        Ok(Some(params)) => params,
        Ok(None) => {
            count(TriggerOutcome::Filtered);
            let answer = TriggerSkipped {
                started: false,
                reason: "filtered",
            };
            return Ok(Json(TriggerAnswer::Skipped(answer)).into_response());
        }
        Err(e) => {
            count(TriggerOutcome::Ignored);
            return Err(e);
        }
    };
    let cmd = start_command(def, params);
    let key = key.as_deref().map(|key| CallKey {
        trigger: &t.name,
        key,
    });
    let run = ctx.store.start_triggered(&cmd, key).await?;
    if run.replayed {
        count(TriggerOutcome::Duplicate);
    } else {
        count(TriggerOutcome::Started);
        metrics::API_COMMANDS_WRITTEN.inc();
    }
    tracing::info!(
        command_id = run.command_id,
        project = %cmd.project,
        workflow = %cmd.workflow,
        trigger = %t.name,
        replayed = run.replayed,
        "trigger called"
    );
    let follow = Follow {
        ctx,
        cmd: &cmd,
        key,
    };
    match t.mode {
        TriggerMode::Async => {
            let workflow_instance_id = follow.claimed(&run).await?;
            let answer = TriggerStarted {
                workflow_instance_id,
                command_id: run.command_id,
            };
            Ok((StatusCode::ACCEPTED, Json(answer)).into_response())
        }
        TriggerMode::Sync => {
            let ended =
                |p: &RunProgress| matches!(p, RunProgress::Instance(_, s) if s.is_terminal());
            match follow.until(&run, t.timeout(), ended).await? {
                RunProgress::Instance(id, state) if state.is_terminal() => {
                    let mut outputs = ctx.store.outputs_of(id).await?;
                    outputs.retain(|name, _| t.outputs.contains(name));
                    let answer = TriggerFinished {
                        workflow_instance_id: id,
                        state,
                        outputs,
                    };
                    Ok(Json(TriggerAnswer::Finished(answer)).into_response())
                }
                progress => Ok(timed_out(t, &run, &progress)),
            }
        }
    }
}

/// A call's payload: a GET's query parameters as an object of strings (a repeated name
/// keeps its last value), any other's JSON body (an empty one is `{}`).
async fn payload(ctx: &Ctx, req: Request) -> Result<Value> {
    if req.method() == Method::GET {
        let query = Query::<BTreeMap<String, String>>::try_from_uri(req.uri())
            .map_err(|e| Error::BadRequest(format!("unreadable query string: {e}")))?;
        return Ok(serde_json::json!(query.0));
    }
    let body = Body::from_request(req, ctx).await?;
    let payload = body.json_or_default::<Option<Value>>()?;
    Ok(payload.unwrap_or_else(|| Value::Object(Default::default())))
}

/// A call's start parameters, or None when the trigger's `when` filters it out.
fn admit(
    def: &StoredDefinition,
    t: &TriggerDef,
    payload: &Value,
    headers: &BTreeMap<String, String>,
) -> Result<Option<Params>> {
    if !t.matches(payload, headers).map_err(Error::BadRequest)? {
        return Ok(None);
    }
    let params: Params = t.map_params(payload).map_err(Error::BadRequest)?;
    refuse_undefined(def, &params)?;
    Ok(Some(params))
}

/// The headers a `when` sees: lower-case names, repeated ones joined by `, `, never the
/// credential a call carries.
fn rule_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut seen = BTreeMap::<String, String>::new();
    for (name, value) in headers {
        if [AUTHORIZATION, PROXY_AUTHORIZATION, COOKIE].contains(name) {
            continue;
        }
        let value = String::from_utf8_lossy(value.as_bytes());
        seen.entry(name.as_str().to_string())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    seen
}

/// The command that starts a run of the latest version `def` with `params`.
pub(crate) fn start_command(def: &StoredDefinition, params: Params) -> NewCommand {
    NewCommand {
        kind: CommandKind::Start,
        project: def.project.clone(),
        workflow: def.name.clone(),
        version: def.version,
        params,
        priority: None,
        workflow_instance_id: None,
        options: Default::default(),
        parent_task_id: None,
        schedule_time: None,
        due_at: None,
    }
}

/// The `Idempotency-Key` header, if the call sent one.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    match value.to_str() {
        Ok(key) if (1..=MAX_KEY_LEN).contains(&key.len()) => Ok(Some(key.to_string())),
        _ => Err(Error::BadRequest(format!(
            "Idempotency-Key must be 1 to {MAX_KEY_LEN} visible ASCII characters (e.g. a UUID)"
        ))),
    }
}

/// A call waiting for the run it started.
pub(crate) struct Follow<'a> {
    pub ctx: &'a Ctx,
    pub cmd: &'a NewCommand,
    pub key: Option<CallKey<'a>>,
}

impl Follow<'_> {
    /// The run once a master has claimed its command, waiting up to [`CLAIM_WAIT`];
    /// None after that.
    pub async fn claimed(&self, run: &TriggeredRun) -> Result<Option<i64>> {
        let progress = self.until(run, CLAIM_WAIT, |p| p != &RunProgress::Pending);
        Ok(match progress.await? {
            RunProgress::Instance(id, _) => Some(id),
            _ => None,
        })
    }

    /// Reads the run's progress until `done` holds or `within` has passed, and returns
    /// the last one read. A run whose command was rejected is an error.
    async fn until(
        &self,
        run: &TriggeredRun,
        within: Duration,
        done: impl Fn(&RunProgress) -> bool,
    ) -> Result<RunProgress> {
        let deadline = Instant::now() + within;
        let mut instance = run.workflow_instance_id;
        loop {
            let progress = self
                .ctx
                .store
                .run_progress(run.command_id, instance)
                .await?;
            match &progress {
                RunProgress::Rejected(why) => {
                    return Err(Error::Store(shoal_common::Error::Corrupt(format!(
                        "command {} of a trigger call could not start: {why}",
                        run.command_id
                    ))));
                }
                // A call repeating the key of a run that was deleted since: it has
                // nothing to follow, and starting another would not be a replay.
                RunProgress::Deleted(id) => {
                    return Err(Error::Conflict(format!(
                        "the run this call started, workflow instance {id}, was deleted{}; \
                         send a new Idempotency-Key to start another",
                        self.key
                            .map(|k| format!(" (Idempotency-Key '{}')", k.key))
                            .unwrap_or_default()
                    )));
                }
                RunProgress::Instance(id, _) if instance.is_none() => {
                    instance = Some(*id);
                    if let Some(key) = self.key {
                        let (project, workflow) = (&self.cmd.project, &self.cmd.workflow);
                        let store = &self.ctx.store;
                        store
                            .remember_triggered_instance(project, workflow, key, *id)
                            .await?;
                    }
                }
                _ => {}
            }
            let now = Instant::now();
            if done(&progress) || now >= deadline {
                return Ok(progress);
            }
            tokio::select! {
                () = tokio::time::sleep(POLL.min(deadline - now)) => {}
                () = self.ctx.shutdown.cancelled() => {
                    return Err(Error::Unavailable(format!(
                        "the api-server is shutting down; the run goes on (command {}{})",
                        run.command_id,
                        instance.map_or_else(String::new, |id| format!(", workflow instance {id}"))
                    )));
                }
            }
        }
    }
}

/// 405 naming the methods the trigger takes.
fn wrong_method(t: &TriggerDef, method: &Method) -> Response {
    let allowed: Vec<&str> = t.methods().iter().map(|m| m.as_str()).collect();
    let allowed = allowed.join(", ");
    let body = error_body(
        format!(
            "trigger '{}' takes {allowed}, not {method} (its `methods`)",
            t.name
        ),
        None,
    );
    let mut response = (StatusCode::METHOD_NOT_ALLOWED, Json(body)).into_response();
    if let Ok(value) = allowed.parse() {
        response.headers_mut().insert(ALLOW, value);
    }
    response
}

/// 504: the run did not end within the trigger's timeout.
fn timed_out(t: &TriggerDef, run: &TriggeredRun, progress: &RunProgress) -> Response {
    let timeout = shoal_common::duration::format(t.timeout());
    let (error, workflow_instance_id) = match progress {
        RunProgress::Instance(id, state) => (
            format!(
                "the run did not end within trigger '{}''s timeout of {timeout}; it goes on as \
                 workflow instance {id} ({state}): GET /api/v1/instances/{id}",
                t.name
            ),
            Some(*id),
        ),
        _ => (
            format!(
                "no master took the run within trigger '{}''s timeout of {timeout}; it starts \
                 when one does: GET /api/v1/commands/{}",
                t.name, run.command_id
            ),
            None,
        ),
    };
    let body = error_body(error, workflow_instance_id);
    (StatusCode::GATEWAY_TIMEOUT, Json(body)).into_response()
}

/// An error answer built here rather than by [`Error`]: one with a header or an instance.
fn error_body(error: String, workflow_instance_id: Option<i64>) -> ErrorBody {
    ErrorBody {
        error,
        line: None,
        column: None,
        task: None,
        workflow_instance_id,
    }
}
