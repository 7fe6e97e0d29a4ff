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
			if ok, _ := n.allow(int64(from + time.Duration(i)*every)); ok {
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
			if ok, _ := n.allow(int64(3*time.Second + time.Duration(i)*d + jitter)); ok {
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

// A NOTIFY says how long its writer may now skip NOTIFYs: zero while a
// token is left for the next enqueue, NotifyDebounce from the one that took
// the last, and zero again once the bucket refilled.
func TestNotifierQuiet(t *testing.T) {
	const d = 10 * time.Millisecond
	n := &notifier{cfg: Config{NotifyDebounce: d}}
	now := time.Second
	for i := range notifyBurst {
		ok, quiet := n.allow(int64(now))
		want := time.Duration(0)
		if i == notifyBurst-1 {
			want = d
		}
		if !ok || quiet != want {
			t.Fatalf("enqueue %d of a burst: notify %v, quiet %v; want true, %v", i, ok, quiet, want)
		}
	}
	if ok, _ := n.allow(int64(now + d/2)); ok {
		t.Fatal("an enqueue within NotifyDebounce of the last token notified")
	}
	// One token back: it is the last again.
	if ok, quiet := n.allow(int64(now + d)); !ok || quiet != d {
		t.Fatalf("the enqueue a NotifyDebounce later: notify %v, quiet %v; want true, %v", ok, quiet, d)
	}
	// A second later the bucket is full: the next enqueue leaves tokens.
	if ok, quiet := n.allow(int64(now + time.Second)); !ok || quiet != 0 {
		t.Fatalf("after a lull: notify %v, quiet %v; want true, 0", ok, quiet)
	}
	fresh := &notifier{cfg: Config{NotifyDebounce: d}}
	if got := fresh.notice(); got != "0" {
		t.Errorf("a fresh notifier's notice = %q, want \"0\"", got)
	}
	if got := (&notifier{cfg: Config{DisableNotify: true}}).notice(); got != "" {
		t.Errorf("DisableNotify: notice %q, want none", got)
	}
	if _, quiet := (&notifier{cfg: Config{NotifyEveryTx: true}}).allow(int64(now)); quiet != 0 {
		t.Errorf("NotifyEveryTx: quiet %v, want 0", quiet)
	}
}

// A one-event enqueue's statement comes from the notifier's built ones for
// every notice it gives — the first ten of a burst, the one that takes the
// last token, the skipped ones — and is the statement insertSQL builds.
func TestNotifierSinglesCoverEveryNotice(t *testing.T) {
	for _, c := range []Config{{NotifyDebounce: 10 * time.Millisecond}, {NotifyDebounce: 1500 * time.Microsecond},
		{NotifyEveryTx: true}, {DisableNotify: true}} {
		cfg, err := c.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		n := &notifier{cfg: cfg}
		n.once.Do(n.buildSingles)
		seen := map[string]bool{}
		for range 3 * notifyBurst {
			notice := n.notice()
			seen[notice] = true
			for _, k := range []bool{false, true} {
				if q, ok := n.singles[single{notice, k}]; !ok || q != insertSQL(cfg, 1, notice, k) {
					t.Errorf("%+v: notice %q, keyed %v: no built statement, or not insertSQL's", c, notice, k)
				}
			}
		}
		if len(seen) < 2 && !c.NotifyEveryTx && !c.DisableNotify {
			t.Errorf("%+v: notices %v; the burst's end was not reached", c, seen)
		}
	}
}
