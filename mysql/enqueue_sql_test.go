package mysql_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores/storetest"
)

// procEnqueue records msgs in tx through the enqueue procedure, one CALL
// each, as a writer in another language does, and returns their IDs. Each
// call runs in a savepoint, as a careful SQL writer's would, so that a
// refused message leaves the transaction as it was. A refusal — the
// procedure's (SQLSTATE 22023) or the server's, for bytes a utf8mb4 column
// cannot hold (1366) — is reported as outbox.ErrInvalidMessage.
func procEnqueue(ctx context.Context, tx *sql.Tx, msgs ...outbox.Message) ([]uuid.UUID, error) {
	var ids []uuid.UUID
	for _, m := range msgs {
		var headers, notBefore, id, created any
		if len(m.Headers) > 0 {
			h, err := json.Marshal(m.Headers)
			if err != nil {
				return nil, err
			}
			headers = string(h)
		}
		if !m.NotBefore.IsZero() {
			notBefore = m.NotBefore.UTC().Format("2006-01-02 15:04:05.999999")
		}
		if m.ID != uuid.Nil {
			id = m.ID[:]
		}
		if !m.CreatedAt.IsZero() {
			created = m.CreatedAt.UTC().Format("2006-01-02 15:04:05.999999")
		}
		payload := m.Payload
		if payload == nil {
			payload = []byte{}
		}
		if _, err := tx.ExecContext(ctx, "SAVEPOINT outbox_enqueue"); err != nil {
			return nil, err
		}
		var hexID string
		err := tx.QueryRowContext(ctx, "CALL `outbox_messages_enqueue`(?, ?, ?, ?, ?, ?, ?, ?)",
			m.Topic, m.Key, m.Type, payload, headers, notBefore, id, created).Scan(&hexID)
		if err != nil {
			if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT outbox_enqueue"); rerr != nil {
				return nil, errors.Join(err, rerr)
			}
			var me *mysqldrv.MySQLError
			if errors.As(err, &me) && (string(me.SQLState[:]) == "22023" || me.Number == 1366) {
				return nil, fmt.Errorf("%w: %w", outbox.ErrInvalidMessage, err)
			}
			return nil, err
		}
		got, err := uuid.Parse(hexID)
		if err != nil {
			return nil, fmt.Errorf("the procedure returned the id %q: %w", hexID, err)
		}
		ids = append(ids, got)
	}
	return ids, nil
}

type procTx struct{ tx *sql.Tx }

func (t procTx) Enqueue(ctx context.Context, msgs ...outbox.Message) error {
	_, err := procEnqueue(ctx, t.tx, msgs...)
	return err
}
func (t procTx) Commit(context.Context) error   { return t.tx.Commit() }
func (t procTx) Rollback(context.Context) error { return t.tx.Rollback() }

// The enqueue procedure is held to the store suite unchanged: what it
// writes, the relay side claims, orders and reports as Enqueue's rows, and
// its writers take their keys' turns on the key-lock table with the
// suite's.
func TestConformanceProcedure(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		b := setup(t)
		return storetest.Harness{Store: b.store, Enqueue: func(ctx context.Context, msgs []outbox.Message, commit bool) error {
			tx, err := b.db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if _, err := procEnqueue(ctx, tx, msgs...); err != nil {
				_ = tx.Rollback()
				return err
			}
			if !commit {
				return tx.Rollback()
			}
			return tx.Commit()
		}, Begin: func(ctx context.Context) (storetest.Tx, error) {
			tx, err := b.db.BeginTx(ctx, nil)
			return procTx{tx: tx}, err
		}}
	})
}

