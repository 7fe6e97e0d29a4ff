-- outbox inbox schema for PostgreSQL. Idempotent: safe to run again.
CREATE SCHEMA IF NOT EXISTS "outbox";

-- One row per message a consumer has handled, written in the handler's own
-- transaction; a message whose id is here is a duplicate.
CREATE TABLE IF NOT EXISTS "outbox"."inbox" (
    id          uuid        PRIMARY KEY,
    topic       text        NOT NULL,
    received_at timestamptz NOT NULL
);

-- Purge deletes the oldest records first.
CREATE INDEX IF NOT EXISTS "inbox_received_at"
    ON "outbox"."inbox" (received_at);
