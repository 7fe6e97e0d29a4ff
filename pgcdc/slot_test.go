package pgcdc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/pgcdc"
)

// A slot the server invalidated (max_slot_wal_keep_size) is reported as
// lost, by Status and by the relay.
func TestLostSlotIsReported(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := e.start(e.config(), e.publisher())
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := e.pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'`)
	t.Cleanup(func() {
		_, _ = e.pool.Exec(ctx, `ALTER SYSTEM RESET max_slot_wal_keep_size`)
		_, _ = e.pool.Exec(ctx, `SELECT pg_reload_conf()`)
	})
	exec(`SELECT pg_reload_conf()`)
	exec(`CREATE TABLE ` + e.name + `.filler (x text)`)
	e.waitFor("the slot is lost", 60*time.Second, func() bool {
		exec(`INSERT INTO ` + e.name + `.filler SELECT repeat('x', 1000) FROM generate_series(1, 2000)`)
		exec(`SELECT pg_switch_wal()`)
		exec(`CHECKPOINT`)
		_, err := pgcdc.SlotStatusOf(ctx, e.pool, e.name)
		return errors.Is(err, pgcdc.ErrSlotLost)
	})
	s, err := r.Status(ctx)
	if !errors.Is(err, pgcdc.ErrSlotLost) || s.WALStatus != "lost" || !strings.Contains(err.Error(), "recreate") {
		t.Fatalf("Status: %+v, %v", s, err)
	}
	// A relay refuses to stream from it and says why.
	r2, err := pgcdc.New(e.config(), e.publisher())
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the relay gives up a session", 30*time.Second, func() bool { return r2.Stats().Restarts > 0 })
	if r2.Active() {
		t.Error("a relay streams from a lost slot")
	}
	sctx2, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	_ = r2.Stop(sctx2)
}

// Bad configurations fail New with one clear error each.
func TestNewRefusesBadConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  pgcdc.Config
		want string
	}{
		{pgcdc.Config{}, "ConnString is required"},
		{pgcdc.Config{ConnString: "postgres://x", Slot: "Bad-Slot"}, `Slot "Bad-Slot"`},
		{pgcdc.Config{ConnString: "postgres://x", Mode: pgcdc.InsertDelete, Retention: time.Hour}, "Retention applies to MarkRows"},
		{pgcdc.Config{ConnString: "postgres://u:s3cret@h:bad/db"}, "cannot parse"},
	} {
		_, err := pgcdc.New(&c.cfg, nopPublisher{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.cfg, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	if _, err := pgcdc.New(&pgcdc.Config{ConnString: "postgres://x"}, nil); err == nil {
		t.Error("a nil publisher was taken")
	}
}
