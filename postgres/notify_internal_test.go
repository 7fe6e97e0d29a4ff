package postgres

import (
	"testing"
	"time"
)

// The NOTIFY pacing: every enqueue notifies while they come slower than one
// per NotifyDebounce, a burst of notifyBurst notifies at once, and a
// sustained higher rate notifies about once per NotifyDebounce.
func TestNotifierPacing(t *testing.T) {
	const d = 10 * time.Millisecond
	count := func(n *notifier, from time.Duration, every time.Duration, k int) int {
		got := 0
		for i := range k {
			if n.allow(int64(from + time.Duration(i)*every)) {
				got++
			}
		}
		return got
	}
	t.Run("slower than the pace", func(t *testing.T) {
		n := &notifier{cfg: Config{NotifyDebounce: d}}
		// 100 enqueues 11ms apart, and 100 at 10ms give or take 4ms.
		if got := count(n, time.Second, 11*time.Millisecond, 100); got != 100 {
			t.Errorf("%d of 100 notified, want all", got)
		}
		got := 0
		for i := range 100 {
			jitter := time.Duration(i%3-1) * 4 * time.Millisecond
			if n.allow(int64(3*time.Second + time.Duration(i)*d + jitter)) {
				got++
			}
		}
		if got != 100 {
			t.Errorf("%d of 100 jittered enqueues notified, want all", got)
		}
	})
	t.Run("burst", func(t *testing.T) {
		n := &notifier{cfg: Config{NotifyDebounce: d}}
		if got := count(n, time.Second, 0, 50); got != notifyBurst {
			t.Errorf("%d of a burst of 50 notified, want %d", got, notifyBurst)
		}
	})
	t.Run("faster than the pace", func(t *testing.T) {
		n := &notifier{cfg: Config{NotifyDebounce: d}}
		// 10 s at one enqueue per millisecond: 1,000 NOTIFYs and the burst.
		if got := count(n, time.Second, time.Millisecond, 10000); got < 1000 || got > 1000+notifyBurst {
			t.Errorf("%d of 10,000 notified, want about 1,000", got)
		}
	})
	t.Run("every transaction or none", func(t *testing.T) {
		if got := count(&notifier{cfg: Config{NotifyDebounce: d, NotifyEveryTx: true}}, time.Second, 0, 50); got != 50 {
			t.Errorf("NotifyEveryTx: %d of 50 notified", got)
		}
		if got := count(&notifier{cfg: Config{NotifyDebounce: d, DisableNotify: true}}, time.Second, 11*time.Millisecond, 50); got != 0 {
			t.Errorf("DisableNotify: %d of 50 notified", got)
		}
	})
}
