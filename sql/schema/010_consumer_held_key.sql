-- Ordered consumers with "on_dead_letter": "hold": one row per key held back
-- because one of its events was dead-lettered (held_behind). Later events of
-- the key are dead-lettered "held behind <held_behind>" while the row exists,
-- by any instance and after any restart. `sidecar dlq replay CONSUMER --key K`
-- sets replay_until (the last event it replays); the consumer releases the key
-- once that event is applied, unless an event arrived during the replay
-- (held_in_replay): then the key stays held behind that one. hold_seq numbers
-- the key's dead letters in arrival order (header x-sidecar-hold-seq), which a
-- replay follows. Runs unchanged (and again) on MySQL 8.4 and MariaDB 10.11.
CREATE TABLE IF NOT EXISTS consumer_held_key (
  consumer_name   VARCHAR(128) NOT NULL,
  order_key       VARCHAR(255) NOT NULL,
  held_behind     CHAR(36)     NOT NULL,
  held_at         DATETIME(6)  NOT NULL,
  hold_seq        BIGINT       NOT NULL DEFAULT 0,
  replay_until    CHAR(36)     NULL,
  held_in_replay  CHAR(36)     NULL,
  CONSTRAINT pk_consumer_held_key PRIMARY KEY (consumer_name, order_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
