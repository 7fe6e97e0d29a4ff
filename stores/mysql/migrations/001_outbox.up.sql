-- outbox schema for MySQL 8+ and MariaDB 10.6+, in the current database.
-- Idempotent: safe to run again.
CREATE TABLE IF NOT EXISTS `outbox_messages` (
    -- seq orders rows by insertion (not by commit); it is never exposed.
    seq          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    -- id is the event's UUIDv7 (16 bytes), the dedup key downstream.
    id           BINARY(16)      NOT NULL,
    topic        VARCHAR(255)    NOT NULL,
    `key`        VARCHAR(255)    NOT NULL DEFAULT '',
    type         VARCHAR(255)    NOT NULL DEFAULT '',
    payload      LONGBLOB        NOT NULL,
    headers      JSON            NULL,
    -- Times are UTC, to the microsecond.
    created_at   DATETIME(6)     NOT NULL,
    -- available_at is the not-before time, then the next attempt's.
    available_at DATETIME(6)     NOT NULL,
    -- status: 1 published (kept for retention), 2 dead, 3 pending: pending
    -- sorts last, see the pending index.
    status       TINYINT         NOT NULL DEFAULT 3,
    attempts     INT             NOT NULL DEFAULT 0,
    last_error   TEXT            NULL,
    published_at DATETIME(6)     NULL,
    PRIMARY KEY (seq),
    UNIQUE KEY id (id),
    -- No partial indexes here: status leads, so pending rows are one
    -- contiguous range in claim order and a claim never reads history. As
    -- pending is the last status, what follows the due rows is rows not yet
    -- due or the end of the index, never a published or dead row: InnoDB
    -- locks the record past the end of a locking range scan, even in READ
    -- COMMITTED, and that lock would stall purges and deadlock them.
    KEY pending (status, available_at, seq),
    -- Purge reads published rows by time; only they have a published_at,
    -- and NULLs sort first, so what follows the range is a newer
    -- published row or the end of the index.
    KEY published (published_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
