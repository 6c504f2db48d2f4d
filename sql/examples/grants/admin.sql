-- The example tables (sql/examples/) for the admin user of sql/grants/admin.sql
-- (which creates it): the example effects `sidecar inspect` and the console
-- show (consumers[].inspect_effects). Applied after sql/grants/, and only where
-- the example tables are: sql/zz_grants.sh with SIDECAR_EXAMPLES=1 (compose),
-- examples/compose/migrate.sh, tests/servers.
GRANT SELECT ON app.notification_job TO 'sidecar_admin'@'%';
GRANT SELECT ON app.order_event_log TO 'sidecar_admin'@'%';
