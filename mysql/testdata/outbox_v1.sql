-- outbox schema for MySQL 8+ and MariaDB 10.6+, in the current database.
-- Idempotent: safe to run again.
CREATE TABLE IF NOT EXISTS `outbox_messages` (
    -- seq orders rows by insertion (not by commit; but within a key, by
    -- commit, see the key-lock table below); it is never exposed.
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
    -- A keyed claim takes a key's oldest pending row (its head) only, and
    -- finds it here: the first entry of (pending, key). utf8mb4 key: at
    -- most 1,020 bytes, well within InnoDB's 3,072.
    KEY pending_keys (status, `key`, seq),
    -- Purge reads published rows by time; only they have a published_at,
    -- and NULLs sort first, so what follows the range is a newer
    -- published row or the end of the index.
    KEY published (published_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Writers of one key take their turns here, so that the key's rows take
-- their seq in commit order: Enqueue upserts a row per key (by a hash of
-- it) before it inserts, and the row lock lasts until the writer's
-- transaction ends. One small row per key ever enqueued; n counts the calls.
CREATE TABLE IF NOT EXISTS `outbox_messages_keys` (
    key_hash BIGINT NOT NULL,
    n        BIGINT NOT NULL,
    PRIMARY KEY (key_hash)
) ENGINE = InnoDB;
