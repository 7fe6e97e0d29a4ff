package postgres

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/internal/testkit/pgtest"
)

// TestClaimPlansWithoutStatistics: claims stay on their indexes while the
// table's statistics are behind its contents. A burst into a table that was
// never analyzed (autovacuum off for it, so none comes meanwhile) made
// PostgreSQL estimate a few dozen pending rows and plan the unordered claim
// as a bitmap scan of every pending row of the keys after the cursor, then
// a sort: 60,000 rows sorted for a claim of 1,000, a quarter of the
// ordered relay's rate (see claimSettingsSQL). Each claim statement's plan
// is read with the settings the claim sets: no sort may sit under its
// LockRows, that is, between the table and the rows it locks.
func TestClaimPlansWithoutStatistics(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	db, err := New(pool, &Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	s := db.Store()
	table := s.nm.table
	if _, err := pool.Exec(ctx, `ALTER TABLE `+table+` SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	// 30,000 keyed rows over 10 keys and 30,000 unkeyed ones.
	if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (id, topic, key, type, payload, created_at, available_at)
		SELECT gen_random_uuid(), 'orders', CASE WHEN g % 2 = 0 THEN 'k' || (g % 10) ELSE '' END, 'T', '\x00', now(), now()
		FROM generate_series(1, 60000) g`); err != nil {
		t.Fatal(err)
	}
	var analyzed bool
	if err := pool.QueryRow(ctx, `SELECT last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL
		FROM pg_stat_user_tables WHERE relid = $1::regclass`, table).Scan(&analyzed); err != nil {
		t.Fatal(err)
	}
	if analyzed {
		t.Fatal("the table was analyzed: the test needs statistics that are behind")
	}
	now := time.Now().UTC().Add(time.Second)
	for _, c := range []struct {
		name string
		sql  string
		args []any
	}{
		{"unordered keyed claim", s.keyedUnorderedSQL(false), []any{now, 1000, "k3"}},
		{"unordered keyed claim, wrapped", s.keyedUnorderedSQL(true), []any{now, 1000, "", "k3"}},
		{"unkeyed claim", s.unkeyedSQL(), []any{now, 500}},
		{"ordered keyed claim", s.keyedSQL(false), []any{now, 250, "k3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck // read only
			if _, err := tx.Exec(ctx, claimSettingsSQL, "60000"); err != nil {
				t.Fatal(err)
			}
			var plan string
			if err := tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+c.sql, c.args...).Scan(&plan); err != nil {
				t.Fatal(err)
			}
			var root []struct {
				Plan planNode `json:"Plan"`
			}
			if err := json.Unmarshal([]byte(plan), &root); err != nil || len(root) != 1 {
				t.Fatalf("EXPLAIN: %v: %s", err, plan)
			}
			if path := root[0].Plan.sortUnderLock(nil, false); path != "" {
				t.Errorf("the plan sorts the table's rows before locking them (%s):\n%s", path, plan)
			}
		})
	}
}

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan.
type planNode struct {
	Type  string     `json:"Node Type"`
	Plans []planNode `json:"Plans"`
}

// sortUnderLock returns the path to a Sort node below a LockRows node, or
// "" when there is none.
func (n planNode) sortUnderLock(path []string, locked bool) string {
	path = append(path, n.Type)
	if locked && n.Type == "Sort" {
		return strings.Join(path, " > ")
	}
	locked = locked || n.Type == "LockRows"
	for _, c := range n.Plans {
		if p := c.sortUnderLock(path, locked); p != "" {
			return p
		}
	}
	return ""
}
