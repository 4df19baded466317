-- Named environments of a project: shell lines a worker runs in the same bash before a
-- shell or python task that uses one (`export JAVA_HOME=...`, `source venv/bin/activate`).
-- Code, not a secret: kept as written. Keep in step with the Postgres twin.
CREATE TABLE environment (
    project     TEXT NOT NULL REFERENCES project (name) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    config      TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    updated_by  TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (project, name)
);
