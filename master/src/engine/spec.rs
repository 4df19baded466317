//! Turns a runtime's task into what a worker receives: parameters resolved, every text
//! field the task runs expanded; and what the master itself resolves from a task's values:
//! waits, logic branches ([`choices`]) and the runs a run starts ([`children`]).

use super::waits::{Dependency, Expiry, Item, Wait};
use super::{Context as EngineContext, Run, callback};
use crate::queue::QueuedTask;
use crate::runtime::Node;
use crate::secrets::{self, Secrets};
use chrono::NaiveDateTime;
use shoal_common::definition::{
    CALLBACK_URL, DEFAULT_CHECK_INTERVAL, DEFAULT_DEPENDENT_TIMEOUT, MAX_EVENT_KEY, TaskDef,
    is_identifier,
};
use shoal_common::mask::Mask;
use shoal_common::params::{
    Context, Guard, Lang, Outside, Source, builtins, environment, evaluate, expand, expand_guarded,
};
use shoal_common::proto::TaskSpec;
use shoal_common::schedule::local_time;
use shoal_common::secret_key::external_params_context;
use shoal_common::start::Params;
use shoal_common::types::{TaskType, now_ms};
use shoal_store::{EventWait, ExternalOffer};
use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

mod children;
mod choices;

pub(super) use children::{child_start, exception_run};
pub(super) use choices::{conditions_choice, foreach_items, loop_condition, switch_choice};

pub(super) fn build(
    run: &Run,
    node: Node,
    id: i64,
    attempt: i32,
    engine: &EngineContext,
) -> Result<QueuedTask, String> {
    let def = &run.rt.definition().tasks[node];
    let (params, mut outside, schedule_time) = task_values(run, node, id);
    let revealed = reveal(&engine.secrets, &run.project, def)?;
    let all = with_secrets(&params, &revealed);
    for (name, _) in &revealed.named {
        outside.insert(format!("secret.{name}"), Source::Secret);
    }
    let ctx = Context {
        params: &all,
        schedule_time,
    };
    let (environment, env_names) = task_environment(&all, &outside, &ctx);
    let guard = |lang| Guard {
        lang,
        outside: &outside,
        env: &env_names,
    };
    let expand = |text: &mut String, lang| -> Result<(), String> {
        *text = expand_guarded(text, &ctx, &guard(lang)).map_err(|e| {
            revealed
                .mask()
                .message(&format!("task '{}': {e}", def.name))
        })?;
        Ok(())
    };
    let code = match def.task_type.parse() {
        Ok(TaskType::Shell) => Lang::Shell,
        Ok(TaskType::Python) => Lang::Python,
        _ => Lang::Text,
    };
    let mut task = def.clone();
    for text in [task.command.as_mut(), task.script.as_mut()]
        .into_iter()
        .flatten()
    {
        expand(text, code)?;
    }
    if let Some(http) = task.http.as_mut() {
        expand(&mut http.url, Lang::Text)?;
        for v in http.headers.values_mut().chain(http.body.as_mut()) {
            expand(v, Lang::Text)?;
        }
    }
    if let Some(sql) = task.sql.as_mut() {
        expand(&mut sql.query, Lang::Sql)?;
    }
    // Each field is one argument of the process the worker starts, never read by a shell.
    if let Some(spark) = task.spark.as_mut() {
        for text in spark.texts_mut() {
            expand(text, Lang::Text)?;
        }
    }
    if let Some(notebook) = task.notebook.as_mut() {
        // The task's own params reach the notebook too; its `parameters` win.
        for name in def.params.keys().filter(|k| is_identifier(k)) {
            let value = notebook.parameters.entry(name.clone());
            value.or_insert_with(|| format!("${{{name}}}"));
        }
        for text in notebook.texts_mut() {
            expand(text, Lang::Text)?;
        }
    }
    // A container's `sh -c` script is code, as a shell task's is; the worker gives the
    // container the task's environment its references read.
    let fields = task.container.as_mut().map(|c| c.texts_mut());
    for (text, lang) in fields.into_iter().flatten() {
        expand(text, lang)?;
    }
    if let Some(k8s) = task.kubernetes.as_mut() {
        for (text, lang) in k8s.texts_mut() {
            expand(text, lang)?;
        }
        k8s.token = revealed.kubernetes_token.clone();
    }
    // A message's body and headers are data: a value lands in them as it is.
    let publish = task.publish.as_mut().map(|p| p.texts_mut());
    for text in publish.into_iter().flatten() {
        expand(text, Lang::Text)?;
    }
    let definition_json = serde_json::to_string(&task).map_err(|e| e.to_string())?;
    let (environment_name, lines) = task_environment_config(run, def, engine)?;
    Ok(QueuedTask {
        spec: TaskSpec {
            task_instance_id: id,
            workflow_instance_id: run.instance_id,
            attempt,
            name: def.name.clone(),
            task_type: def.task_type.clone(),
            definition_json,
            params: environment.into_iter().collect(),
            master_addr: engine.master_addr.clone(),
            owner_epoch: run.epoch,
            tenant: run.rt.definition().tenant.clone().unwrap_or_default(),
            masked: revealed.masked(),
            datasources: revealed.datasources,
            project: run.project.clone(),
            environment_name,
            environment: lines,
        },
        queued_at: std::time::Instant::now(),
        group: def.worker_group.clone(),
        instance_priority: run.priority,
        task_priority: def.priority,
    })
}

