-- Workflows taken offline: they cannot be started and their schedule does not fire until
-- they are brought online again (no row: online). Keep in step with the twin of the
-- other backend.
CREATE TABLE workflow_offline (
    project  TEXT NOT NULL,
    workflow TEXT NOT NULL,
    since    BIGINT NOT NULL,
    PRIMARY KEY (project, workflow)
);
