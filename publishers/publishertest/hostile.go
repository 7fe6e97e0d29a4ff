package publishertest

import (
	"maps"
	"testing"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/hostile"
)

// testHostileKeyAndType: keys and types with leading and trailing spaces,
// CR, LF, TAB, escapes and non-ASCII arrive exactly as they were enqueued,
// as do the headers beside them.
func testHostileKeyAndType(t *testing.T, env Env) {
	p := open(t, env)
	msgs := make([]outbox.Message, len(hostile.Strings))
	for i, s := range hostile.Strings {
		msgs[i] = messages(env.Topic, s, 1, 10)[0]
		msgs[i].Type = s
		msgs[i].Headers = map[string]string{"seq": "1", "inner-space": "a b", "unicode": "☃"}
	}
	publishOK(t, p, msgs)
	got := read(t, env, len(msgs))
	byID := make(map[string]Received, len(got))
	for _, r := range got {
		byID[r.ID] = r
	}
	for _, m := range msgs {
		r, ok := byID[m.ID.String()]
		switch {
		case !ok:
			t.Errorf("message with key %q did not arrive", m.Key)
		case r.Key != m.Key:
			t.Errorf("key %q arrived as %q", m.Key, r.Key)
		case r.Type != m.Type:
			t.Errorf("type %q arrived as %q", m.Type, r.Type)
		}
		if ok {
			h := maps.Clone(r.Headers)
			for k := range h {
				if _, mine := m.Headers[k]; !mine {
					delete(h, k)
				}
			}
			if !maps.Equal(h, m.Headers) {
				t.Errorf("key %q: headers %q, want %q", m.Key, h, m.Headers)
			}
		}
	}
}
