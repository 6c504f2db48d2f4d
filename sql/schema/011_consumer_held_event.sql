-- Ordered consumers with "on_dead_letter": "hold", second form. Each
-- dead-lettered event of a held key has a row in consumer_held_event (its
-- place in the key's arrival order, hold_seq, given out before the dead
-- letter is published); a key is held while one of its rows names an event
-- the consumer has not consumed, behind the first of them. `sidecar dlq
-- replay --key` stamps consumer_held_key.replay_token and publishes copies
-- of the held events in order; the consumer runs the copy of the key's first
-- held event that carries the current token. The columns 010 had for the
-- first form (held_behind, replay_until, held_in_replay) go; order_key
-- becomes bytes. Runs unchanged (and again) on MySQL 8.4 and MariaDB 10.11:
-- MySQL has no ADD/DROP COLUMN IF [NOT] EXISTS, so each statement is chosen
-- from information_schema (nothing to do for consumer_held_key where 010
-- was not applied). A 0.3 pre-release's held keys are not carried over:
-- replay or release them, and stop its ordered consumers, before applying
-- this.
CREATE TABLE IF NOT EXISTS consumer_held_event (
  consumer_name   VARCHAR(128) NOT NULL,
  order_key       VARBINARY(255) NOT NULL,
  event_id        CHAR(36)     NOT NULL,
  hold_seq        BIGINT       NOT NULL,
  held_at         DATETIME(6)  NOT NULL,
  CONSTRAINT pk_consumer_held_event PRIMARY KEY (consumer_name, order_key, event_id),
  INDEX ix_consumer_held_event_seq (consumer_name, order_key, hold_seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

SET @sc_ddl = (SELECT IF(
    (SELECT COUNT(*) FROM information_schema.tables
      WHERE table_schema = DATABASE() AND table_name = 'consumer_held_key') = 1
    AND (SELECT COUNT(*) FROM information_schema.columns
      WHERE table_schema = DATABASE() AND table_name = 'consumer_held_key'
        AND column_name = 'replay_token') = 0,
    'ALTER TABLE consumer_held_key ADD COLUMN replay_token CHAR(36) NULL',
    'DO 0'));
PREPARE sc_ddl_stmt FROM @sc_ddl;
EXECUTE sc_ddl_stmt;
DEALLOCATE PREPARE sc_ddl_stmt;

-- Keys compare byte for byte: a PAD SPACE collation would take 'k' and
-- 'k ' for one key.
SET @sc_ddl = (SELECT IF(COUNT(*) = 1,
    'ALTER TABLE consumer_held_key MODIFY order_key VARBINARY(255) NOT NULL',
    'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'consumer_held_key'
    AND column_name = 'order_key' AND data_type = 'varchar');
PREPARE sc_ddl_stmt FROM @sc_ddl;
EXECUTE sc_ddl_stmt;
DEALLOCATE PREPARE sc_ddl_stmt;

SET @sc_ddl = (SELECT IF(COUNT(*) = 1,
    'ALTER TABLE consumer_held_key DROP COLUMN held_behind',
    'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'consumer_held_key'
    AND column_name = 'held_behind');
PREPARE sc_ddl_stmt FROM @sc_ddl;
EXECUTE sc_ddl_stmt;
DEALLOCATE PREPARE sc_ddl_stmt;

SET @sc_ddl = (SELECT IF(COUNT(*) = 1,
    'ALTER TABLE consumer_held_key DROP COLUMN replay_until',
    'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'consumer_held_key'
    AND column_name = 'replay_until');
PREPARE sc_ddl_stmt FROM @sc_ddl;
EXECUTE sc_ddl_stmt;
DEALLOCATE PREPARE sc_ddl_stmt;

SET @sc_ddl = (SELECT IF(COUNT(*) = 1,
    'ALTER TABLE consumer_held_key DROP COLUMN held_in_replay',
    'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'consumer_held_key'
    AND column_name = 'held_in_replay');
PREPARE sc_ddl_stmt FROM @sc_ddl;
EXECUTE sc_ddl_stmt;
DEALLOCATE PREPARE sc_ddl_stmt;
