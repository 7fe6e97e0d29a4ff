package metrics_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/metrics"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/stores"
	"github.com/outboxgo/outbox/subscribers"
)

// fixedStore is a store whose statistics are fixed; the relay built on it
// is never started.
type fixedStore struct{ stores.Store }

func (fixedStore) Stats(context.Context, stores.StatsParams) ([]stores.TopicStats, error) {
	return []stores.TopicStats{{Topic: "orders", Pending: 2, Due: 1, Scheduled: 1, OldestDue: time.Now().Add(-time.Second)}}, nil
}
func (fixedStore) ClaimTimeout() time.Duration { return 0 }
func (fixedStore) Blocked(context.Context, stores.BlockedParams) ([]stores.BlockedKey, error) {
	return []stores.BlockedKey{{Head: stores.Record{Message: outbox.Message{Topic: "orders", Key: "k"}, Attempts: 1}}}, nil
}

type nopPublisher struct{}

func (nopPublisher) Publish(_ context.Context, msgs []outbox.Message) []error {
	return make([]error, len(msgs))
}
func (nopPublisher) Close() error { return nil }

// touched returns a registry in which every metric of the package has a
// series, and the metrics' kinds by name.
func touched(t *testing.T) (*prometheus.Registry, map[string]dto.MetricType) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.New(reg, &metrics.Options{Store: fixedStore{}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := relay.New(fixedStore{}, nopPublisher{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.SetRelay(r)
	h := m.RelayHooks(relay.Hooks{})
	h.AfterPublish([]outbox.Message{{Topic: "orders", CreatedAt: time.Now()}, {Topic: "orders"}},
		[]error{nil, publishers.Unavailable(os.ErrDeadlineExceeded)})
	h.AfterComplete(relay.BatchResult{Claimed: 2, Published: 1, Retried: 1, Dead: 1, Deferred: 1, Elapsed: time.Millisecond,
		ClaimElapsed: time.Microsecond, PublishElapsed: time.Microsecond, CompleteElapsed: time.Microsecond})
	h.AfterClaim(relay.ClaimResult{Claimed: 2, Elapsed: time.Microsecond})
	h.AfterCompleteFailed(relay.BatchResult{Claimed: 1, Published: 1}, os.ErrDeadlineExceeded)
	cdc := func(context.Context) (metrics.CDCReading, error) {
		return metrics.CDCReading{Active: true, Slot: true, SlotLagBytes: 1, SlotRetainedBytes: 1}, nil
	}
	if err := m.RegisterCDC(reg, cdc); err != nil {
		t.Fatal(err)
	}
	s := m.SubscriberHooks(subscribers.Hooks{})
	s.AfterSettle(subscribers.Settlement{Message: inbox.Message{Topic: "orders"}, Action: subscribers.ActionAck, Outcome: inbox.Duplicate})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]dto.MetricType{}
	for _, mf := range mfs {
		kinds[mf.GetName()] = mf.GetType()
	}
	return reg, kinds
}

// The package's metrics follow Prometheus's naming conventions.
func TestMetricNamesLint(t *testing.T) {
	reg, kinds := touched(t)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	for name := range kinds {
		if !strings.HasPrefix(name, "outbox_") {
			t.Errorf("metric %s: not prefixed outbox_", name)
		}
	}
	if len(kinds) != 44 {
		t.Errorf("%d metrics, want 44 (update this test, and docs/operations.md, when adding one): %v", len(kinds), kinds)
	}
}

var metricName = regexp.MustCompile(`outbox_[a-z_]+`)

// checkNames fails the test for each outbox_ name in expr that the
// package does not register; histograms may be named with their _bucket,
// _sum and _count series.
func checkNames(t *testing.T, where, expr string, kinds map[string]dto.MetricType, used map[string]bool) {
	t.Helper()
	names := metricName.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s: no outbox_ metric in %q", where, expr)
	}
	for _, n := range names {
		if _, ok := kinds[n]; ok {
			used[n] = true
			continue
		}
		base := n
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			base = strings.TrimSuffix(base, suffix)
		}
		if k, ok := kinds[base]; ok && k == dto.MetricType_HISTOGRAM {
			used[base] = true
			continue
		}
		t.Errorf("%s: %s is no metric of this package (expr %q)", where, n, expr)
	}
}

// The dashboard's queries use only metrics this package registers.
func TestDashboardNames(t *testing.T) {
	_, kinds := touched(t)
	raw, err := os.ReadFile("../docs/grafana/outbox-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("outbox-dashboard.json: %v", err)
	}
	used := map[string]bool{}
	var exprs int
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs++
			checkNames(t, "dashboard panel "+p.Title, tg.Expr, kinds, used)
		}
	}
	// Every query of the file, the variables' too, wherever it sits.
	var anyDash any
	_ = json.Unmarshal(raw, &anyDash)
	walkStrings(anyDash, func(key, s string) {
		if (key == "expr" || key == "query" || key == "definition") && strings.Contains(s, "outbox_") {
			checkNames(t, "dashboard "+key, s, kinds, used)
		}
	})
	for _, want := range []string{"outbox_pending_events", "outbox_oldest_due_event_age_seconds", "outbox_published_events_total",
		"outbox_publish_failures_total", "outbox_batch_duration_seconds", "outbox_publish_latency_seconds", "outbox_dead_events"} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
	if exprs < 10 {
		t.Errorf("the dashboard has %d queries; the file looks truncated", exprs)
	}
}

func walkStrings(v any, f func(key, s string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok {
				f(k, s)
			} else {
				walkStrings(x, f)
			}
		}
	case []any:
		for _, x := range v {
			walkStrings(x, f)
		}
	}
}

// The alert rules use only metrics this package registers, and each is
// complete: a name, an expression, a severity and a summary.
func TestAlertNames(t *testing.T) {
	_, kinds := touched(t)
	raw, err := os.ReadFile("../docs/grafana/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	used := map[string]bool{}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			where := "alert " + r.Alert
			if r.Alert == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: want a name, a severity label and a summary: %+v", where, r)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", where, r.For, err)
				}
			}
			if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") {
				t.Errorf("%s: unbalanced parentheses in %q", where, r.Expr)
			}
			checkNames(t, where, r.Expr, kinds, used)
		}
	}
	sort.Strings(alerts)
	for _, want := range []string{"OutboxBrokerRefused", "OutboxBrokerUnavailable", "OutboxDeadEventsIncreasing", "OutboxLagHigh", "OutboxNoPublishes"} {
		if i := sort.SearchStrings(alerts, want); i == len(alerts) || alerts[i] != want {
			t.Errorf("alerts.yml has no alert %s (it has %v)", want, alerts)
		}
	}
}

// docs/operations.md names every metric.
func TestOperationsDocNames(t *testing.T) {
	_, kinds := touched(t)
	raw, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range kinds {
		if !strings.Contains(string(raw), "`"+name+"`") {
			t.Errorf("docs/operations.md does not document %s", name)
		}
	}
	for _, n := range metricName.FindAllString(string(raw), -1) {
		n = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if _, ok := kinds[n]; !ok && !strings.HasSuffix(n, "_") {
			t.Errorf("docs/operations.md names %s, which this package does not register", n)
		}
	}
}
