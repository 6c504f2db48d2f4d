-- The event log of the compose example's second consumer (sql.so, configured in
-- examples/compose/sidecar-sql.json): every order event as received, payload as JSON.
CREATE TABLE IF NOT EXISTS order_event_log (
  event_id      CHAR(36)    NOT NULL,
  order_id      BIGINT      NOT NULL,
  event_type    VARCHAR(64) NOT NULL,
  version       INT         NOT NULL,
  payload       JSON        NULL,
  occurred_at   DATETIME(6) NULL,
  received_at   DATETIME(6) NOT NULL,
  CONSTRAINT pk_order_event_log PRIMARY KEY (event_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
