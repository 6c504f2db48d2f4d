-- The read model of examples/read-model: one row per customer, the state of
-- the newest event version seen. Events may arrive late, twice, or out of
-- order; the upsert in sidecar.json only moves a row forward.
CREATE TABLE IF NOT EXISTS customer_view (
  customer_id    BIGINT       NOT NULL,
  name           VARCHAR(200) NOT NULL,
  note           TEXT         NULL,
  tags           JSON         NULL,
  version        BIGINT       NOT NULL,
  last_event_id  CHAR(36)     NOT NULL,
  changed_at     DATETIME(6)  NOT NULL,
  CONSTRAINT pk_customer_view PRIMARY KEY (customer_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
