-- relay.ordering "per_aggregate" orders an aggregate by (event_version,
-- created_at, event_id): the producer's own sequence first, so a clock
-- stepped back or two writers with skewed clocks cannot invert it. This
-- redefines 008's ix_outbox_event_order with event_version after status, so
-- that each per-aggregate test stays one dive in index order. The name is
-- kept: a relay of the version before still runs against it (its ORDER BY
-- created_at then sorts one aggregate's rows of one status, correct but no
-- longer a single dive). Dropped and added in one ALTER, built in place.
-- Runs unchanged (and again) on MySQL 8.4 and MariaDB 10.11; a no-op once
-- the index has these columns, or when 008 was never applied.
SET @sc_ddl = (SELECT IF(COUNT(*) = 1 AND MAX(s.c) <> 'aggregate_type,aggregate_id,status,event_version,created_at,event_id',
    'ALTER TABLE outbox_event DROP INDEX ix_outbox_event_order, ADD INDEX ix_outbox_event_order (aggregate_type, aggregate_id, status, event_version, created_at, event_id), ALGORITHM=INPLACE, LOCK=NONE',
    'DO 0')
  FROM (SELECT GROUP_CONCAT(column_name ORDER BY seq_in_index) AS c
          FROM information_schema.statistics
         WHERE table_schema = DATABASE() AND table_name = 'outbox_event'
           AND index_name = 'ix_outbox_event_order') s
  WHERE s.c IS NOT NULL);
PREPARE sc_ddl_stmt FROM @sc_ddl;
EXECUTE sc_ddl_stmt;
DEALLOCATE PREPARE sc_ddl_stmt;
