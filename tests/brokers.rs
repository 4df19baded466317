//! Broker triggers and publish tasks end to end, over the real `shoal standalone` and the
//! brokers running on the machine (RabbitMQ on 5672, NATS with JetStream on 4222,
//! Mosquitto on 1883): messages start runs with their mapped parameters, once each (a
//! redelivered message, one copied within a burst the consumer takes in batches, and one
//! whose consumer was killed after its run was written but before its acknowledgement
//! reached the broker, start no second run); `when` filters; unusable messages are kept
//! as ignored with the reason; an event trigger completes a waiting task; a consumer that
//! cannot connect says why and heals; publish tasks reach each broker, and fail clearly
//! (and retry) when the broker is not there. Every test uses queues, streams, subjects and
//! topics of its own.

mod support;
#[path = "support/tls_proxy.rs"]
mod tls_proxy;

use serde_json::{Value, json};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use support::{Env, LONG, Standalone, TcpProxy, attempts, lines, set_secret, wait_for};

const AMQP: &str = "127.0.0.1:5672";
const NATS: &str = "127.0.0.1:4222";
const MQTT: &str = "127.0.0.1:1883";

/// A name no other test (nor an earlier run) uses.
fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{}_{now}_{n}", std::process::id())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A workflow `name` whose one task appends `${order}` to `file`, with `trigger` (YAML).
fn recording_workflow(name: &str, trigger: &str, file: &Path) -> String {
    format!(
        r#"
name: {name}
params: {{ order: none }}
triggers:
  - {trigger}
tasks:
  - {{ name: record, type: shell, command: "echo ${{order}} >> {}" }}
"#,
        file.display()
    )
}

/// The trigger `name` as listed, once its consumer is in `state`.
fn consumer_in(e: &Env, name: &str, state: &str) -> Value {
    wait_for(
        &format!("trigger {name}'s consumer to be {state}"),
        LONG,
        || {
            let listed = e.api().get("/projects/default/triggers");
            let t = listed
                .as_array()?
                .iter()
                .find(|t| t["name"] == name)?
                .clone();
            (t["consumer"]["state"] == state).then_some(t)
        },
    )
}

