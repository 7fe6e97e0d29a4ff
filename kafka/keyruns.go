package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// A key run is the messages of one key in one Publish call. With key runs
// (the default; PublisherConfig.NoKeyRuns turns them off) the Publisher
// keeps each run in order by itself, so the relay sends a batch's events
// of a key in one pipelined call instead of one per round trip. What that
// rests on:
//
//   - franz-go's idempotent producer stores a partition's records in the
//     order they were produced, retries included, and when a batch fails
//     it fails every record it then holds for the partition (the broker
//     refuses the ones in flight: their sequence numbers skip the failed
//     batch);
//   - a call that carries a run publishes on a lane (lanes.go): a client
//     that holds no other call's records from the start of the hand-over
//     until the last of the call's records is settled, so no other
//     batch's failure can fail the partition's buffer halfway through the
//     hand-over;
//   - the lane's writes are held at its write gate (gate.go) while the
//     records are handed over, so no batch of the call can fail before
//     the client holds all of it: every record after a failed one is then
//     held, and failed with it. (Without the gate a record produced just
//     after an earlier one failed would go out in a new batch and be
//     stored.) The records' context ends with the call's, but not before
//     the hand-over is done (handOverContext);
//   - a record that franz-go would fail alone, before sending it — one
//     too large for a batch — the Publisher fails itself (fits), and does
//     not hand over the rest of its run.
//
// After the acknowledgements, a run's messages after its first failure
// that failed too are reported publishers.NotSentAfter it: the relay
// leaves them pending, uncharged.

// repeatsKey reports whether two of msgs share a key: only then does the
// call take a lane.
func repeatsKey(msgs []outbox.Message) bool {
	seen := make(map[string]struct{}, len(msgs))
	for i := range msgs {
		k := msgs[i].Key
		if k == "" {
			continue
		}
		if _, ok := seen[k]; ok {
			return true
		}
		seen[k] = struct{}{}
	}
	return false
}

// handOverContext returns the context of a call's records while it hands
// a key run over: it ends with ctx, but not before handedOver is called
// (which returns the stop of that link). Were it to end during the
// hand-over, franz-go would fail the partitions' buffered records there
// and then take the later records of their keys.
func handOverContext(ctx context.Context) (rctx context.Context, handedOver func() (stop func() bool)) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return rctx, func() func() bool { return context.AfterFunc(ctx, cancel) }
}

// fits returns the error franz-go would fail r with before sending it, or
// nil: no topic to produce to, or a record too large for a batch on its
// own (kerr.MessageTooLarge: permanent). franz-go fails such a record
// alone, after Produce returns, and sends the records after it; the
// Publisher fails it first, so that a run stops there. The size counted
// is r's bytes plus a bound on the batch's and the record's framing, so a
// record within about 100 bytes of the limit fails too.
func (p *Publisher) fits(m *outbox.Message, r *kgo.Record) error {
	if r.Topic == "" && p.defaultTopic == "" {
		return publishers.Misconfigured(fmt.Errorf("kafka publish %s: no Kafka topic: the message has none and the client no DefaultProduceTopic", m.ID))
	}
	topic := r.Topic
	if topic == "" {
		topic = p.defaultTopic
	}
	limit := int(p.maxBatch(topic))
	if n := framedSize(r); n > limit {
		return classify(fmt.Errorf("kafka publish %s to %q: %w (%d bytes with the batch's framing, more than a batch may hold: %d, MaxRecordBytes)",
			m.ID, topic, kerr.MessageTooLarge, n, limit))
	}
	return nil
}

// framedSize bounds what a batch of r alone counts against
// kgo.ProducerBatchMaxBytes (franz-go's batch wire length): the record
// batch's header with the widest length prefix, and each of the record's
// lengths and deltas as the widest varint.
func framedSize(r *kgo.Record) int {
	const (
		batch  = 61 + 5
		record = 5 + 1 + 10 + 5 + 5 + 5 + 5
		header = 5 + 5
	)
	n := batch + record + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += header + len(h.Key) + len(h.Value)
	}
	return n
}

// afterFirstFailure reports, in errs, each key's messages after the first
// of them that failed, which failed too, as not sent after it: franz-go
// failed them with the partition's buffer, unsent.
func afterFirstFailure(msgs []outbox.Message, errs []error) {
	first := map[string]error{}
	for i := range msgs {
		k := msgs[i].Key
		if k == "" || errs[i] == nil {
			continue
		}
		cause, ok := first[k]
		if !ok {
			first[k] = errs[i]
			continue
		}
		if !publishers.IsNotSent(errs[i]) {
			errs[i] = publishers.NotSentAfter(fmt.Sprintf("kafka publish %s", msgs[i].ID), cause)
		}
	}
}
