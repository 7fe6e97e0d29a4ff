package subscribertest

import (
	"testing"
)

// Run runs every case against h, each in parallel on an Env of its own.
func Run(t *testing.T, h Harness) {
	if h.Setup == nil {
		t.Fatal("subscribertest: Harness.Setup is nil")
	}
	for _, c := range []struct {
		name string
		f    func(*testing.T, Harness)
	}{
		{"Delivery", testDelivery},
		{"HostileKeyAndType", testHostileKeyAndType},
		{"DuplicateHasOneEffect", testDuplicateHasOneEffect},
		{"RetryThenSucceed", testRetryThenSucceed},
		{"AckAfterCommit", testAckAfterCommit},
		{"DeadLetters", testDeadLetters},
		{"Order", testOrder},
		{"OrderPerKey", testOrderPerKey},
		{"Concurrency", testConcurrency},
		{"SharedGroup", testSharedGroup},
		{"Resume", testResume},
		{"GracefulStop", testGracefulStop},
		{"HardStop", testHardStop},
		{"RunUntilCancelled", testRunUntilCancelled},
		{"Lifecycle", testLifecycle},
		{"Orphan", testOrphan},
		{"OrphanPastMaxDeliveries", testOrphanPastMaxDeliveries},
		{"SlowHandlerKeepsMessage", testSlowHandlerKeepsMessage},
		{"Outage", testOutage},
		{"StopDuringOutage", testStopDuringOutage},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.f(t, h)
		})
	}
	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		if len(h.Refusals) == 0 {
			t.Fatal("Harness.Refusals is empty: every broker has credentials to refuse")
		}
		for _, r := range h.Refusals {
			t.Run(r.Name, func(t *testing.T) {
				t.Parallel()
				testRefused(t, h, r)
			})
		}
	})
}
