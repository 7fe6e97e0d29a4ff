package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/stores/storetest"
)

// sqlEnqueue records msgs in tx through the enqueue function, one call
// each, as a writer in another language does. Each call runs in a
// savepoint, as a careful SQL writer's would, so that a refused message
// leaves the transaction usable (a failed statement aborts a PostgreSQL
// transaction; Enqueue refuses before it sends anything). A refusal — the
// function's (SQLSTATE 22023) or the server's, for text it cannot hold at
// all (a NUL: 22021, 22P05) — is reported as outbox.ErrInvalidMessage,
// which is what it means.
func sqlEnqueue(ctx context.Context, tx pgx.Tx, schema string, msgs ...outbox.Message) error {
	for _, m := range msgs {
		var headers, notBefore, id, created any
		if len(m.Headers) > 0 {
			h, err := json.Marshal(m.Headers)
			if err != nil {
				return err
			}
			headers = string(h)
		}
		if !m.NotBefore.IsZero() {
			notBefore = m.NotBefore
		}
		if m.ID != uuid.Nil {
			id = m.ID
		}
		if !m.CreatedAt.IsZero() {
			created = m.CreatedAt
		}
		payload := m.Payload
		if payload == nil {
			payload = []byte{}
		}
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := sp.Exec(ctx, `SELECT "`+schema+`".enqueue($1, $2, $3, $4, $5, $6, $7, $8)`,
			m.Topic, m.Key, m.Type, payload, headers, notBefore, id, created); err != nil {
			_ = sp.Rollback(ctx)
			var pe *pgconn.PgError
			if errors.As(err, &pe) && (pe.Code == "22023" || pe.Code == "22021" || pe.Code == "22P05") {
				return fmt.Errorf("%w: %w", outbox.ErrInvalidMessage, err)
			}
			return err
		}
		if err := sp.Commit(ctx); err != nil {
			return err
		}
	}
	return nil
}

type sqlFuncTx struct {
	tx     pgx.Tx
	schema string
}

func (t sqlFuncTx) Enqueue(ctx context.Context, msgs ...outbox.Message) error {
	return sqlEnqueue(ctx, t.tx, t.schema, msgs...)
}
func (t sqlFuncTx) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t sqlFuncTx) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

// The enqueue function is held to the store suite unchanged: what it
// writes, the relay side claims, orders and reports as Enqueue's rows,
// and its writers race with the suite's on the same keys' locks.
func TestConformanceSQLFunction(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		b := setup(t)
		return storetest.Harness{Store: b.store, Enqueue: func(ctx context.Context, msgs []outbox.Message, commit bool) error {
			err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
				if err := sqlEnqueue(ctx, tx, b.cfg.Schema, msgs...); err != nil {
					return err
				}
				if !commit {
					return errRollback
				}
				return nil
			})
			if !commit && errors.Is(err, errRollback) {
				return nil
			}
			return err
		}, Begin: func(ctx context.Context) (storetest.Tx, error) {
			tx, err := b.pool.Begin(ctx)
			return sqlFuncTx{tx: tx, schema: b.cfg.Schema}, err
		}}
	})
}

