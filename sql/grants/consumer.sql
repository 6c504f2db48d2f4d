-- Least privilege for `sidecar consume` (edit user and host).
-- It claims (INSERT consumed_event; DELETE only to undo a claim a batch
-- handler refused, inside the same transaction) and runs the handlers on the
-- same connection: grant each handler's own tables too.
-- The password: @sidecar_consumer_password when the session sets it (sql/zz_grants.sh
-- does, from the role's URL secret in compose; tests/servers from its test URL), else a
-- random one nobody knows: set it with ALTER USER before the role connects. No password
-- is written in this file.
SET @sc_pw = COALESCE(@sidecar_consumer_password, HEX(RANDOM_BYTES(24)));
SET @sc_sql = CONCAT('CREATE USER IF NOT EXISTS ''sidecar_consumer''@''%'' IDENTIFIED BY ', QUOTE(@sc_pw));
PREPARE sc_create_user FROM @sc_sql;
EXECUTE sc_create_user;
DEALLOCATE PREPARE sc_create_user;
SET @sc_pw = NULL, @sc_sql = NULL;
-- Residual risk (docs/security.md): grants are per table, never per row, so
-- this user -- and every handler statement it runs -- can insert or delete
-- any consumer's consumed_event rows. Consumers whose handlers must not touch
-- each other's history each get their own schema for consumed_event.
GRANT SELECT, INSERT, DELETE ON app.consumed_event TO 'sidecar_consumer'@'%';
-- ordered consumers holding keys (and `sidecar dlq replay --key`, run with the
-- consumer's configuration)
GRANT SELECT, INSERT, UPDATE, DELETE ON app.consumer_held_key TO 'sidecar_consumer'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE ON app.consumer_held_event TO 'sidecar_consumer'@'%';
-- ordered consumers with tenants: the copies of a tenant's deliveries sent round while
-- its database cannot be used (in mysql.url's database)
GRANT SELECT, INSERT, UPDATE, DELETE ON app.consumer_tenant_copy TO 'sidecar_consumer'@'%';
-- Your handlers' own tables: grant what their statements need. The example
-- tables' grants (the sample handlers') are in sql/examples/grants/consumer.sql,
-- applied with the examples.
