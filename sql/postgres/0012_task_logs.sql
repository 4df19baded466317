-- The end of each finished task attempt's log (at most 256 KiB, its last bytes), sent by
-- the worker with the attempt's end, so the log stays readable when the worker is gone.
-- `size` is the whole log's size: `content` holds its bytes from `size - length(content)`.
-- Keep in step with the SQLite twin.
CREATE TABLE task_log (
    task_instance_id BIGINT PRIMARY KEY REFERENCES task_instance (id),
    content          BYTEA NOT NULL,
    size             BIGINT NOT NULL
);