/// The name and shell lines of the environment a shell or python task runs in (see
/// [`shoal_common::definition::WorkflowDef::environment_of`]), as set now: sent as set,
/// never expanded. One the project lacks fails the task, saying how to set it.
fn task_environment_config(
    run: &Run,
    def: &TaskDef,
    engine: &EngineContext,
) -> Result<(String, String), String> {
    let Some(name) = run.rt.definition().environment_of(def, &run.options) else {
        return Ok(Default::default());
    };
    match engine.environments.get(&run.project, name) {
        Some(config) => Ok((name.to_string(), config.to_string())),
        None => Err(format!(
            "task '{}': project '{}' has no environment '{name}'; set it with `shoal env set {name} -f env.sh --project {}`",
            def.name, run.project, run.project
        )),
    }
}

/// `${secret.NAME}` expands like a parameter but is not one: it joins only the expansion
/// (and the task's environment, as `SHOAL_SECRET_NAME`), never another task's parameters.
fn with_secrets<'a>(params: &'a Params, revealed: &Revealed) -> Cow<'a, Params> {
    if revealed.named.is_empty() {
        return Cow::Borrowed(params);
    }
    let named = revealed.named.iter();
    let mut all = params.clone();
    all.extend(named.map(|(k, v)| (format!("secret.{k}"), v.clone())));
    Cow::Owned(all)
}

/// A callback task's request: its texts expanded, `${callback.url}` a fresh one-time URL
/// on the api-server at `api`.
pub(super) fn callback_request(
    run: &Run,
    node: Node,
    id: i64,
    secrets: &Secrets,
    api: Option<&str>,
) -> Result<callback::Request, String> {
    let def = &run.rt.definition().tasks[node];
    let Some(cb) = &def.callback else {
        return Err(format!("task '{}' has no callback", def.name));
    };
    let Some(api) = api else {
        return Err(format!(
            "task '{}': a callback task needs the api-server's URL the outside system calls back: start the master with --api-url http://HOST:PORT",
            def.name
        ));
    };
    let (token, callback_url) = callback::new_token(api)
        .map_err(|e| format!("task '{}': no callback token: {e}", def.name))?;
    let (params, schedule_time) = task_params(run, node, id);
    let revealed = reveal(secrets, &run.project, def)?;
    let mut all = with_secrets(&params, &revealed).into_owned();
    all.insert(CALLBACK_URL.to_string(), callback_url.clone());
    let ctx = Context {
        params: &all,
        schedule_time,
    };
    let mask = Mask::new(&[revealed.masked(), vec![token.clone()]].concat());
    let expand = |text: &str| {
        expand(text, &ctx).map_err(|e| mask.message(&format!("task '{}': {e}", def.name)))
    };
    let body = match &cb.body {
        Some(body) => expand(body)?,
        None => serde_json::json!({
            "callback_url": callback_url,
            "task_instance_id": id,
            "workflow_instance_id": run.instance_id,
        })
        .to_string(),
    };
    let headers = cb.headers.iter().map(|(k, v)| Ok((k.clone(), expand(v)?)));
    Ok(callback::Request {
        token,
        url: expand(&cb.url)?,
        method: cb.method.clone(),
        headers: headers.collect::<Result<_, String>>()?,
        body,
        expected_status: cb.expected_status.clone(),
        callback_url,
        mask,
        failed: run.rt.callback_failure(),
    })
}

