-- Enqueue from any SQLite client: a plain INSERT in a BEGIN IMMEDIATE
-- transaction (SQLite's one write lock keeps a key's events in commit
-- order). Bind :id to a UUIDv7's 16 bytes and :now_us to the time in
-- microseconds since the Unix epoch, UTC; see docs/table.md for every
-- column.
BEGIN IMMEDIATE;
UPDATE orders SET status = 'confirmed' WHERE id = 42;
INSERT INTO outbox_messages (id, topic, key, type, payload, headers, created_at, available_at)
VALUES (:id, 'orders', 'order-42', 'OrderConfirmed', CAST('{"id":42}' AS BLOB),
        '{"Trace-Id":"abc"}', :now_us, :now_us);
COMMIT;
