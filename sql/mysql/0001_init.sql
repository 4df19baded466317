-- The MySQL/MariaDB schema, at the state of sql/postgres/0025 (MySQL support began there;
-- later migrations are written for all three backends, in step).
--
-- Types: names are VARCHAR(128) (MAX_NAME_CHARS), other keyed text VARCHAR(255); long text
-- LONGTEXT. Tables take the database's character set and collation, which the store makes
-- utf8mb4 and case- and accent-sensitive before this runs (`mysql_collation` in
-- store/src/db.rs), so that 'ETL' and 'etl', or 'é' and 'e', are different names as on
-- Postgres and SQLite. Partial indexes of Postgres are plain ones here. MySQL runs DDL
-- outside transactions: a migration that fails half-way must be finished by hand.

CREATE TABLE workflow_definition (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    project VARCHAR(128) NOT NULL,
    name VARCHAR(128) NOT NULL,
    version INT NOT NULL,
    spec LONGTEXT NOT NULL,
    created_at BIGINT NOT NULL,
    CONSTRAINT workflow_definition_project_name_version_key UNIQUE (project, name, version)
) ENGINE = InnoDB;

CREATE TABLE command (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    kind VARCHAR(32) NOT NULL,
    project VARCHAR(128) NOT NULL,
    workflow VARCHAR(128) NOT NULL,
    version INT NOT NULL,
    params LONGTEXT NOT NULL,
    priority VARCHAR(16),
    created_at BIGINT NOT NULL,
    workflow_instance_id BIGINT,
    options LONGTEXT NOT NULL DEFAULT ('{}'),
    parent_task_id BIGINT,
    schedule_time BIGINT,
    due_at BIGINT
) ENGINE = InnoDB;
CREATE UNIQUE INDEX command_one_child ON command (parent_task_id);
CREATE UNIQUE INDEX command_one_per_instance ON command (workflow_instance_id);
CREATE INDEX command_due_at ON command (due_at);

CREATE TABLE error_command (
    id BIGINT NOT NULL PRIMARY KEY,
    kind VARCHAR(32) NOT NULL,
    project VARCHAR(128) NOT NULL,
    workflow VARCHAR(128) NOT NULL,
    version INT NOT NULL,
    params LONGTEXT NOT NULL,
    error LONGTEXT NOT NULL,
    created_at BIGINT NOT NULL,
    failed_at BIGINT NOT NULL,
    workflow_instance_id BIGINT,
    parent_task_id BIGINT
) ENGINE = InnoDB;

CREATE TABLE workflow_instance (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    command_id BIGINT NOT NULL,
    project VARCHAR(128) NOT NULL,
    workflow VARCHAR(128) NOT NULL,
    version INT NOT NULL,
    state VARCHAR(32) NOT NULL,
    priority VARCHAR(16) NOT NULL,
    params LONGTEXT NOT NULL,
    owner VARCHAR(255),
    owner_epoch BIGINT NOT NULL,
    run INT NOT NULL DEFAULT 1,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    ended_at BIGINT,
    options LONGTEXT NOT NULL DEFAULT ('{}'),
    parent_task_id BIGINT,
    schedule_time BIGINT,
    message LONGTEXT,
    CONSTRAINT workflow_instance_command_id_key UNIQUE (command_id)
) ENGINE = InnoDB;
CREATE INDEX workflow_instance_active ON workflow_instance (project, workflow, state);
CREATE INDEX workflow_instance_created ON workflow_instance (created_at, id);
CREATE INDEX workflow_instance_ended ON workflow_instance (ended_at);
CREATE INDEX workflow_instance_latest ON workflow_instance (project, workflow, created_at, id);
CREATE UNIQUE INDEX workflow_instance_one_child ON workflow_instance (parent_task_id);
CREATE INDEX workflow_instance_serial_wait ON workflow_instance (project, workflow, state);
CREATE INDEX workflow_instance_state ON workflow_instance (state, created_at, id);
CREATE INDEX workflow_instance_workflow ON workflow_instance (workflow);

