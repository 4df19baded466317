//! Task logs live on the worker that ran the attempt; the api-server asks it over gRPC.
//! The master keeps the end of each ended attempt's log (its last 256 KiB): a log kept
//! whole is served from there, and when the worker cannot answer (it is gone, or lost the
//! file) the kept end is served instead (`X-Shoal-Log-Source: store`).

use crate::Ctx;
use crate::channels::call;
use crate::error::{Error, ErrorBody, Result};
use crate::extract::{ApiPath, ApiQuery, path};
use crate::instances::find_task;
use axum::extract::State;
use axum::http::header::{CONTENT_TYPE, HeaderName};
use axum::response::IntoResponse;
use serde::Deserialize;
use shoal_common::proto::ReadLogRequest;
use shoal_common::proto::worker_client::WorkerClient;
use shoal_common::types::TaskType;
use shoal_store::{KeptLog, TaskInstanceRow};
use std::time::Duration;
use utoipa::IntoParams;

/// How long one call to a worker may take, connecting included.
const WORKER_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes asked for per `ReadLog` call.
const PAGE_BYTES: u32 = 1024 * 1024;
/// Bytes returned per HTTP answer; a longer log is read on with `?offset=`.
const MAX_LOG_BYTES: usize = 16 * 1024 * 1024;
/// Where the next unread byte of the log is; pass it back as `?offset=` to read on.
pub const NEXT_OFFSET_HEADER: HeaderName = HeaderName::from_static("x-shoal-log-next-offset");
/// `true` when the answer stopped at [`MAX_LOG_BYTES`] and the log goes on.
pub const MORE_HEADER: HeaderName = HeaderName::from_static("x-shoal-log-more");
/// `worker`, or `store` for the end of the log kept when the attempt ended.
pub const SOURCE_HEADER: HeaderName = HeaderName::from_static("x-shoal-log-source");

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct LogQuery {
    /// The byte to read from (default 0); pass back `X-Shoal-Log-Next-Offset` to read on.
    #[serde(default)]
    offset: u64,
}

/// `GET /task-instances/{id}/log[?offset=N]`: the attempt's log as `text/plain`.
#[utoipa::path(
    get,
    path = "/task-instances/{id}/log",
    operation_id = "getTaskLog",
    tag = "instances",
    params(path::Id, LogQuery),
    responses(
        (status = 200, description = "The log from `offset`, at most 16 MiB", body = String, content_type = "text/plain",
            headers(
                ("X-Shoal-Log-Next-Offset" = u64, description = "Where the next unread byte is"),
                ("X-Shoal-Log-More" = bool, description = "True when the answer stopped at its limit and the log goes on"),
                ("X-Shoal-Log-Source" = String, description = "`store` for an ended attempt's log kept whole, or when the worker could not answer and the kept end of the log (its last 256 KiB) is served; else `worker`"),
            )),
        (status = 404, description = "No such task instance, not started on a worker yet, or the worker has no log for it (and none was kept)", body = ErrorBody),
        (status = 502, description = "The worker is unreachable or failed, and no log was kept for the attempt (it has not ended)", body = ErrorBody),
    )
)]
pub async fn task_log(
    State(ctx): State<Ctx>,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<LogQuery>,
) -> Result<impl IntoResponse> {
    let task = find_task(&ctx, id).await?;
    // An external worker's log lines are kept in the store as they come.
    if task.task_type == TaskType::External.as_str() {
        let kept = ctx.store.kept_log(id).await?.unwrap_or(KeptLog {
            task_instance_id: id,
            content: Vec::new(),
            size: 0,
        });
        let more = !task.state.is_terminal();
        return Ok(kept_answer(&kept, q.offset, more, EXTERNAL_CUT));
    }
    let Some(addr) = task.worker.clone().filter(|w| !w.is_empty()) else {
        return Err(Error::NotFound(format!(
            "task instance {id} has not started on a worker yet (state {})",
            task.state
        )));
    };
    // An ended attempt's log that was kept whole is served from the store: no call to a
    // worker, and the whole log even where the worker's disk was full or it is gone.
    let ended = task.state.is_terminal();
    let kept = match ended {
        true => ctx.store.kept_log(id).await?,
        false => None,
    };
    if let Some(kept) = kept.as_ref().filter(|k| k.content.len() as u64 == k.size) {
        return Ok(kept_answer(kept, q.offset, false, WORKER_CUT));
    }
    match from_worker(&ctx, &task, &addr, q.offset).await {
        Err(e @ (Error::Peer { .. } | Error::NotFound(_))) => {
            // A running attempt's kept log is the part its worker shipped so far.
            let kept = match ended {
                true => kept,
                false => ctx.store.kept_log(id).await?,
            };
            kept.map(|k| kept_answer(&k, q.offset, false, WORKER_CUT))
                .ok_or(e)
        }
        answer => answer,
    }
}

