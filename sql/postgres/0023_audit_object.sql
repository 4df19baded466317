-- What an audited mutation concerned when its path does not say it all: a workflow and
-- the version it made or acted on, a schedule, user, token (name and id), secret (its
-- name, never its value), member and role, the command or backfill it wrote, the tasks a
-- batch completed. NULL for rows written before it, and where there is nothing to add.
-- Keep in step with the twin of the other backend.
ALTER TABLE audit_log ADD COLUMN object TEXT;
