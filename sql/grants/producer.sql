-- Least privilege for a producing service: its outbox rows here; its business
-- table, and the locking read that reconciles (docs/producers.md#grants), in
-- a grant of your own, as sql/examples/grants/producer.sql does for the demo's
-- orders table (examples/order-producer).
-- The password: @sidecar_producer_password when the session sets it (sql/zz_grants.sh
-- does, from the role's URL secret in compose; tests/servers from its test URL), else a
-- random one nobody knows: set it with ALTER USER before the role connects. No password
-- is written in this file.
SET @sc_pw = COALESCE(@sidecar_producer_password, HEX(RANDOM_BYTES(24)));
SET @sc_sql = CONCAT('CREATE USER IF NOT EXISTS ''sidecar_producer''@''%'' IDENTIFIED BY ', QUOTE(@sc_pw));
PREPARE sc_create_user FROM @sc_sql;
EXECUTE sc_create_user;
DEALLOCATE PREPARE sc_create_user;
SET @sc_pw = NULL, @sc_sql = NULL;
GRANT INSERT ON app.outbox_event TO 'sidecar_producer'@'%';