/// The wait of a wait, callback or external task that started waiting at `started_ms`:
/// its timeout, if any, counts from then, on whichever master drives it.
pub(super) fn signal(run: &Run, node: Node, started_ms: i64) -> Wait {
    let expiry = run.rt.wait_expiry(node).map(|e| Expiry {
        at_ms: started_ms + e.after.as_millis() as i64,
        state: e.state,
        message: e.message,
    });
    let def = &run.rt.definition().tasks[node];
    let leased = def.kind() == TaskType::External;
    let evented = def.event.is_some();
    Wait::Signal {
        expiry,
        leased,
        evented,
    }
}

/// What a wait task for an event waits for: its event, and its key expanded from its
/// parameters (secrets are refused in a key at apply).
pub(super) fn event_wait(run: &Run, node: Node, id: i64) -> Result<Option<EventWait>, String> {
    let def = &run.rt.definition().tasks[node];
    let (Some(event), Some(key)) = (&def.event, &def.key) else {
        return Ok(None);
    };
    let (params, schedule_time) = task_params(run, node, id);
    let ctx = Context {
        params: &params,
        schedule_time,
    };
    let key = expand(key, &ctx).map_err(|e| format!("task '{}': key: {e}", def.name))?;
    if key.is_empty() || key.len() > MAX_EVENT_KEY {
        return Err(format!(
            "task '{}': key '{key}' is {}: an event's key has 1 to {MAX_EVENT_KEY} bytes",
            def.name,
            if key.is_empty() { "empty" } else { "too long" },
        ));
    }
    Ok(Some(EventWait {
        task_instance_id: id,
        workflow_instance_id: run.instance_id,
        project: run.project.clone(),
        event: event.clone(),
        key,
    }))
}

/// An external task's offer: its params expanded as a shell command would be (secrets
/// included, so its worker needs no second call), sealed with the secret key when they
/// hold a secret.
pub(super) fn external_offer(
    run: &Run,
    node: Node,
    id: i64,
    secrets: &Secrets,
) -> Result<ExternalOffer, String> {
    let def = &run.rt.definition().tasks[node];
    let Some(queue) = def.queue.clone() else {
        return Err(format!("task '{}' has no queue", def.name));
    };
    let (params, schedule_time) = task_params(run, node, id);
    let revealed = reveal(secrets, &run.project, def)?;
    let all = with_secrets(&params, &revealed);
    let ctx = Context {
        params: &all,
        schedule_time,
    };
    let mask = revealed.mask();
    let mut given = serde_json::Map::new();
    for (k, v) in &def.params {
        let v = expand(v, &ctx).map_err(|e| mask.message(&format!("task '{}': {e}", def.name)))?;
        given.insert(k.clone(), v.into());
    }
    let json = serde_json::Value::Object(given).to_string();
    let sealed = !revealed.named.is_empty();
    let params = match sealed {
        true => secrets.seal(&external_params_context(id), &json)?,
        false => json,
    };
    Ok(ExternalOffer {
        task_instance_id: id,
        workflow_instance_id: run.instance_id,
        project: run.project.clone(),
        queue,
        params,
        sealed,
        lease_ms: def.lease().as_millis() as i64,
    })
}

/// The project secrets a task uses.
#[derive(Default)]
struct Revealed {
    /// Named as `${secret.NAME}` in its text.
    named: Vec<(String, String)>,
    /// A sql task's datasource that is a secret of the project (name -> URL).
    datasources: HashMap<String, String>,
    /// A kubernetes task's API token (its `token_secret`).
    kubernetes_token: Option<String>,
}

impl Revealed {
    fn masked(&self) -> Vec<String> {
        let named = self.named.iter().map(|(_, v)| v);
        let token = self.kubernetes_token.iter();
        named
            .chain(self.datasources.values())
            .chain(token)
            .cloned()
            .collect()
    }

    /// What hides them in a message the master writes (an expansion that failed on one).
    fn mask(&self) -> Mask {
        Mask::new(&self.masked())
    }
}

