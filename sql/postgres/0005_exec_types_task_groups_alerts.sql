-- Execution types, task groups and alerts. Keep in step with the SQLite twin.

-- Why an instance waits (serial_wait) or was discarded (serial_discard, serial_priority).
ALTER TABLE workflow_instance ADD COLUMN message TEXT;
-- The serial check of a start looks for the active runs of one workflow.
CREATE INDEX workflow_instance_active ON workflow_instance (project, workflow, state);
-- Masters look for waiting runs whose workflow has none active any more (a safety net).
CREATE INDEX workflow_instance_serial_wait ON workflow_instance (project, workflow)
    WHERE state = 'serial_wait';

-- A task group: `slots` attempts of its tasks may hold a slot at once, across workflows
-- and masters. An attempt holds a slot while its row is submitted, dispatched or running
-- with `task_group` set; it waits as `waiting_task_group`. So a slot is released by the
-- very write that ends the attempt.
CREATE TABLE task_group (
    name        TEXT PRIMARY KEY,
    slots       INT NOT NULL CHECK (slots > 0),
    description TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL
);
ALTER TABLE task_instance ADD COLUMN task_group TEXT;
ALTER TABLE task_instance ADD COLUMN task_group_priority INT NOT NULL DEFAULT 0;
CREATE INDEX task_instance_task_group ON task_instance (task_group, state)
    WHERE task_group IS NOT NULL;

-- Where alerts go: kind webhook (config {url, format}) or log.
CREATE TABLE alert_channel (
    name       TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    config     TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

-- The alert outbox: written with the instance's terminal state, delivered by a master's
-- sender, which leases a row (lease_owner, lease_until) while it delivers it.
CREATE TABLE alert (
    id                   BIGSERIAL PRIMARY KEY,
    workflow_instance_id BIGINT NOT NULL,
    channel              TEXT NOT NULL,
    event                TEXT NOT NULL,
    payload              TEXT NOT NULL,
    state                TEXT NOT NULL,
    attempts             INT NOT NULL DEFAULT 0,
    last_error           TEXT,
    next_attempt_at      BIGINT NOT NULL,
    lease_owner          TEXT,
    lease_until          BIGINT,
    created_at           BIGINT NOT NULL,
    sent_at              BIGINT
);
CREATE INDEX alert_due ON alert (state, next_attempt_at);
CREATE INDEX alert_instance ON alert (workflow_instance_id);
