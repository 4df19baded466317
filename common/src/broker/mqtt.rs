//! MQTT 3.1.1 connections (through `rumqttc`).

use super::{BrokerKind, parse_url};
use rumqttc::{MqttOptions, TlsConfiguration, Transport};
use std::time::Duration;

/// The largest packet sent or taken (a message and its topic).
pub const MAX_PACKET: usize = 8 * 1024 * 1024;
const KEEP_ALIVE: Duration = Duration::from_secs(30);

/// The options of a client `client_id` of the broker at `url` (`mqtt://user:pw@host:1883`,
/// `mqtts://` over TLS), and the broker as messages name it.
pub fn options(url: &str, client_id: &str) -> Result<(MqttOptions, String), String> {
    let addr = parse_url(BrokerKind::Mqtt, url)?;
    let shown = addr.shown(BrokerKind::Mqtt);
    let mut options = MqttOptions::new(client_id, addr.host, addr.port);
    options
        .set_keep_alive(KEEP_ALIVE)
        .set_max_packet_size(MAX_PACKET, MAX_PACKET);
    if addr.tls {
        let config = super::tls::client_config()?;
        options.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(config)));
    }
    if let Some(user) = addr.user {
        options.set_credentials(user, addr.password.unwrap_or_default());
    }
    Ok((options, shown))
}
