-- One row per attempt: a write retried after its outcome was lost can find its rows there
-- and must not add them twice. Keep in step with the twin of the other backend.
CREATE UNIQUE INDEX task_instance_attempt
    ON task_instance (workflow_instance_id, run, name, attempt);
