//! AMQP 0-9-1 connections (through `amqprs`): one connection with one channel, whose
//! events (the broker closing it, publisher confirms, returned messages) arrive on a
//! receiver the caller reads.

use super::{BrokerKind, parse_url};
use amqprs::callbacks::{ChannelCallback, DefaultConnectionCallback};
use amqprs::channel::Channel;
use amqprs::connection::{Connection, OpenConnectionArguments};
use amqprs::tls::TlsAdaptor;
use amqprs::{Ack, BasicProperties, Cancel, CloseChannel, Nack, Return};
use tokio::sync::mpsc;

/// What the broker said on a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// It closed the channel: why (`NOT_FOUND - no queue 'orders' in vhost '/'`).
    Closed(String),
    /// It cancelled the consumer (its queue was deleted).
    Cancelled,
    /// Publisher confirms: it took a message, or could not.
    Ack,
    Nack,
    /// It could not route a mandatory message to a queue: why.
    Returned(String),
}

/// An open connection, its channel and the channel's events.
pub struct Opened {
    pub connection: Connection,
    pub channel: Channel,
    pub events: mpsc::UnboundedReceiver<Event>,
    /// The broker as messages name it (never a credential).
    pub shown: String,
}

impl Opened {
    /// Why the broker closed the channel, if it said so already.
    pub fn closed_reason(&mut self) -> Option<String> {
        while let Ok(event) = self.events.try_recv() {
            match event {
                Event::Closed(why) => return Some(why),
                Event::Cancelled => return Some("the broker cancelled the consumer".into()),
                _ => {}
            }
        }
        None
    }

    /// `e`, an error of an operation on the channel, with the broker's reason when it
    /// gave one.
    pub fn explain(&mut self, what: &str, e: impl std::fmt::Display) -> String {
        match self.closed_reason() {
            Some(why) => format!("{what} on {}: {why}", self.shown),
            None => format!("{what} on {}: {e}", self.shown),
        }
    }
}

/// Connects to the broker at `url` (`amqp://user:password@host:port/vhost`, `amqps://`
/// over TLS; guest/guest when the URL names no user) as `name`, and opens a channel.
pub async fn open(url: &str, name: &str) -> Result<Opened, String> {
    let addr = parse_url(BrokerKind::Amqp, url)?;
    let shown = addr.shown(BrokerKind::Amqp);
    let mut args = OpenConnectionArguments::new(
        &addr.host,
        addr.port,
        addr.user.as_deref().unwrap_or("guest"),
        addr.password.as_deref().unwrap_or("guest"),
    );
    args.virtual_host(&addr.vhost).connection_name(name);
    if addr.tls {
        let connector = tokio_rustls::TlsConnector::from(super::tls::client_config()?);
        args.tls_adaptor(TlsAdaptor::new(connector, addr.host.clone()));
    }
    let connection = Connection::open(&args)
        .await
        .map_err(|e| format!("cannot connect to {shown}: {e}"))?;
    let failed = |e: amqprs::error::Error| format!("cannot open a channel on {shown}: {e}");
    connection
        .register_callback(DefaultConnectionCallback)
        .await
        .map_err(failed)?;
    let channel = connection.open_channel(None).await.map_err(failed)?;
    let (tx, events) = mpsc::unbounded_channel();
    channel
        .register_callback(Events(tx))
        .await
        .map_err(failed)?;
    Ok(Opened {
        connection,
        channel,
        events,
        shown,
    })
}

/// Forwards a channel's events.
struct Events(mpsc::UnboundedSender<Event>);

impl Events {
    fn send(&self, event: Event) {
        // The receiver goes with the channel's user, who no longer listens.
        let _ = self.0.send(event);
    }
}

#[async_trait::async_trait]
impl ChannelCallback for Events {
    async fn close(
        &mut self,
        _: &Channel,
        close: CloseChannel,
    ) -> Result<(), amqprs::error::Error> {
        self.send(Event::Closed(close.reply_text().clone()));
        Ok(())
    }

    async fn cancel(&mut self, _: &Channel, _: Cancel) -> Result<(), amqprs::error::Error> {
        self.send(Event::Cancelled);
        Ok(())
    }

    async fn flow(&mut self, _: &Channel, _: bool) -> Result<bool, amqprs::error::Error> {
        Ok(true)
    }

    async fn publish_ack(&mut self, _: &Channel, _: Ack) {
        self.send(Event::Ack);
    }

    async fn publish_nack(&mut self, _: &Channel, _: Nack) {
        self.send(Event::Nack);
    }

    async fn publish_return(&mut self, _: &Channel, ret: Return, _: BasicProperties, _: Vec<u8>) {
        self.send(Event::Returned(format!(
            "{} {}",
            ret.reply_code(),
            ret.reply_text()
        )));
    }
}
