//! A pod's logs into the task log: every container's, the init containers one after the
//! other first (as they run), then the others at once (sidecar init containers among
//! them). With more than one container each line is prefixed `[name] `; `${setValue(k=v)}`
//! lines are read from any.
//!
//! Each container's log is followed with `timestamps=true`. A stream that ends while its
//! container still runs (an API server restart, an idle timeout, a broken connection) is
//! opened again with `sinceTime` set to the last line's timestamp, after a backoff that
//! doubles up to [`MAX_BACKOFF`]; lines at or before that time which were written already
//! are skipped, so none is lost or doubled. Once the container ended, its log is read once
//! more from there to its end. A stream is given up on only when the pod is gone (or the API
//! server stays unreachable for [`UNREACHABLE`]).

use super::super::set_value::OutputScanner;
use super::super::task_log::TaskLog;
use super::{Api, chain, pod_name_of, statuses, waiting_stuck};
use reqwest::Method;
use serde_json::Value;
use shoal_common::mask::MaskStream;
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The first wait before a stream is opened again; it doubles up to [`MAX_BACKOFF`], and
/// starts again once a stream brought new lines.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long the API server may not answer while a log is followed before the task fails.
const UNREACHABLE: Duration = Duration::from_secs(600);

/// The containers of a pod spec whose logs are streamed: the init containers that run
/// one after the other, then the others, which run together.
pub(super) fn containers(pod: &Value) -> (Vec<String>, Vec<String>) {
    let names = |list: &Value, sidecar: bool| -> Vec<String> {
        let list = list.as_array().map(Vec::as_slice).unwrap_or_default();
        (list.iter())
            .filter(|c| (c["restartPolicy"].as_str() == Some("Always")) == sidecar)
            .filter_map(|c| c["name"].as_str().map(str::to_string))
            .collect()
    };
    let spec = &pod["spec"];
    let mut together = names(&spec["initContainers"], true);
    together.extend(names(&spec["containers"], false));
    (names(&spec["initContainers"], false), together)
}

/// Streams the logs of `pod`'s containers into `log` until each container ended; the
/// output parameters its lines set, and whether some were dropped for size.
pub(super) async fn stream(
    api: &Api,
    ns: &str,
    pod: &Value,
    log: &TaskLog,
) -> Result<(HashMap<String, String>, bool), String> {
    let pod_name = pod_name_of(pod);
    let (init, together) = containers(pod);
    let prefixed = init.len() + together.len() > 1;
    let named = |names: &[String]| {
        let names: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
        names.join(", ")
    };
    let said = match (init.as_slice(), together.as_slice()) {
        ([], [one]) => format!("the log of container '{one}'"),
        ([], _) => format!("the logs of containers {}", named(&together)),
        (_, _) => format!(
            "the logs of init containers {}, then of containers {}",
            named(&init),
            named(&together)
        ),
    };
    log.note(&format!("pod {pod_name}: streaming {said}"));
    let mut out = Out {
        log,
        scanner: OutputScanner::default(),
    };
    for name in &init {
        out.group(api, ns, pod_name, std::slice::from_ref(name), prefixed)
            .await?;
    }
    out.group(api, ns, pod_name, &together, prefixed).await?;
    Ok(out.scanner.finish())
}

/// Where the lines of every container go.
struct Out<'a> {
    log: &'a TaskLog,
    scanner: OutputScanner,
}

/// What a container's follower reports.
enum Report {
    /// Log text, in whole lines but for the very end of the log.
    Text(usize, Vec<u8>),
    /// A note for the task log.
    Note(String),
    Done(usize, Result<(), String>),
}

