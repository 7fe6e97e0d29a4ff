package outboxcli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/internal/logtest"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/cmd/outbox/outboxcli"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
)

// relayBehindCutProxy migrates a schema of its own, enqueues one event and
// returns the relay's database flags, a JetStream stream on the shared
// server, its subject prefix, and a proxy to the server that is cut.
func relayBehindCutProxy(t *testing.T) (db []string, stream, prefix string, px *tcpproxy.Proxy) {
	t.Helper()
	nc := natstest.Connect(t)
	prefix, stream = natstest.NewStream(t, nc)
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	db = []string{"--database-url", pgtest.URL(), "--schema", schema}
	ctx := context.Background()
	if code, out, stderr := run(t, ctx, append([]string{"migrate"}, db...)...); code != 0 {
		t.Fatalf("migrate: %s%s", out, stderr)
	}
	d, _ := postgres.New(pool, &postgres.Config{Schema: schema})
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return outbox.New(d, nil).Enqueue(ctx, tx, outbox.Message{Topic: "orders", Payload: []byte("1")})
	}); err != nil {
		t.Fatal(err)
	}
	px = tcpproxy.Start(t, strings.TrimPrefix(natstest.URL(), "nats://"))
	px.Cut()
	return db, stream, prefix, px
}

// TestRelayWaitsForBroker: a relay started while its broker is unreachable
// says so and keeps trying; once the broker is back it publishes.
func TestRelayWaitsForBroker(t *testing.T) {
	db, stream, prefix, px := relayBehindCutProxy(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr logtest.Buffer
	done := make(chan int)
	go func() {
		var out bytes.Buffer
		done <- outboxcli.Main(ctx, append([]string{"relay", "--broker-url", "nats://" + px.Addr,
			"--subject-prefix", prefix, "--poll-interval", "50ms"}, db...), &out, &stderr)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "broker unreachable; trying again") {
		select {
		case code := <-done:
			t.Fatalf("relay exited %d while the broker was unreachable: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no word of the unreachable broker within 30s: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	px.Restore(t)
	msgs := natstest.WaitForCount(t, natstest.JetStream(t, natstest.Connect(t)), stream, 1, 30*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("the stream holds %d messages once the broker is back, want 1; relay said: %s", len(msgs), stderr.String())
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("relay exit %d: %s", code, stderr.String())
	}
}

// TestRelayBrokerWaitGivesUp: with --broker-wait, a relay whose broker
// stays unreachable exits 1, saying why, without the URL's password.
func TestRelayBrokerWaitGivesUp(t *testing.T) {
	db, _, _, px := relayBehindCutProxy(t)
	code, _, stderr := run(t, context.Background(), append([]string{"relay", "--broker-url", "nats://bob:s3cret@" + px.Addr,
		"--broker-wait", "1s"}, db...)...)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	last := lines[len(lines)-1]
	if code != 1 || !strings.HasPrefix(last, "outbox: ") || !strings.Contains(last, "still unreachable after --broker-wait 1s") {
		t.Errorf("exit %d, last line %q; want 1 and a line saying the broker stayed unreachable", code, last)
	}
	if strings.Contains(stderr, "s3cret") {
		t.Errorf("stderr leaks the password: %s", stderr)
	}
}
