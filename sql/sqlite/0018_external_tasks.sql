-- External tasks offered to workers outside the cluster: written with the attempt's
-- `waiting` row, taken by a poll (a lease: worker, token hash, expiry), deleted when the
-- attempt ends. `params` is the task's params expanded, as JSON, sealed with the secret
-- key when they hold a secret. Keep in step with the Postgres twin.
CREATE TABLE external_task (
    task_instance_id     INTEGER PRIMARY KEY REFERENCES task_instance (id),
    workflow_instance_id INTEGER NOT NULL,
    project              TEXT NOT NULL,
    queue                TEXT NOT NULL,
    params               TEXT NOT NULL,
    sealed               BOOLEAN NOT NULL,
    lease_ms             INTEGER NOT NULL,
    offered_at           INTEGER NOT NULL,
    worker               TEXT,
    token_hash           TEXT,
    lease_expires_at     INTEGER
);
-- A poll reads the oldest untaken offers of its queues.
CREATE INDEX external_task_ready ON external_task (queue, task_instance_id) WHERE token_hash IS NULL;
