-- The producer's outbox: written in the business transaction, published by
-- the relay. Runs unchanged on MySQL 8.4 and MariaDB 10.11.
CREATE TABLE IF NOT EXISTS outbox_event (
  event_id        CHAR(36)     NOT NULL,
  aggregate_type  VARCHAR(64)  NOT NULL,
  aggregate_id    VARCHAR(64)  NOT NULL,
  event_type      VARCHAR(128) NOT NULL,
  event_version   INT          NOT NULL,
  payload         JSON         NOT NULL,
  status          VARCHAR(16)  NOT NULL DEFAULT 'PENDING',
  lease_owner     VARCHAR(128) NULL,
  lease_until     DATETIME(6)  NULL,
  publish_attempts INT         NOT NULL DEFAULT 0,
  created_at      DATETIME(6)  NOT NULL,
  published_at    DATETIME(6)  NULL,
  CONSTRAINT pk_outbox_event PRIMARY KEY (event_id),
  CONSTRAINT ck_outbox_event_status CHECK (status IN ('PENDING', 'PUBLISHING', 'PUBLISHED')),
  KEY ix_outbox_event_claim (status, created_at, event_id),
  KEY ix_outbox_event_lease (status, lease_until)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