CREATE TABLE task_instance (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    workflow_instance_id BIGINT NOT NULL,
    name VARCHAR(128) NOT NULL,
    task_type VARCHAR(64) NOT NULL,
    state VARCHAR(32) NOT NULL,
    attempt INT NOT NULL,
    priority VARCHAR(16) NOT NULL,
    worker_group VARCHAR(128) NOT NULL,
    worker VARCHAR(255),
    submitted_at BIGINT NOT NULL,
    started_at BIGINT,
    ended_at BIGINT,
    exit_code INT,
    output LONGTEXT,
    message LONGTEXT,
    run INT NOT NULL DEFAULT 1,
    task_group VARCHAR(128),
    task_group_priority INT NOT NULL DEFAULT 0,
    group_state VARCHAR(32) AS (CASE WHEN task_group IS NOT NULL THEN state END) STORED,
    CONSTRAINT task_instance_workflow_instance_id_fkey FOREIGN KEY (workflow_instance_id)
        REFERENCES workflow_instance (id)
) ENGINE = InnoDB;
CREATE UNIQUE INDEX task_instance_attempt ON task_instance (workflow_instance_id, run, name, attempt);
CREATE INDEX task_instance_task_group ON task_instance (task_group, group_state);
CREATE INDEX task_instance_workflow_instance ON task_instance (workflow_instance_id);

CREATE TABLE task_log (
    task_instance_id BIGINT NOT NULL PRIMARY KEY,
    content LONGBLOB NOT NULL,
    size BIGINT NOT NULL,
    CONSTRAINT task_log_task_instance_id_fkey FOREIGN KEY (task_instance_id)
        REFERENCES task_instance (id)
) ENGINE = InnoDB;

CREATE TABLE task_callback (
    token_hash VARCHAR(255) NOT NULL PRIMARY KEY,
    task_instance_id BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    sent_at BIGINT,
    CONSTRAINT task_callback_task_instance_id_fkey FOREIGN KEY (task_instance_id)
        REFERENCES task_instance (id)
) ENGINE = InnoDB;
CREATE INDEX task_callback_task ON task_callback (task_instance_id);

CREATE TABLE schedule (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    project VARCHAR(128) NOT NULL,
    workflow VARCHAR(128) NOT NULL,
    cron VARCHAR(255) NOT NULL,
    timezone VARCHAR(255) NOT NULL,
    start_time BIGINT,
    end_time BIGINT,
    enabled BOOLEAN NOT NULL,
    misfire VARCHAR(32) NOT NULL DEFAULT 'run_once',
    params LONGTEXT NOT NULL DEFAULT ('{}'),
    priority VARCHAR(16),
    worker_group VARCHAR(128),
    failure_strategy VARCHAR(32),
    fired_until BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    alert_channels LONGTEXT NOT NULL DEFAULT ('[]'),
    timeout_ms BIGINT,
    environment VARCHAR(128),
    CONSTRAINT schedule_project_workflow_key UNIQUE (project, workflow)
) ENGINE = InnoDB;

CREATE TABLE schedule_fire (
    schedule_id BIGINT NOT NULL,
    schedule_time BIGINT NOT NULL,
    command_id BIGINT NOT NULL,
    PRIMARY KEY (schedule_id, schedule_time)
) ENGINE = InnoDB;

CREATE TABLE task_group (
    name VARCHAR(128) NOT NULL PRIMARY KEY,
    slots INT NOT NULL,
    description LONGTEXT NOT NULL DEFAULT (''),
    created_at BIGINT NOT NULL,
    CONSTRAINT task_group_slots_check CHECK (slots > 0)
) ENGINE = InnoDB;

CREATE TABLE alert_channel (
    name VARCHAR(128) NOT NULL PRIMARY KEY,
    kind VARCHAR(32) NOT NULL,
    config LONGTEXT NOT NULL,
    created_at BIGINT NOT NULL
) ENGINE = InnoDB;

