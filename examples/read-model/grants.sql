-- The consumer's user (sql/grants/consumer.sql) also needs the read model:
-- the upsert inserts, updates and reads the stored version.
GRANT SELECT, INSERT, UPDATE ON app.customer_view TO 'sidecar_consumer'@'%';
