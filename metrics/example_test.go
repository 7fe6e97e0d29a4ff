package metrics_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/metrics"
	"github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/relay"
)

// A relay embedded in a service, with its metrics and health endpoints:
// the metrics' hooks go in the relay's Config, the relay goes back to the
// metrics for its counters, and one mux serves /metrics, /healthz and
// /readyz.
func Example() {
	ctx := context.Background()
	pool, schema, done := pgtest.ExampleDB()
	defer done()
	db, err := postgres.New(pool, &postgres.Config{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix, stream := "shop_"+hex.EncodeToString(b[:]), "SHOP_"+hex.EncodeToString(b[:])
	pub, err := nats.NewPublisher(&nats.PublisherConfig{SubjectPrefix: prefix, Stream: stream})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	if err := pub.SetupStream(ctx); err != nil {
		log.Fatal(err)
	}
	defer deleteStream(pub, stream)

	// The metrics, on a registry of the program's own.
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, &metrics.Options{Store: db.Store(), Topics: []string{"orders"}})
	if err != nil {
		log.Fatal(err)
	}
	var published atomic.Int64
	drained := make(chan struct{})
	r, err := relay.New(db.Store(), pub, &relay.Config{
		// The program's own hook runs after the metrics'.
		Hooks: m.RelayHooks(relay.Hooks{AfterComplete: func(res relay.BatchResult) {
			if published.Add(int64(res.Published)) == 3 {
				close(drained)
			}
		}}),
	})
	if err != nil {
		log.Fatal(err)
	}
	m.SetRelay(r)
	srv := httptest.NewServer(m.ServeMux(reg, &metrics.HealthOptions{MaxLag: time.Minute})) // in production: http.ListenAndServe(":9090", mux)
	defer srv.Close()
	if err := r.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = r.Stop(ctx) }()

	ob := outbox.New(db, nil)
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return ob.Enqueue(ctx, tx,
			outbox.Message{Topic: "orders", Payload: []byte(`{"id":1}`)},
			outbox.Message{Topic: "orders", Payload: []byte(`{"id":2}`)},
			outbox.Message{Topic: "refunds", Payload: []byte(`{"id":3}`)})
	})
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-drained:
	case <-time.After(30 * time.Second):
		log.Fatal("not published within 30s")
	}

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(srv.URL + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "outbox_published_events_total") {
			fmt.Println(sc.Text())
		}
	}
	_ = resp.Body.Close()
	resp, err = client.Get(srv.URL + "/readyz")
	if err != nil {
		log.Fatal(err)
	}
	_ = resp.Body.Close()
	fmt.Println("/readyz:", resp.StatusCode)
	// Output:
	// outbox_published_events_total{topic="orders"} 2
	// outbox_published_events_total{topic="other"} 1
	// /readyz: 200
}

func deleteStream(pub *nats.Publisher, name string) {
	js, err := jetstream.New(pub.Conn())
	if err != nil {
		log.Fatal(err)
	}
	if err := js.DeleteStream(context.Background(), name); err != nil {
		log.Printf("delete stream %s: %v", name, err)
	}
}