/// Opens the secrets `def` uses. A `${secret.NAME}` the project lacks, or this master
/// cannot open, fails the task with the reason; a sql datasource that is not a secret is
/// left to the worker's `--datasource`.
fn reveal(secrets: &Secrets, project: &str, def: &TaskDef) -> Result<Revealed, String> {
    let mut revealed = Revealed::default();
    for name in def.texts().flat_map(secrets::referenced) {
        if revealed.named.iter().any(|(n, _)| n == name) {
            continue;
        }
        let value = match secrets.get(project, name) {
            Some(opened) => opened.map_err(|e| format!("task '{}': {e}", def.name))?,
            None => {
                return Err(format!(
                    "task '{}': project '{project}' has no secret '{name}'; set it with `shoal secret set {name} --project {project}`",
                    def.name
                ));
            }
        };
        revealed.named.push((name.to_string(), value));
    }
    if let Some(sql) = &def.sql
        && secrets.any(project)
        && let Some(url) = secrets.get(project, &sql.datasource)
    {
        let url = url.map_err(|e| format!("task '{}': {e}", def.name))?;
        revealed.datasources.insert(sql.datasource.clone(), url);
    }
    if let Some(name) = def
        .kubernetes
        .as_ref()
        .and_then(|k| k.token_secret.as_ref())
    {
        let Some(token) = secrets.get(project, name) else {
            return Err(format!(
                "task '{}': project '{project}' has no secret '{name}' (kubernetes token_secret)",
                def.name
            ));
        };
        let token = token.map_err(|e| format!("task '{}': {e}", def.name))?;
        revealed.kubernetes_token = Some(token);
    }
    Ok(revealed)
}

/// The parameters a task sees, and the schedule time its time expressions use: the run's
/// schedule time on the wall clock of its schedule's zone (manual runs are "scheduled" at
/// their start, in UTC).
fn task_params(run: &Run, node: Node, id: i64) -> (Params, NaiveDateTime) {
    let (params, _, schedule_time) = task_values(run, node, id);
    (params, schedule_time)
}

/// [`task_params`], and which of them come from outside the definition.
fn task_values(run: &Run, node: Node, id: i64) -> (Params, Outside, NaiveDateTime) {
    let schedule_time = local_time(run.stands_for(), run.options.timezone.as_deref());
    let builtins = builtins(run.instance_id, id, schedule_time);
    let (params, outside) = run.rt.task_values(node, &run.start_params, &builtins);
    (params, outside, schedule_time)
}

/// The environment variables a task gets its values in (see [`environment`]), each value
/// as `${name}` stands for it; and each parameter's own variable. A value whose time
/// expression is bad is exported as written: a task that uses it fails with the reason.
fn task_environment(
    values: &Params,
    outside: &Outside,
    ctx: &Context,
) -> (Params, std::collections::BTreeMap<String, String>) {
    let evaluated = values
        .iter()
        .map(|(k, v)| (k.clone(), evaluate(v, k, ctx).unwrap_or_else(|_| v.clone())))
        .collect();
    environment(&evaluated, outside)
}

/// What a dependent task recorded at `since_ms` waits for: its items' date cycles resolved
/// against the instant the run stands for, in the run's zone (UTC for manual runs without
/// one); its timeout counts from `since_ms`.
pub(super) fn dependency(run: &Run, node: Node, since_ms: i64) -> Wait {
    let def = &run.rt.definition().tasks[node];
    let spec = def.dependent.clone().unwrap_or_default();
    let timezone = run.options.timezone.as_deref();
    let at = run.stands_for();
    let groups = spec
        .resolved_groups()
        .into_iter()
        .map(|g| {
            let items = g
                .items
                .into_iter()
                .map(|i| Item {
                    project: i.project.unwrap_or_else(|| run.project.clone()),
                    workflow: i.workflow,
                    task: i.task,
                    date: i.date,
                    intervals: i.date.intervals(at, timezone),
                    pass_outputs: i.pass_outputs,
                })
                .collect();
            (g.relation, items)
        })
        .collect();
    let timeout = spec.timeout.unwrap_or(DEFAULT_DEPENDENT_TIMEOUT);
    let left = (since_ms + timeout.as_millis() as i64 - now_ms()).max(0);
    let on = Dependency {
        relation: spec.relation,
        groups,
        on_failure: spec.on_failure,
        deadline: tokio::time::Instant::now() + Duration::from_millis(left as u64),
        every: spec.check_interval.unwrap_or(DEFAULT_CHECK_INTERVAL),
    };
    Wait::Dependent {
        on: std::sync::Arc::new(on),
        next_check: tokio::time::Instant::now(),
        shown: None,
    }
}