type LogAnswer = ([(HeaderName, String); 4], String);

/// The log as the worker has it.
async fn from_worker(
    ctx: &Ctx,
    task: &TaskInstanceRow,
    addr: &str,
    from: u64,
) -> Result<LogAnswer> {
    let id = task.id;
    let worker_error = |reason: String| Error::Peer {
        action: format!("read from worker {addr}"),
        reason,
    };
    let mut client = WorkerClient::new(ctx.peers.get(addr).map_err(worker_error)?);

    let mut content = Vec::new();
    let mut offset = from;
    let more = loop {
        let req = ReadLogRequest {
            workflow_instance_id: task.workflow_instance_id,
            task_instance_id: id,
            attempt: task.attempt,
            offset,
            limit: PAGE_BYTES,
        };
        let page = match call(WORKER_TIMEOUT, client.read_log(req)).await {
            Ok(page) => page,
            Err(status) => return Err(worker_error(describe(&status))),
        };
        if !page.found {
            return Err(Error::NotFound(format!(
                "worker {addr} has no log for task instance {id} (attempt {})",
                task.attempt
            )));
        }
        let n = page.content.len();
        content.extend_from_slice(&page.content);
        offset += n as u64;
        if n < PAGE_BYTES as usize {
            break false;
        }
        if content.len() >= MAX_LOG_BYTES {
            break true;
        }
    };
    Ok(answer(&content, offset, more, "worker"))
}

/// The kept end of the log, from `from` (a byte of the whole log) on: what is before the
/// kept part is said in one line instead.
/// `more`: the log may grow; `cut` says where the part before the kept end is.
fn kept_answer(kept: &KeptLog, from: u64, more: bool, cut: &str) -> LogAnswer {
    let start = kept.size - kept.content.len() as u64;
    let mut content = Vec::new();
    if from < start {
        content.extend_from_slice(
            format!(
                "[the first {start} bytes of this log {cut}; the last {} follow]\n",
                kept.content.len()
            )
            .as_bytes(),
        );
    }
    let skip = from.saturating_sub(start).min(kept.content.len() as u64) as usize;
    content.extend_from_slice(&kept.content[skip..]);
    answer(&content, kept.size, more, "store")
}

/// Where the start of a worker's log that only its end was kept of is.
const WORKER_CUT: &str = "are only on its worker, which could not serve them";
/// Where the start of a long external task's log went.
const EXTERNAL_CUT: &str = "were dropped (the store keeps an external task's last 256 KiB)";

fn answer(content: &[u8], next: u64, more: bool, source: &str) -> LogAnswer {
    (
        [
            (CONTENT_TYPE, "text/plain; charset=utf-8".to_string()),
            (NEXT_OFFSET_HEADER, next.to_string()),
            (MORE_HEADER, more.to_string()),
            (SOURCE_HEADER, source.to_string()),
        ],
        String::from_utf8_lossy(content).into_owned(),
    )
}

/// A worker's gRPC failure in words; transport failures mean the worker is unreachable.
fn describe(status: &tonic::Status) -> String {
    match status.code() {
        tonic::Code::Unavailable => format!("worker is unreachable ({})", status.message()),
        tonic::Code::DeadlineExceeded | tonic::Code::Cancelled => {
            format!("worker did not answer within {}s", WORKER_TIMEOUT.as_secs())
        }
        code => format!("worker answered {code:?}: {}", status.message()),
    }
}
