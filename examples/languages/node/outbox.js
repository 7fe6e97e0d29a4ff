// Outbox for Node.js (pg): record an event in the current database
// transaction, to be published by the Go relay after it commits — and never
// if it rolls back.
//
//   const client = await pool.connect();
//   try {
//     await client.query('BEGIN');
//     await client.query("UPDATE orders SET status = 'confirmed' WHERE id = $1", [42]);
//     await enqueue(client, { topic: 'orders', key: 'order-42', type: 'OrderConfirmed',
//                             payload: Buffer.from(JSON.stringify({ id: 42 })) });
//     await client.query('COMMIT');
//   } catch (e) { await client.query('ROLLBACK'); throw e; } finally { client.release(); }
//
// It calls the outbox.enqueue SQL function (installed by `outbox migrate`),
// which does what the Go library's Enqueue does: the checks, a UUIDv7 ID,
// the per-key lock that keeps a key's events in commit order, and the
// NOTIFY that wakes the relay. It resolves to the event's ID.
'use strict';

const SCHEMA = process.env.OUTBOX_SCHEMA || 'outbox';

// enqueue records one event in client's current transaction. payload is a
// Buffer (or a string, sent as its UTF-8 bytes); headers an object of
// string values; notBefore a Date.
async function enqueue(client, { topic, key = '', type = '', payload = Buffer.alloc(0), headers = null, notBefore = null }, schema = SCHEMA) {
  const body = Buffer.isBuffer(payload) ? payload : Buffer.from(String(payload), 'utf8');
  const res = await client.query(
    `SELECT ${client.escapeIdentifier(schema)}.enqueue($1, $2, $3, $4, $5, $6) AS id`,
    [topic, key, type, body, headers ? JSON.stringify(headers) : null, notBefore],
  );
  return res.rows[0].id;
}

module.exports = { enqueue, SCHEMA };