/// `shoal_trigger_messages_total` of trigger `default/{workflow}/{trigger}` and `outcome`.
fn counted(e: &Env, workflow: &str, trigger: &str, outcome: &str) -> u64 {
    let line = format!(
        "shoal_trigger_messages_total{{trigger=\"default/{workflow}/{trigger}\",outcome=\"{outcome}\"}} "
    );
    let text = e.api().get_text("/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(&line)?.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits until the trigger counted `want` messages of each outcome.
fn wait_counted(e: &Env, workflow: &str, trigger: &str, want: &[(&str, u64)]) {
    wait_for(&format!("{trigger} to count {want:?}"), LONG, || {
        want.iter()
            .all(|(outcome, n)| counted(e, workflow, trigger, outcome) == *n)
            .then_some(())
    });
}

/// The trigger `name` as listed, once its consumer shows these counts by outcome (written
/// with its state every few seconds, so the API shows them from any process).
fn consumer_counted(e: &Env, name: &str, want: Value) -> Value {
    wait_for(
        &format!("trigger {name}'s consumer to show {want}"),
        LONG,
        || {
            let listed = e.api().get("/projects/default/triggers");
            let t = listed.as_array()?.iter().find(|t| t["name"] == name)?;
            (t["consumer"]["messages"] == want).then(|| t.clone())
        },
    )
}

/// The lines of `file`, sorted, once there are `n`.
fn recorded(file: &Path, n: usize) -> Vec<String> {
    wait_for(&format!("{n} runs to record"), LONG, || {
        let mut got = lines(file);
        got.sort();
        (got.len() >= n).then_some(got)
    })
}

/// How many runs of `workflow` there are.
fn runs_of(e: &Env, workflow: &str) -> usize {
    let list = e
        .api()
        .get(&format!("/instances?workflow={workflow}&limit=10000"));
    list.as_array().unwrap().len()
}

// ---- the brokers' own clients, as a publisher or a reader outside shoal ----

mod amqp {
    use amqprs::channel::{BasicGetArguments, BasicPublishArguments, QueueDeclareArguments};
    use amqprs::{BasicProperties, FieldTable, FieldValue};
    use shoal_common::broker::amqp::{Opened, open};
    use std::collections::BTreeMap;

    async fn connect() -> Opened {
        open(&format!("amqp://{}/", super::AMQP), "shoal test")
            .await
            .unwrap()
    }

    /// Declares `queue`; it goes a minute after its last consumer.
    pub async fn declare(queue: &str) {
        let o = connect().await;
        let mut expires = FieldTable::new();
        expires.insert("x-expires".try_into().unwrap(), FieldValue::I(60_000));
        let args = QueueDeclareArguments::new(queue)
            .arguments(expires)
            .finish();
        o.channel.queue_declare(args).await.unwrap();
    }

    /// Messages ready in `queue` (not those delivered and unacknowledged).
    pub async fn ready(queue: &str) -> u32 {
        counts(queue).await.0
    }

    /// Messages ready in `queue`, and its consumers.
    pub async fn counts(queue: &str) -> (u32, u32) {
        let o = connect().await;
        let args = QueueDeclareArguments::new(queue).passive(true).finish();
        let (_, messages, consumers) = o.channel.queue_declare(args).await.unwrap().unwrap();
        (messages, consumers)
    }

    pub async fn publish(queue: &str, body: &str, message_id: Option<&str>) {
        let o = connect().await;
        let mut props = BasicProperties::default();
        if let Some(id) = message_id {
            props.with_message_id(id);
        }
        let args = BasicPublishArguments::new("", queue);
        o.channel
            .basic_publish(props, body.as_bytes().to_vec(), args)
            .await
            .unwrap();
        // Closed (flushing the message) before it returns.
        o.channel.close().await.unwrap();
    }

    /// Publishes `bodies` to `queue` in order, over one connection.
    pub async fn publish_all(queue: &str, bodies: &[String]) {
        let o = connect().await;
        for body in bodies {
            let args = BasicPublishArguments::new("", queue);
            let props = BasicProperties::default();
            o.channel
                .basic_publish(props, body.as_bytes().to_vec(), args)
                .await
                .unwrap();
        }
        o.channel.close().await.unwrap();
    }

    /// The next message of `queue`: its body and headers.
    pub async fn get(queue: &str) -> Option<(String, BTreeMap<String, String>)> {
        let o = connect().await;
        let args = BasicGetArguments::new(queue).no_ack(true).finish();
        let (_, props, body) = o.channel.basic_get(args).await.unwrap()?;
        let headers = props.headers().map_or_else(BTreeMap::new, |h| {
            h.as_ref()
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        });
        Some((String::from_utf8(body).unwrap(), headers))
    }
}

mod nats {
    use async_nats::jetstream::{self, consumer::pull, stream};
    use shoal_common::broker::nats::connect;
    use tokio_stream::StreamExt;

    async fn js() -> jetstream::Context {
        let url = format!("nats://{}", super::NATS);
        jetstream::new(connect(&url, "shoal test").await.unwrap().0)
    }

    /// A stream `name` capturing `subjects`.
    pub async fn stream(name: &str, subjects: &str) {
        let config = stream::Config {
            name: name.to_string(),
            subjects: vec![subjects.to_string()],
            ..Default::default()
        };
        js().await.create_stream(config).await.unwrap();
    }

    pub async fn delete_stream(name: &str) {
        let _ = js().await.delete_stream(name).await;
    }

    pub async fn publish(subject: &str, body: &str) {
        // Kept until the ack came: dropping the last handle closes the connection.
        let js = js().await;
        let ack = js
            .publish(subject.to_string(), body.to_string().into())
            .await
            .unwrap();
        ack.await.unwrap();
    }

    /// Publishes `bodies` to `subject` in order, once the stream stored each.
    pub async fn publish_all(subject: &str, bodies: &[String]) {
        let js = js().await;
        let mut acks = Vec::new();
        for body in bodies {
            let ack = js
                .publish(subject.to_string(), body.clone().into())
                .await
                .unwrap();
            acks.push(ack);
        }
        for ack in acks {
            ack.await.unwrap();
        }
    }

    /// The first message of stream `name`: its body and its `x-order` header.
    pub async fn first(name: &str) -> (String, Option<String>) {
        let stream = js().await.get_stream(name).await.unwrap();
        let consumer = stream
            .create_consumer(pull::Config::default())
            .await
            .unwrap();
        let mut batch = consumer.fetch().max_messages(1).messages().await.unwrap();
        let m = batch.next().await.unwrap().unwrap();
        let header = m
            .headers
            .as_ref()
            .and_then(|h| h.get("x-order"))
            .map(|v| v.to_string());
        (String::from_utf8(m.payload.to_vec()).unwrap(), header)
    }
}

mod mqtt {
    use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
    use tokio::sync::mpsc;

    fn options(id: &str) -> MqttOptions {
        let (host, port) = super::MQTT.split_once(':').unwrap();
        MqttOptions::new(id, host, port.parse().unwrap())
    }

    pub async fn publish(topic: &str, body: &str) {
        let (client, mut events) = AsyncClient::new(options(&super::unique("pub")), 4);
        client
            .publish(topic, QoS::AtLeastOnce, false, body.as_bytes().to_vec())
            .await
            .unwrap();
        loop {
            if let Event::Incoming(Packet::PubAck(_)) = events.poll().await.unwrap() {
                return;
            }
        }
    }

    /// Publishes `bodies` to `topic` in order at QoS 1, until the broker acknowledged each.
    pub async fn publish_all(topic: &str, bodies: &[String]) {
        let (client, mut events) = AsyncClient::new(options(&super::unique("pub")), 16);
        let n = bodies.len();
        let acked = tokio::spawn(async move {
            let mut acked = 0;
            while acked < n {
                if let Event::Incoming(Packet::PubAck(_)) = events.poll().await.unwrap() {
                    acked += 1;
                }
            }
        });
        for body in bodies {
            client
                .publish(topic, QoS::AtLeastOnce, false, body.as_bytes().to_vec())
                .await
                .unwrap();
        }
        acked.await.unwrap();
    }

    /// Ends the persistent session of client `id` (connecting with a clean session does).
    pub async fn end_session(id: &str) {
        let mut opts = options(id);
        opts.set_clean_session(true);
        let (client, mut events) = AsyncClient::new(opts, 4);
        loop {
            if let Event::Incoming(Packet::ConnAck(_)) = events.poll().await.unwrap() {
                break;
            }
        }
        client.disconnect().await.unwrap();
        // Sent once the event loop runs again.
        let _ = events.poll().await;
    }

    /// The bodies of the messages of `topic` from now on (subscribed once this returns).
    pub async fn subscribe(topic: &str) -> mpsc::UnboundedReceiver<String> {
        let (client, mut events) = AsyncClient::new(options(&super::unique("sub")), 4);
        client.subscribe(topic, QoS::AtLeastOnce).await.unwrap();
        loop {
            if let Event::Incoming(Packet::SubAck(_)) = events.poll().await.unwrap() {
                break;
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let _client = client;
            while let Ok(event) = events.poll().await {
                if let Event::Incoming(Packet::Publish(p)) = event {
                    let _ = tx.send(String::from_utf8_lossy(&p.payload).into_owned());
                }
            }
        });
        rx
    }
}

// ---- broker triggers ----

#[test]
fn amqp_messages_start_runs_with_their_params_once_each_and_when_filters() {
    let e = Env::Standalone(Standalone::start());
    let rt = runtime();
    let queue = unique("orders");
    rt.block_on(amqp::declare(&queue));
    // The URL with its password is a project secret.
    set_secret(&e, "RABBIT", &format!("amqp://guest:guest@{AMQP}/"));
    let file = e.path("runs");
    e.apply(&recording_workflow(
        "shop",
        &format!(
            "{{ name: orders, type: amqp, url: '${{secret.RABBIT}}', queue: {queue}, \
             when: 'body.total > 10', params: {{ order: $.id }} }}"
        ),
        &file,
    ));
    let listed = consumer_in(&e, "orders", "connected");
    assert_eq!(listed["type"], "amqp");
    assert_eq!(listed["consumes"], queue.as_str());
    assert_eq!(listed["url"], "${secret.RABBIT}");
    assert_eq!(listed["path"], Value::Null);

    rt.block_on(async {
        for (body, id) in [
            (json!({"id": "a", "total": 50}), "m-a"),
            (json!({"id": "b", "total": 5}), "m-b"),
            (json!({"id": "c", "total": 20}), "m-c"),
            // The first one again, as a broker redelivers it: same message id.
            (json!({"id": "a", "total": 50}), "m-a"),
        ] {
            amqp::publish(&queue, &body.to_string(), Some(id)).await;
        }
    });
    wait_counted(
        &e,
        "shop",
        "orders",
        &[("started", 2), ("filtered", 1), ("duplicate", 1)],
    );
    let want = json!({"started": 2, "filtered": 1, "duplicate": 1, "ignored": 0, "delivered": 0});
    let listed = consumer_counted(&e, "orders", want);
    assert!(
        listed["consumer"]["last_message_at"].is_string(),
        "{listed}"
    );
    assert_eq!(recorded(&file, 2), ["a", "c"]);
    assert_eq!(runs_of(&e, "shop"), 2);
    assert_eq!(
        rt.block_on(amqp::ready(&queue)),
        0,
        "every message acknowledged"
    );

    // Offline, the consumer goes; online again, it comes back.
    take_offline(&e, "shop");
    let (status, body) = e.api().post("/projects/default/workflows/shop/online", "");
    assert_eq!(status, 200, "{body}");
    consumer_in(&e, "orders", "connected");
}

#[test]
fn a_cluster_of_two_masters_runs_one_consumer_and_starts_each_message_once() {
    let e = Env::Cluster(support::MiniCluster::start(2, 1));
    let rt = runtime();
    let queue = unique("orders");
    rt.block_on(amqp::declare(&queue));
    e.apply(&format!(
        r#"
name: shop
params: {{ order: none }}
triggers:
  - {{ name: orders, type: amqp, url: 'amqp://{AMQP}/', queue: {queue}, key: $.id, params: {{ order: $.id }} }}
tasks:
  - {{ name: record, type: noop }}
"#
    ));
    let listed = consumer_in(&e, "orders", "connected");
    assert!(listed["consumer"]["master"].is_string(), "{listed}");
    rt.block_on(async {
        for n in 0..20 {
            let body = json!({ "id": n % 10 }).to_string();
            amqp::publish(&queue, &body, None).await;
        }
    });
    wait_for("ten runs", LONG, || {
        (runs_of(&e, "shop") == 10).then_some(())
    });
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(runs_of(&e, "shop"), 10, "one run per key");
    assert_eq!(
        rt.block_on(amqp::counts(&queue)),
        (0, 1),
        "one consumer, nothing left"
    );
}

#[test]
fn nats_messages_start_one_run_per_key() {
    let e = Env::Standalone(Standalone::start());
    let rt = runtime();
    let (stream, subject) = (unique("S"), unique("orders"));
    rt.block_on(nats::stream(&stream, &format!("{subject}.>")));
    let file = e.path("runs");
    e.apply(&recording_workflow(
        "shop",
        &format!(
            "{{ name: orders, type: nats, url: 'nats://{NATS}', subject: '{subject}.*', \
             key: $.id, params: {{ order: $.id }} }}"
        ),
        &file,
    ));
    consumer_in(&e, "orders", "connected");
    rt.block_on(async {
        for id in ["x", "y", "x"] {
            let body = json!({ "id": id }).to_string();
            nats::publish(&format!("{subject}.created"), &body).await;
        }
    });
    wait_counted(&e, "shop", "orders", &[("started", 2), ("duplicate", 1)]);
    assert_eq!(recorded(&file, 2), ["x", "y"]);
    assert_eq!(runs_of(&e, "shop"), 2);
    rt.block_on(nats::delete_stream(&stream));
}

#[test]
fn mqtt_messages_start_one_run_per_key() {
    let e = Env::Standalone(Standalone::start());
    let rt = runtime();
    let topic = format!("shoal/{}", unique("orders"));
    let file = e.path("runs");
    // Its own workflow name: an MQTT consumer's client id is named for its trigger, and
    // the broker drops one of two connections of one client id.
    let shop = unique("shop");
    e.apply(&recording_workflow(
        &shop,
        &format!(
            "{{ name: orders, type: mqtt, url: 'mqtt://{MQTT}', topic: '{topic}/+', \
             key: $.id, params: {{ order: $.id }}, when: \"headers.topic.endsWith('/new')\" }}"
        ),
        &file,
    ));
    consumer_in(&e, "orders", "connected");
    rt.block_on(async {
        for (id, kind) in [("1", "new"), ("2", "new"), ("1", "new"), ("3", "old")] {
            let body = json!({ "id": id }).to_string();
            mqtt::publish(&format!("{topic}/{kind}"), &body).await;
        }
    });
    wait_counted(
        &e,
        &shop,
        "orders",
        &[("started", 2), ("duplicate", 1), ("filtered", 1)],
    );
    assert_eq!(recorded(&file, 2), ["1", "2"]);
}

#[test]
fn unusable_messages_are_acknowledged_and_kept_as_ignored_with_the_reason() {
    let e = Env::Standalone(Standalone::start());
    let rt = runtime();
    let queue = unique("orders");
    rt.block_on(amqp::declare(&queue));
    let file = e.path("runs");
    e.apply(&recording_workflow(
        "shop",
        &format!(
            "{{ name: orders, type: amqp, url: 'amqp://{AMQP}/', queue: {queue}, \
             params: {{ order: $.id }} }}"
        ),
        &file,
    ));
    consumer_in(&e, "orders", "connected");
    rt.block_on(async {
        amqp::publish(&queue, "{not json", None).await;
        amqp::publish(&queue, r#"{"total": 5}"#, None).await;
        amqp::publish(&queue, r#"{"id": "ok"}"#, None).await;
    });
    wait_counted(&e, "shop", "orders", &[("ignored", 2), ("started", 1)]);
    let ignored = e
        .api()
        .get("/projects/default/workflows/shop/triggers/orders/ignored");
    let ignored = ignored.as_array().unwrap();
    assert_eq!(ignored.len(), 2, "{ignored:?}");
    // Newest first.
    assert_eq!(ignored[0]["body"], r#"{"total": 5}"#);
    let reason = ignored[0]["reason"].as_str().unwrap();
    assert!(reason.contains("no value at $.id"), "{reason}");
    assert_eq!(ignored[1]["body"], "{not json");
    let reason = ignored[1]["reason"].as_str().unwrap();
    assert!(reason.starts_with("the body is not JSON"), "{reason}");
    assert_eq!(recorded(&file, 1), ["ok"]);
    assert_eq!(rt.block_on(amqp::ready(&queue)), 0, "nothing left to retry");
    let status = e
        .api()
        .status("/projects/default/workflows/shop/triggers/nope/ignored");
    assert_eq!(status, 404);
}

#[test]
fn an_event_trigger_completes_the_task_waiting_for_its_key() {
    let e = Env::Standalone(Standalone::start());
    let rt = runtime();
    let (stream, subject) = (unique("S"), unique("payments"));
    rt.block_on(nats::stream(&stream, &subject));
    let done = e.path("done");
    e.apply(&format!(
        r#"
name: orders
params: {{ order_id: "0" }}
triggers:
  - {{ name: payments, type: nats, url: 'nats://{NATS}', subject: {subject}, event: order_paid, key: $.order, params: {{ status: $.status }} }}
tasks:
  - {{ name: paid, type: wait, event: order_paid, key: "${{order_id}}", timeout: 10m }}
  - name: route
    type: switch
    depends_on: [paid]
    switch: {{ cases: [{{ when: "outputs.paid.status == 'ok'", then: ship }}], default: refund }}
  - {{ name: ship, type: shell, depends_on: [route], command: "echo ship ${{order_id}} >> {f}" }}
  - {{ name: refund, type: shell, depends_on: [route], command: "echo refund ${{order_id}} >> {f}" }}
"#,
        f = done.display()
    ));
    consumer_in(&e, "payments", "connected");
    let id = e.start("orders", r#"{"params": {"order_id": "42"}}"#);
    wait_for("the order to wait", LONG, || {
        let inst = e.api().get(&format!("/instances/{id}"));
        let paid = attempts(&inst, "paid").into_iter().next()?.clone();
        (paid["state"] == "waiting").then_some(())
    });
    let body = json!({"order": "42", "status": "ok"}).to_string();
    rt.block_on(nats::publish(&subject, &body));
    let inst = e.wait_state(id, &["success", "failure"]);
    assert_eq!(inst["state"], "success", "{inst}");
    assert_eq!(lines(&done), ["ship 42"]);
    wait_counted(&e, "orders", "payments", &[("delivered", 1)]);
    // Nothing else was started by it.
    assert_eq!(runs_of(&e, "orders"), 1);
    rt.block_on(nats::delete_stream(&stream));
}

/// Which broker a burst or fault test runs against.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Amqp,
    Nats,
    Mqtt,
}

impl Kind {
    /// Makes what a trigger named for `name` consumes (a queue, a stream; MQTT needs
    /// none): the trigger's type, its broker's address and the field that names it.
    fn consumed(
        self,
        rt: &tokio::runtime::Runtime,
        name: &str,
    ) -> (&'static str, &'static str, String) {
        match self {
            Kind::Amqp => {
                rt.block_on(amqp::declare(name));
                ("amqp", AMQP, format!("queue: {name}"))
            }
            Kind::Nats => {
                rt.block_on(nats::stream(name, name));
                ("nats", NATS, format!("subject: {name}"))
            }
            Kind::Mqtt => ("mqtt", MQTT, format!("topic: shoal/{name}")),
        }
    }

    /// Checks that nothing of `name` is left to deliver and removes what can go.
    fn done(self, rt: &tokio::runtime::Runtime, name: &str) {
        match self {
            Kind::Amqp => assert_eq!(rt.block_on(amqp::ready(name)), 0),
            Kind::Nats => rt.block_on(nats::delete_stream(name)),
            Kind::Mqtt => {}
        }
    }
}

/// Takes `workflow` (the one with a trigger) offline, once its consumer went.
fn take_offline(e: &Env, workflow: &str) {
    let path = format!("/projects/default/workflows/{workflow}/offline");
    let (status, body) = e.api().post(&path, "");
    assert_eq!(status, 200, "{body}");
    wait_for("the consumer to go", LONG, || {
        let listed = e.api().get("/projects/default/triggers");
        listed[0]["consumer"].is_null().then_some(())
    });
}

/// A burst of messages, waiting while the trigger is offline, reaches the consumer at
/// once when it comes back (so it takes them in batches): with two copies of some
/// (next to each other, as in one batch) and one that is not JSON, each order starts
/// exactly one run, the copies count as duplicates and the bad one is kept as ignored.
fn a_burst_starts_each_run_once(kind: Kind) {
    const ORDERS: usize = 150;
    let e = Env::Standalone(Standalone::start());
    let rt = runtime();
    let name = unique("burst");
    // Its own workflow name: an MQTT consumer's client id is named for its trigger, and
    // the broker drops one of two connections of one client id.
    let workflow = name.as_str();
    let (scheme, upstream, target) = kind.consumed(&rt, &name);
    let file = e.path("runs");
    let trigger = format!(
        "{{ name: orders, type: {scheme}, url: '{scheme}://{upstream}', {target}, \
         key: $.id, params: {{ order: $.id }} }}"
    );
    e.apply(&recording_workflow(workflow, &trigger, &file));
    // Connected once: the queue, durable consumer or session that keeps messages is there.
    consumer_in(&e, "orders", "connected");
    take_offline(&e, workflow);

    let order = |n: usize| format!("o-{n:03}");
    let copied = [3, 64, 100];
    let mut bodies = Vec::new();
    for n in 0..ORDERS {
        let body = json!({ "id": order(n) }).to_string();
        if copied.contains(&n) {
            bodies.push(body.clone());
        }
        bodies.push(body);
        if n == ORDERS / 2 {
            bodies.push("{not json".to_string());
        }
    }
    rt.block_on(async {
        match kind {
            Kind::Amqp => amqp::publish_all(&name, &bodies).await,
            Kind::Nats => nats::publish_all(&name, &bodies).await,
            Kind::Mqtt => mqtt::publish_all(&format!("shoal/{name}"), &bodies).await,
        }
    });
    let (status, body) = e.api().post(
        &format!("/projects/default/workflows/{workflow}/online"),
        "",
    );
    assert_eq!(status, 200, "{body}");

    wait_counted(
        &e,
        workflow,
        "orders",
        &[
            ("started", ORDERS as u64),
            ("duplicate", copied.len() as u64),
            ("ignored", 1),
        ],
    );
    let want: Vec<String> = (0..ORDERS).map(order).collect();
    assert_eq!(recorded(&file, ORDERS), want);
    assert_eq!(runs_of(&e, workflow), ORDERS);
    let ignored = e.api().get(&format!(
        "/projects/default/workflows/{workflow}/triggers/orders/ignored"
    ));
    assert_eq!(ignored[0]["body"], "{not json", "{ignored}");
    // Nothing more comes: every message was acknowledged once taken.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(lines(&file).len(), ORDERS);
    kind.done(&rt, &name);
    if let Kind::Mqtt = kind {
        // The broker keeps the consumer's session (and what it queues) until told not to.
        take_offline(&e, workflow);
        let id = shoal_common::broker::durable_name("default", workflow, "orders");
        rt.block_on(mqtt::end_session(&id));
    }
}

#[test]
fn an_amqp_burst_starts_each_run_once() {
    a_burst_starts_each_run_once(Kind::Amqp);
}

#[test]
fn a_nats_burst_starts_each_run_once() {
    a_burst_starts_each_run_once(Kind::Nats);
}

#[test]
fn an_mqtt_burst_starts_each_run_once() {
    a_burst_starts_each_run_once(Kind::Mqtt);
}

/// The consumer's acknowledgement of a message is lost (a proxy swallows it) after its
/// run was written, and the process is killed (SIGKILL): the broker delivers the message
/// again to the restarted consumer, which starts no second run.
fn killed_between_commit_and_ack(kind: Kind) {
    let mut e = Env::Standalone(Standalone::start());
    let rt = runtime();
    let name = unique("orders");
    // Its own workflow name, as for a burst.
    let shop = name.as_str();
    let (scheme, upstream, target) = kind.consumed(&rt, &name);
    let proxy = TcpProxy::start(upstream);
    let file = e.path("runs");
    let trigger = format!(
        "{{ name: orders, type: {scheme}, url: '{scheme}://127.0.0.1:{}', {target}, \
         params: {{ order: $.id }} }}",
        proxy.port
    );
    e.apply(&recording_workflow(shop, &trigger, &file));
    consumer_in(&e, "orders", "connected");
    proxy.swallow_requests(true);
    let body = json!({"id": "k1"}).to_string();
    rt.block_on(async {
        match kind {
            Kind::Amqp => amqp::publish(&name, &body, Some("k1")).await,
            Kind::Nats => nats::publish(&name, &body).await,
            Kind::Mqtt => mqtt::publish(&format!("shoal/{name}"), &body).await,
        }
    });
    // The run ran: its start was committed, and the acknowledgement sent since is lost.
    // It ends before the kill (which would make its task run again, as any task's).
    assert_eq!(recorded(&file, 1), ["k1"]);
    let list = e.api().get(&format!("/instances?workflow={shop}"));
    e.wait_state(list[0]["id"].as_i64().unwrap(), &["success"]);
    proxy.swallow_requests(false);
    let Env::Standalone(s) = &mut e else {
        panic!("a standalone")
    };
    s.crash_and_restart();
    wait_for(
        &format!("{kind:?} to deliver the message again"),
        LONG,
        || (counted(&e, shop, "orders", "duplicate") == 1).then_some(()),
    );
    assert_eq!(counted(&e, shop, "orders", "started"), 0);
    assert_eq!(lines(&file), ["k1"], "one run");
    assert_eq!(runs_of(&e, shop), 1);
    kind.done(&rt, &name);
}

#[test]
fn amqp_consumer_killed_between_commit_and_ack_starts_no_second_run() {
    killed_between_commit_and_ack(Kind::Amqp);
}

#[test]
fn nats_consumer_killed_between_commit_and_ack_starts_no_second_run() {
    killed_between_commit_and_ack(Kind::Nats);
}

#[test]
fn mqtt_consumer_killed_between_commit_and_ack_starts_no_second_run() {
    killed_between_commit_and_ack(Kind::Mqtt);
}

#[test]
fn a_consumer_that_cannot_consume_says_why_and_heals_and_bad_triggers_are_refused() {
    let e = Env::Standalone(Standalone::start());
    let rt = runtime();
    let (queue, subject) = (unique("later"), unique("later"));
    let file = e.path("runs");
    e.apply(&format!(
        r#"
name: shop
params: {{ order: none }}
triggers:
  - {{ name: rabbit, type: amqp, url: 'amqp://{AMQP}/', queue: {queue}, params: {{ order: $.id }} }}
  - {{ name: jet, type: nats, url: 'nats://{NATS}', subject: {subject} }}
  - {{ name: nowhere, type: mqtt, url: 'mqtt://127.0.0.1:{closed}', topic: t }}
tasks:
  - {{ name: record, type: shell, command: "echo ${{order}} >> {f}" }}
"#,
        closed = support::free_port(),
        f = file.display()
    ));
    let error = |name: &str| consumer_in(&e, name, "failed")["consumer"]["error"].to_string();
    let rabbit = error("rabbit");
    assert!(rabbit.contains(&format!("no queue '{queue}'")), "{rabbit}");
    let jet = error("jet");
    assert!(
        jet.contains(&format!("captures subject '{subject}'")),
        "{jet}"
    );
    let nowhere = error("nowhere");
    assert!(
        nowhere.contains("cannot connect") && nowhere.contains("mqtt://127.0.0.1:"),
        "{nowhere}"
    );
    // Once the queue exists, the consumer connects again and messages start runs.
    rt.block_on(amqp::declare(&queue));
    consumer_in(&e, "rabbit", "connected");
    rt.block_on(amqp::publish(&queue, r#"{"id": "late"}"#, None));
    assert_eq!(recorded(&file, 1), ["late"]);

    for (trigger, says) in [
        (
            format!(
                "{{ name: t, type: amqp, url: 'amqp://{AMQP}/', queue: {} }}",
                "q".repeat(256)
            ),
            "queue is 256 bytes long; AMQP takes at most 255",
        ),
        (
            format!("{{ name: t, type: amqp, url: 'amqp://guest:guest@{AMQP}/', queue: q }}"),
            "url carries a password",
        ),
        (
            format!(
                "{{ name: t, type: nats, url: 'nats://{NATS}', subject: s, when: 'body.x ==' }}"
            ),
            "when:",
        ),
    ] {
        let yaml = recording_workflow("bad", &trigger, &file);
        let (status, body) = e.api().post("/projects/default/workflows", &yaml);
        assert_eq!(status, 400, "{body}");
        let error = body["error"].as_str().unwrap();
        assert!(error.contains(says), "{error}\n  want: {says}");
    }
}

/// A nats-server of its own with JetStream and TLS on a free port (the machine's has no
/// TLS listener), and a JetStream context on it that trusts `certs`' CA.
fn nats_with_tls(dir: &Path, certs: &support::Certs) -> (support::Proc, u16) {
    let port = support::free_port();
    let store = dir.join("nats-store");
    let proc = support::Proc::spawn(
        "nats-server",
        dir,
        "nats-server",
        &[
            "-a",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-js",
            "-sd",
            store.to_str().unwrap(),
            "--tls",
            "--tlscert",
            certs.cert.to_str().unwrap(),
            "--tlskey",
            certs.key.to_str().unwrap(),
        ],
        &[],
    );
    wait_for("nats-server to listen", LONG, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok()
    });
    (proc, port)
}

/// A stream capturing `subject` on the TLS nats-server at `port`.
async fn tls_stream(port: u16, ca: &Path, subject: &str) {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(ca).unwrap())
        .unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let client = async_nats::ConnectOptions::new()
        .require_tls(true)
        .tls_client_config(tls)
        .connect(format!("tls://127.0.0.1:{port}"))
        .await
        .unwrap();
    let config = async_nats::jetstream::stream::Config {
        name: subject.replace('.', "_"),
        subjects: vec![subject.to_string()],
        ..Default::default()
    };
    async_nats::jetstream::new(client)
        .create_stream(config)
        .await
        .unwrap();
}

#[test]
fn triggers_and_publish_tasks_reach_each_broker_over_tls_and_check_its_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let certs = support::make_certs(dir.path(), "brokers");
    let rogue = support::make_certs(dir.path(), "rogue");
    let amqps = tls_proxy::TlsProxy::start(AMQP, &certs);
    let mqtts = tls_proxy::TlsProxy::start(MQTT, &certs);
    let untrusted = tls_proxy::TlsProxy::start(AMQP, &rogue);
    let (_nats, nats_port) = nats_with_tls(dir.path(), &certs);
    let rt = runtime();
    let (queue, subject, topic) = (unique("tls"), unique("tls"), unique("tls"));
    rt.block_on(amqp::declare(&queue));
    rt.block_on(tls_stream(nats_port, &certs.ca, &subject));

    // The brokers' CA is trusted the way a private CA is: through SSL_CERT_FILE.
    let e = Env::Standalone(Standalone::start_with(&[(
        "SSL_CERT_FILE",
        certs.ca.to_str().unwrap(),
    )]));
    let file = e.path("orders");
    let urls = [
        (
            "amqp",
            format!("amqps://127.0.0.1:{}/", amqps.port),
            "queue",
            &queue,
        ),
        (
            "nats",
            format!("tls://127.0.0.1:{nats_port}"),
            "subject",
            &subject,
        ),
        (
            "mqtt",
            format!("mqtts://127.0.0.1:{}", mqtts.port),
            "topic",
            &topic,
        ),
    ];
    for (kind, url, field, target) in &urls {
        let trigger = format!(
            "{{ name: in_{kind}, type: {kind}, url: '{url}', {field}: {target}, params: {{ order: $.id }} }}"
        );
        e.apply(&recording_workflow(&format!("tls_{kind}"), &trigger, &file));
    }
    for (kind, ..) in &urls {
        consumer_in(&e, &format!("in_{kind}"), "connected");
    }
    let publishes: Vec<String> = urls
        .iter()
        .map(|(kind, url, field, target)| {
            format!(
                "  - {{ name: to_{kind}, type: publish, publish: {{ broker: {kind}, url: '{url}', {field}: {target}, body: '{{\"id\": \"{kind}-1\"}}' }} }}"
            )
        })
        .collect();
    e.apply(&format!(
        "name: tls_out\ntasks:\n{}\n",
        publishes.join("\n")
    ));
    let run = e.start("tls_out", "{}");
    assert_eq!(e.end(run)["state"], "success");
    assert_eq!(recorded(&file, 3), ["amqp-1", "mqtt-1", "nats-1"]);

    // A broker whose certificate no trusted CA signed is refused, and the trigger says so.
    let trigger = format!(
        "{{ name: rogue, type: amqp, url: 'amqps://127.0.0.1:{}/', queue: {queue} }}",
        untrusted.port
    );
    e.apply(&recording_workflow("tls_rogue", &trigger, &file));
    let error = consumer_in(&e, "rogue", "failed")["consumer"]["error"].to_string();
    assert!(
        error.contains("amqps://127.0.0.1:") && error.contains("certificate"),
        "{error}"
    );
}

// ---- publish tasks ----

#[test]
fn publish_tasks_reach_each_broker_and_their_values_stay_data() {
    let e = Env::Standalone(Standalone::start());
    let rt = runtime();
    let (queue, stream) = (unique("out"), unique("OUT"));
    let topic = format!("shoal/{}", unique("out"));
    rt.block_on(amqp::declare(&queue));
    rt.block_on(nats::stream(&stream, &stream));
    let mut mqtt_bodies = rt.block_on(mqtt::subscribe(&topic));
    e.apply(&format!(
        r#"
name: announce
params: {{ order: none }}
tasks:
  - name: to_rabbit
    type: publish
    publish: {{ broker: amqp, url: 'amqp://{AMQP}/', queue: {queue}, body: '{{"order": "${{order}}"}}', headers: {{ x-order: "${{order}}" }} }}
  - name: to_nats
    type: publish
    publish: {{ broker: nats, url: 'nats://{NATS}', subject: {stream}, body: '{{"order": "${{order}}"}}', headers: {{ x-order: "${{order}}" }} }}
  - name: to_mqtt
    type: publish
    publish: {{ broker: mqtt, url: 'mqtt://{MQTT}', topic: '{topic}', body: '{{"order": "${{order}}"}}' }}
"#
    ));
    // A value with what a shell or a template would read: it lands as it is.
    let order = r#"o-1 $HOME "quoted" `id`"#;
    let id = e.start("announce", &json!({"params": {"order": order}}).to_string());
    let inst = e.wait_state(id, &["success", "failure"]);
    assert_eq!(inst["state"], "success", "{inst}");
    let body = format!(r#"{{"order": "{order}"}}"#);
    let (got, headers) = rt
        .block_on(amqp::get(&queue))
        .expect("a message in the queue");
    assert_eq!(got, body);
    assert_eq!(headers["x-order"], order);
    let (got, header) = rt.block_on(nats::first(&stream));
    assert_eq!((got, header.as_deref()), (body.clone(), Some(order)));
    let got = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), mqtt_bodies.recv()).await
    });
    assert_eq!(got.unwrap().as_deref(), Some(body.as_str()));
    let (_, log) = e
        .api()
        .log(attempts(&inst, "to_nats")[0]["id"].as_i64().unwrap());
    assert!(
        log.contains(&format!("stored by nats://{NATS} in stream '{stream}'")),
        "{log}"
    );
    rt.block_on(nats::delete_stream(&stream));
}

#[test]
fn a_publish_the_broker_does_not_confirm_fails_saying_why_and_retries() {
    let e = Env::Standalone(Standalone::start());
    let closed = support::free_port();
    e.apply(&format!(
        r#"
name: announce
failure_strategy: continue
tasks:
  - name: down
    type: publish
    retries: 1
    retry_interval: 1s
    publish: {{ broker: amqp, url: 'amqp://127.0.0.1:{closed}/', queue: q, body: x }}
  - name: no_queue
    type: publish
    publish: {{ broker: amqp, url: 'amqp://{AMQP}/', queue: {missing}, body: x }}
  - name: no_stream
    type: publish
    publish: {{ broker: nats, url: 'nats://{NATS}', subject: {missing}, body: x }}
"#,
        missing = unique("missing")
    ));
    let id = e.start("announce", "{}");
    let inst = e.wait_state(id, &["failure"]);
    let message = |task: &str| {
        let tries = attempts(&inst, task);
        (tries.len(), tries.last().unwrap()["message"].to_string())
    };
    let (tries, down) = message("down");
    assert_eq!(tries, 2, "its retry ran: {inst}");
    assert!(
        down.contains(&format!("cannot connect to amqp://127.0.0.1:{closed}/")),
        "{down}"
    );
    let (_, no_queue) = message("no_queue");
    assert!(
        no_queue.contains("could not route the message to a queue"),
        "{no_queue}"
    );
    let (_, no_stream) = message("no_stream");
    assert!(
        no_stream.contains("a JetStream stream must capture subject"),
        "{no_stream}"
    );
}
