-- The dead list (outbox dead list, Store.Dead) pages dead rows oldest
-- first by (created_at, id), of every topic; purging dead rows by age reads
-- them in the same order. The index holds dead rows only.
CREATE INDEX IF NOT EXISTS "outbox_messages_dead_list"
    ON "outbox_messages" (created_at, id) WHERE status = 2;
