package postgres

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
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
	pool, db := migrated(t)
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
		{"unkeyed claim", s.unkeyedSQL(false), []any{now, 500}},
		{"unkeyed claim, after", s.unkeyedSQL(true), []any{now, 500, now.Add(-time.Hour), 10}},
		{"ordered keyed claim", s.keyedSQL(false, lockInOrder, false), []any{now, 250, "k3"}},
		{"ordered keyed claim with first runs", s.keyedSQL(true, lockInOrder, false), []any{now, 250, "k3", 1}},
		{"ordered keyed claim with first runs, ranked", s.keyedSQL(true, lockRanked, false), []any{now, 250, "k3", 1}},
		{"ordered keyed claim from the start", s.keyedSQL(false, lockInOrder, true), []any{now, 250, ""}},
		{"ordered keyed claim with first runs from the start", s.keyedSQL(true, lockInOrder, true), []any{now, 250, "", 1}},
		{"ordered keyed claim with first runs from the start, ranked", s.keyedSQL(true, lockRanked, true), []any{now, 250, "", 1}},
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
	Type          string     `json:"Node Type"`
	Relation      string     `json:"Relation Name"`
	Index         string     `json:"Index Name"`
	IndexCond     string     `json:"Index Cond"`
	TIDCond       string     `json:"TID Cond"`
	Function      string     `json:"Function Name"`
	OneTimeFilter string     `json:"One-Time Filter"`
	Output        []string   `json:"Output"` // with VERBOSE
	Plans         []planNode `json:"Plans"`
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

