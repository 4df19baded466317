//! Consumes an AMQP queue: manual acknowledgements, [`PREFETCH`] messages in flight,
//! a batch acknowledged at once. The
//! queue must exist (the consumer does not declare it): a missing one is shown on the
//! trigger, with the broker's reason, until it is created.

use super::consumer::{PREFETCH, Source};
use super::message::{Delivery, Trigger};
use amqprs::channel::{
    BasicAckArguments, BasicConsumeArguments, BasicQosArguments, ConsumerMessage,
};
use shoal_common::broker::amqp::{Opened, open};
use tokio::sync::mpsc::UnboundedReceiver;

pub(crate) struct Amqp {
    opened: Opened,
    messages: UnboundedReceiver<ConsumerMessage>,
}

impl Source for Amqp {
    /// The delivery tag.
    type Ack = u64;

    async fn connect(url: &str, t: &Trigger) -> Result<Amqp, String> {
        let mut opened = open(url, &format!("shoal trigger {}", t.label)).await?;
        let queue = t.def.queue.as_deref().unwrap_or_default();
        let qos = BasicQosArguments::new(0, PREFETCH, false);
        if let Err(e) = opened.channel.basic_qos(qos).await {
            return Err(opened.explain("cannot set the prefetch", e));
        }
        let args = BasicConsumeArguments::new(queue, "")
            .manual_ack(true)
            .finish();
        let messages = match opened.channel.basic_consume_rx(args).await {
            Ok((_tag, messages)) => messages,
            Err(e) => return Err(opened.explain(&format!("cannot consume queue '{queue}'"), e)),
        };
        Ok(Amqp { opened, messages })
    }

    async fn next(&mut self) -> Result<(Delivery, u64), String> {
        let Some(message) = self.messages.recv().await else {
            let why = self.opened.closed_reason();
            return Err(
                why.unwrap_or_else(|| format!("the connection to {} was lost", self.opened.shown))
            );
        };
        let tag = message
            .deliver
            .as_ref()
            .map(|d| d.delivery_tag())
            .ok_or("the broker sent a message without its delivery")?;
        let properties = message.basic_properties.as_ref();
        let headers = properties
            .and_then(|p| p.headers())
            .map(|table| {
                let fields = table.as_ref().iter();
                fields
                    .map(|(name, value)| (name.to_string().to_lowercase(), value.to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let delivery = Delivery {
            body: message.content.unwrap_or_default(),
            headers,
            id: properties.and_then(|p| p.message_id()).cloned(),
        };
        Ok((delivery, tag))
    }

    /// One acknowledgement of the last tag and all before it (`multiple`): the channel
    /// delivers in order, and every message before a batch was acknowledged with its own.
    async fn ack(&mut self, tags: Vec<u64>) -> Result<(), String> {
        let Some(&last) = tags.iter().max() else {
            return Ok(());
        };
        let acked = self
            .opened
            .channel
            .basic_ack(BasicAckArguments::new(last, true))
            .await;
        acked.map_err(|e| self.opened.explain("cannot acknowledge", e))
    }
}
