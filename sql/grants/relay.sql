-- Least privilege for `sidecar relay`: claim, read and mark outbox rows.
-- The password: @sidecar_relay_password when the session sets it (sql/zz_grants.sh
-- does, from the role's URL secret in compose; tests/servers from its test URL), else a
-- random one nobody knows: set it with ALTER USER before the role connects. No password
-- is written in this file.
SET @sc_pw = COALESCE(@sidecar_relay_password, HEX(RANDOM_BYTES(24)));
SET @sc_sql = CONCAT('CREATE USER IF NOT EXISTS ''sidecar_relay''@''%'' IDENTIFIED BY ', QUOTE(@sc_pw));
PREPARE sc_create_user FROM @sc_sql;
EXECUTE sc_create_user;
DEALLOCATE PREPARE sc_create_user;
SET @sc_pw = NULL, @sc_sql = NULL;
-- Exactly what follows, also when this file runs again on an older install
-- (which granted UPDATE on every column).
REVOKE ALL PRIVILEGES, GRANT OPTION FROM 'sidecar_relay'@'%';
GRANT SELECT ON app.outbox_event TO 'sidecar_relay'@'%';
-- The columns its claim and marks set (sidecar/relay/relay.c), nothing else:
-- never the event itself (payload, event_type, aggregate_*, event_id).
GRANT UPDATE (status, lease_owner, lease_until, publish_attempts, published_at)
  ON app.outbox_event TO 'sidecar_relay'@'%';
