-- relay.source "binlog": the relay's position in the binary log, one row
-- per outbox (outbox = 'outbox_event'). Written once per confirmed batch:
-- the file and offset after the last transaction whose events are all
-- confirmed (and its MariaDB GTID where the server logs one), with that
-- transaction's commit time as published_up_to. The lease columns make one
-- relay the active one; a standby takes the row over once lease_until has
-- passed. Poll relays never read it. Runs unchanged (and again) on MySQL
-- 8.4 and MariaDB 10.11.
CREATE TABLE IF NOT EXISTS relay_checkpoint (
  outbox          VARCHAR(64)     NOT NULL,
  binlog_file     VARCHAR(255)    NOT NULL DEFAULT '',
  binlog_pos      BIGINT UNSIGNED NOT NULL DEFAULT 0,
  gtid            VARCHAR(64)     NULL,
  published_up_to DATETIME(6)     NULL,
  lease_owner     VARCHAR(128)    NULL,
  lease_until     DATETIME(6)     NULL,
  updated_at      DATETIME(6)     NOT NULL,
  CONSTRAINT pk_relay_checkpoint PRIMARY KEY (outbox)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
