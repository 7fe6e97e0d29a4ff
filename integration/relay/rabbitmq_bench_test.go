package relay_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/publishers"
	rabbitpub "github.com/outboxgo/outbox/rabbitmq"
	"github.com/outboxgo/outbox/relay"
)

// rabbitBenchURL is the shared RabbitMQ of the RabbitMQ benchmarks.
const rabbitBenchURL = "amqp://guest:guest@127.0.0.1:5672/"

// BenchmarkDrainRabbitMQ drains a backlog of b.N events (200-byte payloads,
// 1,000 keys) from PostgreSQL to RabbitMQ — a durable queue bound to an
// exchange of the benchmark's own, persistent messages, publisher
// confirms — in three ways, one after the other, in rounds (the flag
// -rabbitmq-rounds, default 1, interleaves them): the relay with its
// default config (2 workers, batch 1,000, delete on ack), unordered, with
// the rabbitmq publisher; the same relay with minimalRabbitPublisher; and a
// hand-written reference relay (referenceRabbitDrain). Then the relay
// ordered, once. Each case reports events/s and the µs of CPU per event of
// this process (relay_cpu_us: the relay, and the harness, idle meanwhile),
// of RabbitMQ's beam.smp (broker_cpu_us) and of every PostgreSQL process
// (pg_cpu_us: other clients of the shared server count too):
//
//	go test -run '^$' -bench DrainRabbitMQ -benchtime 200000x ./relay/ -rabbitmq-rounds 3
func BenchmarkDrainRabbitMQ(b *testing.B) {
	for round := range *rabbitRounds {
		b.Run(fmt.Sprintf("round=%d", round+1), func(b *testing.B) {
			b.Run("relay/unordered", func(b *testing.B) {
				benchRelayRabbitMQ(b, &relay.Config{Unordered: true}, nil)
			})
			b.Run("relay/unordered/minimal publisher", func(b *testing.B) {
				benchRelayRabbitMQ(b, &relay.Config{Unordered: true}, newMinimalRabbitPublisher)
			})
			b.Run("reference", benchReferenceRabbitMQ)
		})
	}
	b.Run("relay/ordered", func(b *testing.B) { benchRelayRabbitMQ(b, &relay.Config{}, nil) })
}

// rabbitRounds is how many times the RabbitMQ benchmarks run their cases,
// interleaved (-count repeats each case before the next one).
var rabbitRounds = flag.Int("rabbitmq-rounds", 1, "rounds of the RabbitMQ benchmarks' cases")

// benchRelayRabbitMQ times a relay with cfg draining benchDrain's backlog
// to a durable queue through the rabbitmq publisher, or through the
// publisher newPub makes for the exchange when not nil.
func benchRelayRabbitMQ(b *testing.B, cfg *relay.Config, newPub func(b *testing.B, exchange string) publishers.Publisher) {
	bd := setup(b)
	seed(b, bd, b.N, 1000)
	exchange := rabbitTopology(b, true)
	var pub publishers.Publisher
	if newPub != nil {
		pub = newPub(b, exchange)
	} else {
		p, err := rabbitpub.NewPublisher(&rabbitpub.PublisherConfig{URL: rabbitBenchURL, Exchange: exchange})
		pub = benchPublisher(b, p, err)
	}
	db, _ := postgres.New(pgtest.Pool(b), bd.cfg)
	r, err := relay.New(db.Store(), pub, cfg)
	if err != nil {
		b.Fatal(err)
	}
	cpu := startDrainCPU()
	timeDrain(b, r, b.N, func(elapsed time.Duration) { cpu.report(b, b.N, elapsed) })
}

// benchReferenceRabbitMQ times referenceRabbitDrain on benchDrain's
// backlog.
func benchReferenceRabbitMQ(b *testing.B) {
	bd := setup(b)
	seed(b, bd, b.N, 1000)
	exchange := rabbitTopology(b, true)
	cpu := startDrainCPU()
	b.ResetTimer()
	start := time.Now()
	if err := referenceRabbitDrain(context.Background(), bd, exchange, b.N); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cpu.report(b, b.N, elapsed)
}

// minimalRabbitPublisher publishes as referenceRabbitDrain does — one
// confirm-mode channel, persistent, MessageId only, not mandatory — for
// the relay: it separates the relay's own cost from its publisher's. It
// drops the key, type and headers and cannot tell an unroutable message:
// a measuring device, not a publisher.
type minimalRabbitPublisher struct {
	conn     *amqp.Connection
	ch       *amqp.Channel
	exchange string
}

