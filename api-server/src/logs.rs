//! Task logs live on the worker that ran the attempt; the api-server asks it over gRPC.

use crate::Ctx;
use crate::channels::call;
use crate::error::{Error, Result};
use crate::extract::{ApiPath, ApiQuery};
use crate::instances::find_task;
use axum::extract::State;
use axum::http::header::{CONTENT_TYPE, HeaderName};
use axum::response::IntoResponse;
use serde::Deserialize;
use shoal_common::proto::ReadLogRequest;
use shoal_common::proto::worker_client::WorkerClient;
use std::time::Duration;

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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogQuery {
    #[serde(default)]
    offset: u64,
}

/// `GET /task-instances/{id}/log[?offset=N]`: the attempt's log as `text/plain`.
pub async fn task_log(
    State(ctx): State<Ctx>,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<LogQuery>,
) -> Result<impl IntoResponse> {
    let task = find_task(&ctx, id).await?;
    let Some(addr) = task.worker.filter(|w| !w.is_empty()) else {
        return Err(Error::NotFound(format!(
            "task instance {id} has not started on a worker yet (state {})",
            task.state
        )));
    };
    let worker_error = |reason: String| Error::Peer {
        action: format!("read from worker {addr}"),
        reason,
    };
    let mut client = WorkerClient::new(ctx.peers.get(&addr).map_err(worker_error)?);

    let mut content = Vec::new();
    let mut offset = q.offset;
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
    let text = String::from_utf8_lossy(&content).into_owned();
    Ok((
        [
            (CONTENT_TYPE, "text/plain; charset=utf-8".to_string()),
            (NEXT_OFFSET_HEADER, offset.to_string()),
            (MORE_HEADER, more.to_string()),
        ],
        text,
    ))
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