impl Out<'_> {
    /// Streams the logs of containers that run together, until each ended.
    async fn group(
        &mut self,
        api: &Api,
        ns: &str,
        pod: &str,
        names: &[String],
        prefixed: bool,
    ) -> Result<(), String> {
        let (tx, mut rx) = mpsc::channel(64);
        // Dropped on an error or a kill: the followers stop with it.
        let mut followers = JoinSet::new();
        let mut writers = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            let follower = Follower {
                api: api.clone(),
                path: format!("/api/v1/namespaces/{ns}/pods/{pod}"),
                pod: pod.to_string(),
                container: name.clone(),
            };
            let tx = tx.clone();
            followers.spawn(async move {
                let end = follower.run(i, &tx).await;
                let _ = tx.send(Report::Done(i, end)).await;
            });
            writers.push(Some(Writer {
                prefix: prefixed.then(|| format!("[{name}] ").into_bytes()),
                mask: Some(self.log.mask().stream()),
                line: Vec::new(),
            }));
        }
        drop(tx);
        let mut left = names.len();
        while left > 0 {
            match rx.recv().await {
                Some(Report::Text(i, text)) => {
                    if let Some(w) = writers[i].as_mut() {
                        w.text(&text, self);
                    }
                }
                Some(Report::Note(note)) => self.log.note(&note),
                Some(Report::Done(i, end)) => {
                    if let Some(w) = writers[i].take() {
                        w.finish(self);
                    }
                    end?;
                    left -= 1;
                }
                None => return Err("a container's log follower stopped".into()),
            }
        }
        Ok(())
    }

    fn line(&mut self, prefix: Option<&[u8]>, line: &[u8]) {
        self.scanner.feed(line);
        match prefix {
            Some(p) => self.log.append(&[p, line].concat()),
            None => self.log.append(line),
        }
    }
}

/// One container's log on its way to the task log: masked, and cut into lines to prefix.
struct Writer {
    prefix: Option<Vec<u8>>,
    /// None once finished.
    mask: Option<MaskStream>,
    /// The masked start of a line not ended yet.
    line: Vec<u8>,
}

impl Writer {
    fn text(&mut self, text: &[u8], out: &mut Out) {
        if let Some(mask) = self.mask.as_mut() {
            let masked = mask.feed(text);
            self.lines(&masked, out);
        }
    }

    fn lines(&mut self, mut masked: &[u8], out: &mut Out) {
        while let Some(i) = masked.iter().position(|b| *b == b'\n') {
            self.line.extend_from_slice(&masked[..=i]);
            out.line(self.prefix.as_deref(), &self.line);
            self.line.clear();
            masked = &masked[i + 1..];
        }
        self.line.extend_from_slice(masked);
    }

    /// The end of the log: a last line without a newline gets one when prefixed (the next
    /// line may be another container's).
    fn finish(mut self, out: &mut Out) {
        let rest = self.mask.take().map(MaskStream::finish).unwrap_or_default();
        self.lines(&rest, out);
        if !self.line.is_empty() {
            if self.prefix.is_some() {
                self.line.push(b'\n');
            }
            out.line(self.prefix.as_deref(), &self.line);
        }
    }
}

/// Follows one container's log, opening its stream again until the container ended.
struct Follower {
    api: Api,
    /// The pod's API path.
    path: String,
    pod: String,
    container: String,
}

/// How a stream ended.
enum StreamEnd {
    /// The server ended it.
    Closed,
    /// The connection broke, or the server could not be reached.
    Broken(String),
    /// The server refused it (e.g. 400: the container has not started).
    Refused(String),
}

/// Where a container is.
enum Container {
    /// Not started, or running.
    Live,
    /// Terminated, or never to run (its pod ended).
    Ended,
    /// Waiting for a reason it does not get out of by itself.
    Stuck(String, String),
    /// The pod is gone.
    Gone,
}

