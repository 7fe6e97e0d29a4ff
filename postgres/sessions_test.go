package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/stores"
)

// Sessions lists the connections named as relays, with what they do: one
// in a transaction (a claim held) says since when; connections of other
// programs (the dashboard's, the benchmark's, psql's) are not listed.
func TestSessions(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	name := fmt.Sprintf("outbox relay test-%d", time.Now().UnixNano())
	connect := func(app string) *pgx.Conn {
		t.Helper()
		cfg, err := pgx.ParseConfig(pgtest.URL())
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = app
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	idle := connect(name)
	claiming := connect(name)
	connect("outbox ui " + name)
	connect("outbox-bench " + name)
	connect("psql " + name)
	if _, err := idle.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	tx, err := claiming.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}

	all, err := b.store.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mine []stores.Session
	for _, s := range all {
		if s.Application == name {
			mine = append(mine, s)
		}
		if s.Application == "outbox ui "+name || s.Application == "outbox-bench "+name || s.Application == "psql "+name {
			t.Errorf("Sessions lists %q, which is not a relay", s.Application)
		}
	}
	if len(mine) != 2 {
		t.Fatalf("Sessions lists %d connections named %q, want 2: %+v", len(mine), name, all)
	}
	var inTx int
	for _, s := range mine {
		if s.Connected.IsZero() || s.PID == 0 || s.Client == "" {
			t.Errorf("session %+v: want its connection time, server PID and client", s)
		}
		if !s.InTxSince.IsZero() {
			inTx++
			if s.State != "idle in transaction" {
				t.Errorf("the claiming session's state is %q, want idle in transaction", s.State)
			}
		}
	}
	if inTx != 1 {
		t.Errorf("%d sessions in a transaction, want 1: %+v", inTx, mine)
	}
}
