-- One-time callback tokens of callback tasks, kept as their SHA-256. A task may hold more
-- than one (a master that took it over before the first request was marked sent arms a
-- new one); any of them completes it once. Keep in step with the SQLite twin.
CREATE TABLE task_callback (
    token_hash       TEXT PRIMARY KEY,
    task_instance_id BIGINT NOT NULL REFERENCES task_instance (id),
    created_at       BIGINT NOT NULL,
    -- When the request carrying this token was answered as expected.
    sent_at          BIGINT
);
CREATE INDEX task_callback_task ON task_callback (task_instance_id);
