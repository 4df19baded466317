//! Message brokers that triggers consume from and publish tasks send to: AMQP 0-9-1
//! (RabbitMQ), NATS JetStream and MQTT 3.1.1. What a definition names is checked here
//! (URLs, queues, subjects, topics), so that the consumers on the master and the publishers
//! on the workers read it one way, and how each is connected to ([`amqp`], [`nats`],
//! [`mqtt`]).

pub mod amqp;
pub mod mqtt;
pub mod nats;
mod tls;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use url::Url;

/// The longest AMQP queue, exchange or routing key (a short string of the protocol).
pub const MAX_AMQP_NAME: usize = 255;
/// The longest NATS subject or MQTT topic taken.
pub const MAX_SUBJECT: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BrokerKind {
    Amqp,
    Nats,
    Mqtt,
}

impl BrokerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BrokerKind::Amqp => "amqp",
            BrokerKind::Nats => "nats",
            BrokerKind::Mqtt => "mqtt",
        }
    }

    /// The broker a trigger `type` names, if it names one.
    pub fn of_trigger(trigger_type: &str) -> Option<BrokerKind> {
        match trigger_type {
            "amqp" => Some(BrokerKind::Amqp),
            "nats" => Some(BrokerKind::Nats),
            "mqtt" => Some(BrokerKind::Mqtt),
            _ => None,
        }
    }

    /// The URL scheme of a TLS connection (`nats` and `tls` as the NATS clients write
    /// them).
    fn tls_scheme(self) -> &'static str {
        match self {
            BrokerKind::Amqp => "amqps",
            BrokerKind::Nats => "tls",
            BrokerKind::Mqtt => "mqtts",
        }
    }

    fn default_port(self, tls: bool) -> u16 {
        match (self, tls) {
            (BrokerKind::Amqp, false) => 5672,
            (BrokerKind::Amqp, true) => 5671,
            (BrokerKind::Nats, _) => 4222,
            (BrokerKind::Mqtt, false) => 1883,
            (BrokerKind::Mqtt, true) => 8883,
        }
    }

    /// The field that names where messages go or come from.
    pub fn target_field(self) -> &'static str {
        match self {
            BrokerKind::Amqp => "queue",
            BrokerKind::Nats => "subject",
            BrokerKind::Mqtt => "topic",
        }
    }
}

/// How long connecting to a broker (and setting up what is done on the connection) may
/// take.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where a broker is and who connects, from its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerAddr {
    pub host: String,
    pub port: u16,
    /// Decoded; None when the URL has none.
    pub user: Option<String>,
    pub password: Option<String>,
    /// AMQP's virtual host (the URL's path without its `/`; `/` when empty).
    pub vhost: String,
    /// Over TLS (`amqps://`, `tls://`, `mqtts://`), the broker's certificate checked
    /// against the system's trust store.
    pub tls: bool,
}

impl BrokerAddr {
    /// The broker as messages name it: `amqp://host:port/vhost`, never a credential.
    pub fn shown(&self, kind: BrokerKind) -> String {
        let host = match self.host.contains(':') {
            true => format!("[{}]", self.host),
            false => self.host.clone(),
        };
        let scheme = match self.tls {
            true => kind.tls_scheme(),
            false => kind.as_str(),
        };
        match kind {
            BrokerKind::Amqp => format!(
                "{scheme}://{host}:{}/{}",
                self.port,
                self.vhost.trim_start_matches('/')
            ),
            _ => format!("{scheme}://{host}:{}", self.port),
        }
    }
}

