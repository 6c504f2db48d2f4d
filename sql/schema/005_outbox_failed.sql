-- A fourth outbox status: FAILED, for rows the relay refuses to publish
-- because they cannot become a valid CloudEvent (docs/contract-notes.md).
-- The relay never claims them again; repair the row and set it PENDING.
-- Runs unchanged (and again) on MySQL 8.0.19+/8.4 and MariaDB 10.11.
ALTER TABLE outbox_event DROP CONSTRAINT ck_outbox_event_status;
ALTER TABLE outbox_event ADD CONSTRAINT ck_outbox_event_status
  CHECK (status IN ('PENDING', 'PUBLISHING', 'PUBLISHED', 'FAILED'));
