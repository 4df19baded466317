-- `GET /instances?state=...` newest first (e.g. the failed runs), a page at a time and
-- counted, without walking every instance. Keep in step with the twin of the other backend.
DROP INDEX workflow_instance_state;
CREATE INDEX workflow_instance_state ON workflow_instance (state, created_at, id);