// Called with the topic alone, the function writes what Enqueue writes for
// Message{Topic: …}: a UUIDv7, no key, type, payload or headers, due now.
func TestSQLEnqueueDefaults(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	before := time.Now()
	var id uuid.UUID
	if err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT "`+b.cfg.Schema+`".enqueue('orders')`).Scan(&id)
	}); err != nil {
		t.Fatal(err)
	}
	if id.Version() != 7 || id.Variant() != uuid.RFC4122 {
		t.Errorf("id %s: version %d, variant %v; want a UUIDv7", id, id.Version(), id.Variant())
	}
	if ms := time.UnixMilli(int64(id[0])<<40 | int64(id[1])<<32 | int64(id[2])<<24 | int64(id[3])<<16 | int64(id[4])<<8 | int64(id[5])); ms.Before(before.Add(-time.Second)) || ms.After(time.Now().Add(time.Second)) {
		t.Errorf("id %s holds the time %v, want about %v", id, ms, before)
	}
	var (
		key, typ         string
		payload          []byte
		headers          *string
		created, avail   time.Time
		status, attempts int
	)
	if err := b.pool.QueryRow(ctx, `SELECT key, type, payload, headers::text, created_at, available_at, status, attempts
		FROM "`+b.cfg.Schema+`".messages WHERE id = $1`, id).Scan(&key, &typ, &payload, &headers, &created, &avail, &status, &attempts); err != nil {
		t.Fatal(err)
	}
	if key != "" || typ != "" || len(payload) != 0 || headers != nil || !avail.Equal(created) || status != 0 || attempts != 0 {
		t.Errorf("row: key %q type %q payload %q headers %v created %v available %v status %d attempts %d",
			key, typ, payload, headers, created, avail, status, attempts)
	}
	if created.Before(before.Add(-time.Second)) || created.After(time.Now().Add(time.Second)) {
		t.Errorf("created_at %v, want about %v", created, before)
	}
}

// The function refuses what Enqueue refuses, in one line naming the
// problem (SQLSTATE 22023), and writes nothing.
func TestSQLEnqueueRefuses(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	long := strings.Repeat("x", 256)
	for _, c := range []struct {
		name, topic, key, typ, headers, want string
	}{
		{"empty topic", "", "", "", "", "empty topic"},
		{"long topic", long, "", "", "", "topic is 256 bytes, limit 255"},
		{"long key", "orders", long, "", "", "key is 256 bytes, limit 255"},
		{"long type", "orders", "", long, "", "type is 256 bytes, limit 255"},
		{"headers not an object", "orders", "", "", `["a"]`, "headers must be a JSON object, not array"},
		{"header value not a string", "orders", "", "", `{"n": 1}`, `header "n": the value must be a JSON string`},
		{"header name with a space", "orders", "", "", `{"a b": "v"}`, `header "a b": a name holds a character outside`},
		{"header name with a colon", "orders", "", "", `{"a:b": "v"}`, `header "a:b": a name holds`},
		{"reserved header", "orders", "", "", `{"Outbox-Key": "v"}`, `header "Outbox-Key": names starting with`},
		{"reserved NATS header", "orders", "", "", `{"Nats-Msg-Id": "v"}`, `header "Nats-Msg-Id": names starting with`},
		{"header value with LF", "orders", "", "", `{"a": "x\ny"}`, `header "a": the value holds a control character`},
		{"header value with a leading space", "orders", "", "", `{"a": " x"}`, `header "a": the value begins or ends`},
		{"header value with a trailing TAB", "orders", "", "", `{"a": "x\t"}`, `header "a": the value begins or ends`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var headers any
			if c.headers != "" {
				headers = c.headers
			}
			err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `SELECT "`+b.cfg.Schema+`".enqueue($1, $2, $3, '\x', $4)`, c.topic, c.key, c.typ, headers)
				return err
			})
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "22023" || !strings.Contains(pe.Message, c.want) ||
				!strings.HasPrefix(pe.Message, "outbox: invalid message: ") {
				t.Fatalf("error %v, want SQLSTATE 22023 saying %q", err, c.want)
			}
		})
	}
	var n int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM "`+b.cfg.Schema+`".messages`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows written (err %v), want none", n, err)
	}
	// What Enqueue accepts, the function accepts: a TAB inside a value,
	// any UTF-8, an empty object (stored as no headers).
	if err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT "`+b.cfg.Schema+`".enqueue('orders', 'k', 't', '\x', '{"Trace-Id": "a\tb ☃"}')`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT "`+b.cfg.Schema+`".enqueue('orders', 'k', 't', '\x', '{}')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// A key's writers take turns whoever writes: a transaction that enqueued
// through the function holds the key's lock until it ends, and Enqueue's
// writer of the same key waits for it (and the other way round), so the
// key's events take their seq in commit order.
func TestSQLEnqueueSharesTheKeyLock(t *testing.T) {
	for _, sqlFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("function first %v", sqlFirst), func(t *testing.T) {
			b := setup(t)
			ob := outbox.New(b.pg, nil)
			ctx := context.Background()
			write := func(tx pgx.Tx, viaSQL bool, id uuid.UUID) error {
				m := outbox.Message{ID: id, Topic: "orders", Key: "order-42"}
				if viaSQL {
					return sqlEnqueue(ctx, tx, b.cfg.Schema, m)
				}
				return ob.Enqueue(ctx, tx, m)
			}
			first, second := outbox.NewID(), outbox.NewID()
			tx1, err := b.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx1.Rollback(ctx) }()
			if err := write(tx1, sqlFirst, first); err != nil {
				t.Fatal(err)
			}
			var pid1 uint32
			if err := tx1.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid1); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				done <- pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return write(tx, !sqlFirst, second) })
			}()
			// The second writer waits on the first's advisory lock.
			waitFor(t, "the second writer to wait for the key's lock", func() bool {
				var waiting bool
				err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks w JOIN pg_locks h
					ON h.locktype = 'advisory' AND h.classid = w.classid AND h.objid = w.objid AND h.granted
					WHERE w.locktype = 'advisory' AND NOT w.granted AND h.pid = $1)`, pid1).Scan(&waiting)
				return err == nil && waiting
			})
			if err := tx1.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			var ids []uuid.UUID
			rows, err := b.pool.Query(ctx, `SELECT id FROM "`+b.cfg.Schema+`".messages ORDER BY seq`)
			if err != nil {
				t.Fatal(err)
			}
			ids, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			if err != nil || len(ids) != 2 || ids[0] != first || ids[1] != second {
				t.Fatalf("seq order %v (err %v), want commit order [%s %s]", ids, err, first, second)
			}
		})
	}
}

// A transaction that enqueued through the function wakes listening relays
// when it commits, and only then.
func TestSQLEnqueueNotifies(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	channel := b.cfg.Schema + "_messages"
	if _, err := conn.Exec(ctx, `LISTEN "`+channel+`"`); err != nil {
		t.Fatal(err)
	}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := sqlEnqueue(ctx, tx, b.cfg.Schema, outbox.Message{Topic: "orders", Key: "k"}, outbox.Message{Topic: "orders"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := conn.Conn().WaitForNotification(wctx)
	if err != nil || n.Channel != channel {
		t.Fatalf("notification %+v, %v; want one on %s", n, err, channel)
	}
}

// Another table of the schema has its own function, <table>_enqueue, on its
// own table, lock space and channel.
func TestSQLEnqueueOtherTable(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	schema := pgtest.Schema(t, pool)
	for _, table := range []string{"messages", "events"} {
		db, err := postgres.New(pool, &postgres.Config{Schema: schema, Table: table})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT "`+schema+`".events_enqueue('orders', 'k')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var events, messages int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM "`+schema+`".events), (SELECT count(*) FROM "`+schema+`".messages)`).Scan(&events, &messages); err != nil {
		t.Fatal(err)
	}
	if events != 1 || messages != 0 {
		t.Fatalf("events %d, messages %d; want 1 and 0", events, messages)
	}
}

// waitFor waits until cond holds; the deadline bounds a failure only.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
