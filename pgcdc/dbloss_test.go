package pgcdc_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
)

// The relay loses the database mid-stream (every connection cut, new ones
// refused): it reconnects and resumes from the slot's confirmed position.
// Events in flight are sent again with their IDs (the dedup window drops
// them); none is lost; every row ends marked.
func TestDatabaseLossResumes(t *testing.T) {
	e := newEnv(t)
	proxy := tcpproxy.Start(t, "127.0.0.1:"+strconv.Itoa(cluster.port))
	cfg := e.config()
	cfg.ConnString = strings.Replace(cfg.ConnString, "127.0.0.1:"+strconv.Itoa(cluster.port), proxy.Addr, 1)
	pub := e.publisher()
	r := e.start(cfg, pub)
	var msgs []outbox.Message
	for i := range 300 {
		msgs = append(msgs, msg(fmt.Sprintf("k%d", i%4)))
	}
	e.insert(false, msgs[:100]...)
	e.read(100)
	e.insert(false, msgs[100:200]...)
	proxy.Cut()
	e.insert(false, msgs[200:]...)
	e.waitFor("the relay sees the loss", 30*time.Second, func() bool { return r.Stats().Restarts > 0 })
	proxy.Restore(t)
	got := e.read(300)
	if len(got) != 300 {
		t.Fatalf("stream holds %d, want 300", len(got))
	}
	e.waitFor("every row marked", 30*time.Second, func() bool { return e.count(0) == 0 })
	at := pos(ids(t, got))
	last := map[string]int{}
	for _, m := range msgs {
		if p, ok := last[m.Key]; ok && at[m.ID] < p {
			t.Fatalf("key %s out of order after the reconnect", m.Key)
		}
		last[m.Key] = at[m.ID]
	}
	t.Logf("duplicates dropped by the dedup window: %d", pub.Duplicates())
}
