-- A run at a later time (`shoal start --at`): masters claim the command from due_at
-- (ms since the epoch) on; NULL is due at once. Keep in step with the Postgres twin.
ALTER TABLE command ADD COLUMN due_at BIGINT;
CREATE INDEX command_due_at ON command (due_at) WHERE due_at IS NOT NULL;

-- A schedule's runs' further start options (as a start may set them): alert channels
-- that replace the workflow's (a JSON list), a timeout (ms) and an environment.
ALTER TABLE schedule ADD COLUMN alert_channels TEXT NOT NULL DEFAULT '[]';
ALTER TABLE schedule ADD COLUMN timeout_ms BIGINT;
ALTER TABLE schedule ADD COLUMN environment TEXT;
