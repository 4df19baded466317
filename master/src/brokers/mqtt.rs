//! Subscribes to an MQTT topic at QoS 1 in a persistent session (clean session off, the
//! client id named for the trigger: [`durable_name`]), acknowledging each message by hand:
//! a message not acknowledged when the connection drops is delivered again on the next.
//! MQTT 3.1.1 messages have no id and no headers: the topic a message came on is its
//! `topic` header, and its identity, without a trigger `key`, is its body.

use super::consumer::{PREFETCH, Source};
use super::message::{Delivery, Trigger};
use rumqttc::{AsyncClient, Event, EventLoop, Packet, Publish, QoS, SubscribeReasonCode};
use shoal_common::broker::durable_name;
use shoal_common::broker::mqtt::options;
use std::collections::BTreeMap;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub(crate) struct Mqtt {
    client: AsyncClient,
    messages: mpsc::Receiver<Result<Publish, String>>,
    /// Polls the connection (which sends and receives) and forwards what arrives.
    poller: JoinHandle<()>,
    shown: String,
}

impl Drop for Mqtt {
    fn drop(&mut self) {
        self.poller.abort();
    }
}

impl Source for Mqtt {
    type Ack = Publish;

    async fn connect(url: &str, t: &Trigger) -> Result<Mqtt, String> {
        let id = durable_name(&t.project, &t.workflow, &t.def.name);
        let (mut opts, shown) = options(url, &id)?;
        opts.set_clean_session(false)
            .set_manual_acks(true)
            .set_inflight(PREFETCH);
        let (client, mut events) = AsyncClient::new(opts, usize::from(PREFETCH));
        let topic = t.def.topic.clone().unwrap_or_default();
        // Queued until the connection is up.
        client
            .subscribe(topic.clone(), QoS::AtLeastOnce)
            .await
            .map_err(|e| format!("cannot subscribe to '{topic}' on {shown}: {e}"))?;
        let failed = |e: String| format!("{shown}: {e}");
        // The subscription is in place once the broker acknowledges it; messages of the
        // session may come before that.
        let mut early = Vec::new();
        loop {
            match events.poll().await.map_err(|e| failed(e.to_string()))? {
                Event::Incoming(Packet::SubAck(ack)) => {
                    if ack.return_codes.contains(&SubscribeReasonCode::Failure) {
                        return Err(failed(format!(
                            "the broker refused the subscription to '{topic}'"
                        )));
                    }
                    break;
                }
                Event::Incoming(Packet::Publish(p)) => early.push(p),
                _ => {}
            }
        }
        let (tx, messages) = mpsc::channel(usize::from(PREFETCH) + early.len());
        for p in early {
            let _ = tx.try_send(Ok(p));
        }
        let poller = tokio::spawn(poll(events, tx));
        Ok(Mqtt {
            client,
            messages,
            poller,
            shown,
        })
    }

    async fn next(&mut self) -> Result<(Delivery, Publish), String> {
        let publish = match self.messages.recv().await {
            Some(Ok(publish)) => publish,
            Some(Err(e)) => return Err(format!("{}: {e}", self.shown)),
            None => return Err(format!("the connection to {} ended", self.shown)),
        };
        let delivery = Delivery {
            body: publish.payload.to_vec(),
            headers: BTreeMap::from([("topic".to_string(), publish.topic.clone())]),
            id: None,
        };
        Ok((delivery, publish))
    }

    /// A PUBACK for each: MQTT acknowledges messages one by one.
    async fn ack(&mut self, publishes: Vec<Publish>) -> Result<(), String> {
        for publish in &publishes {
            self.client
                .ack(publish)
                .await
                .map_err(|e| format!("acknowledging on {}: {e}", self.shown))?;
        }
        Ok(())
    }
}

/// Polls until the connection fails (sent on as the last item) or nobody listens.
async fn poll(mut events: EventLoop, tx: mpsc::Sender<Result<Publish, String>>) {
    loop {
        let item = match events.poll().await {
            Ok(Event::Incoming(Packet::Publish(p))) => Ok(p),
            Ok(_) => continue,
            Err(e) => Err(e.to_string()),
        };
        let failed = item.is_err();
        if tx.send(item).await.is_err() || failed {
            return;
        }
    }
}
