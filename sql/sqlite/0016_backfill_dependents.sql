-- Backfills made for the workflows that depend on a backfilled one (`with_dependents`):
-- each follows the first backfill of its chain and starts when every backfill of an
-- earlier stage of that chain has ended. Keep in step with the twin of the other backend.
ALTER TABLE backfill ADD COLUMN follows BIGINT;
ALTER TABLE backfill ADD COLUMN stage INT NOT NULL DEFAULT 0;
CREATE INDEX backfill_follows ON backfill (follows);
