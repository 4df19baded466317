-- shoal schema, Postgres. Timestamps are BIGINT milliseconds since the Unix epoch; maps are
-- JSON text. Keep in step with sql/sqlite/0001_init.sql (same tables and columns).

CREATE TABLE workflow_definition (
    id         BIGSERIAL PRIMARY KEY,
    project    TEXT NOT NULL,
    name       TEXT NOT NULL,
    version    INT NOT NULL,
    spec       TEXT NOT NULL, -- WorkflowDef as JSON
    created_at BIGINT NOT NULL,
    UNIQUE (project, name, version)
);

-- The hot queue: rows live from the API's write until a master claims them.
CREATE TABLE command (
    id         BIGSERIAL PRIMARY KEY,
    kind       TEXT NOT NULL,
    project    TEXT NOT NULL,
    workflow   TEXT NOT NULL,
    version    INT NOT NULL,
    params     TEXT NOT NULL,
    priority   TEXT,
    created_at BIGINT NOT NULL
);

-- Commands that could not become an instance; id is the id the command had.
CREATE TABLE error_command (
    id         BIGINT PRIMARY KEY,
    kind       TEXT NOT NULL,
    project    TEXT NOT NULL,
    workflow   TEXT NOT NULL,
    version    INT NOT NULL,
    params     TEXT NOT NULL,
    error      TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    failed_at  BIGINT NOT NULL
);

CREATE TABLE workflow_instance (
    id          BIGSERIAL PRIMARY KEY,
    -- UNIQUE: a command becomes exactly one instance.
    command_id  BIGINT NOT NULL UNIQUE,
    project     TEXT NOT NULL,
    workflow    TEXT NOT NULL,
    version     INT NOT NULL,
    state       TEXT NOT NULL,
    priority    TEXT NOT NULL,
    params      TEXT NOT NULL,
    owner       TEXT,
    owner_epoch BIGINT NOT NULL,
    run         INT NOT NULL DEFAULT 1,
    created_at  BIGINT NOT NULL,
    started_at  BIGINT,
    ended_at    BIGINT
);
CREATE INDEX workflow_instance_state ON workflow_instance (state);
CREATE INDEX workflow_instance_workflow ON workflow_instance (workflow);

CREATE TABLE task_instance (
    id                   BIGSERIAL PRIMARY KEY,
    workflow_instance_id BIGINT NOT NULL REFERENCES workflow_instance (id),
    name                 TEXT NOT NULL,
    task_type            TEXT NOT NULL,
    state                TEXT NOT NULL,
    attempt              INT NOT NULL,
    priority             TEXT NOT NULL,
    worker_group         TEXT NOT NULL,
    worker               TEXT,
    submitted_at         BIGINT NOT NULL,
    started_at           BIGINT,
    ended_at             BIGINT,
    exit_code            INT,
    output               TEXT,
    message              TEXT
);
CREATE INDEX task_instance_workflow_instance ON task_instance (workflow_instance_id);