CREATE TABLE alert (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    workflow_instance_id BIGINT NOT NULL,
    channel VARCHAR(128) NOT NULL,
    event VARCHAR(64) NOT NULL,
    payload LONGTEXT NOT NULL,
    state VARCHAR(32) NOT NULL,
    attempts INT NOT NULL DEFAULT 0,
    last_error LONGTEXT,
    next_attempt_at BIGINT NOT NULL,
    lease_owner VARCHAR(255),
    lease_until BIGINT,
    created_at BIGINT NOT NULL,
    sent_at BIGINT
) ENGINE = InnoDB;
CREATE INDEX alert_due ON alert (state, next_attempt_at);
CREATE INDEX alert_instance ON alert (workflow_instance_id);

CREATE TABLE app_user (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name VARCHAR(128) NOT NULL,
    admin BOOLEAN NOT NULL DEFAULT FALSE,
    disabled BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL,
    CONSTRAINT app_user_name_key UNIQUE (name)
) ENGINE = InnoDB;

CREATE TABLE api_token (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    user_id BIGINT NOT NULL,
    name VARCHAR(128) NOT NULL,
    hash VARCHAR(255) NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    last_used_at BIGINT,
    revoked_at BIGINT,
    CONSTRAINT api_token_hash_key UNIQUE (hash),
    CONSTRAINT api_token_user_id_name_key UNIQUE (user_id, name),
    CONSTRAINT api_token_user_id_fkey FOREIGN KEY (user_id) REFERENCES app_user (id)
) ENGINE = InnoDB;

CREATE TABLE project (
    name VARCHAR(128) NOT NULL PRIMARY KEY,
    description LONGTEXT NOT NULL DEFAULT (''),
    created_by VARCHAR(128) NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL
) ENGINE = InnoDB;