/// Parses a broker URL (`amqp://user:pass@host:5672/vhost`, `nats://host:4222`,
/// `mqtt://host:1883`, or over TLS `amqps://`, `tls://`, `mqtts://`); the error names what
/// is wrong without repeating a password.
pub fn parse_url(kind: BrokerKind, text: &str) -> Result<BrokerAddr, String> {
    let shown = crate::redact::without_password(text);
    let url = Url::parse(text.trim()).map_err(|e| format!("url '{shown}' is not a URL: {e}"))?;
    let tls = match url.scheme() {
        s if s == kind.as_str() => false,
        s if s == kind.tls_scheme() => true,
        _ => {
            return Err(format!(
                "url '{shown}' must start with {}:// or, over TLS, {}://",
                kind.as_str(),
                kind.tls_scheme()
            ));
        }
    };
    let host = match url.host_str() {
        Some(h) if !h.is_empty() => h.trim_start_matches('[').trim_end_matches(']'),
        _ => return Err(format!("url '{shown}' names no host")),
    };
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8()
            .map(|s| s.into_owned())
            .map_err(|_| format!("url '{shown}': the user or password is not UTF-8"))
    };
    let user = Some(url.username()).filter(|u| !u.is_empty());
    let path = url.path().strip_prefix('/').unwrap_or(url.path());
    if kind != BrokerKind::Amqp && !path.is_empty() {
        return Err(format!(
            "url '{shown}' has a path; only AMQP URLs take one (the virtual host)"
        ));
    }
    Ok(BrokerAddr {
        host: host.to_string(),
        port: url.port().unwrap_or(kind.default_port(tls)),
        user: user.map(decode).transpose()?,
        password: url.password().map(decode).transpose()?,
        vhost: match path {
            "" => "/".to_string(),
            path => decode(path)?,
        },
        tls,
    })
}

/// Checks a URL as a definition gives it: one that names a secret (`${secret.NAME}`) or
/// a parameter is checked when it is used; a literal one must parse, and must not carry a
/// password, which everyone who may read the definition would see.
pub fn check_url(kind: BrokerKind, text: &str) -> Result<(), String> {
    if text.contains("${") {
        return Ok(());
    }
    let addr = parse_url(kind, text)?;
    if addr.password.is_some() {
        return Err(format!(
            "url carries a password, which whoever reads the workflow would see: store the URL \
             as a project secret (`shoal secret set BROKER_URL`) and write url: \
             \"${{secret.BROKER_URL}}\", or leave the credentials out ({} default: guest/guest)",
            kind.as_str()
        ));
    }
    Ok(())
}

/// An AMQP queue, exchange or routing key: at most [`MAX_AMQP_NAME`] bytes.
pub fn check_amqp_name(field: &str, name: &str) -> Result<(), String> {
    if name.len() > MAX_AMQP_NAME {
        return Err(format!(
            "{field} is {} bytes long; AMQP takes at most {MAX_AMQP_NAME}",
            name.len()
        ));
    }
    Ok(())
}

/// A NATS subject: dot-separated tokens without spaces; `*` and `>` (wildcards) only
/// where `wildcards` (a consumer's filter).
pub fn check_subject(subject: &str, wildcards: bool) -> Result<(), String> {
    let bad = |why: &str| Err(format!("subject '{subject}' {why}"));
    if subject.is_empty() || subject.len() > MAX_SUBJECT {
        return bad(&format!("must be 1 to {MAX_SUBJECT} bytes long"));
    }
    if subject.chars().any(char::is_whitespace) {
        return bad("may not contain spaces");
    }
    let tokens: Vec<&str> = subject.split('.').collect();
    if tokens.iter().any(|t| t.is_empty()) {
        return bad("has an empty token (two dots in a row, or a dot at an end)");
    }
    for (i, t) in tokens.iter().enumerate() {
        let wild = *t == "*" || (*t == ">" && i == tokens.len() - 1);
        if t.contains(['*', '>']) && !(wildcards && wild) {
            return bad(match wildcards {
                true => "uses * or > other than as a whole token (> only last)",
                false => "has a wildcard (* or >): a message is published to one subject",
            });
        }
    }
    Ok(())
}

/// An MQTT topic: `+` and `#` (wildcards) only where `wildcards` (a subscription), each a
/// whole level, `#` only last.
pub fn check_topic(topic: &str, wildcards: bool) -> Result<(), String> {
    let bad = |why: &str| Err(format!("topic '{topic}' {why}"));
    if topic.is_empty() || topic.len() > MAX_SUBJECT {
        return bad(&format!("must be 1 to {MAX_SUBJECT} bytes long"));
    }
    if topic.contains('\0') {
        return bad("may not contain NUL");
    }
    let levels: Vec<&str> = topic.split('/').collect();
    for (i, level) in levels.iter().enumerate() {
        let wild = *level == "+" || (*level == "#" && i == levels.len() - 1);
        if level.contains(['+', '#']) && !(wildcards && wild) {
            return bad(match wildcards {
                true => "uses + or # other than as a whole level (# only last)",
                false => "has a wildcard (+ or #): a message is published to one topic",
            });
        }
    }
    Ok(())
}

