-- Cron schedules (one per workflow) and backfills. Keep in step with
-- sql/sqlite/0004_schedules.sql.
CREATE TABLE schedule (
    id               BIGSERIAL PRIMARY KEY,
    project          TEXT NOT NULL,
    workflow         TEXT NOT NULL,
    cron             TEXT NOT NULL,
    timezone         TEXT NOT NULL,
    start_time       BIGINT,
    end_time         BIGINT,
    enabled          BOOLEAN NOT NULL,
    misfire          TEXT NOT NULL DEFAULT 'run_once', -- run_all | run_once | skip
    params           TEXT NOT NULL DEFAULT '{}',
    priority         TEXT,
    worker_group     TEXT,
    failure_strategy TEXT,
    -- Every fire at or before this instant has been run or dropped (the leader's cursor).
    fired_until      BIGINT NOT NULL,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    UNIQUE (project, workflow)
);

-- One row per fire, written in the transaction that writes the fire's command: the
-- primary key makes a second fire of the same schedule time impossible, also when the
-- command has long become an instance and across leader changes.
CREATE TABLE schedule_fire (
    schedule_id   BIGINT NOT NULL,
    schedule_time BIGINT NOT NULL,
    command_id    BIGINT NOT NULL,
    PRIMARY KEY (schedule_id, schedule_time)
);

-- The instant a cron or backfill run stands for (NULL for other runs).
ALTER TABLE command ADD COLUMN schedule_time BIGINT;
ALTER TABLE workflow_instance ADD COLUMN schedule_time BIGINT;

-- A backfill: one run per schedule time, started by the leader master as earlier ones end.
CREATE TABLE backfill (
    id              BIGSERIAL PRIMARY KEY,
    project         TEXT NOT NULL,
    workflow        TEXT NOT NULL,
    version         INT NOT NULL,
    params          TEXT NOT NULL,
    priority        TEXT,
    options         TEXT NOT NULL,
    parallel        INT NOT NULL,
    stop_on_failure BOOLEAN NOT NULL,
    state           TEXT NOT NULL, -- running | success | failure
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
CREATE INDEX backfill_state ON backfill (state);

CREATE TABLE backfill_run (
    backfill_id          BIGINT NOT NULL REFERENCES backfill (id),
    position             INT NOT NULL, -- start order
    schedule_time        BIGINT NOT NULL,
    state                TEXT NOT NULL, -- pending | running | success | failure | skipped
    command_id           BIGINT,
    workflow_instance_id BIGINT,
    error                TEXT,
    PRIMARY KEY (backfill_id, position)
);