-- Every installation starts with the project `default` (Postgres' 0008).
INSERT INTO project (name, created_at) VALUES ('default', UNIX_TIMESTAMP() * 1000);

CREATE TABLE project_member (
    project VARCHAR(128) NOT NULL,
    user_id BIGINT NOT NULL,
    role VARCHAR(32) NOT NULL,
    PRIMARY KEY (project, user_id),
    CONSTRAINT project_member_project_fkey FOREIGN KEY (project) REFERENCES project (name)
        ON DELETE CASCADE,
    CONSTRAINT project_member_user_id_fkey FOREIGN KEY (user_id) REFERENCES app_user (id)
) ENGINE = InnoDB;
CREATE INDEX project_member_user ON project_member (user_id);

CREATE TABLE audit_log (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at BIGINT NOT NULL,
    actor VARCHAR(255) NOT NULL,
    action VARCHAR(255) NOT NULL,
    target LONGTEXT NOT NULL,
    project VARCHAR(128),
    address VARCHAR(255) NOT NULL,
    result VARCHAR(255) NOT NULL,
    object LONGTEXT
) ENGINE = InnoDB;
CREATE INDEX audit_log_actor ON audit_log (actor, id);
CREATE INDEX audit_log_project ON audit_log (project, id);

CREATE TABLE secret (
    project VARCHAR(128) NOT NULL,
    name VARCHAR(128) NOT NULL,
    sealed LONGTEXT NOT NULL,
    description LONGTEXT NOT NULL DEFAULT (''),
    updated_by VARCHAR(128) NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (project, name),
    CONSTRAINT secret_project_fkey FOREIGN KEY (project) REFERENCES project (name)
        ON DELETE CASCADE
) ENGINE = InnoDB;

CREATE TABLE environment (
    project VARCHAR(128) NOT NULL,
    name VARCHAR(128) NOT NULL,
    config LONGTEXT NOT NULL,
    description LONGTEXT NOT NULL DEFAULT (''),
    updated_by VARCHAR(128) NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (project, name),
    CONSTRAINT environment_project_fkey FOREIGN KEY (project) REFERENCES project (name)
        ON DELETE CASCADE
) ENGINE = InnoDB;

CREATE TABLE trigger_call (
    project VARCHAR(128) NOT NULL,
    workflow VARCHAR(128) NOT NULL,
    trigger_name VARCHAR(128) NOT NULL,
    idempotency_key VARCHAR(255) NOT NULL,
    params_hash VARCHAR(255) NOT NULL,
    command_id BIGINT NOT NULL,
    workflow_instance_id BIGINT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (project, workflow, trigger_name, idempotency_key),
    CONSTRAINT trigger_call_project_fkey FOREIGN KEY (project) REFERENCES project (name)
        ON DELETE CASCADE
) ENGINE = InnoDB;
CREATE INDEX trigger_call_created ON trigger_call (created_at);

CREATE TABLE trigger_message (
    project VARCHAR(128) NOT NULL,
    workflow VARCHAR(128) NOT NULL,
    trigger_name VARCHAR(128) NOT NULL,
    message_id VARCHAR(255) NOT NULL,
    command_id BIGINT,
    received_at BIGINT NOT NULL,
    PRIMARY KEY (project, workflow, trigger_name, message_id),
    CONSTRAINT trigger_message_project_fkey FOREIGN KEY (project) REFERENCES project (name)
        ON DELETE CASCADE
) ENGINE = InnoDB;
CREATE INDEX trigger_message_age ON trigger_message (received_at);

CREATE TABLE trigger_consumer (
    project VARCHAR(128) NOT NULL,
    workflow VARCHAR(128) NOT NULL,
    trigger_name VARCHAR(128) NOT NULL,
    master VARCHAR(255) NOT NULL,
    state VARCHAR(32) NOT NULL,
    error LONGTEXT,
    since BIGINT NOT NULL,
    last_message_at BIGINT,
    started BIGINT NOT NULL DEFAULT 0,
    filtered BIGINT NOT NULL DEFAULT 0,
    ignored BIGINT NOT NULL DEFAULT 0,
    duplicate BIGINT NOT NULL DEFAULT 0,
    delivered BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (project, workflow, trigger_name),
    CONSTRAINT trigger_consumer_project_fkey FOREIGN KEY (project) REFERENCES project (name)
        ON DELETE CASCADE
) ENGINE = InnoDB;

CREATE TABLE trigger_ignored (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    project VARCHAR(128) NOT NULL,
    workflow VARCHAR(128) NOT NULL,
    trigger_name VARCHAR(128) NOT NULL,
    reason LONGTEXT NOT NULL,
    body LONGTEXT NOT NULL,
    received_at BIGINT NOT NULL,
    CONSTRAINT trigger_ignored_project_fkey FOREIGN KEY (project) REFERENCES project (name)
        ON DELETE CASCADE
) ENGINE = InnoDB;
CREATE INDEX trigger_ignored_by_trigger ON trigger_ignored (project, workflow, trigger_name, id);

CREATE TABLE workflow_offline (
    project VARCHAR(128) NOT NULL,
    workflow VARCHAR(128) NOT NULL,
    since BIGINT NOT NULL,
    PRIMARY KEY (project, workflow)
) ENGINE = InnoDB;

CREATE TABLE backfill (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    project VARCHAR(128) NOT NULL,
    workflow VARCHAR(128) NOT NULL,
    version INT NOT NULL,
    params LONGTEXT NOT NULL,
    priority VARCHAR(16),
    options LONGTEXT NOT NULL,
    parallel INT NOT NULL,
    stop_on_failure BOOLEAN NOT NULL,
    state VARCHAR(32) NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    follows BIGINT,
    stage INT NOT NULL DEFAULT 0
) ENGINE = InnoDB;
CREATE INDEX backfill_follows ON backfill (follows);
CREATE INDEX backfill_state ON backfill (state);

CREATE TABLE backfill_run (
    backfill_id BIGINT NOT NULL,
    position INT NOT NULL,
    schedule_time BIGINT NOT NULL,
    state VARCHAR(32) NOT NULL,
    command_id BIGINT,
    workflow_instance_id BIGINT,
    error LONGTEXT,
    PRIMARY KEY (backfill_id, position),
    CONSTRAINT backfill_run_backfill_id_fkey FOREIGN KEY (backfill_id) REFERENCES backfill (id)
) ENGINE = InnoDB;

CREATE TABLE external_task (
    task_instance_id BIGINT NOT NULL PRIMARY KEY,
    workflow_instance_id BIGINT NOT NULL,
    project VARCHAR(128) NOT NULL,
    queue VARCHAR(128) NOT NULL,
    params LONGTEXT NOT NULL,
    sealed BOOLEAN NOT NULL,
    lease_ms BIGINT NOT NULL,
    offered_at BIGINT NOT NULL,
    worker VARCHAR(255),
    token_hash VARCHAR(255),
    lease_expires_at BIGINT,
    CONSTRAINT external_task_task_instance_id_fkey FOREIGN KEY (task_instance_id)
        REFERENCES task_instance (id)
) ENGINE = InnoDB;
CREATE INDEX external_task_ready ON external_task (queue, task_instance_id);

CREATE TABLE external_worker (
    project VARCHAR(128) NOT NULL,
    queue VARCHAR(128) NOT NULL,
    worker VARCHAR(255) NOT NULL,
    last_seen_at BIGINT NOT NULL,
    PRIMARY KEY (project, queue, worker)
) ENGINE = InnoDB;

CREATE TABLE event_wait (
    task_instance_id BIGINT NOT NULL PRIMARY KEY,
    workflow_instance_id BIGINT NOT NULL,
    project VARCHAR(128) NOT NULL,
    event VARCHAR(128) NOT NULL,
    event_key VARCHAR(255) NOT NULL,
    CONSTRAINT event_wait_task_instance_id_fkey FOREIGN KEY (task_instance_id)
        REFERENCES task_instance (id)
) ENGINE = InnoDB;
CREATE INDEX event_wait_by_key ON event_wait (project, event, event_key);

CREATE TABLE kept_event (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    project VARCHAR(128) NOT NULL,
    event VARCHAR(128) NOT NULL,
    event_key VARCHAR(255) NOT NULL,
    data LONGTEXT NOT NULL,
    received_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    CONSTRAINT kept_event_project_fkey FOREIGN KEY (project) REFERENCES project (name)
        ON DELETE CASCADE
) ENGINE = InnoDB;
CREATE INDEX kept_event_by_key ON kept_event (project, event, event_key, id);
CREATE INDEX kept_event_expiry ON kept_event (expires_at);

-- MySQL only: Tx::lock_key's rows, one per bucket of lock keys, made here so that taking
-- a lock is a row lock on a row that exists (inserting one would deadlock its racers).
CREATE TABLE key_lock (
    bucket INT NOT NULL PRIMARY KEY
) ENGINE = InnoDB;
INSERT INTO key_lock (bucket)
SELECT a.i * 256 + b.i * 16 + c.i
FROM (SELECT 0 AS i UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
      UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8
      UNION ALL SELECT 9 UNION ALL SELECT 10 UNION ALL SELECT 11 UNION ALL SELECT 12
      UNION ALL SELECT 13 UNION ALL SELECT 14 UNION ALL SELECT 15) a,
     (SELECT 0 AS i UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
      UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8
      UNION ALL SELECT 9 UNION ALL SELECT 10 UNION ALL SELECT 11 UNION ALL SELECT 12
      UNION ALL SELECT 13 UNION ALL SELECT 14 UNION ALL SELECT 15) b,
     (SELECT 0 AS i UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
      UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8
      UNION ALL SELECT 9 UNION ALL SELECT 10 UNION ALL SELECT 11 UNION ALL SELECT 12
      UNION ALL SELECT 13 UNION ALL SELECT 14 UNION ALL SELECT 15) c;
