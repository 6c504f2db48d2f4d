-- For the operator commands: inspect (reads), purge (deletes old rows), and
-- `sidecar console`, whose one write sets a FAILED outbox row back to PENDING
-- (only those three columns).
-- The password: @sidecar_admin_password when the session sets it (sql/zz_grants.sh
-- does, from the role's URL secret in compose; tests/servers from its test URL), else a
-- random one nobody knows: set it with ALTER USER before the role connects. No password
-- is written in this file.
SET @sc_pw = COALESCE(@sidecar_admin_password, HEX(RANDOM_BYTES(24)));
SET @sc_sql = CONCAT('CREATE USER IF NOT EXISTS ''sidecar_admin''@''%'' IDENTIFIED BY ', QUOTE(@sc_pw));
PREPARE sc_create_user FROM @sc_sql;
EXECUTE sc_create_user;
DEALLOCATE PREPARE sc_create_user;
SET @sc_pw = NULL, @sc_sql = NULL;
GRANT SELECT, DELETE ON app.consumed_event TO 'sidecar_admin'@'%';
GRANT SELECT ON app.consumer_held_key TO 'sidecar_admin'@'%';
GRANT SELECT ON app.consumer_held_event TO 'sidecar_admin'@'%';
GRANT SELECT, DELETE ON app.outbox_event TO 'sidecar_admin'@'%';
GRANT UPDATE (status, lease_owner, lease_until) ON app.outbox_event TO 'sidecar_admin'@'%';
-- the binlog relay's watermark: which PENDING rows it has published
GRANT SELECT ON app.relay_checkpoint TO 'sidecar_admin'@'%';
-- The effects `sidecar inspect` shows (consumers[].inspect_effects) are your
-- handlers' tables: grant SELECT on each. The example tables' grants are in
-- sql/examples/grants/admin.sql, applied with the examples.
