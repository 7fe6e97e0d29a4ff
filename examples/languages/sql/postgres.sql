-- Enqueue from any PostgreSQL client: one event in your transaction,
-- published by the Go relay after COMMIT and never after ROLLBACK.
-- outbox.enqueue is installed by `outbox migrate` (see docs/languages.md):
-- the same checks as the Go library's Enqueue, a UUIDv7, the key's lock
-- (a key's events stay in commit order, whoever writes them), a NOTIFY.
BEGIN;
UPDATE orders SET status = 'confirmed' WHERE id = 42;
SELECT outbox.enqueue('orders',
                      key     => 'order-42',
                      type    => 'OrderConfirmed',
                      payload => convert_to('{"id":42}', 'UTF8'),
                      headers => '{"Trace-Id":"abc"}');
COMMIT;
