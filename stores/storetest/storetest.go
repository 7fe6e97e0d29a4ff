// Package storetest is the conformance suite of the store contract: every
// store runs Run unchanged against its real database.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// Harness is what the suite needs of a store under test: a migrated, empty
// outbox table of its own.
type Harness struct {
	// Store is the relay side of the table.
	Store stores.Store
	// Enqueue writes msgs through the store's outbox.Driver in one new
	// transaction, then commits it or, when commit is false, rolls it back.
	Enqueue func(ctx context.Context, msgs []outbox.Message, commit bool) error
	// Begin opens a transaction of the store's own kind, for the cases
	// that race two writers. Optional: nil skips them.
	Begin func(ctx context.Context) (Tx, error)
	// Open returns another store on the same table, as a relay in
	// another process has (its own key cursor, say). Optional: with nil,
	// the cases that race relays run them all on Store.
	Open func(t *testing.T) stores.Store
	// StepBack takes the outbox table back one migration step that changes
	// the table (an index built, a column altered), so that Store.Migrate
	// has it to apply; MigrationWaits reports whether a session waits for
	// a lock on the table. Optional, both or neither: nil skips the case,
	// for a backend whose migrations never wait behind a writer.
	StepBack       func(ctx context.Context) error
	MigrationWaits func(ctx context.Context) (bool, error)
}

// Tx is an open writer transaction.
type Tx interface {
	Enqueue(ctx context.Context, msgs ...outbox.Message) error
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Run runs every case. setup is called once per case and must return a
// harness on a fresh table.
func Run(t *testing.T, setup func(t *testing.T) Harness) {
	cases := []struct {
		name string
		f    func(t *testing.T, h Harness)
	}{
		{"RoundTrip", testRoundTrip},
		{"Rollback", testRollback},
		{"ManyInOneCall", testManyInOneCall},
		{"ClaimIsExclusive", testClaimIsExclusive},
		{"AbortReleases", testAbortReleases},
		{"MarkPublishedAndPurge", testMarkPublishedAndPurge},
		{"DeletePublished", testDeletePublished},
		{"RetryBackoff", testRetryBackoff},
		{"DeadAndReplay", testDeadAndReplay},
		{"NotBefore", testNotBefore},
		{"UnnamedRecordsUntouched", testUnnamedRecordsUntouched},
		{"LimitAndOrder", testLimitAndOrder},
		{"Stats", testStats},
		{"ConcurrentRelays", testConcurrentRelays},
		{"OrderedHeadOnly", testOrderedHeadOnly},
		{"OrderedRetryBlocksKey", testOrderedRetryBlocksKey},
		{"OrderedNotBeforeBlocksKey", testOrderedNotBeforeBlocksKey},
		{"OrderedFairAcrossKeys", testOrderedFairAcrossKeys},
		{"OrderedConcurrentRelays", testOrderedConcurrentRelays},
		{"OrderedCommitOrderRace", testOrderedCommitOrderRace},
		{"OrderedRuns", testOrderedRuns},
		{"OrderedRunStopsAtNotDue", testOrderedRunStopsAtNotDue},
		{"OrderedRunNeverPassesAHeldRecord", testOrderedRunNeverPassesAHeldRecord},
		{"OrderedRunsConcurrentRelays", testOrderedRunsConcurrentRelays},
		{"OrderedRunsFillTheBatch", testOrderedRunsFillTheBatch},
		{"ContinueFollowsRuns", testContinueFollowsRuns},
		{"ContinueStopsAtNotDue", testContinueStopsAtNotDue},
		{"ContinueOnlyWhatCovers", testContinueOnlyWhatCovers},
		{"ContinueNotAtATrickle", testContinueNotAtATrickle},
		{"ContinuationOutlivesItsBatch", testContinuationOutlivesItsBatch},
		{"ContinueAfterItsBatchCompleted", testContinueAfterItsBatchCompleted},
		{"Unordered", testUnordered},
		{"DeadLetterByHand", testDeadLetterByHand},
		{"StatsDueScheduledRetrying", testStatsDueScheduledRetrying},
		{"Blocked", testBlocked},
		{"DeadLetterKeepsLastError", testDeadLetterKeepsLastError},
		{"DeadByIDs", testDeadByIDs},
		{"Discard", testDiscard},
		{"DeadFilters", testDeadFilters},
		{"DeadPaging", testDeadPaging},
		{"PurgeDead", testPurgeDead},
		{"Republish", testRepublish},
		{"Find", testFind},
		{"HostileRoundTrip", testHostileRoundTrip},
		{"HostileBlocked", testHostileBlocked},
		{"EnqueueRefusesNUL", testEnqueueRefusesNUL},
		{"MigrateLetsWritersThrough", testMigrateLetsWritersThrough},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := setup(t)
			c.f(t, h)
		})
	}
}

// t0 is the suite's fixed clock: timestamps the suite writes and compares
// never come from the wall clock.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
