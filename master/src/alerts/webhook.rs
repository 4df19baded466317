//! Webhook alerts: the body each format's receiver takes, and whether its answer says it
//! took it (DingTalk, WeCom, Feishu and Telegram answer 200 with an error inside).

use super::summary;
use serde_json::{Value, json};
use shoal_store::WebhookFormat;
use std::time::Duration;

/// Longest a webhook may take to answer.
pub(super) const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// POSTs `payload` to `url` in `format`.
pub(super) async fn send(
    http: &reqwest::Client,
    url: &str,
    format: WebhookFormat,
    payload: &Value,
) -> Result<(), String> {
    let resp = http
        .post(url)
        .json(&body(url, format, payload))
        .send()
        .await
        // Once, in front: reqwest would repeat the URL in its error.
        .map_err(|e| format!("POST {url}: {}", e.without_url()))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("POST {url}: answered {status}"));
    }
    if format == WebhookFormat::Json || format == WebhookFormat::Slack {
        return Ok(());
    }
    let answer: Value = resp.json().await.unwrap_or(Value::Null);
    match refusal(format, &answer) {
        Some(reason) => Err(format!("POST {url}: refused: {reason}")),
        None => Ok(()),
    }
}

/// What is POSTed for `payload`.
pub(super) fn body(url: &str, format: WebhookFormat, payload: &Value) -> Value {
    let text = summary(payload);
    match format {
        WebhookFormat::Json => payload.clone(),
        WebhookFormat::Slack => json!({ "text": text }),
        WebhookFormat::Dingtalk | WebhookFormat::Wecom => {
            json!({ "msgtype": "text", "text": { "content": text } })
        }
        WebhookFormat::Feishu => json!({ "msg_type": "text", "content": { "text": text } }),
        WebhookFormat::Telegram => {
            let chat = url::Url::parse(url).ok().and_then(|u| {
                u.query_pairs()
                    .find(|(k, _)| k == "chat_id")
                    .map(|(_, v)| v.into_owned())
            });
            json!({ "chat_id": chat, "text": text })
        }
    }
}

/// Why a robot that answered 200 did not take the message, if it did not.
fn refusal(format: WebhookFormat, answer: &Value) -> Option<String> {
    let reason = |code: &Value, message: &Value| {
        format!(
            "{} (code {code})",
            message.as_str().unwrap_or("no reason given")
        )
    };
    match format {
        WebhookFormat::Json | WebhookFormat::Slack => None,
        WebhookFormat::Dingtalk | WebhookFormat::Wecom => match &answer["errcode"] {
            Value::Number(n) if n.as_i64() == Some(0) => None,
            code => Some(reason(code, &answer["errmsg"])),
        },
        WebhookFormat::Feishu => match (&answer["code"], &answer["StatusCode"]) {
            (Value::Number(n), _) | (_, Value::Number(n)) if n.as_i64() == Some(0) => None,
            (Value::Null, code) | (code, _) => Some(reason(code, &answer["msg"])),
        },
        WebhookFormat::Telegram => match answer["ok"].as_bool() {
            Some(true) => None,
            _ => Some(reason(&answer["error_code"], &answer["description"])),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload() -> Value {
        json!({
            "event": "failure", "workflow_instance_id": 7, "project": "p", "workflow": "etl",
            "state": "failure", "started_at": "t0", "ended_at": "t1", "failed_tasks": ["load"],
        })
    }

    #[test]
    fn each_robot_gets_its_own_text_message() {
        let text = summary(&payload());
        assert_eq!(
            body(
                "https://oapi.dingtalk.com/robot/send?access_token=x",
                WebhookFormat::Dingtalk,
                &payload()
            ),
            json!({ "msgtype": "text", "text": { "content": text } })
        );
        assert_eq!(
            body(
                "https://open.feishu.cn/open-apis/bot/v2/hook/x",
                WebhookFormat::Feishu,
                &payload()
            ),
            json!({ "msg_type": "text", "content": { "text": text } })
        );
        assert_eq!(
            body(
                "https://api.telegram.org/botT/sendMessage?chat_id=-100123",
                WebhookFormat::Telegram,
                &payload()
            ),
            json!({ "chat_id": "-100123", "text": text })
        );
    }

    #[test]
    fn a_robot_s_error_in_a_200_answer_is_a_failure() {
        let dingtalk = json!({ "errcode": 310000, "errmsg": "keywords not in content" });
        assert_eq!(
            refusal(WebhookFormat::Dingtalk, &dingtalk).as_deref(),
            Some("keywords not in content (code 310000)")
        );
        assert_eq!(
            refusal(
                WebhookFormat::Wecom,
                &json!({ "errcode": 0, "errmsg": "ok" })
            ),
            None
        );
        assert_eq!(
            refusal(
                WebhookFormat::Feishu,
                &json!({ "code": 0, "msg": "success" })
            ),
            None
        );
        assert_eq!(
            refusal(WebhookFormat::Feishu, &json!({ "StatusCode": 0 })),
            None
        );
        assert!(
            refusal(
                WebhookFormat::Feishu,
                &json!({ "code": 19021, "msg": "sign match fail" })
            )
            .is_some()
        );
        assert!(
            refusal(
                WebhookFormat::Telegram,
                &json!({ "ok": false, "error_code": 400, "description": "chat not found" })
            )
            .is_some()
        );
        assert_eq!(
            refusal(WebhookFormat::Telegram, &json!({ "ok": true })),
            None
        );
        assert!(refusal(WebhookFormat::Dingtalk, &Value::Null).is_some());
    }
}
