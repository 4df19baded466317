-- The group index keys on `group_state`, the state of grouped attempts only, as on
-- Postgres, where it lets the other task updates be made in place (see the twin). SQLite
-- updates in place anyway; the column is virtual here. Keep in step with the twin of the
-- other backend.
ALTER TABLE task_instance ADD COLUMN group_state TEXT
    GENERATED ALWAYS AS (CASE WHEN task_group IS NOT NULL THEN state END) VIRTUAL;
DROP INDEX task_instance_task_group;
CREATE INDEX task_instance_task_group ON task_instance (task_group, group_state)
    WHERE task_group IS NOT NULL;
