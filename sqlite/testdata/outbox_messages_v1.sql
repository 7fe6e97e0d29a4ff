-- outbox schema for SQLite (3.37 or later). Idempotent: safe to run again.
CREATE TABLE IF NOT EXISTS "outbox_messages" (
    -- seq is the rowid: it orders rows by insertion and is never exposed.
    -- AUTOINCREMENT never reuses one, so sqlite_sequence counts inserts
    -- (Listen watches it).
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    -- id is the event's UUIDv7, 16 bytes, the dedup key downstream.
    id           BLOB    NOT NULL UNIQUE,
    topic        TEXT    NOT NULL,
    key          TEXT    NOT NULL DEFAULT '',
    type         TEXT    NOT NULL DEFAULT '',
    payload      BLOB    NOT NULL,
    -- headers is a JSON object of strings, NULL when there are none.
    headers      TEXT,
    -- Times are microseconds since the Unix epoch (UTC).
    created_at   INTEGER NOT NULL,
    -- available_at is the not-before time, then the next attempt's.
    available_at INTEGER NOT NULL,
    -- status: 0 pending, 1 published (kept for retention), 2 dead.
    status       INTEGER NOT NULL DEFAULT 0,
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT,
    published_at INTEGER,
    -- The lease of a claimed pending row: the claim's token, and the time
    -- until which no other claim may take the row.
    claim_token  INTEGER,
    locked_until INTEGER NOT NULL DEFAULT 0
) STRICT;

-- The hot indexes hold pending rows only, so the cost of a claim does not
-- grow with history. An unordered claim reads all pending rows in claim
-- order; an ordered one reads unkeyed rows in claim order, and walks keyed
-- rows key by key, each key's oldest pending row (its head) first.
CREATE INDEX IF NOT EXISTS "outbox_messages_pending"
    ON "outbox_messages" (available_at, seq) WHERE status = 0;
CREATE INDEX IF NOT EXISTS "outbox_messages_pending_unkeyed"
    ON "outbox_messages" (available_at, seq) WHERE status = 0 AND key = '';
CREATE INDEX IF NOT EXISTS "outbox_messages_pending_keys"
    ON "outbox_messages" (key, seq) WHERE status = 0 AND key <> '';

-- Purge and status read published and dead rows by time.
CREATE INDEX IF NOT EXISTS "outbox_messages_published"
    ON "outbox_messages" (published_at) WHERE status = 1;
CREATE INDEX IF NOT EXISTS "outbox_messages_dead"
    ON "outbox_messages" (topic, created_at) WHERE status = 2;
