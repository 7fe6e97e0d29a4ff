// A writer for the project's tests (integration/languages): each
// transaction enqueues OrderConfirmed and bumps the order's version in one
// pg transaction; every FAIL_EVERY-th rolls back after enqueueing, so its
// event must never be published. It records each committed event in the
// ledger table with the order's new version (taken under the key's lock,
// so it counts the key's commits in order) and prints "rollback ID" for
// each rolled-back one.
//
// Environment: DATABASE_URL, OUTBOX_SCHEMA, WRITER, N, KEYS, FAIL_EVERY, and
// JITTER_MS: up to this long a pause after enqueueing, so that racing
// writers overtake one another if a key's lock let them.
'use strict';

const { Client } = require('pg');
const { enqueue, SCHEMA } = require('./outbox');

async function main() {
  const writer = process.env.WRITER || 'node';
  const n = Number(process.env.N || 20);
  const keys = Number(process.env.KEYS || 5);
  const failEvery = Number(process.env.FAIL_EVERY || 0);
  const jitter = Number(process.env.JITTER_MS || 0) / 1000;
  const client = new Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  const s = client.escapeIdentifier(SCHEMA);
  try {
    for (let i = 0; i < n; i++) {
      const order = i % keys;
      const key = `order-${order}`;
      await client.query('BEGIN');
      try {
        const id = await enqueue(client, { topic: 'orders', key, type: 'OrderConfirmed',
          payload: JSON.stringify({ order, writer, i }), headers: { Writer: writer } });
        if (jitter > 0) await client.query('SELECT pg_sleep($1 * random())', [jitter]);
        const v = await client.query(`UPDATE ${s}.orders SET version = version + 1, status = 'confirmed' WHERE id = $1 RETURNING version`, [order]);
        await client.query(`INSERT INTO ${s}.ledger (event_id, key, n, writer) VALUES ($1, $2, $3, $4)`, [id, key, v.rows[0].version, writer]);
        if (failEvery > 0 && i % failEvery === failEvery - 1) {
          await client.query('ROLLBACK');
          console.log(`rollback ${id}`);
          continue;
        }
        await client.query('COMMIT');
      } catch (e) {
        await client.query('ROLLBACK');
        throw e;
      }
    }
  } finally {
    await client.end();
  }
}

main().catch((e) => { console.error(`writer: ${e.message}`); process.exit(1); });
