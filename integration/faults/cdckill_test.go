package faults

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
)

// An `outbox relay --mode cdc` process SIGKILLed after the broker
// acknowledged events and before it confirmed them to the slot: the hot
// standby takes the slot over, sends them again with the same IDs (which
// JetStream's duplicate window drops: the stream holds each event once)
// and nothing is lost.
func TestCDCRelayKilledAfterAckResendsSameIDs(t *testing.T) {
	db, br := newLogicalPostgres(t), newNATS(t)
	ctx := context.Background()
	keys := []string{"k0", "k1", "k2"}
	if err := db.prepare(ctx, keys); err != nil {
		t.Fatal(err)
	}
	env := slices.Concat(os.Environ(), db.env(), br.env())
	cw := startCDCRelays(t, db, br, env, helperLog(t), cdcRelays)

	const n = 200
	var all []uuid.UUID
	for attempt := 1; ; attempt++ {
		held, err := cw.stored(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids, before := commitEvents(t, db, keys, n)
		all = append(all, ids...)
		killed, died, err := cw.killActiveAfterAck(ctx, held)
		if err != nil {
			t.Fatal(err)
		}
		// Read at once: the standby retries the slot once a second, and
		// it could not confirm this so soon anyway.
		confirmed := slotConfirmed(t, db)
		took, err := cw.waitTakeover(died)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("attempt %d: SIGKILLed relay %d after JetStream acknowledged an event; the standby took the slot over %v later",
			attempt, killed, took.Round(time.Millisecond))
		if err := cw.relays[killed].start(); err != nil {
			t.Fatal(err)
		}
		if confirmed < before {
			break // killed between the ack and the confirmation
		}
		if attempt == 5 {
			t.Fatalf("in 5 attempts the relay had always confirmed its events before the kill")
		}
	}

	// The successor publishes and marks everything; the stream holds each
	// event exactly once, and the wire saw some sent twice, same ID.
	waitFor(t, "the outbox drained", 2*time.Minute, func() bool { p, err := db.pending(ctx); return err == nil && p == 0 })
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	got, err := br.consume(cctx, len(all))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(all) {
		t.Errorf("the stream holds %d messages, want %d: a duplicate got through or an event was lost", len(got), len(all))
	}
	in := map[uuid.UUID]bool{}
	for _, id := range got {
		in[id] = true
	}
	for _, id := range all {
		if !in[id] {
			t.Errorf("event %s was lost", id)
		}
	}
	waitFor(t, "the wire to show the same IDs sent again", 30*time.Second, func() bool { r, _ := br.republished(); return r > 0 })
	r, _ := br.republished()
	t.Logf("%d events; the standby re-sent %d of them with the same IDs, all dropped by JetStream's duplicate window; takeovers: %s",
		len(all), r, cw.takeoverSummary())
}

// commitEvents commits n events over keys in one transaction and returns
// their IDs and the WAL position just before the commit: a slot confirmed
// past the transaction is confirmed past it.
func commitEvents(t *testing.T, db *pgDatabase, keys []string, n int) ([]uuid.UUID, uint64) {
	t.Helper()
	ctx := context.Background()
	var ids []uuid.UUID
	var before uint64
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		for i := range n {
			m := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: keys[i%len(keys)], Type: "Counted",
				Payload: fmt.Appendf(nil, `{"i":%d}`, i)}
			if err := db.ob.Enqueue(ctx, tx, m); err != nil {
				return err
			}
			ids = append(ids, m.ID)
		}
		return tx.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint`).Scan(&before)
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids, before
}

// slotConfirmed is the slot's confirmed_flush_lsn as a number.
func slotConfirmed(t *testing.T, db *pgDatabase) uint64 {
	t.Helper()
	var n uint64
	if err := db.pool.QueryRow(context.Background(), `SELECT coalesce(pg_wal_lsn_diff(confirmed_flush_lsn, '0/0'), 0)::bigint
		FROM pg_replication_slots WHERE slot_name = 'outbox_cdc'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
