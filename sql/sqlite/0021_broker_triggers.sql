-- Broker triggers (AMQP, NATS JetStream, MQTT). `trigger_message`: each message a
-- trigger acted on, by its identity (its `key`, else the broker's message id, else a hash
-- of its body), written in the transaction that starts its run (`command_id`) or delivers
-- its event or records it ignored: a redelivered message finds it and starts nothing.
-- `trigger_ignored`: messages that could not be used (not JSON, a mapping that failed),
-- the reason and the start of the body, the last ones per trigger. `trigger_consumer`:
-- where each trigger's consumer runs and how it fares, written by that master. Keep in
-- step with the Postgres twin.
CREATE TABLE trigger_message (
    project      TEXT NOT NULL REFERENCES project (name) ON DELETE CASCADE,
    workflow     TEXT NOT NULL,
    trigger_name TEXT NOT NULL,
    message_id   TEXT NOT NULL,
    command_id   INTEGER,
    received_at  INTEGER NOT NULL,
    PRIMARY KEY (project, workflow, trigger_name, message_id)
);
CREATE INDEX trigger_message_age ON trigger_message (received_at);

CREATE TABLE trigger_ignored (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    project      TEXT NOT NULL REFERENCES project (name) ON DELETE CASCADE,
    workflow     TEXT NOT NULL,
    trigger_name TEXT NOT NULL,
    reason       TEXT NOT NULL,
    body         TEXT NOT NULL,
    received_at  INTEGER NOT NULL
);
CREATE INDEX trigger_ignored_by_trigger ON trigger_ignored (project, workflow, trigger_name, id);

CREATE TABLE trigger_consumer (
    project         TEXT NOT NULL REFERENCES project (name) ON DELETE CASCADE,
    workflow        TEXT NOT NULL,
    trigger_name    TEXT NOT NULL,
    master          TEXT NOT NULL,
    state           TEXT NOT NULL,
    error           TEXT,
    since           INTEGER NOT NULL,
    last_message_at INTEGER,
    PRIMARY KEY (project, workflow, trigger_name)
);
