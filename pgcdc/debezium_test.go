package pgcdc_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/pgcdc"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
)

// A Debezium-style outbox table, inserted into and deleted from at once:
// each event is routed by its aggregate type, keyed by its aggregate id,
// and a dead one lands in this project's outbox table.
func TestDebeziumTable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `CREATE TABLE `+e.name+`.dbz (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
		aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	cfg.Mode, cfg.KeyedFailure, cfg.MaxAttempts = pgcdc.InsertDelete, relay.DeadLetterKey, 1
	cfg.Debezium = &pgcdc.DebeziumTable{Schema: e.name, Table: "dbz", Route: func(t string) string { return "event." + t }}
	pub := newFailing(e.publisher())
	e.start(cfg, pub)
	ids := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	pub.set(ids[2], publishers.Permanent(errBroker))
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, agg := range []string{"order", "order", "customer"} {
		if _, err := tx.Exec(ctx, `INSERT INTO `+e.name+`.dbz VALUES ($1, $2, $3, 'Created', '{"n": 1}')`, ids[i], agg, agg+"-7"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM `+e.name+`.dbz`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := e.read(2)
	for i, m := range got {
		if m.Subject() != e.prefix+".event.order" || m.Headers().Get(outboxnats.HeaderKey) != "order-7" ||
			m.Headers().Get(outboxnats.HeaderMsgID) != ids[i].String() || string(m.Data()) != `{"n": 1}` {
			t.Errorf("message %d: subject %s, headers %v, data %s", i, m.Subject(), m.Headers(), m.Data())
		}
	}
	e.waitFor("the dead event in the outbox table", 30*time.Second, func() bool { return e.count(2) == 1 })
	var topic string
	if err := e.pool.QueryRow(ctx, `SELECT topic FROM `+e.table+` WHERE id = $1 AND status = 2`, ids[2]).Scan(&topic); err != nil {
		t.Fatal(err)
	}
	if topic != "event.customer" {
		t.Errorf("dead row topic %q", topic)
	}
}
