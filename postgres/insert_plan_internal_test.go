package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
)

// TestKeyedInsertLocksBeforeSeq: a keyed enqueue takes its keys' locks
// before any of its rows takes a seq, or two writers of one key could take
// their seqs in one order and commit in the other (see insertSQL). Read
// off each keyed statement's plan: the node that computes the seq
// (nextval) is, for one event, the scan of pg_advisory_xact_lock itself —
// its rows come from the lock's call — and, for several, under a one-time
// filter on the locks' InitPlan, which runs before the first row is
// fetched.
func TestKeyedInsertLocksBeforeSeq(t *testing.T) {
	ctx := context.Background()
	pool, db := migrated(t)
	now := time.Now().UTC()
	for _, n := range []int{1, 3} {
		for _, notice := range []string{"", "0"} {
			t.Run(fmt.Sprintf("%d events, notice %q", n, notice), func(t *testing.T) {
				msgs := make([]outbox.Message, n)
				for i := range msgs {
					msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: fmt.Sprintf("k%d", i%2), CreatedAt: now}
				}
				args, err := insertArgs(msgs)
				if err != nil {
					t.Fatal(err)
				}
				var plan string
				if err := pool.QueryRow(ctx, `EXPLAIN (VERBOSE, FORMAT JSON) `+insertSQL(db.cfg, n, notice, true), args...).Scan(&plan); err != nil {
					t.Fatal(err)
				}
				var root []struct {
					Plan planNode `json:"Plan"`
				}
				if err := json.Unmarshal([]byte(plan), &root); err != nil || len(root) != 1 {
					t.Fatalf("EXPLAIN: %v: %s", err, plan)
				}
				path := root[0].Plan.seqPath(nil)
				if len(path) == 0 {
					t.Fatalf("no node computes nextval:\n%s", plan)
				}
				at := path[len(path)-1]
				if n == 1 {
					if at.Type != "Function Scan" || at.Function != "pg_advisory_xact_lock" {
						t.Fatalf("the seq is computed by a %s node (function %q), want the scan of pg_advisory_xact_lock:\n%s", at.Type, at.Function, plan)
					}
					return
				}
				if !slices.ContainsFunc(path, func(p planNode) bool {
					return strings.Contains(p.OneTimeFilter, "InitPlan") || strings.HasPrefix(p.OneTimeFilter, "($")
				}) {
					t.Fatalf("no one-time filter on the locks above the node that computes the seq (%s):\n%s", at.Type, plan)
				}
			})
		}
	}
}

// seqPath returns the nodes from n down to the first one whose output
// computes nextval, or nil.
func (n planNode) seqPath(path []planNode) []planNode {
	path = append(path, n)
	for _, o := range n.Output {
		if strings.Contains(o, "nextval(") {
			return path
		}
	}
	for _, c := range n.Plans {
		if p := c.seqPath(path); p != nil {
			return p
		}
	}
	return nil
}
