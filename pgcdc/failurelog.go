package pgcdc

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// failureLogEvery is how often the relay logs the failures of one topic
// and outcome: the first at once, then one line per interval counting the
// ones left out.
const failureLogEvery = 10 * time.Second

// maxLoggedTopics bounds the topics tracked apart.
const maxLoggedTopics = 1024

// failureLog logs per-event publish failures, rate-limited per topic and
// outcome.
type failureLog struct {
	log     *slog.Logger
	mu      sync.Mutex
	entries map[[2]string]*failureEntry
}

type failureEntry struct {
	last       time.Time
	suppressed int
}

func newFailureLog(log *slog.Logger) *failureLog {
	return &failureLog{log: log, entries: map[[2]string]*failureEntry{}}
}

func (f *failureLog) event(level slog.Level, msg string, ev *event, err error) {
	if !f.log.Enabled(context.Background(), level) {
		return
	}
	now := time.Now()
	k := [2]string{ev.msg.Topic, msg}
	f.mu.Lock()
	e, ok := f.entries[k]
	if !ok && len(f.entries) >= maxLoggedTopics {
		k[0] = ""
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
	args := []any{"id", ev.msg.ID, "topic", ev.msg.Topic}
	if ev.msg.Key != "" {
		args = append(args, "key", ev.msg.Key)
	}
	args = append(args, "attempts", ev.attempts, "error", err)
	if suppressed > 0 {
		args = append(args, "more_since_last_line", suppressed)
	}
	f.log.Log(context.Background(), level, msg, args...)
}
