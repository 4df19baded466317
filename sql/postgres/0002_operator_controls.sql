-- Operator controls and start options.
-- A command may target an existing instance (resume, rerun, resubmit-failed); at most one
-- such command per instance is pending, which makes a repeated click a no-op.
ALTER TABLE command ADD COLUMN workflow_instance_id BIGINT;
ALTER TABLE command ADD COLUMN options TEXT NOT NULL DEFAULT '{}';
CREATE UNIQUE INDEX command_one_per_instance ON command (workflow_instance_id);
ALTER TABLE error_command ADD COLUMN workflow_instance_id BIGINT;
-- Start options of the instance (dry run, start from a task).
ALTER TABLE workflow_instance ADD COLUMN options TEXT NOT NULL DEFAULT '{}';
-- Which run of the instance an attempt belongs to (a rerun starts run + 1).
ALTER TABLE task_instance ADD COLUMN run INT NOT NULL DEFAULT 1;
