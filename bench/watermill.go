package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/jetstream"
	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// watermill is baseline (b): Watermill's SQL forwarder. Events are written
// through forwarder.Publisher over watermill-sql's PostgreSQL publisher (in
// transactions, as an application would), and the forwarder component, fed
// by watermill-sql's subscriber (default PostgreSQL schema adapter, batch
// 100, and offsets adapter), republishes them with watermill-nats's
// JetStream publisher (synchronous publish, waiting for each ack) to the
// same JetStream server.
func (r *runner) watermill(ctx context.Context) error {
	n := r.o.BaselineN
	e, err := r.newEnv(ctx, "obb_watermill", nil, 0)
	if err != nil {
		return err
	}
	defer e.close()
	const fwdTopic = "fwd"
	logger := watermill.NopLogger{}
	schema := wmsql.DefaultPostgreSQLSchema{}
	offsets := wmsql.DefaultPostgreSQLOffsetsAdapter{}
	sub, err := wmsql.NewSubscriber(wmsql.BeginnerFromPgx(e.pool), wmsql.SubscriberConfig{
		SchemaAdapter: schema, OffsetsAdapter: offsets, InitializeSchema: true,
	}, logger)
	if err != nil {
		return err
	}
	if err := sub.SubscribeInitialize(fwdTopic); err != nil {
		return fmt.Errorf("watermill schema: %w", err)
	}

	// The backlog, 1,000 events per transaction.
	payload := make([]byte, payloadSize)
	dest := e.name + "_wm"
	for lo := 0; lo < n; lo += 1000 {
		err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			p, err := wmsql.NewPublisher(wmsql.TxFromPgx(tx), wmsql.PublisherConfig{SchemaAdapter: schema}, logger)
			if err != nil {
				return err
			}
			fp := forwarder.NewPublisher(p, forwarder.PublisherConfig{ForwarderTopic: fwdTopic})
			msgs := make([]*message.Message, 0, 1000)
			for i := lo; i < min(n, lo+1000); i++ {
				m := message.NewMessage(watermill.NewUUID(), payload)
				m.Metadata.Set("key", fmt.Sprint(i%keyCount))
				msgs = append(msgs, m)
			}
			return fp.Publish(dest, msgs...)
		})
		if err != nil {
			return fmt.Errorf("watermill enqueue: %w", err)
		}
	}
	if _, err := e.pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return err
	}

	nc, err := nats.Connect(r.o.NatsURL, nats.Name("outbox-bench-watermill"))
	if err != nil {
		return err
	}
	pub, err := wmnats.NewPublisher(wmnats.PublisherConfig{
		Conn: nc, Logger: logger,
		ConfigureStream: func(topic string) jetstream.StreamConfig { return jetstream.StreamConfig{Name: topic} },
	})
	if err != nil {
		nc.Close()
		return err
	}
	defer pub.Close() // closes nc
	fwd, err := forwarder.NewForwarder(sub, pub, logger, forwarder.Config{ForwarderTopic: fwdTopic, CloseTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	rss := startRSS()
	start := time.Now()
	runErr := make(chan error, 1)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { runErr <- fwd.Run(rctx) }()
	werr := e.waitStream(ctx, n, drainLimit, nil)
	el := time.Since(start)
	peak := rss.peakMiB()
	_ = fwd.Close()
	cancel()
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		r.logf("  watermill router: %v", err)
	}
	_ = sub.Close()
	if werr != nil {
		return werr
	}
	r.add(Result{Workload: "drain", Case: "baseline: Watermill forwarder", Params: map[string]any{"n": n, "batch": 100},
		Metrics: map[string]float64{"events_per_s": float64(n) / el.Seconds(), "seconds": el.Seconds(), "peak_rss_mib": peak}})
	return nil
}
