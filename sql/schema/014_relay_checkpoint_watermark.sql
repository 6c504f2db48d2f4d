-- relay.source "binlog": the watermark of the checkpoint. Every outbox row
-- whose created_at is before published_created_before has been published
-- (or is FAILED), although the binlog relay leaves its status PENDING. The
-- relay samples it from the server's open transactions and statements and
-- stores it with the first checkpoint that has passed the binary log's end
-- of that sample; it never moves back. NULL: none stored yet (a poll relay,
-- or a binlog relay of the version before): every PENDING row is pending.
-- Read by the gauges, `sidecar inspect` and `sidecar purge`. Adding a
-- nullable column at the end is an instant change on MySQL 8.4 and MariaDB
-- 10.11. Runs unchanged (and again) on both: MySQL has no ADD COLUMN IF NOT
-- EXISTS, so the statement is chosen from information_schema; a no-op once
-- the column is there, or when 013 was never applied.
SET @sc_ddl = (SELECT IF(COUNT(*) > 0 AND SUM(column_name = 'published_created_before') = 0,
    'ALTER TABLE relay_checkpoint ADD COLUMN published_created_before DATETIME(6) NULL',
    'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'relay_checkpoint');
PREPARE sc_ddl_stmt FROM @sc_ddl;
EXECUTE sc_ddl_stmt;
DEALLOCATE PREPARE sc_ddl_stmt;
