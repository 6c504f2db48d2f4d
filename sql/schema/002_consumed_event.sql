-- One row per (consumer, event) the sidecar has applied. The named unique
-- constraint is the only thing that makes a repeat recognisable: a 1062 on
-- uq_consumed_event_identity means "already consumed", nothing else does.
CREATE TABLE IF NOT EXISTS consumed_event (
  id             BIGINT       NOT NULL AUTO_INCREMENT,
  consumer_name  VARCHAR(128) NOT NULL,
  event_id       CHAR(36)     NOT NULL,
  consumed_at    DATETIME(6)  NOT NULL,
  CONSTRAINT pk_consumed_event PRIMARY KEY (id),
  CONSTRAINT uq_consumed_event_identity UNIQUE (consumer_name, event_id),
  KEY ix_consumed_event_consumed_at (consumed_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
