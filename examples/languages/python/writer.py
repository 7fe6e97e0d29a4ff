"""A writer for the project's tests (integration/languages): each
transaction enqueues OrderConfirmed and bumps the order's version in one
psycopg transaction; every FAIL_EVERY-th raises after enqueueing, so its
event must never be published. It records each committed event in the
ledger table with the order's new version (taken under the key's lock, so
it counts the key's commits in order) and prints "rollback ID" for each
rolled-back one.

Environment: DATABASE_URL, OUTBOX_SCHEMA, WRITER, N, KEYS, FAIL_EVERY, and
JITTER_MS: up to this long a pause after enqueueing, so that racing writers
overtake one another if a key's lock let them.
"""

import json
import os

import psycopg
from psycopg import sql

import outbox


class Boom(Exception):
    pass


def main():
    writer = os.environ.get("WRITER", "python")
    n = int(os.environ.get("N", "20"))
    keys = int(os.environ.get("KEYS", "5"))
    fail_every = int(os.environ.get("FAIL_EVERY", "0"))
    jitter = float(os.environ.get("JITTER_MS", "0")) / 1000
    schema = sql.Identifier(outbox.SCHEMA)
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        for i in range(n):
            order = i % keys
            key = f"order-{order}"
            event_id = None
            try:
                with conn.transaction():
                    event_id = outbox.enqueue(conn, "orders", key=key, type="OrderConfirmed",
                                              payload=json.dumps({"order": order, "writer": writer, "i": i}).encode(),
                                              headers={"Writer": writer})
                    if jitter > 0:
                        conn.execute("SELECT pg_sleep(%s * random())", (jitter,))
                    version = conn.execute(sql.SQL("UPDATE {}.orders SET version = version + 1, status = 'confirmed' "
                                                   "WHERE id = %s RETURNING version").format(schema), (order,)).fetchone()[0]
                    conn.execute(sql.SQL("INSERT INTO {}.ledger (event_id, key, n, writer) VALUES (%s, %s, %s, %s)").format(schema),
                                 (event_id, key, version, writer))
                    if fail_every > 0 and i % fail_every == fail_every - 1:
                        raise Boom("rolled back on purpose")
            except Boom:
                print(f"rollback {event_id}", flush=True)


if __name__ == "__main__":
    main()
