package faults

import (
	"context"
	"database/sql"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/subscribers"
)

// natsBroker is a private in-process nats-server with JetStream, its
// max_payload lowered to 64 KiB, and a stream that takes messages of at
// most 32 KiB.
type natsBroker struct {
	t      testing.TB
	srv    *natstest.Server
	js     jetstream.JetStream
	px     *tcpproxy.Proxy
	prefix string
	stream string
	dlq    string

	mu   sync.Mutex
	wire map[string]int // publishes seen by a core subscriber, by Nats-Msg-Id
}

// The inbox's durable consumer.
const natsDurable = "faults"

func newNATS(t *testing.T) *natsBroker {
	t.Helper()
	b := &natsBroker{t: t, wire: map[string]int{}}
	b.srv = natstest.StartServer(t, "", func(o *server.Options) { o.MaxPayload = 64 << 10 })
	nc := b.srv.Connect(t)
	b.js = natstest.JetStream(t, nc)
	b.prefix, b.stream = natstest.NewStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := b.js.Stream(ctx, b.stream)
	if err == nil {
		sc := st.CachedInfo().Config
		sc.MaxMsgSize = 32 << 10 // a refusal by the broker itself, after the publisher sent it
		// As SetupStream makes it: the relay's publisher then keeps key
		// order itself with fast-ingest batches, its default on 2.14+,
		// and the relay pipelines each key's run.
		sc.AllowBatchPublish = true
		_, err = b.js.UpdateStream(ctx, sc)
	}
	if err != nil {
		t.Fatal(err)
	}
	b.dlq, _ = natstest.NewStream(t, nc)
	u, err := url.Parse(b.srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	b.px = tcpproxy.Start(t, u.Host)

	// A plain core-NATS subscriber sees every publish the server receives,
	// including the re-publishes JetStream's duplicate window drops from
	// the stream, counted best effort (it misses what is published while
	// it reconnects).
	wc, err := nats.Connect(b.srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wc.Close)
	ws, err := wc.Subscribe(b.prefix+".>", func(m *nats.Msg) {
		b.mu.Lock()
		b.wire[m.Header.Get("Nats-Msg-Id")]++
		b.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = ws.SetPendingLimits(-1, -1)
	return b
}

func (b *natsBroker) name() string           { return "NATS JetStream" }
func (b *natsBroker) proxy() *tcpproxy.Proxy { return b.px }

func (b *natsBroker) env() []string {
	return []string{envBrokerKind + "=nats", envBroker + "=nats://" + b.px.Addr, envBrokerDir + "=" + b.srv.URL(),
		envPrefix + "=" + b.prefix, "OUTBOX_FAULTS_NATS_STREAM=" + b.stream, "OUTBOX_FAULTS_NATS_DLQ=" + b.dlq}
}

func (b *natsBroker) stop() error  { b.srv.Shutdown(); return nil }
func (b *natsBroker) start() error { b.srv.Start(); return nil }

func (b *natsBroker) badInput() []badCase {
	return []badCase{
		{"a 100 KiB payload over the broker's 64 KiB max_payload", "maximum payload",
			outbox.Message{Topic: "big", Type: "Big", Payload: make([]byte, 100<<10)}},
		{"a 40 KiB payload over the stream's 32 KiB max_msg_size", "message size exceeds maximum",
			outbox.Message{Topic: "orders", Key: badKey, Type: "Big", Payload: make([]byte, 40<<10)}},
		{"a topic mapping to an invalid subject", "invalid subject",
			outbox.Message{Topic: "bad topic", Key: badKey, Type: "Bad", Payload: []byte("{}")}},
	}
}

// consume reads the stream with a plain ordered consumer.
func (b *natsBroker) consume(ctx context.Context, want int) ([]uuid.UUID, error) {
	d, _ := ctx.Deadline()
	msgs := natstest.WaitForCount(b.t, b.js, b.stream, want, time.Until(d))
	ids := make([]uuid.UUID, 0, len(msgs))
	for _, m := range msgs {
		id, err := uuid.Parse(m.Headers().Get("Nats-Msg-Id"))
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func (b *natsBroker) inboxBacklog(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := b.js.Consumer(ctx, b.stream, natsDurable)
	if err != nil {
		return 0, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int(info.NumPending) + info.NumAckPending, nil
}

func (b *natsBroker) republished() (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, c := range b.wire {
		n += c - 1
	}
	return n, true
}

// natsRelayPublisher is the relay process's publisher. RetryOnFailedConnect:
// a relay restarted while the broker (or the path to it) is down starts
// anyway and connects when it can.
func natsRelayPublisher(log *slog.Logger) (publishers.Publisher, error) {
	return natspub.NewPublisher(&natspub.PublisherConfig{URL: os.Getenv(envBroker), SubjectPrefix: os.Getenv(envPrefix),
		Name: "outbox-faults-relay", ReconnectWait: 50 * time.Millisecond, AckTimeout: 5 * time.Second,
		Options: []nats.Option{nats.RetryOnFailedConnect(true)}, Logger: log})
}

// natsSubscribe starts the inbox process's subscriber, straight to the
// server, on the durable consumer natsDurable (MaxDeliver 10,000 so that a
// database restart cannot dead-letter an effect).
func natsSubscribe(ctx context.Context, in *inbox.Inbox[*sql.Tx], h inbox.Handler[*sql.Tx]) error {
	nc, err := nats.Connect(os.Getenv(envBrokerDir), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.RetryOnFailedConnect(true))
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	sub, err := natspub.NewSubscriber(js, in, h, &natspub.SubscriberConfig{Stream: os.Getenv("OUTBOX_FAULTS_NATS_STREAM"), Durable: natsDurable,
		SubjectPrefix: os.Getenv(envPrefix), DeadLetterSubject: os.Getenv("OUTBOX_FAULTS_NATS_DLQ") + ".dead",
		AckWait: 5 * time.Second, AckTimeout: 2 * time.Second,
		Options: subscribers.Options{MaxDeliveries: 10000,
			Backoff:     outbox.Backoff{Min: 20 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: 0.2},
			Concurrency: 4, ShutdownTimeout: 5 * time.Second,
			Hooks: subscribers.Hooks{AfterCommit: printDup}}})
	if err != nil {
		return err
	}
	return sub.Start(ctx)
}

// printDup tells the parent about each redelivery the inbox dropped.
func printDup(_ inbox.Message, o inbox.Outcome) {
	if o == inbox.Duplicate {
		os.Stdout.WriteString("dup\n")
	}
}
