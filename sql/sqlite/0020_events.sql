-- Events that complete waiting tasks (`POST /projects/{project}/events/{event}`).
-- `event_wait`: a wait task waiting for an event and key, written with the attempt's
-- `waiting` row and deleted when the attempt ends. `kept_event`: an event that completed
-- no waiting task, kept until `expires_at` for the first wait of its event and key that
-- begins before then (taken in the transaction that ends that wait). `data` is the
-- outputs as a JSON object of strings. Keep in step with the Postgres twin.
CREATE TABLE event_wait (
    task_instance_id     INTEGER PRIMARY KEY REFERENCES task_instance (id),
    workflow_instance_id INTEGER NOT NULL,
    project              TEXT NOT NULL,
    event                TEXT NOT NULL,
    event_key            TEXT NOT NULL
);
CREATE INDEX event_wait_by_key ON event_wait (project, event, event_key);

CREATE TABLE kept_event (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    project     TEXT NOT NULL REFERENCES project (name) ON DELETE CASCADE,
    event       TEXT NOT NULL,
    event_key   TEXT NOT NULL,
    data        TEXT NOT NULL,
    received_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
CREATE INDEX kept_event_by_key ON kept_event (project, event, event_key, id);
CREATE INDEX kept_event_expiry ON kept_event (expires_at);
