//! One trigger's consumer: connects to its broker (the URL's secrets opened), takes
//! messages into the store in batches (a message, and those the broker had delivered
//! already behind it, in one transaction) and acknowledges a batch only once it is
//! committed, and on any failure shows it on the trigger and connects again after a
//! growing pause. A batch whose write failed is not acknowledged: the broker delivers
//! its messages again.

use super::message::{Action, Decision, Delivery, Trigger};
use crate::secrets::{Secrets, referenced};
use shoal_common::broker::CONNECT_TIMEOUT;
use shoal_common::metrics::{self, TriggerOutcome};
use shoal_common::types::now_ms;
use shoal_store::{
    ConsumerState, MessageAction, MessageCounts, MessageTaken, NewCommand, Store, TriggerMessage,
};
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The first pause before connecting again; it doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How often, at most, a busy consumer records when its last message came.
const NOTE_LAST_MESSAGE: Duration = Duration::from_secs(5);
/// Messages a broker hands a consumer before it acknowledges any; the largest batch.
pub(super) const PREFETCH: u16 = 64;

/// A connected consumer of one broker.
pub(super) trait Source: Sized + Send {
    /// What acknowledges one message.
    type Ack: Send;

    /// Connects to the broker at `url` and starts consuming what `t` names.
    fn connect(url: &str, t: &Trigger) -> impl Future<Output = Result<Self, String>> + Send;

    /// The next message; an error when the connection or the consumer ended. Dropped
    /// before it is ready, it took no message.
    fn next(&mut self) -> impl Future<Output = Result<(Delivery, Self::Ack), String>> + Send;

    /// Acknowledges messages, in the order they came: the broker will not deliver them
    /// again.
    fn ack(&mut self, acks: Vec<Self::Ack>) -> impl Future<Output = Result<(), String>> + Send;
}

/// What every consumer of a master shares.
pub(super) struct Shared {
    pub store: Store,
    pub secrets: Secrets,
    /// This master, as its consumers' states name it.
    pub me: String,
    /// How long an event that completed no wait is kept (`--event-retention`).
    pub event_retention: Duration,
}

/// Runs `t`'s consumer until `stop`.
pub(super) async fn run<S: Source>(shared: Arc<Shared>, t: Arc<Trigger>, stop: CancellationToken) {
    let mut state = State::new(&shared, &t);
    let mut backoff = MIN_BACKOFF;
    loop {
        state.set("connecting", None).await;
        let connected = match url(&shared.secrets, &t) {
            Ok(url) => tokio::select! {
                () = stop.cancelled() => break,
                c = tokio::time::timeout(CONNECT_TIMEOUT, S::connect(&url, &t)) => c
                    .unwrap_or_else(|_| Err(format!("no answer within {CONNECT_TIMEOUT:?}"))),
            },
            Err(e) => Err(e),
        };
        let error = match connected {
            Ok(mut source) => {
                info!(trigger = %t.label, "trigger consumer connected");
                state.set("connected", None).await;
                backoff = MIN_BACKOFF;
                match consume(&shared, &t, &mut source, &mut state, &stop).await {
                    Ok(()) => break,
                    Err(e) => e,
                }
            }
            Err(e) => format!("cannot connect: {e}"),
        };
        warn!(trigger = %t.label, error = %error, retry_in = ?backoff, "trigger consumer failed");
        state.set("failed", Some(error)).await;
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    state.forget().await;
}

/// Takes messages until `stop` (Ok) or a failure (its reason).
async fn consume<S: Source>(
    shared: &Shared,
    t: &Trigger,
    source: &mut S,
    state: &mut State<'_>,
    stop: &CancellationToken,
) -> Result<(), String> {
    let mut deliveries = Vec::with_capacity(usize::from(PREFETCH));
    let mut acks = Vec::with_capacity(usize::from(PREFETCH));
    loop {
        let first = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            next = source.next() => next?,
            // Once messages stop, what the last ones did is written too.
            () = tokio::time::sleep(NOTE_LAST_MESSAGE), if state.unwritten => {
                state.write().await;
                continue;
            }
        };
        // Those already delivered behind it join it, waiting for none: a lone message
        // goes at once, and while a batch is written the next one gathers.
        let mut next = Some(first);
        while let Some((delivery, ack)) = next.take() {
            deliveries.push(delivery);
            acks.push(ack);
            if deliveries.len() < usize::from(PREFETCH) {
                next = ready(source).await.transpose()?;
            }
        }
        let outcomes = take(shared, t, &deliveries)
            .await
            .map_err(|e| format!("cannot record messages (they will come again): {e}"))?;
        source
            .ack(std::mem::take(&mut acks))
            .await
            .map_err(|e| format!("cannot acknowledge messages (they will come again): {e}"))?;
        deliveries.clear();
        for outcome in outcomes {
            metrics::trigger_message(&t.label, outcome);
            state.message(outcome).await;
        }
    }
}

