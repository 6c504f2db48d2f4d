-- The sample handler's local effect: one job per accepted order event.
CREATE TABLE IF NOT EXISTS notification_job (
  event_id        CHAR(36)    NOT NULL,
  order_id        BIGINT      NOT NULL,
  source_version  INT         NOT NULL,
  status          VARCHAR(16) NOT NULL,
  created_at      DATETIME(6) NOT NULL,
  CONSTRAINT pk_notification_job PRIMARY KEY (event_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