impl Follower {
    async fn run(&self, i: usize, tx: &mpsc::Sender<Report>) -> Result<(), String> {
        let mut seen = Seen::default();
        let mut backoff = FIRST_BACKOFF;
        let mut answered = Instant::now();
        // The container had ended when this stream was opened: it is the last.
        let mut last = false;
        let mut broke = false;
        loop {
            let (end, new) = self.read(&mut seen, i, tx).await;
            if new {
                backoff = FIRST_BACKOFF;
            }
            match &end {
                // Said once for a row of breaks (an API server down for a while).
                StreamEnd::Broken(e) if !broke => {
                    let note = format!(
                        "the log stream of container '{}' broke: {e}; opening it again",
                        self.container
                    );
                    let _ = tx.send(Report::Note(note)).await;
                    broke = true;
                }
                StreamEnd::Broken(_) => {}
                _ => {
                    answered = Instant::now();
                    broke = false;
                }
            }
            if last {
                match end {
                    StreamEnd::Closed => {
                        // The log's very end may lack a newline.
                        let tail = std::mem::take(&mut seen.partial);
                        if let Some(tail) = seen.new_line(&tail) {
                            send(tx, i, tail.to_vec()).await;
                        }
                        return Ok(());
                    }
                    // No log to read (never started, or removed with its pod).
                    StreamEnd::Refused(e) => {
                        let note = format!("no log of container '{}': {e}", self.container);
                        let _ = tx.send(Report::Note(note)).await;
                        return Ok(());
                    }
                    StreamEnd::Broken(_) => {}
                }
            }
            let state = self.state().await;
            if state.is_ok() {
                answered = Instant::now();
            }
            match state {
                Ok(Container::Ended) => {
                    last = true;
                    if matches!(end, StreamEnd::Broken(_)) {
                        self.wait(&mut backoff).await;
                    }
                    continue;
                }
                Ok(Container::Live) => {}
                Ok(Container::Stuck(reason, message)) => {
                    return Err(format!(
                        "pod {} cannot start: {reason}: {message}",
                        self.pod
                    ));
                }
                Ok(Container::Gone) => {
                    let (StreamEnd::Broken(e) | StreamEnd::Refused(e)) = &end else {
                        // Deleted with its Job (a deadline, by hand): the Job says how.
                        let note = format!("pod {} is gone: its log ends here", self.pod);
                        let _ = tx.send(Report::Note(note)).await;
                        return Ok(());
                    };
                    let lost = match &seen.last {
                        Some((_, at)) => format!("its lines after {at} are lost"),
                        None => "its lines are lost".into(),
                    };
                    return Err(format!(
                        "the log of container '{}' of pod {} broke ({e}) and the pod is gone: {lost}",
                        self.container, self.pod
                    ));
                }
                Err(e) if answered.elapsed() > UNREACHABLE => {
                    return Err(format!(
                        "following the log of container '{}' of pod {}: the API server did not answer for {}s: {e}",
                        self.container,
                        self.pod,
                        UNREACHABLE.as_secs()
                    ));
                }
                Err(_) => {}
            }
            self.wait(&mut backoff).await;
        }
    }

    async fn wait(&self, backoff: &mut Duration) {
        tokio::time::sleep(*backoff).await;
        *backoff = (*backoff * 2).min(MAX_BACKOFF);
    }

    /// Reads one stream of the log to its end, sending its new lines; whether there were any.
    async fn read(
        &self,
        seen: &mut Seen,
        i: usize,
        tx: &mpsc::Sender<Report>,
    ) -> (StreamEnd, bool) {
        let mut url = format!(
            "{}/log?container={}&follow=true&timestamps=true",
            self.path, self.container
        );
        if let Some((_, at)) = &seen.last {
            url.push_str("&sinceTime=");
            url.push_str(&at.replace(':', "%3A").replace('+', "%2B"));
        }
        seen.reopened();
        let mut response = match self.api.request(Method::GET, &url).send().await {
            Ok(r) => r,
            Err(e) => return (StreamEnd::Broken(chain(&e)), false),
        };
        if !response.status().is_success() {
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            return (
                StreamEnd::Refused(format!("{status}: {}", text.trim())),
                false,
            );
        }
        let mut new = false;
        loop {
            match response.chunk().await {
                Ok(Some(bytes)) => {
                    let text = seen.feed(&bytes);
                    if !text.is_empty() {
                        new = true;
                        send(tx, i, text).await;
                    }
                }
                Ok(None) => return (StreamEnd::Closed, new),
                Err(e) => return (StreamEnd::Broken(chain(&e)), new),
            }
        }
    }

    /// The container's state, as its pod's status says.
    async fn state(&self) -> Result<Container, String> {
        let response = (self.api.request(Method::GET, &self.path))
            .timeout(super::REQUEST_TIMEOUT)
            .send()
            .await
            .map_err(|e| chain(&e))?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(Container::Gone);
        }
        if !response.status().is_success() {
            return Err(format!("GET {}: {}", self.path, response.status()));
        }
        let pod: Value = response.json().await.map_err(|e| chain(&e))?;
        if matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        ) {
            return Ok(Container::Ended);
        }
        let mine = statuses(&pod).find(|(_, s)| s["name"].as_str() == Some(&self.container));
        Ok(match mine {
            Some((_, s)) if s["state"].get("terminated").is_some() => Container::Ended,
            Some((_, s)) => match waiting_stuck(s) {
                Some((reason, message)) => Container::Stuck(reason, message),
                None => Container::Live,
            },
            None => Container::Live,
        })
    }
}

async fn send(tx: &mpsc::Sender<Report>, i: usize, text: Vec<u8>) {
    if !text.is_empty() {
        let _ = tx.send(Report::Text(i, text)).await;
    }
}

