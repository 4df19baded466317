-- A sub_workflow task starts one child instance: the child's command and instance carry
-- the parent task instance id, unique, so a retried start cannot make a second child.
ALTER TABLE command ADD COLUMN parent_task_id BIGINT;
CREATE UNIQUE INDEX command_one_child ON command (parent_task_id);
ALTER TABLE error_command ADD COLUMN parent_task_id BIGINT;
ALTER TABLE workflow_instance ADD COLUMN parent_task_id BIGINT;
CREATE UNIQUE INDEX workflow_instance_one_child ON workflow_instance (parent_task_id);
