//! Consumes a NATS subject through a durable JetStream pull consumer named for the
//! trigger ([`durable_name`]), created (or updated) on the stream that captures the
//! subject, delivering every message not yet acknowledged. The stream must exist: a
//! missing one is shown on the trigger until it is created.

use super::consumer::{PREFETCH, Source};
use super::message::{Delivery, Trigger};
use async_nats::jetstream::{self, AckKind, consumer::pull};
use shoal_common::broker::durable_name;
use shoal_common::broker::nats::connect;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio_stream::StreamExt;

/// How long a message may stay unacknowledged before the server delivers it again (to
/// this consumer once it connects again): ample for one write to the store.
const ACK_WAIT: Duration = Duration::from_secs(10);
/// The header that names a message (JetStream's own de-duplication uses it too).
const MSG_ID: &str = "Nats-Msg-Id";

pub(crate) struct Nats {
    messages: pull::Stream,
    shown: String,
}

impl Source for Nats {
    type Ack = jetstream::Message;

    async fn connect(url: &str, t: &Trigger) -> Result<Nats, String> {
        let (client, shown) = connect(url, &format!("shoal trigger {}", t.label)).await?;
        let js = jetstream::new(client);
        let subject = t.def.subject.clone().unwrap_or_default();
        let stream = js.stream_by_subject(subject.clone()).await.map_err(|e| {
            format!(
                "no JetStream stream on {shown} captures subject '{subject}' ({e}): create \
                 one, e.g. `nats stream add ORDERS --subjects '{subject}'`"
            )
        })?;
        let stream = js
            .get_stream(&stream)
            .await
            .map_err(|e| format!("cannot read stream '{stream}' on {shown}: {e}"))?;
        let name = durable_name(&t.project, &t.workflow, &t.def.name);
        let config = pull::Config {
            durable_name: Some(name.clone()),
            filter_subject: subject.clone(),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ack_wait: ACK_WAIT,
            max_ack_pending: i64::from(PREFETCH),
            ..Default::default()
        };
        let consumer = stream
            .create_consumer(config)
            .await
            .map_err(|e| format!("cannot create consumer '{name}' on {shown}: {e}"))?;
        let messages = consumer
            .messages()
            .await
            .map_err(|e| format!("cannot pull from consumer '{name}' on {shown}: {e}"))?;
        Ok(Nats { messages, shown })
    }

    async fn next(&mut self) -> Result<(Delivery, jetstream::Message), String> {
        let message = match self.messages.next().await {
            Some(Ok(message)) => message,
            Some(Err(e)) => return Err(format!("pulling from {}: {e}", self.shown)),
            None => return Err(format!("the connection to {} ended", self.shown)),
        };
        let mut headers = BTreeMap::<String, String>::new();
        let mut id = None;
        for (name, values) in message.headers.iter().flat_map(|h| h.iter()) {
            let value: Vec<&str> = values.iter().map(|v| v.as_str()).collect();
            let value = value.join(", ");
            let name: &str = name.as_ref();
            if name.eq_ignore_ascii_case(MSG_ID) {
                id = Some(value.clone());
            }
            headers.insert(name.to_lowercase(), value);
        }
        // Without a message id: the message's place in its stream, which a redelivery keeps.
        let id = id.or_else(|| {
            let info = message.info().ok()?;
            Some(format!("{}:{}", info.stream, info.stream_sequence))
        });
        let delivery = Delivery {
            body: message.payload.to_vec(),
            headers,
            id,
        };
        Ok((delivery, message))
    }

    /// Each message on its own: JetStream has no acknowledgement of several (an explicit
    /// consumer's ack covers only its message).
    async fn ack(&mut self, messages: Vec<jetstream::Message>) -> Result<(), String> {
        for message in messages {
            message
                .ack_with(AckKind::Ack)
                .await
                .map_err(|e| format!("acknowledging on {}: {e}", self.shown))?;
        }
        Ok(())
    }
}
