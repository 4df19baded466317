-- Idempotency keys of webhook trigger calls: a call that repeats a key gets the run the
-- first call started instead of a second one. Written in the transaction of the start
-- command; `workflow_instance_id` is filled in once the command became an instance (a
-- rerun re-points the instance to its own command). `params_hash` (SHA-256 of the mapped
-- parameters) tells a retry from another payload sent under the same key. Keep in step
-- with the Postgres twin.
CREATE TABLE trigger_call (
    project              TEXT NOT NULL REFERENCES project (name) ON DELETE CASCADE,
    workflow             TEXT NOT NULL,
    trigger_name         TEXT NOT NULL,
    idempotency_key      TEXT NOT NULL,
    params_hash          TEXT NOT NULL,
    command_id           BIGINT NOT NULL,
    workflow_instance_id BIGINT,
    created_at           BIGINT NOT NULL,
    PRIMARY KEY (project, workflow, trigger_name, idempotency_key)
);
