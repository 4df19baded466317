-- A run at a later time (`shoal start --at`): masters claim the command from due_at
-- (ms since the epoch) on; NULL is due at once. Keep in step with the Postgres twin.
ALTER TABLE command ADD COLUMN due_at BIGINT;
CREATE INDEX command_due_at ON command (due_at) WHERE due_at IS NOT NULL;
