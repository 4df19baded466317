//! A callback task's request: it hands an outside system a one-time URL on the api-server
//! (`POST /api/v1/callbacks/{token}`) that completes the task. The token is armed in the
//! store (as its hash) before the request leaves, and the request is marked sent once it
//! was answered as expected; a master that takes the task over sends again only if no
//! request was marked sent (its new token works as well as the first).
//!
//! What the task's message says of the request (its URL, a failure, the answer) passes
//! through its [`Mask`]: the project secrets expanded into it and the token are `***`.

use shoal_common::access::{random_hex, token_hash};
use shoal_common::mask::Mask;
use shoal_common::types::TaskState;
use shoal_store::{Holder, Store};
use std::time::Duration;
use tracing::warn;

const HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// Most of an unexpected answer's body kept in the task's message.
const BODY_EXCERPT: usize = 512;

/// A callback task's request, its texts expanded.
#[derive(Clone)]
pub(super) struct Request {
    pub token: String,
    pub url: String,
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub expected_status: Vec<u16>,
    /// Given to the outside system (also as `X-Shoal-Callback`).
    pub callback_url: String,
    /// The secrets expanded into the request, and the token.
    pub mask: Mask,
    /// The state the task ends in if the request fails (the runtime's decision).
    pub failed: TaskState,
}

impl Request {
    /// Where the request goes, as the task's message shows it.
    pub fn shown_url(&self) -> String {
        self.mask.message(&self.url)
    }
}

/// A fresh one-time token and the callback URL that carries it, on the api-server at `api`.
pub(super) fn new_token(api: &str) -> std::io::Result<(String, String)> {
    let token = random_hex(32)?;
    let url = format!("{}/api/v1/callbacks/{token}", api.trim_end_matches('/'));
    Ok((token, url))
}

/// Sends the request of callback task `id` in the background. Its failure ends the task
/// as failed (unless it was completed meanwhile: a fast outside system may call back
/// before it answers).
pub(super) fn send(store: Store, id: i64, request: Request) {
    tokio::spawn(async move {
        let hash = token_hash(&request.token);
        match store.arm_callback(id, &hash).await {
            Ok(true) => {}
            Ok(false) => return, // sent by the master that had the task before
            Err(error) => {
                let reason = format!("cannot record its callback token: {error}");
                return fail(&store, id, request.failed, &reason).await;
            }
        }
        match call(&request).await {
            Ok(()) => {
                if let Err(error) = store.callback_sent(&hash).await {
                    warn!(%error, task_instance_id = id, "cannot mark a callback request sent");
                }
            }
            Err(reason) => {
                let reason = request.mask.message(&reason);
                fail(&store, id, request.failed, &reason).await
            }
        }
    });
}

async fn call(r: &Request) -> Result<(), String> {
    let to = format!("callback request {} {}", r.method, r.shown_url());
    let method = reqwest::Method::from_bytes(r.method.as_bytes())
        .map_err(|_| format!("{to}: '{}' is not an HTTP method", r.method))?;
    let client = reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
        .build()
        .map_err(|e| format!("{to}: {}", e.without_url()))?;
    let mut req = client
        .request(method, &r.url)
        .header("X-Shoal-Callback", &r.callback_url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(r.body.clone());
    for (k, v) in &r.headers {
        req = req.header(k, v);
    }
    // The error without its URL: `to` shows it masked.
    let answer = req
        .send()
        .await
        .map_err(|e| format!("{to} failed: {}", e.without_url()))?;
    let status = answer.status();
    let ok = match r.expected_status.is_empty() {
        true => status.is_success(),
        false => r.expected_status.contains(&status.as_u16()),
    };
    if ok {
        return Ok(());
    }
    let body = answer.text().await.unwrap_or_default();
    let excerpt: String = body.chars().take(BODY_EXCERPT).collect();
    Err(format!("{to} answered {status}: {excerpt}"))
}

async fn fail(store: &Store, id: i64, state: TaskState, reason: &str) {
    let output = Default::default();
    if let Err(error) = store
        .end_waiting(id, state, &output, reason, Holder::Anyone)
        .await
    {
        warn!(%error, task_instance_id = id, reason, "cannot fail a callback task");
    }
}
