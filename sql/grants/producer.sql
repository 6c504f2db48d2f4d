-- Least privilege for a producing service (examples/order-producer): its
-- business table and outbox rows, and the locking read that reconciles.
CREATE USER IF NOT EXISTS 'sidecar_producer'@'%' IDENTIFIED BY 'producer-secret';
GRANT SELECT, INSERT, UPDATE ON app.orders TO 'sidecar_producer'@'%';
GRANT INSERT ON app.outbox_event TO 'sidecar_producer'@'%';
