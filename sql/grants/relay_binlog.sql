-- Least privilege for `sidecar relay` with relay.source "binlog": read the
-- binary log as a replica, read outbox rows back by key, mark refused rows
-- FAILED, keep its checkpoint, and sample the watermark of the checkpoint.
-- Same password rules as relay.sql.
-- REPLICATION CLIENT is MariaDB's BINLOG MONITOR (SHOW BINARY LOGS).
SET @sc_pw = COALESCE(@sidecar_relay_binlog_password, HEX(RANDOM_BYTES(24)));
SET @sc_sql = CONCAT('CREATE USER IF NOT EXISTS ''sidecar_relay_binlog''@''%'' IDENTIFIED BY ', QUOTE(@sc_pw));
PREPARE sc_create_user FROM @sc_sql;
EXECUTE sc_create_user;
DEALLOCATE PREPARE sc_create_user;
SET @sc_pw = NULL, @sc_sql = NULL;
REVOKE ALL PRIVILEGES, GRANT OPTION FROM 'sidecar_relay_binlog'@'%';
-- PROCESS: the watermark's sample reads every session's open transaction
-- and running statement (information_schema.INNODB_TRX, PROCESSLIST)
GRANT REPLICATION SLAVE, REPLICATION CLIENT, PROCESS ON *.* TO 'sidecar_relay_binlog'@'%';
GRANT SELECT ON app.outbox_event TO 'sidecar_relay_binlog'@'%';
-- a refused row is recorded FAILED, on its own; with relay.ordering
-- per_aggregate the rows held behind it get a lease (lease_owner,
-- lease_until), and once it is repaired they are marked PUBLISHED
-- (published_at); nothing else of a row
GRANT UPDATE (status, lease_owner, lease_until, published_at) ON app.outbox_event TO 'sidecar_relay_binlog'@'%';
GRANT SELECT, INSERT, UPDATE ON app.relay_checkpoint TO 'sidecar_relay_binlog'@'%';
