-- Every event of one aggregate in order (`sidecar inspect --aggregate TYPE ID`,
-- the console's business-key search) is one range of this index instead of a
-- scan of the whole outbox. Inserts pay one more secondary entry; the relay's
-- updates do not touch these columns, so its claims and marks cost the same.
-- Built in place, writes going on (ALGORITHM=INPLACE, LOCK=NONE: a server that
-- cannot refuses the statement rather than lock the table).
-- Runs unchanged (and again) on MySQL 8.4 and MariaDB 10.11: neither has one
-- portable CREATE INDEX IF NOT EXISTS, so the statement is chosen from
-- information_schema.
SET @sc_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE outbox_event ADD INDEX ix_outbox_event_aggregate (aggregate_type, aggregate_id, created_at, event_id), ALGORITHM=INPLACE, LOCK=NONE',
    'DO 0')
  FROM information_schema.statistics
  WHERE table_schema = DATABASE() AND table_name = 'outbox_event'
    AND index_name = 'ix_outbox_event_aggregate');
PREPARE sc_ddl_stmt FROM @sc_ddl;
EXECUTE sc_ddl_stmt;
DEALLOCATE PREPARE sc_ddl_stmt;