/// A name for the broker's side of trigger `project/workflow/trigger` (a durable NATS
/// consumer, an MQTT client id): readable, of the characters every broker takes, and
/// unique through a hash of the exact names.
pub fn durable_name(project: &str, workflow: &str, trigger: &str) -> String {
    let exact = format!("{project}/{workflow}/{trigger}");
    let hash = hex::encode(&Sha256::digest(exact.as_bytes())[..8]);
    let readable: String = format!("{project}_{workflow}_{trigger}")
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                true => c,
                false => '_',
            },
        )
        .take(48)
        .collect();
    format!("shoal_{readable}_{hash}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_host_port_credentials_and_vhost() {
        let a = parse_url(
            BrokerKind::Amqp,
            "amqp://us%40er:p%3Ass@rabbit:5673/prod%2Fx",
        )
        .unwrap();
        assert_eq!(
            a,
            BrokerAddr {
                host: "rabbit".into(),
                port: 5673,
                user: Some("us@er".into()),
                password: Some("p:ss".into()),
                vhost: "prod/x".into(),
                tls: false,
            }
        );
        let n = parse_url(BrokerKind::Nats, "nats://127.0.0.1").unwrap();
        assert_eq!((n.port, n.user, n.vhost.as_str()), (4222, None, "/"));
        assert_eq!(
            parse_url(BrokerKind::Mqtt, "mqtt://[::1]").unwrap().host,
            "::1"
        );

        let e = parse_url(BrokerKind::Amqp, "nats://u:secret@h").unwrap_err();
        assert!(
            e.contains("must start with amqp:// or, over TLS, amqps://") && !e.contains("secret"),
            "{e}"
        );
        let e = parse_url(BrokerKind::Mqtt, "mqtt://h/x").unwrap_err();
        assert!(e.contains("has a path"), "{e}");
        assert!(parse_url(BrokerKind::Nats, "nats://").is_err());
        assert!(parse_url(BrokerKind::Nats, "not a url").is_err());
    }

    #[test]
    fn tls_schemes_take_the_tls_ports_and_say_so() {
        let cases = [
            (
                BrokerKind::Amqp,
                "amqps://rabbit/prod",
                5671,
                "amqps://rabbit:5671/prod",
            ),
            (BrokerKind::Nats, "tls://nats", 4222, "tls://nats:4222"),
            (
                BrokerKind::Mqtt,
                "mqtts://mosquitto",
                8883,
                "mqtts://mosquitto:8883",
            ),
        ];
        for (kind, url, port, shown) in cases {
            let a = parse_url(kind, url).unwrap();
            assert!(a.tls, "{url}");
            assert_eq!((a.port, a.shown(kind).as_str()), (port, shown));
        }
        assert!(!parse_url(BrokerKind::Mqtt, "mqtt://m").unwrap().tls);
        assert!(parse_url(BrokerKind::Mqtt, "amqps://m").is_err());
    }

    #[test]
    fn literal_passwords_are_refused_and_secrets_checked_later() {
        let e = check_url(BrokerKind::Amqp, "amqp://guest:guest@h").unwrap_err();
        assert!(e.contains("${secret.BROKER_URL}"), "{e}");
        check_url(BrokerKind::Amqp, "amqp://h:5672/").unwrap();
        check_url(BrokerKind::Amqp, "${secret.BROKER_URL}").unwrap();
    }

    #[test]
    fn subjects_and_topics_take_wildcards_only_where_subscribed() {
        check_subject("orders.*.created", true).unwrap();
        check_subject("orders.>", true).unwrap();
        assert!(check_subject("orders.>", false).is_err());
        assert!(check_subject("orders..x", true).is_err());
        assert!(check_subject("orders.a*", true).is_err());
        assert!(check_subject("a b", false).is_err());
        check_topic("sensors/+/temp", true).unwrap();
        check_topic("sensors/#", true).unwrap();
        assert!(check_topic("sensors/#/x", true).is_err());
        assert!(check_topic("sensors/+", false).is_err());
        assert!(check_amqp_name("queue", &"q".repeat(256)).is_err());
        check_amqp_name("queue", &"q".repeat(255)).unwrap();
    }

    #[test]
    fn durable_names_are_plain_and_unique() {
        let a = durable_name("p", "w.x", "t");
        let b = durable_name("p", "w_x", "t");
        assert!(a.starts_with("shoal_p_w_x_t_") && a != b, "{a} {b}");
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    }
}
