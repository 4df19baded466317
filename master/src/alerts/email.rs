//! E-mail alerts through the channel's SMTP server (lettre): TLS, STARTTLS or plain as
//! its URL says, a password opened with the master's secret key, a private CA if given.

use super::summary;
use lettre::message::{Mailbox, header::ContentType};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde_json::Value;
use shoal_common::secret_key::SecretKey;
use shoal_store::EmailTarget;
use std::time::Duration;

/// Longest an SMTP conversation may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(20);

/// Sends `payload` as an e-mail of channel `name`.
pub(super) async fn send(
    name: &str,
    e: &EmailTarget,
    key: Option<&SecretKey>,
    payload: &Value,
) -> Result<(), String> {
    let subject = summary(payload);
    let body = serde_json::to_string_pretty(payload).unwrap_or_default();
    let mut message = Message::builder()
        .from(mailbox(&e.from)?)
        .subject(subject.clone())
        .header(ContentType::TEXT_PLAIN);
    for to in &e.to {
        message = message.to(mailbox(to)?);
    }
    let message = message
        .body(format!("{subject}\n\n{body}\n"))
        .map_err(|err| format!("cannot build the e-mail: {err}"))?;
    transport(name, e, key)?
        .send(message)
        .await
        .map_err(|err| format!("{}: {err}", e.smtp))?;
    Ok(())
}

fn mailbox(address: &str) -> Result<Mailbox, String> {
    address
        .parse()
        .map_err(|err| format!("'{address}' is not an e-mail address: {err}"))
}

/// The transport the channel's URL describes, with its credentials and CA.
fn transport(
    name: &str,
    e: &EmailTarget,
    key: Option<&SecretKey>,
) -> Result<AsyncSmtpTransport<Tokio1Executor>, String> {
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::from_url(&e.smtp)
        .map_err(|err| format!("smtp '{}': {err}", e.smtp))?
        .timeout(Some(SMTP_TIMEOUT));
    if let Some(ca) = &e.ca {
        let host = url::Url::parse(&e.smtp)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default();
        let ca = Certificate::from_pem(ca.as_bytes()).map_err(|err| format!("ca: {err}"))?;
        let tls = TlsParameters::builder(host)
            .add_root_certificate(ca)
            .build_rustls()
            .map_err(|err| format!("cannot set up TLS: {err}"))?;
        // The URL chose between TLS and STARTTLS; the CA changes whom TLS trusts only.
        builder = builder.tls(if e.smtp.starts_with("smtps:") {
            Tls::Wrapper(tls)
        } else {
            Tls::Required(tls)
        });
    }
    if let Some(username) = &e.username {
        let password = match &e.password {
            Some(sealed) => {
                let key = key.ok_or("this master has no secret key to open the password with: start it with SHOAL_SECRET_KEY")?;
                key.open(&EmailTarget::password_context(name), sealed)?
            }
            None => String::new(),
        };
        builder = builder.credentials(Credentials::new(username.clone(), password));
    }
    Ok(builder.build())
}
