-- Ordered consumers with tenants: the deliveries of a tenant whose database
-- cannot be used go round through a delay queue, each copy with its rank in
-- the tenant's arrival order. One row per copy out (and per copy taken back
-- whose event is not applied or dead-lettered yet), written in mysql.url's
-- database before the copy is published and deleted once its event is
-- resolved, so that a consumer that restarts, or a standby that takes over,
-- takes the copies back in their order and keeps the tenant's fresh
-- deliveries behind them. Runs unchanged (and again) on MySQL 8.4 and
-- MariaDB 10.11.
CREATE TABLE IF NOT EXISTS consumer_tenant_copy (
  consumer_name  VARCHAR(128)   NOT NULL,
  queue_name     VARBINARY(255) NOT NULL,
  tenant         VARCHAR(48)    NOT NULL,
  event_id       CHAR(36)       NOT NULL,
  copy_rank      BIGINT         NOT NULL,
  mark           VARCHAR(96)    NOT NULL,
  sent_at        DATETIME(6)    NOT NULL,
  CONSTRAINT pk_consumer_tenant_copy PRIMARY KEY (consumer_name, queue_name, tenant, event_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
