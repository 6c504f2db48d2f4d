-- Least privilege for `sidecar consume` (edit user, host and password).
-- It claims (INSERT consumed_event; DELETE only to undo a claim a batch
-- handler refused, inside the same transaction) and runs the handlers on the
-- same connection: grant each handler's own tables too.
CREATE USER IF NOT EXISTS 'sidecar_consumer'@'%' IDENTIFIED BY 'consumer-secret';
GRANT SELECT, INSERT, DELETE ON app.consumed_event TO 'sidecar_consumer'@'%';
-- the sample handler (handlers/notification_job)
GRANT SELECT, INSERT ON app.notification_job TO 'sidecar_consumer'@'%';
GRANT SELECT, INSERT ON app.order_event_log TO 'sidecar_consumer'@'%';
