-- outbox schema for PostgreSQL. Idempotent: safe to run again.
CREATE SCHEMA IF NOT EXISTS "{{.Schema}}";

CREATE TABLE IF NOT EXISTS "{{.Schema}}"."{{.Table}}" (
    -- seq orders rows by insertion; it is never exposed.
    seq          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- id is the event's UUIDv7, the dedup key downstream.
    id           uuid        NOT NULL UNIQUE,
    topic        text        NOT NULL,
    key          text        NOT NULL DEFAULT '',
    type         text        NOT NULL DEFAULT '',
    payload      bytea       NOT NULL,
    headers      jsonb,
    created_at   timestamptz NOT NULL,
    -- available_at is the not-before time, then the next attempt's.
    available_at timestamptz NOT NULL,
    -- status: 0 pending, 1 published (kept for retention), 2 dead.
    status       smallint    NOT NULL DEFAULT 0,
    attempts     integer     NOT NULL DEFAULT 0,
    last_error   text,
    published_at timestamptz
);

-- The hot indexes hold pending rows only, so the cost of a claim does not
-- grow with history. Unordered events (empty key) are claimed by due time;
-- keyed events key by key, each key's oldest pending event (its head) only.
CREATE INDEX IF NOT EXISTS "{{.Table}}_pending"
    ON "{{.Schema}}"."{{.Table}}" (available_at, seq) WHERE status = 0 AND key = '';
CREATE INDEX IF NOT EXISTS "{{.Table}}_pending_keys"
    ON "{{.Schema}}"."{{.Table}}" (key, seq) WHERE status = 0 AND key <> '';

-- Purge and status read published and dead rows by time.
CREATE INDEX IF NOT EXISTS "{{.Table}}_published"
    ON "{{.Schema}}"."{{.Table}}" (published_at) WHERE status = 1;
CREATE INDEX IF NOT EXISTS "{{.Table}}_dead"
    ON "{{.Schema}}"."{{.Table}}" (topic, created_at) WHERE status = 2;
