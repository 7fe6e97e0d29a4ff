package metrics_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/metrics"
)

// An event due for longer than MaxLag (no relay drains it) fails /readyz
// as stuck; /healthz stays 200.
func TestReadyzStuck(t *testing.T) {
	b := setup(t, nil, &metrics.HealthOptions{MaxLag: time.Minute})
	if code, body := b.get(t, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz on an empty outbox: %d %q", code, body)
	}
	// A fresh event is no lag yet.
	b.enqueue(t, outbox.Message{Topic: "orders", Payload: []byte(`{}`)})
	if code, body := b.get(t, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with a fresh event: %d %q", code, body)
	}
	// One written ten minutes ago and still due is.
	b.enqueue(t, outbox.Message{Topic: "payments", Payload: []byte(`{}`), CreatedAt: time.Now().Add(-10 * time.Minute)})
	code, body := b.get(t, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "stuck") || !strings.Contains(body, "topic payments") {
		t.Errorf("/readyz with a 10-minute-old due event: %d %q, want 503 stuck, naming topic payments", code, body)
	}
	if lag, _ := value(t, b.reg, "outbox_oldest_due_event_age_seconds", "topic", "payments"); lag < 600 || lag > 660 {
		t.Errorf("lag{payments} = %vs, want about 600", lag)
	}
	if code, body := b.get(t, "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q, want 200 ok", code, body)
	}
	if code, _ := b.get(t, "/nothing"); code != http.StatusNotFound {
		t.Errorf("GET /nothing: %d, want 404", code)
	}
}

// A database that cannot be reached fails /readyz, and turns
// outbox_store_up to 0, within StatsTimeout; it recovers with the path.
func TestReadyzDatabase(t *testing.T) {
	pool := pgtest.Pool(t)
	proxy := tcpproxy.Start(t, "127.0.0.1:5432")
	cfg, err := pgxpool.ParseConfig(strings.Replace(pgtest.URL(), "127.0.0.1:5432", proxy.Addr, 1))
	if err != nil {
		t.Fatal(err)
	}
	via, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(via.Close)
	b := setupOn(t, pool, via, &metrics.Options{StatsTimeout: time.Second}, nil)
	if code, body := b.get(t, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	if v, _ := value(t, b.reg, "outbox_store_up"); v != 1 {
		t.Errorf("outbox_store_up = %v, want 1", v)
	}

	proxy.Stall(true)
	code, body := b.get(t, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready: database: ") || strings.Count(body, "\n") != 1 {
		t.Errorf("/readyz with the database stalled: %d %q, want 503 naming the database, one line", code, body)
	}
	if v, _ := value(t, b.reg, "outbox_store_up"); v != 0 {
		t.Errorf("outbox_store_up with the database stalled = %v, want 0", v)
	}
	if _, ok := value(t, b.reg, "outbox_pending_events"); ok {
		t.Error("outbox_pending_events reported though the store could not be read")
	}
	proxy.Stall(false)
	proxy.Drop() // the stalled connections are no use
	b.waitReady(t, http.StatusOK, "ok")
}
