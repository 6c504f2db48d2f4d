-- The example tables (sql/examples/) for the consumer user of
-- sql/grants/consumer.sql (which creates it): the sample handlers' effects,
-- handlers/notification_job (notification_job) and the compose stack's sql.so
-- consumer (order_event_log). Applied after sql/grants/, and only where the
-- example tables are (see admin.sql here).
GRANT SELECT, INSERT ON app.notification_job TO 'sidecar_consumer'@'%';
GRANT SELECT, INSERT ON app.order_event_log TO 'sidecar_consumer'@'%';
