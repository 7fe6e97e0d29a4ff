-- The CDC relay (package pgcdc) sweeps the pending rows the log does not
-- bring when due: delayed events and replayed dead ones, whose available_at
-- is past their created_at. The index holds those rows only, so a sweep
-- reads what it publishes, not the whole backlog (or the retained rows).
CREATE INDEX IF NOT EXISTS "messages_delayed"
    ON "outbox"."messages" (available_at, seq) WHERE status = 0 AND available_at > created_at;
