-- What a broker trigger's consumer did with the messages it took since it started on its
-- master, by outcome: written with its state (at most every few seconds while messages
-- come), so the API can show them whichever process serves it. Filtered and duplicate
-- messages write nothing else, which is why these are counts and not derived from rows.
-- Keep in step with the SQLite/Postgres twin.
ALTER TABLE trigger_consumer ADD COLUMN started BIGINT NOT NULL DEFAULT 0;
ALTER TABLE trigger_consumer ADD COLUMN filtered BIGINT NOT NULL DEFAULT 0;
ALTER TABLE trigger_consumer ADD COLUMN ignored BIGINT NOT NULL DEFAULT 0;
ALTER TABLE trigger_consumer ADD COLUMN duplicate BIGINT NOT NULL DEFAULT 0;
ALTER TABLE trigger_consumer ADD COLUMN delivered BIGINT NOT NULL DEFAULT 0;
