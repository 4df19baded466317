-- Named secrets of a project, encrypted by the api-server (AES-256-GCM, the key is not in
-- the database); `sealed` is hex of nonce, ciphertext and tag. Keep in step with the
-- SQLite twin.
CREATE TABLE secret (
    project     TEXT NOT NULL REFERENCES project (name) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    sealed      TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    updated_by  TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (project, name)
);
