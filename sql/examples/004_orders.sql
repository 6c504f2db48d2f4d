-- The example producer's business table. request_id makes a retried request
-- find its first attempt; acceptance_event_id ties the order to its event.
CREATE TABLE IF NOT EXISTS orders (
  id                   BIGINT      NOT NULL AUTO_INCREMENT,
  tenant_id            VARCHAR(64) NOT NULL,
  request_id           VARCHAR(64) NOT NULL,
  acceptance_event_id  CHAR(36)    NOT NULL,
  version              INT         NOT NULL DEFAULT 1,
  status               VARCHAR(16) NOT NULL,
  created_at           DATETIME(6) NOT NULL,
  CONSTRAINT pk_orders PRIMARY KEY (id),
  CONSTRAINT uq_orders_tenant_request UNIQUE (tenant_id, request_id),
  CONSTRAINT uq_orders_acceptance_event UNIQUE (acceptance_event_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
