package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/webhook"
	"github.com/outboxgo/outbox/webhook/verify"
)

// Both sides: the relay's publisher posts an event, twice (a relay that
// died between the receiver's 2xx and marking the event published posts
// it again); the receiver verifies each request and feeds an inbox in
// PostgreSQL, which runs the handler once per event ID, in the
// transaction that records the ID.
func Example() {
	ctx := context.Background()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // use 32 random bytes of your own

	// The receiving side's inbox: a table in a schema of the example's own.
	pool, schema, done := pgtest.ExampleDB()
	defer done()
	db, err := postgres.New(pool, &postgres.Config{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Inbox().Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	in, err := inbox.New(db.Inbox(), nil)
	if err != nil {
		log.Fatal(err)
	}
	v, err := verify.New(secret)
	if err != nil {
		log.Fatal(err)
	}
	handle := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		// The business change goes in tx, with the inbox's record of m.ID.
		fmt.Printf("handling %s %s from %s\n", m.Type, m.Payload, m.Topic)
		return nil
	}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead { // the publisher's Check: verify, do nothing else
			if _, err := v.Verify(r.Header, nil); err != nil {
				http.Error(w, "not verified", http.StatusUnauthorized)
				return
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		m, err := v.Message(r.Header, body)
		switch {
		case errors.Is(err, verify.ErrSignature), errors.Is(err, verify.ErrTimestamp), errors.Is(err, verify.ErrMissingHeader):
			http.Error(w, "not verified", http.StatusUnauthorized) // the relay pauses: a configuration to fix
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusUnprocessableEntity) // dead-lettered
			return
		}
		o, err := in.Handle(r.Context(), m, handle)
		switch {
		case inbox.IsPermanent(err):
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		case err != nil:
			http.Error(w, "try again", http.StatusServiceUnavailable) // retried
		default:
			fmt.Println(o)
			w.WriteHeader(http.StatusNoContent) // acknowledged: handled or a duplicate
		}
	}))
	defer receiver.Close()

	// The relay's side.
	pub, err := webhook.New(&webhook.Config{
		Endpoint:    receiver.URL + "/webhooks/{topic}",
		Secrets:     []string{secret},
		ContentType: "application/json",
		AllowCIDRs:  []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, // the example's receiver is local
	})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Check(ctx); err != nil { // what the relay does at start
		log.Fatal(err)
	}
	m := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "order-42", Type: "order.placed", Payload: []byte(`{"total":42}`)}
	for range 2 {
		for _, err := range pub.Publish(ctx, []outbox.Message{m}) {
			if err != nil {
				log.Fatal(err)
			}
		}
	}
	// Output:
	// handling order.placed {"total":42} from orders
	// handled
	// duplicate
}

func ExampleConfigFromURL() {
	cfg, err := webhook.ConfigFromURL("webhook+https://relay:pa55@hooks.example.com/in/{topic}?secret=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw&timeout=10s")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Timeout, len(cfg.Secrets))
	_, err = webhook.ConfigFromURL("webhook+https://relay:pa55@hooks.example.com/in?secret=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw&timout=10s")
	fmt.Println(err)
	// Output:
	// 10s 1
	// webhook publisher: URL webhook+https://relay:xxxxx@hooks.example.com/in?secret=xxxxx&timout=10s: unknown parameter "timout" (the publisher reads secret, timeout, max_in_flight, max_payload, content_type, allow_private, allow_cidr)
}
