-- Least privilege for `sidecar relay`: claim, read and mark outbox rows.
CREATE USER IF NOT EXISTS 'sidecar_relay'@'%' IDENTIFIED BY 'relay-secret';
GRANT SELECT, UPDATE ON app.outbox_event TO 'sidecar_relay'@'%';
