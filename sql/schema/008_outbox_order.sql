-- relay.ordering "per_aggregate" claims an event only when it is the head of
-- its aggregate (every earlier event PUBLISHED). This index makes each such
-- test one dive to the first entry of one status of one aggregate, so the
-- claim costs the same whatever the backlog, and an aggregate with
-- thousands of pending events costs one entry, not thousands. Not needed
-- (and not checked) with relay.ordering "none". The relay's status changes
-- move a row's entry in it: three more index writes over a row's life.
-- Runs unchanged (and again) on MySQL 8.4 and MariaDB 10.11: neither has one
-- portable CREATE INDEX IF NOT EXISTS, so the statement is chosen from
-- information_schema.
SET @sc_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE outbox_event ADD INDEX ix_outbox_event_order (aggregate_type, aggregate_id, status, created_at, event_id), ALGORITHM=INPLACE, LOCK=NONE',
    'DO 0')
  FROM information_schema.statistics
  WHERE table_schema = DATABASE() AND table_name = 'outbox_event'
    AND index_name = 'ix_outbox_event_order');
PREPARE sc_ddl_stmt FROM @sc_ddl;
EXECUTE sc_ddl_stmt;
DEALLOCATE PREPARE sc_ddl_stmt;