/// The lines of a container's log seen so far, to tell the new ones in a stream opened
/// again from the last one's time.
#[derive(Default)]
struct Seen {
    /// The last line's timestamp: when, and as written.
    last: Option<(Stamp, String)>,
    /// How many lines seen carry that timestamp.
    at_last: usize,
    /// How many lines with that timestamp this stream has still to skip.
    skip: usize,
    /// The start of a line whose end has not come.
    partial: Vec<u8>,
}

/// Nanoseconds since the Unix epoch.
type Stamp = i128;

impl Seen {
    /// A new stream, from the last line's time: the lines at that time seen already come again.
    fn reopened(&mut self) {
        self.skip = self.at_last;
        // A line cut short comes again whole.
        self.partial.clear();
    }

    /// The text of the new whole lines in `bytes`, their timestamps taken off.
    fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.partial.extend_from_slice(bytes);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return Vec::new();
        };
        let rest = self.partial.split_off(end + 1);
        let lines = std::mem::replace(&mut self.partial, rest);
        let mut text = Vec::with_capacity(lines.len());
        for line in lines.split_inclusive(|b| *b == b'\n') {
            if let Some(content) = self.new_line(line) {
                text.extend_from_slice(content);
            }
        }
        text
    }

    /// A line's content (timestamp off) unless it was seen already.
    fn new_line<'l>(&mut self, line: &'l [u8]) -> Option<&'l [u8]> {
        let split = line.iter().position(|b| *b == b' ');
        let stamped = split.and_then(|at| {
            let written = std::str::from_utf8(&line[..at]).ok()?;
            Some((stamp(written)?, written, &line[at + 1..]))
        });
        // A line without a timestamp cannot be told apart: it is taken.
        let Some((stamp, written, content)) = stamped else {
            return Some(line);
        };
        match &self.last {
            Some((last, _)) if stamp < *last => return None,
            Some((last, _)) if stamp == *last => {
                if self.skip > 0 {
                    self.skip -= 1;
                    return None;
                }
                self.at_last += 1;
            }
            _ => {
                self.last = Some((stamp, written.to_string()));
                self.at_last = 1;
                self.skip = 0;
            }
        }
        Some(content)
    }
}

/// An RFC 3339 timestamp as Kubernetes writes one (`2026-01-02T03:04:05.123456789Z`).
fn stamp(text: &str) -> Option<Stamp> {
    let t = chrono::DateTime::parse_from_rfc3339(text).ok()?;
    Some(i128::from(t.timestamp()) * 1_000_000_000 + i128::from(t.timestamp_subsec_nanos()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_seen_before_a_stream_opened_again_are_skipped() {
        let mut seen = Seen::default();
        let text = seen.feed(b"2026-01-02T03:04:05.1Z a\n2026-01-02T03:04:05.2Z b\n2026-01-02T03:04:05.2Z c\n2026-01-02T03:04:06Z d cut");
        assert_eq!(text, b"a\nb\nc\n");
        // Again from 05.2 (a server that drops the fraction sends from 05).
        seen.reopened();
        let text = seen.feed(b"2026-01-02T03:04:05.1Z a\n2026-01-02T03:04:05.2Z b\n2026-01-02T03:04:05.2Z c\n2026-01-02T03:04:05.2Z c2\n");
        assert_eq!(text, b"c2\n");
        let text = seen.feed(b"2026-01-02T03:04:06Z d whole\nno stamp\n");
        assert_eq!(text, b"d whole\nno stamp\n");
        assert_eq!(seen.last.as_ref().unwrap().1, "2026-01-02T03:04:06Z");
        assert!(stamp("2026-01-02T03:04:05.1Z") > stamp("2026-01-02T03:04:05.09Z"));
        assert!(stamp("2026-01-02T03:04:05Z") < stamp("2026-01-02T03:04:05.5Z"));
    }

    #[test]
    fn init_containers_come_first_and_sidecars_run_with_the_others() {
        let pod = json!({"spec": {
            "initContainers": [{"name": "a"}, {"name": "side", "restartPolicy": "Always"}, {"name": "b"}],
            "containers": [{"name": "main"}, {"name": "x"}],
        }});
        let (init, together) = containers(&pod);
        assert_eq!(init, ["a", "b"]);
        assert_eq!(together, ["side", "main", "x"]);
    }
}
