-- For the operator commands: inspect (reads), purge (deletes old rows), and
-- `sidecar console`, whose one write sets a FAILED outbox row back to PENDING
-- (only those three columns).
CREATE USER IF NOT EXISTS 'sidecar_admin'@'%' IDENTIFIED BY 'admin-secret';
GRANT SELECT, DELETE ON app.consumed_event TO 'sidecar_admin'@'%';
GRANT SELECT, DELETE ON app.outbox_event TO 'sidecar_admin'@'%';
GRANT UPDATE (status, lease_owner, lease_until) ON app.outbox_event TO 'sidecar_admin'@'%';
GRANT SELECT ON app.notification_job TO 'sidecar_admin'@'%';
