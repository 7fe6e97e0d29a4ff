package pgcdc_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
)

// BenchmarkDrain measures how fast the relay drains a burst of events
// committed before it starts (OUTBOX_BENCH_EVENTS, default 100000) to an
// in-process JetStream, in key order, over 1000 keys and over 10: from
// Start until the broker holds them all. Run it once per case:
//
//	go test -run '^$' -bench Drain -benchtime 1x ./pgcdc
func BenchmarkDrain(b *testing.B) {
	n := 100000
	if s := os.Getenv("OUTBOX_BENCH_EVENTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		n = v
	}
	for _, keys := range []int{1000, 10} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			var total time.Duration
			for range b.N {
				total += drainOnce(b, n, keys)
			}
			b.ReportMetric(float64(n*b.N)/total.Seconds(), "ev/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func drainOnce(b *testing.B, n, keys int) time.Duration {
	b.StopTimer()
	e := newEnv(b)
	ctx := context.Background()
	// Create the slot, then commit the burst while no relay runs.
	r := e.start(e.config(), e.publisher())
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := r.Stop(sctx); err != nil {
		b.Fatal(err)
	}
	cancel()
	const perTx = 1000
	for i := 0; i < n; i += perTx {
		msgs := make([]outbox.Message, 0, perTx)
		for j := i; j < min(n, i+perTx); j++ {
			m := msg(fmt.Sprintf("k%d", j%keys))
			m.Payload = make([]byte, 200)
			msgs = append(msgs, m)
		}
		e.insert(false, msgs...)
	}
	stream, err := e.js.Stream(ctx, e.stream)
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	start := time.Now()
	e.start(e.config(), e.publisher())
	e.waitFor("the burst published", 10*time.Minute, func() bool {
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs >= uint64(n)
	})
	d := time.Since(start)
	b.StopTimer()
	return d
}
