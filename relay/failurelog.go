package relay

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// failureLogEvery is how often the relay logs the failures of one topic
// and outcome: the first at once, then one line per interval that counts
// the ones it left out. A broker that rejects every event must show in the
// log, without one line per event.
const failureLogEvery = 10 * time.Second

// maxLoggedTopics bounds the topics tracked apart; the failures of the
// others share one entry.
const maxLoggedTopics = 1024

// failureLog logs per-event publish failures, rate-limited per topic and
// outcome.
type failureLog struct {
	log   *slog.Logger
	clock outbox.Clock

	mu      sync.Mutex
	entries map[failureKey]*failureEntry
}

type failureKey struct{ topic, msg string }

type failureEntry struct {
	last       time.Time
	suppressed int
}

func newFailureLog(log *slog.Logger, clock outbox.Clock) *failureLog {
	return &failureLog{log: log, clock: clock, entries: make(map[failureKey]*failureEntry)}
}

// event logs msg at level for rec's failure err, unless the same topic
// and msg were logged less than failureLogEvery ago.
func (f *failureLog) event(level slog.Level, msg string, rec *stores.Record, err error, attrs ...any) {
	if !f.log.Enabled(context.Background(), level) {
		return
	}
	now := f.clock.Now()
	f.mu.Lock()
	k := failureKey{rec.Topic, msg}
	e, ok := f.entries[k]
	if !ok && len(f.entries) >= maxLoggedTopics {
		k.topic = "" // folded with the other topics past the bound
		e, ok = f.entries[k]
	}
	if !ok {
		e = &failureEntry{}
		f.entries[k] = e
	} else if now.Sub(e.last) < failureLogEvery {
		e.suppressed++
		f.mu.Unlock()
		return
	}
	suppressed := e.suppressed
	e.last, e.suppressed = now, 0
	f.mu.Unlock()

	args := []any{"id", rec.ID, "topic", rec.Topic}
	if rec.Key != "" {
		args = append(args, "key", rec.Key)
	}
	args = append(args, "attempts", rec.Attempts+1, "error", err)
	args = append(args, attrs...)
	if suppressed > 0 {
		args = append(args, "more_since_last_line", suppressed)
	}
	f.log.Log(context.Background(), level, msg, args...)
}
