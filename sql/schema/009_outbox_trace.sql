-- W3C trace context of the request that wrote the event: the producer
-- stores its `traceparent` (version 00, 55 characters) and `tracestate`
-- (at most 512) beside the row; the relay publishes them as the CloudEvents
-- distributed-tracing attributes. Both nullable: a row without them is an
-- event without trace context, as every row before this migration.
-- Adding a nullable column at the end is an instant change on MySQL 8.4
-- and MariaDB 10.11 (no table copy). Runs unchanged (and again) on both:
-- MySQL has no ADD COLUMN IF NOT EXISTS, so the statement is chosen from
-- information_schema.
SET @sc_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE outbox_event ADD COLUMN traceparent VARCHAR(55) NULL',
    'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'outbox_event'
    AND column_name = 'traceparent');
PREPARE sc_ddl_stmt FROM @sc_ddl;
EXECUTE sc_ddl_stmt;
DEALLOCATE PREPARE sc_ddl_stmt;
SET @sc_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE outbox_event ADD COLUMN tracestate VARCHAR(512) NULL',
    'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'outbox_event'
    AND column_name = 'tracestate');
PREPARE sc_ddl_stmt FROM @sc_ddl;
EXECUTE sc_ddl_stmt;
DEALLOCATE PREPARE sc_ddl_stmt;
