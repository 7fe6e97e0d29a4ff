package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/metrics"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
)

// waitFor bounds every wait on a condition.
const waitFor = 60 * time.Second

// bundle is what a test needs: its own schema, its own registry and
// metrics on its store, and an HTTP server of the metrics' mux.
type bundle struct {
	pool   *pgxpool.Pool
	schema string
	db     *postgres.DB
	ob     *outbox.Outbox[pgx.Tx]
	reg    *prometheus.Registry
	m      *metrics.Metrics
	srv    *httptest.Server
	client *http.Client
}

func setup(t *testing.T, opts *metrics.Options, health *metrics.HealthOptions) *bundle {
	t.Helper()
	pool := pgtest.Pool(t)
	return setupOn(t, pool, pool, opts, health)
}

// setupOn is setup with the store on storePool (a pool through a proxy,
// say) and the test's own queries on pool.
func setupOn(t *testing.T, pool, storePool *pgxpool.Pool, opts *metrics.Options, health *metrics.HealthOptions) *bundle {
	t.Helper()
	schema := pgtest.Schema(t, pool)
	db, err := postgres.New(storePool, &postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if opts == nil {
		opts = &metrics.Options{}
	}
	if opts.Store == nil {
		opts.Store = db.Store()
	}
	if opts.StatsCacheTTL == 0 {
		opts.StatsCacheTTL = -1 // every scrape reads the table: the tests compare with it
	}
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.New(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.ServeMux(reg, health))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	return &bundle{pool: pool, schema: schema, db: db, ob: outbox.New(db, nil), reg: reg, m: m, srv: srv, client: client}
}

// startRelay runs a relay on the bundle's store, with the metrics' hooks,
// until the test ends.
func (b *bundle) startRelay(t *testing.T, pub publishers.Publisher, cfg *relay.Config) *relay.Relay {
	t.Helper()
	if cfg == nil {
		cfg = &relay.Config{}
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	if cfg.OutageBackoff == (outbox.Backoff{}) {
		cfg.OutageBackoff = outbox.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond, Jitter: 0.2}
	}
	cfg.Hooks = b.m.RelayHooks(cfg.Hooks)
	r, err := relay.New(b.db.Store(), pub, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.m.SetRelay(r)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("stop relay: %v", err)
		}
	})
	return r
}

// enqueue commits msgs in one transaction.
func (b *bundle) enqueue(t *testing.T, msgs ...outbox.Message) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return b.ob.Enqueue(ctx, tx, msgs...) })
	if err != nil {
		t.Fatal(err)
	}
}

func events(topic string, n int) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		out[i] = outbox.Message{Topic: topic, Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))}
	}
	return out
}

// count runs a count query on the test's schema (%s is the table).
func (b *bundle) count(t *testing.T, where string) float64 {
	t.Helper()
	var n int64
	q := fmt.Sprintf(`SELECT count(*) FROM %q.messages WHERE `+where, b.schema)
	if err := b.pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return float64(n)
}

// get GETs path from the metrics' server.
func (b *bundle) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := b.client.Get(b.srv.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// value gathers the registry and returns the value of the metric name
// whose labels include labels (alternating names and values), summed over
// the series that match; ok is false when none does.
func value(t *testing.T, g prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	sum, ok := 0.0, false
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, mt := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if labelValue(mt, labels[i]) != labels[i+1] {
					continue series
				}
			}
			ok = true
			switch {
			case mt.Counter != nil:
				sum += mt.GetCounter().GetValue()
			case mt.Gauge != nil:
				sum += mt.GetGauge().GetValue()
			case mt.Histogram != nil:
				sum += float64(mt.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum, ok
}

func labelValue(mt *dto.Metric, name string) string {
	for _, l := range mt.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// eventually waits until cond holds, failing with what it last said.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	var last string
	for {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, waitFor, last)
		}
		time.Sleep(20 * time.Millisecond) // polling interval of the wait, bounded by the deadline
	}
}

// waitValue waits until the metric's value is want.
func waitValue(t *testing.T, g prometheus.Gatherer, want float64, name string, labels ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s%v = %v", name, labels, want), func() (bool, string) {
		v, ok := value(t, g, name, labels...)
		return ok && v == want, fmt.Sprintf("%v (present %v)", v, ok)
	})
}

// waitReady waits until /readyz answers code with a body containing part.
func (b *bundle) waitReady(t *testing.T, code int, part string) string {
	t.Helper()
	var body string
	eventually(t, fmt.Sprintf("/readyz %d %q", code, part), func() (bool, string) {
		var c int
		c, body = b.get(t, "/readyz")
		return c == code && strings.Contains(body, part), fmt.Sprintf("%d %q", c, body)
	})
	return body
}

// natsPublisher publishes to url under prefix.
func natsPublisher(t *testing.T, cfg natspub.PublisherConfig) *natspub.Publisher {
	t.Helper()
	if cfg.ReconnectWait == 0 {
		cfg.ReconnectWait = 50 * time.Millisecond
	}
	p, err := natspub.NewPublisher(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// streamCount is how many messages stream holds.
func streamCount(t *testing.T, js jetstream.JetStream, stream string) float64 {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return float64(info.State.Msgs)
}

var _ = testutil.ToFloat64
