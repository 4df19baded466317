-- Users, API tokens, projects with members, and the audit log. Keep in step with the
-- SQLite twin.

CREATE TABLE app_user (
    id         BIGSERIAL PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    -- A global admin may do anything, in every project.
    admin      BOOLEAN NOT NULL DEFAULT FALSE,
    disabled   BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL
);

-- A token is shown once; only its SHA-256 (hex) is kept. Tokens carry 256 random bits, so
-- a plain hash cannot be reversed by guessing.
CREATE TABLE api_token (
    id           BIGSERIAL PRIMARY KEY,
    user_id      BIGINT NOT NULL REFERENCES app_user (id),
    name         TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT,
    last_used_at BIGINT,
    revoked_at   BIGINT,
    UNIQUE (user_id, name)
);

CREATE TABLE project (
    name        TEXT PRIMARY KEY,
    description TEXT NOT NULL DEFAULT '',
    created_by  TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL
);
-- Projects used to exist only through their workflows.
INSERT INTO project (name, created_at)
    SELECT project, MIN(created_at) FROM workflow_definition GROUP BY project;
INSERT INTO project (name, created_at)
    VALUES ('default', (EXTRACT(EPOCH FROM now()) * 1000)::BIGINT)
    ON CONFLICT DO NOTHING;

-- role: viewer | operator | editor | admin.
CREATE TABLE project_member (
    project TEXT NOT NULL REFERENCES project (name) ON DELETE CASCADE,
    user_id BIGINT NOT NULL REFERENCES app_user (id),
    role    TEXT NOT NULL,
    PRIMARY KEY (project, user_id)
);
CREATE INDEX project_member_user ON project_member (user_id);

-- Every mutation of the API: written by the transaction that made the change, or, for a
-- refused one, after it. result: `ok`, or `<status>: <error>`.
CREATE TABLE audit_log (
    id      BIGSERIAL PRIMARY KEY,
    at      BIGINT NOT NULL,
    actor   TEXT NOT NULL,
    action  TEXT NOT NULL,
    target  TEXT NOT NULL,
    project TEXT,
    address TEXT NOT NULL,
    result  TEXT NOT NULL
);
CREATE INDEX audit_log_actor ON audit_log (actor, id);
CREATE INDEX audit_log_project ON audit_log (project, id);
