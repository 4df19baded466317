-- A task row is updated two or three times (where it went, running, its end). Postgres
-- can update a row in place, without new entries in the table's indexes (a HOT update),
-- only when no indexed column changes and the row's page has room. `state` was a key of
-- `task_instance_task_group`, and a partial index still counts for every row, so no task
-- update was in place. The group index now keys on `group_state`, the state of grouped
-- attempts only (NULL, so unchanged, for the rest), and each page keeps 40 % free for new
-- versions: a cycle updates a fan-out's neighbouring rows in one statement, so most of a
-- page's rows need their room at once. Keep in step with the twin of the other backend.
ALTER TABLE task_instance SET (fillfactor = 60);
ALTER TABLE task_instance ADD COLUMN group_state TEXT
    GENERATED ALWAYS AS (CASE WHEN task_group IS NOT NULL THEN state END) STORED;
DROP INDEX task_instance_task_group;
CREATE INDEX task_instance_task_group ON task_instance (task_group, group_state)
    WHERE task_group IS NOT NULL;
