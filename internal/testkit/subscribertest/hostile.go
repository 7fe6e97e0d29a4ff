package subscribertest

import (
	"context"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/hostile"
)

// testHostileKeyAndType: the handler receives each event's key and type
// exactly as they were enqueued — leading and trailing spaces, CR, LF,
// TAB, escapes and non-ASCII included.
func testHostileKeyAndType(t *testing.T, h Harness) {
	f := setup(t, h)
	evs := events(len(hostile.Strings))
	want := make(map[uuid.UUID]string, len(evs))
	for i, s := range hostile.Strings {
		evs[i].Key, evs[i].Type = s, s
		want[evs[i].ID] = s
	}
	var mu sync.Mutex
	got := make(map[uuid.UUID]inbox.Message)
	c := f.config("hostile")
	c.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		mu.Lock()
		got[m.ID] = m
		mu.Unlock()
		return f.effect(ctx, tx, m)
	}
	s := f.start(c)
	f.Publish(t, evs...)
	waitFor(t, "every event handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(evs)
	})
	f.stop(s)
	for id, w := range want {
		m := got[id]
		if m.Key != w || m.Type != w {
			t.Errorf("key and type %q arrived as key %q, type %q", w, m.Key, m.Type)
		}
	}
}
