-- Retention (`--retention`) deletes ended instances oldest first and expires trigger
-- idempotency keys: both are found by time. Keep in step with the twin of the other
-- backend.
CREATE INDEX workflow_instance_ended ON workflow_instance (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX trigger_call_created ON trigger_call (created_at);
