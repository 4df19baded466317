-- Cron schedules (one per workflow) and backfills. Keep in step with
-- sql/postgres/0004_schedules.sql.
CREATE TABLE schedule (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    project          TEXT NOT NULL,
    workflow         TEXT NOT NULL,
    cron             TEXT NOT NULL,
    timezone         TEXT NOT NULL,
    start_time       INTEGER,
    end_time         INTEGER,
    enabled          INTEGER NOT NULL,
    misfire          TEXT NOT NULL DEFAULT 'run_once', -- run_all | run_once | skip
    params           TEXT NOT NULL DEFAULT '{}',
    priority         TEXT,
    worker_group     TEXT,
    failure_strategy TEXT,
    -- Every fire at or before this instant has been run or dropped (the leader's cursor).
    fired_until      INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (project, workflow)
);

-- One row per fire, written in the transaction that writes the fire's command: the
-- primary key makes a second fire of the same schedule time impossible, also when the
-- command has long become an instance and across leader changes.
CREATE TABLE schedule_fire (
    schedule_id   INTEGER NOT NULL,
    schedule_time INTEGER NOT NULL,
    command_id    INTEGER NOT NULL,
    PRIMARY KEY (schedule_id, schedule_time)
);

-- The instant a cron or backfill run stands for (NULL for other runs).
ALTER TABLE command ADD COLUMN schedule_time INTEGER;
ALTER TABLE workflow_instance ADD COLUMN schedule_time INTEGER;

-- A backfill: one run per schedule time, started by the leader master as earlier ones end.
CREATE TABLE backfill (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    project         TEXT NOT NULL,
    workflow        TEXT NOT NULL,
    version         INTEGER NOT NULL,
    params          TEXT NOT NULL,
    priority        TEXT,
    options         TEXT NOT NULL,
    parallel        INTEGER NOT NULL,
    stop_on_failure INTEGER NOT NULL,
    state           TEXT NOT NULL, -- running | success | failure
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX backfill_state ON backfill (state);

CREATE TABLE backfill_run (
    backfill_id          INTEGER NOT NULL REFERENCES backfill (id),
    position             INTEGER NOT NULL, -- start order
    schedule_time        INTEGER NOT NULL,
    state                TEXT NOT NULL, -- pending | running | success | failure | skipped
    command_id           INTEGER,
    workflow_instance_id INTEGER,
    error                TEXT,
    PRIMARY KEY (backfill_id, position)
);
