-- The example business table (sql/examples/004_orders.sql) for the producer
-- user of sql/grants/producer.sql (which creates it): the demo producer
-- (examples/order-producer, examples/producers/) inserts orders and
-- reconciles with a locking read, which MySQL allows only with UPDATE beside
-- SELECT (docs/producers.md#grants). Applied after sql/grants/, and only where
-- the example tables are (see admin.sql here).
GRANT SELECT, INSERT, UPDATE ON app.orders TO 'sidecar_producer'@'%';
