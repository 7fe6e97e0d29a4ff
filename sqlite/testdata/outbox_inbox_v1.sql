-- outbox inbox schema for SQLite (3.37 or later). Idempotent: safe to run again.

-- One row per message a consumer has handled, written in the handler's own
-- transaction; a message whose id is here is a duplicate. id is the event's
-- UUIDv7 as 16 bytes; received_at is microseconds since the Unix epoch (UTC).
CREATE TABLE IF NOT EXISTS "outbox_inbox" (
    id          BLOB    PRIMARY KEY,
    topic       TEXT    NOT NULL,
    received_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- Purge deletes the oldest records first.
CREATE INDEX IF NOT EXISTS "outbox_inbox_received_at"
    ON "outbox_inbox" (received_at);
