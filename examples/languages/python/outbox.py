"""Outbox for Python (psycopg 3): record an event in the current database
transaction, to be published by the Go relay after it commits — and never
if it rolls back.

    with psycopg.connect(url) as conn:          # one transaction
        conn.execute("UPDATE orders SET status = 'confirmed' WHERE id = %s", (42,))
        outbox.enqueue(conn, "orders", key="order-42", type="OrderConfirmed",
                       payload=b'{"id": 42}')

It calls the outbox.enqueue SQL function (installed by `outbox migrate`),
which does what the Go library's Enqueue does: the checks, a UUIDv7 ID, the
per-key lock that keeps a key's events in commit order, and the NOTIFY that
wakes the relay. It returns the event's ID.
"""

import os

from psycopg import sql
from psycopg.types.json import Jsonb

SCHEMA = os.environ.get("OUTBOX_SCHEMA", "outbox")


def enqueue(conn, topic, key="", type="", payload=b"", headers=None, not_before=None, schema=None):
    """Records one event in conn's current transaction and returns its ID
    (a uuid.UUID). payload is bytes; headers a dict of str to str;
    not_before a timezone-aware datetime."""
    query = sql.SQL("SELECT {}.enqueue(%s, %s, %s, %s, %s, %s)").format(sql.Identifier(schema or SCHEMA))
    row = conn.execute(query, (topic, key, type, payload, Jsonb(headers) if headers else None, not_before)).fetchone()
    return row[0]
