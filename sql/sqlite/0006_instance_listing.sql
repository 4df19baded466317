-- Listing instances for the API and the web UI. Keep in step with the twin of the other backend.

-- `GET /instances`: newest first (created_at, then id), a page at a time, filtered by a
-- time range on created_at, with the count of the whole range.
CREATE INDEX workflow_instance_created ON workflow_instance (created_at, id);
-- The latest run of each workflow (the workflow list), and one workflow's runs newest
-- first.
CREATE INDEX workflow_instance_latest ON workflow_instance (project, workflow, created_at, id);
