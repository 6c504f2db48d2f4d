-- A released key keeps its consumer_held_key row, with held_behind NULL, so
-- that hold_seq (the key's dead letters numbered in arrival order) never
-- starts again at 1: `sidecar dlq replay --key` proves it read every dead
-- letter of the key by finding the highest number the row has given out.
-- Runs unchanged (and again) on MySQL 8.4 and MariaDB 10.11: the statement
-- is chosen from information_schema (nothing to do when the column is
-- nullable already, or when 010 was not applied: a database without
-- ordered consumers).
SET @sc_ddl = (SELECT IF(COUNT(*) = 1,
    'ALTER TABLE consumer_held_key MODIFY held_behind CHAR(36) NULL',
    'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'consumer_held_key'
    AND column_name = 'held_behind' AND is_nullable = 'NO');
PREPARE sc_ddl_stmt FROM @sc_ddl;
EXECUTE sc_ddl_stmt;
DEALLOCATE PREPARE sc_ddl_stmt;
