package publishertest

import (
	"testing"
)

// Run runs every case of the suite against h. Cases run in parallel, except
// those that count goroutines and those that stop a broker, which run after.
func Run(t *testing.T, h Harness) {
	if h.Setup == nil {
		t.Fatal("publishertest: Harness.Setup is nil")
	}
	t.Run("Parallel", func(t *testing.T) {
		for _, c := range []struct {
			name string
			fn   func(*testing.T, Env)
		}{
			{"RoundTrip", testRoundTrip},
			{"EmptyBatch", testEmptyBatch},
			{"OversizeFailsAlone", testOversizeFailsAlone},
			{"OrderPerKey", testOrderPerKey},
			{"Concurrent", testConcurrent},
			{"Dedup", testDedup},
			{"CanceledContext", testCanceledContext},
			{"PublishAfterClose", testPublishAfterClose},
			{"HostileKeyAndType", testHostileKeyAndType},
			{"Check", testCheck},
		} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.fn(t, h.Setup(t))
			})
		}
	})
	t.Run("Refused", func(t *testing.T) {
		if len(h.Refusals) == 0 {
			t.Fatal("Harness.Refusals is empty: every broker has credentials to refuse")
		}
		for _, r := range h.Refusals {
			t.Run(r.Name, func(t *testing.T) {
				t.Parallel()
				testRefused(t, h.Setup(t), r)
			})
		}
	})
	t.Run("CloseLeavesNoGoroutines", func(t *testing.T) {
		testCloseLeavesNoGoroutines(t, h.Setup(t))
	})
	t.Run("Outage", func(t *testing.T) {
		if h.Outage == nil {
			t.Skip("Harness.Outage is nil")
		}
		testOutage(t, h.Outage(t))
	})
}
