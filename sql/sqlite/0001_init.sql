-- shoal schema, SQLite. Timestamps are INTEGER milliseconds since the Unix epoch; maps are
-- JSON text. Keep in step with sql/postgres/0001_init.sql (same tables and columns).
-- AUTOINCREMENT so that ids are never reused after a delete (commands are deleted when
-- claimed, and error_command and command_status rely on a command id staying unique).

CREATE TABLE workflow_definition (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    project    TEXT NOT NULL,
    name       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    spec       TEXT NOT NULL, -- WorkflowDef as JSON
    created_at INTEGER NOT NULL,
    UNIQUE (project, name, version)
);

-- The hot queue: rows live from the API's write until a master claims them.
CREATE TABLE command (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    kind       TEXT NOT NULL,
    project    TEXT NOT NULL,
    workflow   TEXT NOT NULL,
    version    INTEGER NOT NULL,
    params     TEXT NOT NULL,
    priority   TEXT,
    created_at INTEGER NOT NULL
);

-- Commands that could not become an instance; id is the id the command had.
CREATE TABLE error_command (
    id         INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL,
    project    TEXT NOT NULL,
    workflow   TEXT NOT NULL,
    version    INTEGER NOT NULL,
    params     TEXT NOT NULL,
    error      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    failed_at  INTEGER NOT NULL
);

CREATE TABLE workflow_instance (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    -- UNIQUE: a command becomes exactly one instance.
    command_id  INTEGER NOT NULL UNIQUE,
    project     TEXT NOT NULL,
    workflow    TEXT NOT NULL,
    version     INTEGER NOT NULL,
    state       TEXT NOT NULL,
    priority    TEXT NOT NULL,
    params      TEXT NOT NULL,
    owner       TEXT,
    owner_epoch INTEGER NOT NULL,
    run         INTEGER NOT NULL DEFAULT 1,
    created_at  INTEGER NOT NULL,
    started_at  INTEGER,
    ended_at    INTEGER
);
CREATE INDEX workflow_instance_state ON workflow_instance (state);
CREATE INDEX workflow_instance_workflow ON workflow_instance (workflow);

CREATE TABLE task_instance (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_instance_id INTEGER NOT NULL REFERENCES workflow_instance (id),
    name                 TEXT NOT NULL,
    task_type            TEXT NOT NULL,
    state                TEXT NOT NULL,
    attempt              INTEGER NOT NULL,
    priority             TEXT NOT NULL,
    worker_group         TEXT NOT NULL,
    worker               TEXT,
    submitted_at         INTEGER NOT NULL,
    started_at           INTEGER,
    ended_at             INTEGER,
    exit_code            INTEGER,
    output               TEXT,
    message              TEXT
);
CREATE INDEX task_instance_workflow_instance ON task_instance (workflow_instance_id);