// TestClaimGenericPlans: every statement of a claim and of its completion
// is planned once per connection (plannerSettings: force_generic_plan), so
// its one plan must suit every state of the table. Each statement's generic
// plan, made with the claim's settings, is read for a table that is empty
// and analyzed (the state a relay woken on every commit sees), for a
// backlog that statistics have not caught up with, and for the same
// backlog analyzed: every read of the outbox table must be an index scan
// bounded by an index condition (never a sequential or bitmap scan, or a
// whole index read end to end), with no hash or merge join and no sort
// between the table and the rows locked.
func TestClaimGenericPlans(t *testing.T) {
	ctx := context.Background()
	pool, db := migrated(t)
	s := db.Store()
	table := s.nm.table
	relation := strings.Trim(table[strings.LastIndexByte(table, '.')+1:], `"`)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`ALTER TABLE ` + table + ` SET (autovacuum_enabled = false)`)
	statements := []struct {
		name   string
		sql    string
		params int
		byKey  bool // reads a key's rows: every index scan of the table must be bounded by the key
	}{
		{"ordered heads", s.keyedSQL(false, lockInOrder, false), 3, false},
		{"ordered heads and first runs", s.keyedSQL(true, lockInOrder, false), 4, true},
		{"ordered heads and first runs, ranked", s.keyedSQL(true, lockRanked, false), 4, true},
		{"ordered heads from the start", s.keyedSQL(false, lockInOrder, true), 3, false},
		{"ordered heads and first runs from the start", s.keyedSQL(true, lockInOrder, true), 4, true},
		{"ordered heads and first runs from the start, ranked", s.keyedSQL(true, lockRanked, true), 4, true},
		{"runs", s.runsSQL(lockInOrder), 3, true},
		{"runs, ranked", s.runsSQL(lockRanked), 3, true},
		{"range", s.rangeSQL(false, lockInOrder), 2, false},
		{"range, wrapped", s.rangeSQL(true, lockInOrder), 3, false},
		{"range, ranked", s.rangeSQL(false, lockRanked), 4, false},
		{"range, ranked and wrapped", s.rangeSQL(true, lockRanked), 5, false},
		{"keys beyond the walk", s.keysBeyondSQL(false), 2, false},
		{"keys beyond the walk, wrapped", s.keysBeyondSQL(true), 2, false},
		{"unordered keyed claim", s.keyedUnorderedSQL(false), 3, false},
		{"unordered keyed claim, wrapped", s.keyedUnorderedSQL(true), 4, false},
		{"unkeyed claim", s.unkeyedSQL(false), 2, false},
		{"unkeyed claim, after", s.unkeyedSQL(true), 4, false},
		{"delete published", s.deletePublishedSQL(), 1, false},
		{"delete the rows published", s.deleteRowsSQL(), 1, false},
		{"mark the rows published", s.markRowsSQL(), 2, false},
		{"mark published", s.markPublishedSQL(), 2, false},
		{"retry", s.retrySQL(), 3, false},
		{"dead", s.deadSQL(), 2, false},
	}
	check := func(t *testing.T, state string) {
		for _, c := range statements {
			t.Run(state+"/"+c.name, func(t *testing.T) {
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx) //nolint:errcheck // read only
				if _, err := tx.Exec(ctx, claimSettingsSQL, "60000"); err != nil {
					t.Fatal(err)
				}
				// A prepared statement outlives the transaction: one name
				// per session, dropped at the end.
				if _, err := tx.Exec(ctx, `PREPARE generic_claim AS `+c.sql); err != nil {
					t.Fatal(err)
				}
				defer tx.Exec(ctx, `DEALLOCATE generic_claim`) //nolint:errcheck // the session's, before the rollback
				// A generic plan does not depend on the values: EXPLAIN
				// shows it for any, NULL included.
				nulls := strings.TrimSuffix(strings.Repeat("NULL, ", c.params), ", ")
				var plan string
				if err := tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE generic_claim(`+nulls+`)`).Scan(&plan); err != nil {
					t.Fatal(err)
				}
				var root []struct {
					Plan planNode `json:"Plan"`
				}
				if err := json.Unmarshal([]byte(plan), &root); err != nil || len(root) != 1 {
					t.Fatalf("EXPLAIN: %v: %s", err, plan)
				}
				if bad := root[0].Plan.unbounded(nil, relation, false); bad != "" {
					t.Errorf("generic plan %s:\n%s", bad, plan)
				}
				if bad := root[0].Plan.offKey(nil, relation); c.byKey && bad != "" {
					t.Errorf("generic plan reads a key's rows %s:\n%s", bad, plan)
				}
			})
		}
	}
	exec(`ANALYZE ` + table)
	check(t, "empty, analyzed")
	// 30,000 keyed rows over 1,000 keys and 30,000 unkeyed ones, with the
	// statistics of the empty table.
	exec(`INSERT INTO ` + table + ` (id, topic, key, type, payload, created_at, available_at)
		SELECT gen_random_uuid(), 'orders', CASE WHEN g % 2 = 0 THEN 'k' || (g % 1000) ELSE '' END, 'T', '\x00', now(), now()
		FROM generate_series(1, 60000) g`)
	check(t, "backlog, statistics behind")
	exec(`ANALYZE ` + table)
	check(t, "backlog, analyzed")
	// A few hot keys, their rows interleaved: with ten keys, PostgreSQL
	// estimated that reading the primary key in seq order from a run's
	// start and filtering on the key was cheapest, and read ten rows for
	// each one it took (a tenth of the key's run, the rest other keys').
	exec(`TRUNCATE ` + table)
	exec(`INSERT INTO ` + table + ` (id, topic, key, type, payload, created_at, available_at)
		SELECT gen_random_uuid(), 'orders', 'k' || (g % 10), 'T', '\x00', now(), now()
		FROM generate_series(1, 60000) g`)
	exec(`ANALYZE ` + table)
	check(t, "backlog of ten keys, analyzed")
}

// offKey returns where the plan reads relation along an index without
// bounding the key (a scan of the primary key, say, filtering on the key),
// or "" when every index scan of relation has the key in its condition.
func (n planNode) offKey(path []string, relation string) string {
	path = append(path, n.Type)
	if n.Relation == relation && strings.HasPrefix(n.Type, "Index") && !strings.Contains(n.IndexCond, "key") {
		return "along " + n.Index + " by " + n.IndexCond + " (" + strings.Join(path, " > ") + ")"
	}
	for _, c := range n.Plans {
		if p := c.offKey(path, relation); p != "" {
			return p
		}
	}
	return ""
}

// unbounded returns what makes the plan unfit to be planned once: a
// sequential or bitmap scan of relation, an index scan of it with no index
// condition (a TID scan must have its TID condition), a hash or merge
// join, or a sort below a LockRows node. It returns "" when there is none.
func (n planNode) unbounded(path []string, relation string, locked bool) string {
	path = append(path, n.Type)
	at := strings.Join(path, " > ")
	reads := n.Relation == relation && n.Type != "ModifyTable" // the statement's target, not a read
	switch {
	case reads && n.Type == "Tid Scan" && n.TIDCond != "":
		// A row found where an index range said it is.
	case reads && n.Type != "Index Scan" && n.Type != "Index Only Scan":
		return "reads " + relation + " by " + n.Type + " (" + at + ")"
	case reads && n.IndexCond == "":
		return "reads all of index " + n.Index + " (" + at + ")"
	case n.Type == "Hash Join" || n.Type == "Merge Join":
		return "has a " + n.Type + " (" + at + ")"
	case locked && n.Type == "Sort":
		return "sorts the rows it locks (" + at + ")"
	}
	locked = locked || n.Type == "LockRows"
	for _, c := range n.Plans {
		if p := c.unbounded(path, relation, locked); p != "" {
			return p
		}
	}
	return ""
}
