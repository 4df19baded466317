-- External workers as last seen on each queue of each project: written when a poll takes
-- tasks and on each heartbeat, for the Cluster page's "seen recently" (a worker that only
-- polls an empty queue is not recorded). Keep in step with the Postgres twin.
CREATE TABLE external_worker (
    project      TEXT NOT NULL,
    queue        TEXT NOT NULL,
    worker       TEXT NOT NULL,
    last_seen_at INTEGER NOT NULL,
    PRIMARY KEY (project, queue, worker)
);
