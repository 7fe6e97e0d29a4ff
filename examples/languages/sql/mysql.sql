-- Enqueue from any MySQL/MariaDB client: one event in your transaction,
-- published by the Go relay after COMMIT and never after ROLLBACK.
-- The procedure is installed by `outbox migrate` (see docs/languages.md):
-- the same checks as the Go library's Enqueue, a UUIDv7, the key's turn on
-- the key-lock table. Arguments: topic, key, type, payload, headers (a
-- JSON object of strings), not_before (UTC), event_id, created — NULL for
-- what you leave out. It answers one row: the event's ID, 32 hex digits.
START TRANSACTION;
UPDATE orders SET status = 'confirmed' WHERE id = 42;
CALL outbox_messages_enqueue('orders', 'order-42', 'OrderConfirmed', '{"id":42}',
                             '{"Trace-Id":"abc"}', NULL, NULL, NULL);
COMMIT;