// Called with NULLs, the procedure writes what Enqueue writes for
// Message{Topic: …}: a UUIDv7, no key, type, payload or headers, due now.
func TestProcedureDefaults(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	before := time.Now()
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var hexID string
	if err := tx.QueryRowContext(ctx, "CALL `outbox_messages_enqueue`('orders', NULL, NULL, NULL, NULL, NULL, NULL, NULL)").Scan(&hexID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	id, err := uuid.Parse(hexID)
	if err != nil || id.Version() != 7 || id.Variant() != uuid.RFC4122 {
		t.Fatalf("id %q (%v): want a UUIDv7", hexID, err)
	}
	ms := time.UnixMilli(int64(id[0])<<40 | int64(id[1])<<32 | int64(id[2])<<24 | int64(id[3])<<16 | int64(id[4])<<8 | int64(id[5]))
	if ms.Before(before.Add(-time.Minute)) || ms.After(time.Now().Add(time.Minute)) {
		t.Errorf("id %s holds the time %v, want about %v", id, ms, before)
	}
	var key, typ string
	var payload []byte
	var headers sql.NullString
	var same bool
	if err := b.db.QueryRowContext(ctx, "SELECT `key`, type, payload, headers, created_at = available_at FROM outbox_messages WHERE id = ?",
		id[:]).Scan(&key, &typ, &payload, &headers, &same); err != nil {
		t.Fatal(err)
	}
	if key != "" || typ != "" || len(payload) != 0 || headers.Valid || !same {
		t.Errorf("row: key %q type %q payload %q headers %v, created = available %v", key, typ, payload, headers, same)
	}
}

// The procedure refuses what Enqueue refuses, in one line naming the
// problem (SQLSTATE 22023), and writes nothing.
func TestProcedureRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// 100 characters, 300 bytes: within VARCHAR(255), over the outbox's
	// 255 bytes (a longer string the server refuses itself, SQLSTATE 22001).
	long := strings.Repeat("☃", 100)
	for _, c := range []struct {
		name, topic, key, headers, want string
	}{
		{"empty topic", "", "", "", "empty topic"},
		{"long topic", long, "", "", "over 255 bytes"},
		{"long key", "orders", long, "", "over 255 bytes"},
		{"NUL in the key", "orders", "a\x00b", "", "holds a NUL byte"},
		{"headers not an object", "orders", "", `["a"]`, "headers must be a JSON object"},
		{"header value not a string", "orders", "", `{"n": 1}`, `header "n": the value must be a JSON string`},
		{"header name with a space", "orders", "", `{"a b": "v"}`, `header "a b": a name holds a character outside`},
		{"reserved header", "orders", "", `{"Outbox-Key": "v"}`, `header "Outbox-Key": names starting with`},
		{"header value with LF", "orders", "", `{"a": "x\ny"}`, `header "a": the value holds a control character`},
		{"header value with a trailing TAB", "orders", "", `{"a": "x\t"}`, `header "a": the value begins or ends`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var headers any
			if c.headers != "" {
				headers = c.headers
			}
			tx, err := b.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			var id string
			err = tx.QueryRowContext(ctx, "CALL `outbox_messages_enqueue`(?, ?, '', '', ?, NULL, NULL, NULL)", c.topic, c.key, headers).Scan(&id)
			var me *mysqldrv.MySQLError
			if !errors.As(err, &me) || string(me.SQLState[:]) != "22023" || !strings.Contains(me.Message, c.want) ||
				!strings.HasPrefix(me.Message, "outbox: invalid message: ") {
				t.Fatalf("error %v, want SQLSTATE 22023 saying %q", err, c.want)
			}
		})
	}
	var n int
	if err := b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox_messages").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows written (err %v), want none", n, err)
	}
}

// The procedure's key hash is Enqueue's: the same key-lock row for the
// same key, whatever its bytes.
func TestProcedureKeyHashIsEnqueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	keys := []string{"a", "order-42", "žluťoučký kůň", "☃", strings.Repeat("k", 255), " padded "}
	for i, k := range keys {
		tx, err := b.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			err = b.ob.Enqueue(ctx, tx, outbox.Message{Topic: "orders", Key: k})
		} else {
			_, err = procEnqueue(ctx, tx, outbox.Message{Topic: "orders", Key: k})
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		var viaSQL, rows int64
		if err := b.db.QueryRowContext(ctx, "SELECT `outbox_messages_key_hash`(CAST(? AS BINARY)), (SELECT COUNT(*) FROM outbox_messages_keys)", k).
			Scan(&viaSQL, &rows); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := b.db.QueryRowContext(ctx, "SELECT n FROM outbox_messages_keys WHERE key_hash = ?", viaSQL).Scan(&n); err != nil || n != 1 {
			t.Fatalf("key %q: the procedure's hash %d has no key-lock row of its one enqueue (n %d, err %v)", k, viaSQL, n, err)
		}
		if rows != int64(i+1) {
			t.Fatalf("key %q: %d key-lock rows after %d keys: the two writers hash differently", k, rows, i+1)
		}
	}
}
