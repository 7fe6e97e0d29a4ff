package pgcdc_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/internal/logtest"
	"github.com/outboxgo/outbox/pgcdc"
)

// TestSweepReadsDelayedRowsOnly: the due sweep, which runs every
// PollInterval, reads the delayed index, not the backlog. Before the index
// (migration 004_delayed) no index served its predicate: each sweep was a
// scan of the whole table, pending and retained rows alike — with 400,000
// rows, 150 ms of the server's CPU every PollInterval, a third of the CDC
// relay's drain. The table is never analyzed here (autovacuum off), as
// after a burst.
func TestSweepReadsDelayedRowsOnly(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `ALTER TABLE `+e.table+` SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	// 40,000 pending rows, keyed and unkeyed, 10,000 published ones and
	// 10 delayed.
	if _, err := e.pool.Exec(ctx, `INSERT INTO `+e.table+` (id, topic, key, type, payload, created_at, available_at, status, published_at)
		SELECT gen_random_uuid(), 't', CASE WHEN g % 2 = 0 THEN 'k' || (g % 100) ELSE '' END, 'T', '\x00', now(),
			now() + CASE WHEN g % 5000 = 0 THEN interval '1 hour' ELSE interval '0' END,
			CASE WHEN g % 5 = 0 AND g % 5000 <> 0 THEN 1 ELSE 0 END, CASE WHEN g % 5 = 0 AND g % 5000 <> 0 THEN now() END
		FROM generate_series(1, 50000) g`); err != nil {
		t.Fatal(err)
	}
	var plan string
	err := e.pool.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+pgcdc.SweepSQL(e.table), time.Now().UTC(), 1000).Scan(&plan)
	if err != nil {
		t.Fatal(err)
	}
	var root []struct {
		Plan scanNode `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(plan), &root); err != nil || len(root) != 1 {
		t.Fatalf("EXPLAIN: %v: %s", err, plan)
	}
	// An index scan of the delayed index, or a bitmap scan of the table
	// through it: nothing else.
	scans := root[0].Plan.scans(nil)
	delayed, other := false, false
	for _, s := range scans {
		switch {
		case s.Index == "messages_delayed":
			delayed = true
		case s.Type == "Bitmap Heap Scan" && s.Index == "":
		default:
			other = true
		}
	}
	if !delayed || other {
		t.Fatalf("the sweep reads %+v, want the messages_delayed index only:\n%s", scans, plan)
	}
}

// scanNode is a node of EXPLAIN (FORMAT JSON)'s plan.
type scanNode struct {
	Type     string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Plans    []scanNode `json:"Plans"`
}

// scans returns the plan's nodes that read a table or an index.
func (n scanNode) scans(out []scanNode) []scanNode {
	if n.Relation != "" || n.Index != "" {
		out = append(out, scanNode{Type: n.Type, Relation: n.Relation, Index: n.Index})
	}
	for _, c := range n.Plans {
		out = c.scans(out)
	}
	return out
}

// A table migrated before the delayed index still streams, and the relay
// says once what the sweeps cost it and how to fix it.
func TestWarnsWithoutDelayedIndex(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `DROP INDEX `+pgx.Identifier{e.name, "messages_delayed"}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	var log logtest.Buffer
	cfg := e.config()
	cfg.Logger = log.Logger()
	e.start(cfg, e.publisher())
	m := msg("k")
	e.insert(false, m)
	if got := ids(t, e.read(1)); got[0] != m.ID {
		t.Fatalf("published %v, want %v", got, m.ID)
	}
	lines := log.Lines("no index of delayed events")
	if len(lines) != 1 || !strings.Contains(lines[0], "run outbox migrate") {
		t.Fatalf("want one warning that says what to run, got %q in:\n%s", lines, log.String())
	}
}