/// The message `source` has already received, if any (after letting the tasks that
/// receive for it run once).
async fn ready<S: Source>(source: &mut S) -> Option<Result<(Delivery, S::Ack), String>> {
    for attempt in 0..2 {
        if attempt > 0 {
            tokio::task::yield_now().await;
        }
        let mut next = pin!(source.next());
        let polled = std::future::poll_fn(|cx| Poll::Ready(next.as_mut().poll(cx))).await;
        if let Poll::Ready(got) = polled {
            return Some(got);
        }
    }
    None
}

/// Writes what messages do, all in one transaction; their outcomes, in order.
async fn take(
    shared: &Shared,
    t: &Trigger,
    deliveries: &[Delivery],
) -> shoal_common::Result<Vec<TriggerOutcome>> {
    let decisions: Vec<Decision> = deliveries.iter().map(|d| t.decide(d)).collect();
    let commands: Vec<Option<NewCommand>> = decisions
        .iter()
        .map(|d| match d {
            Decision::Take {
                action: Action::Start(params),
                ..
            } => Some(super::start_command(t, params.clone())),
            _ => None,
        })
        .collect();
    let mut batch = Vec::with_capacity(decisions.len());
    for (decision, command) in decisions.iter().zip(&commands) {
        let Decision::Take { id, action } = decision else {
            continue;
        };
        let message = TriggerMessage {
            project: &t.project,
            workflow: &t.workflow,
            trigger: &t.def.name,
            id,
        };
        let taken = match (action, command) {
            (Action::Start(_), Some(command)) => MessageAction::Start(command),
            (Action::Start(_), None) => unreachable!("a start's command is made above"),
            (Action::Deliver { key, data }, _) => MessageAction::Deliver {
                // An event trigger has an event: it is what made this a delivery.
                event: t.def.event.as_deref().unwrap_or_default(),
                key,
                data,
                keep: shared.event_retention,
            },
            (Action::Ignore { reason, body }, _) => MessageAction::Ignore { reason, body },
        };
        batch.push((message, taken));
    }
    let mut taken = shared
        .store
        .take_trigger_messages(&batch)
        .await?
        .into_iter();
    let mut outcomes = Vec::with_capacity(decisions.len());
    for decision in &decisions {
        let Decision::Take { action, .. } = decision else {
            outcomes.push(TriggerOutcome::Filtered);
            continue;
        };
        let Some(taken) = taken.next() else {
            return Err(shoal_common::Error::Invalid(
                "the store answered for fewer messages than it was given".into(),
            ));
        };
        outcomes.push(outcome(t, action, taken));
    }
    Ok(outcomes)
}

