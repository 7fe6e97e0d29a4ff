package relay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/cputime"
	rabbitpub "github.com/outboxgo/outbox/rabbitmq"
)

// BenchmarkRabbitMQPublishCost publishes b.N messages of 200 bytes to a
// durable queue, without a database, in batches of 1,000 on one
// confirm-mode channel, each batch's confirms awaited together — the
// reference relay's publishing — with more of what the rabbitmq publisher
// puts on the wire in each case, and through the publisher itself, to
// find what costs the broker. Each case reports messages/s and the µs of
// CPU per message of this process and of beam.smp; -rabbitmq-rounds
// interleaves the cases. The properties block (flags and properties, what
// RabbitMQ keeps as the content's properties_bin) is 40 bytes in the
// minimal case: delivery mode and a 36-character MessageId.
//
//	go test -run '^$' -bench RabbitMQPublishCost -benchtime 200000x ./relay/ -rabbitmq-rounds 2
func BenchmarkRabbitMQPublishCost(b *testing.B) {
	created := time.Now()
	createdAt := created.UTC().Format(time.RFC3339Nano)
	minimal := func(id uuid.UUID, payload []byte) amqp.Publishing {
		return amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: id.String(), Body: payload}
	}
	full := func(id uuid.UUID, payload []byte) amqp.Publishing {
		p := minimal(id, payload)
		p.Type, p.Timestamp = "Bench", created
		p.Headers = amqp.Table{rabbitpub.HeaderKey: "123", rabbitpub.HeaderCreatedAt: createdAt}
		return p
	}
	with := func(f func(p *amqp.Publishing)) func(id uuid.UUID, payload []byte) amqp.Publishing {
		return func(id uuid.UUID, payload []byte) amqp.Publishing {
			p := minimal(id, payload)
			f(&p)
			return p
		}
	}
	cases := []struct {
		name      string
		mandatory bool
		message   func(id uuid.UUID, payload []byte) amqp.Publishing
	}{
		{"minimal (40-byte properties)", false, minimal},
		{"mandatory", true, minimal},
		{"body 276 bytes", false, with(func(p *amqp.Publishing) { p.Body = make([]byte, 276) })},
		{"type of 20 bytes (61)", false, with(func(p *amqp.Publishing) { p.Type = strings.Repeat("t", 20) })},
		{"type of 30 bytes (71)", false, with(func(p *amqp.Publishing) { p.Type = strings.Repeat("t", 30) })},
		{"Outbox-Key header (63)", false, with(func(p *amqp.Publishing) { p.Headers = amqp.Table{rabbitpub.HeaderKey: "123"} })},
		{"both headers (116)", false, with(func(p *amqp.Publishing) {
			p.Headers = amqp.Table{rabbitpub.HeaderKey: "123", rabbitpub.HeaderCreatedAt: createdAt}
		})},
		{"publisher's message, not mandatory (130)", false, full},
		{"publisher's message (130)", true, full},
	}
	payload := make([]byte, 200)
	ctx := context.Background()
	for round := range *rabbitRounds {
		b.Run(fmt.Sprintf("round=%d", round+1), func(b *testing.B) {
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					exchange := rabbitTopology(b, true)
					conn, err := amqp.Dial(rabbitBenchURL)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = conn.Close() })
					ch, err := conn.Channel()
					if err == nil {
						err = ch.Confirm(false)
					}
					if err != nil {
						b.Fatal(err)
					}
					timePublishes(b, func(n int) error {
						dcs := make([]*amqp.DeferredConfirmation, n)
						for i := range dcs {
							dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, "bench", c.mandatory, false, c.message(outbox.NewID(), payload))
							if err != nil {
								return err
							}
							dcs[i] = dc
						}
						for _, dc := range dcs {
							if ok, err := dc.WaitContext(ctx); err != nil || !ok {
								return fmt.Errorf("confirm: acked %v, %v", ok, err)
							}
						}
						return nil
					})
				})
			}
			b.Run("publisher", func(b *testing.B) {
				exchange := rabbitTopology(b, true)
				p, err := rabbitpub.NewPublisher(&rabbitpub.PublisherConfig{URL: rabbitBenchURL, Exchange: exchange})
				pub := benchPublisher(b, p, err)
				msgs := make([]outbox.Message, 1000)
				timePublishes(b, func(n int) error {
					for i := range msgs[:n] {
						msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "bench", Key: "123", Type: "Bench", Payload: payload, CreatedAt: created}
					}
					for _, err := range pub.Publish(ctx, msgs[:n]) {
						if err != nil {
							return err
						}
					}
					return nil
				})
			})
		})
	}
}

// timePublishes times b.N messages sent by publish in batches of at most
// 1,000 and reports the rate and the CPU per message.
func timePublishes(b *testing.B, publish func(n int) error) {
	b.Helper()
	cpu := startDrainCPU()
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; done += 1000 {
		if err := publish(min(1000, b.N-done)); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cpu.report(b, b.N, elapsed)
}

// drainCPU is the CPU time spent so far by this process, RabbitMQ's
// beam.smp and PostgreSQL.
type drainCPU struct{ self, broker, pg time.Duration }

func startDrainCPU() drainCPU {
	return drainCPU{self: cputime.Self(), broker: cputime.Proc("beam.smp"), pg: cputime.Proc("postgres")}
}

// report reports events/s and the µs of CPU per event since c.
func (c drainCPU) report(b *testing.B, n int, elapsed time.Duration) {
	now := startDrainCPU()
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
	b.ReportMetric(us(now.self-c.self), "relay_cpu_us")
	if now.broker > 0 {
		b.ReportMetric(us(now.broker-c.broker), "broker_cpu_us")
	}
	if now.pg > 0 {
		b.ReportMetric(us(now.pg-c.pg), "pg_cpu_us")
	}
}