func newMinimalRabbitPublisher(b *testing.B, exchange string) publishers.Publisher {
	conn, err := amqp.Dial(rabbitBenchURL)
	if err != nil {
		b.Fatal(err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	p := &minimalRabbitPublisher{conn: conn, ch: ch, exchange: exchange}
	return benchPublisher(b, p, err)
}

func (p *minimalRabbitPublisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	dcs := make([]*amqp.DeferredConfirmation, len(msgs))
	for i, m := range msgs {
		dcs[i], errs[i] = p.ch.PublishWithDeferredConfirmWithContext(ctx, p.exchange, m.Topic, false, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: m.ID.String(), Body: m.Payload})
	}
	for i, dc := range dcs {
		if errs[i] != nil {
			continue
		}
		if ok, err := dc.WaitContext(ctx); err != nil || !ok {
			errs[i] = publishers.Unavailable(fmt.Errorf("confirm: acked %v, %v", ok, err))
		}
	}
	return errs
}

func (p *minimalRabbitPublisher) Close() error { return p.conn.Close() }

// referenceRabbitDrain is the hand-written relay the rabbitmq publisher is
// measured against: each of relay.DefaultWorkers workers claims 1,000
// pending rows with FOR UPDATE SKIP LOCKED (along the index of pending
// keyed rows, ignoring order), publishes all of them on one shared
// confirm-mode channel — persistent, the event ID as MessageId and nothing
// else — awaits every confirm, deletes them in one statement and commits,
// until n are done. No order, no retries, no classification of failures,
// no check that a message was routed.
func referenceRabbitDrain(ctx context.Context, bd *bundle, exchange string, n int) error {
	conn, err := amqp.Dial(rabbitBenchURL)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return err
	}
	table := `"` + bd.cfg.Schema + `".messages`
	batch := func() (int, error) {
		got := 0
		err := pgx.BeginFunc(ctx, bd.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT id, topic, payload FROM `+table+`
				WHERE status = 0 AND key <> '' AND available_at <= now() ORDER BY key, seq LIMIT 1000 FOR UPDATE SKIP LOCKED`)
			if err != nil {
				return err
			}
			var ids []uuid.UUID
			var dcs []*amqp.DeferredConfirmation
			for rows.Next() {
				var (
					id      uuid.UUID
					topic   string
					payload []byte
				)
				if err := rows.Scan(&id, &topic, &payload); err != nil {
					return err
				}
				dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, topic, false, false,
					amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: id.String(), Body: payload})
				if err != nil {
					return err
				}
				ids, dcs = append(ids, id), append(dcs, dc)
			}
			if err := rows.Err(); err != nil {
				return err
			}
			for _, dc := range dcs {
				if ok, err := dc.WaitContext(ctx); err != nil || !ok {
					return fmt.Errorf("confirm: acked %v, %v", ok, err)
				}
			}
			if len(ids) > 0 {
				if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE id = ANY($1)`, ids); err != nil {
					return err
				}
			}
			got = len(ids)
			return nil
		})
		return got, err
	}
	var (
		done atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		fail error
	)
	deadline := time.Now().Add(10 * time.Minute)
	for range relay.DefaultWorkers {
		wg.Go(func() {
			for done.Load() < int64(n) {
				got, err := batch()
				if err == nil && got == 0 && time.Now().After(deadline) {
					err = fmt.Errorf("claimed nothing with %d of %d done", done.Load(), n)
				}
				if err != nil {
					mu.Lock()
					fail = err
					mu.Unlock()
					return
				}
				if got == 0 {
					time.Sleep(time.Millisecond) // the other worker holds the rest
				}
				done.Add(int64(got))
			}
		})
	}
	wg.Wait()
	return fail
}

// rabbitTopology declares an exchange and a queue bound to it with the
// routing key "bench", durable or not, both deleted at cleanup (after
// checking that the queue holds what the benchmark published), and
// returns the exchange's name.
func rabbitTopology(b *testing.B, durable bool) string {
	b.Helper()
	conn, err := amqp.Dial(rabbitBenchURL)
	if err != nil {
		testenv.Unreachable(b, "RabbitMQ at 127.0.0.1:5672", err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	name := fmt.Sprintf("outbox-bench-%d", time.Now().UnixNano())
	if err := ch.ExchangeDeclare(name, amqp.ExchangeDirect, durable, !durable, false, false, nil); err != nil {
		b.Fatal(err)
	}
	if _, err := ch.QueueDeclare(name, durable, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	if err := ch.QueueBind(name, "bench", name, false, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		q, err := ch.QueueDeclarePassive(name, durable, false, false, false, nil)
		if err == nil && q.Messages < b.N {
			b.Errorf("queue %s holds %d messages, want %d", name, q.Messages, b.N)
		}
		_, _ = ch.QueueDelete(name, false, false, false)
		_ = ch.ExchangeDelete(name, false, false)
	})
	return name
}