/// What a message the store took did, logged.
fn outcome(t: &Trigger, action: &Action, taken: MessageTaken) -> TriggerOutcome {
    match taken {
        MessageTaken::Started(command_id) => {
            info!(trigger = %t.label, command_id, "broker message started a run");
            TriggerOutcome::Started
        }
        MessageTaken::Delivered(delivered) => {
            info!(trigger = %t.label, completed = delivered.completed.len(), "broker message delivered its event");
            TriggerOutcome::Delivered
        }
        MessageTaken::Ignored => {
            if let Action::Ignore { reason, .. } = action {
                warn!(trigger = %t.label, %reason, "broker message ignored");
            }
            TriggerOutcome::Ignored
        }
        MessageTaken::Duplicate => TriggerOutcome::Duplicate,
    }
}

/// The trigger's URL with the project secrets it names opened.
fn url(secrets: &Secrets, t: &Trigger) -> Result<String, String> {
    let mut url = t.def.url.clone().unwrap_or_default();
    let names: Vec<String> = referenced(&url).map(str::to_string).collect();
    for name in names {
        let value = match secrets.get(&t.project, &name) {
            Some(opened) => opened?,
            None => {
                return Err(format!(
                    "the url names secret '{name}', which project '{}' does not have: \
                     `shoal secret set {name} --project {}`",
                    t.project, t.project
                ));
            }
        };
        url = url.replace(&format!("${{secret.{name}}}"), &value);
    }
    Ok(url)
}

/// The consumer's state as the store shows it, written when it changes (and, while
/// messages come, when the last one came and what they did, every [`NOTE_LAST_MESSAGE`]
/// at most: a write per message would cost more than the message).
struct State<'a> {
    store: &'a Store,
    row: ConsumerState,
    noted: Option<i64>,
    /// Messages were taken since the row was last written.
    unwritten: bool,
}

impl<'a> State<'a> {
    fn new(shared: &'a Shared, t: &Trigger) -> State<'a> {
        State {
            store: &shared.store,
            row: ConsumerState {
                project: t.project.clone(),
                workflow: t.workflow.clone(),
                trigger_name: t.def.name.clone(),
                master: shared.me.clone(),
                state: String::new(),
                error: None,
                since: now_ms(),
                last_message_at: None,
                counts: MessageCounts::default(),
            },
            noted: None,
            unwritten: false,
        }
    }

    /// Enters `state`; a new error replaces the last one, which stays while connecting.
    async fn set(&mut self, state: &str, error: Option<String>) {
        if self.row.state == state && error.is_none() {
            return;
        }
        self.row.state = state.to_string();
        if error.is_some() || state == "connected" {
            self.row.error = error;
        }
        self.row.since = now_ms();
        self.write().await;
    }

    /// Counts a message by what it did.
    async fn message(&mut self, outcome: TriggerOutcome) {
        let now = now_ms();
        self.row.last_message_at = Some(now);
        let c = &mut self.row.counts;
        *match outcome {
            TriggerOutcome::Started => &mut c.started,
            TriggerOutcome::Filtered => &mut c.filtered,
            TriggerOutcome::Ignored => &mut c.ignored,
            TriggerOutcome::Duplicate => &mut c.duplicate,
            TriggerOutcome::Delivered => &mut c.delivered,
        } += 1;
        self.unwritten = true;
        let due = NOTE_LAST_MESSAGE.as_millis() as i64;
        if self.noted.is_none_or(|at| now - at >= due) {
            self.noted = Some(now);
            self.write().await;
        }
    }

    async fn write(&mut self) {
        self.unwritten = false;
        if let Err(e) = self.store.set_consumer_state(&self.row).await {
            warn!(trigger = %self.row.trigger_name, error = %e, "cannot record a trigger consumer's state");
        }
    }

    /// Removes the state: the consumer stopped.
    async fn forget(self) {
        let r = &self.row;
        let dropped = self
            .store
            .drop_consumer_state(&r.project, &r.workflow, &r.trigger_name, &r.master)
            .await;
        if let Err(e) = dropped {
            warn!(trigger = %r.trigger_name, error = %e, "cannot forget a trigger consumer's state");
        }
    }
}
