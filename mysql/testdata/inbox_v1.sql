-- outbox inbox schema for MySQL 8+ and MariaDB 10.6+, in the current
-- database. Idempotent: safe to run again.

-- One row per message a consumer has handled, written in the handler's own
-- transaction; a message whose id is here is a duplicate. id is the event's
-- UUIDv7 as 16 bytes (time-ordered, so the primary key appends);
-- received_at is UTC, to the microsecond.
CREATE TABLE IF NOT EXISTS `outbox_inbox` (
    id          BINARY(16)  NOT NULL,
    topic       TEXT        NOT NULL,
    received_at DATETIME(6) NOT NULL,
    PRIMARY KEY (id),
    -- Purge deletes the oldest records first.
    KEY received_at (received_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
