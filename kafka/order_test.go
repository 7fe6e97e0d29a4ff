package kafka_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/kafka"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/publishers/publishertest"
)

// The tests of this file pin down what franz-go keeps of a key's order
// within one Publish call, and what the Publisher adds so that it can keep
// publishers.OrderKeeper's promise (see the package documentation, "Key
// order within a call").

func TestKeepsKeyOrder(t *testing.T) {
	p := newPublisher(t, &kafka.PublisherConfig{Brokers: []string{"127.0.0.1:1"}})
	defer p.Close()
	if !p.KeepsKeyOrder() {
		t.Error("KeepsKeyOrder = false by default, want true (key runs)")
	}
	off := newPublisher(t, &kafka.PublisherConfig{Brokers: []string{"127.0.0.1:1"}, NoKeyRuns: true})
	defer off.Close()
	if off.KeepsKeyOrder() {
		t.Error("KeepsKeyOrder = true with NoKeyRuns, want false")
	}
}

// TestKeyOrderWithinCall: a call with many messages of one key, among
// other keys', stores that key's messages in call order.
func TestKeyOrderWithinCall(t *testing.T) {
	b := brokers(t)
	prefix := newTopicName(t) + "."
	createTopic(t, b, prefix+testTopic)
	p := newPublisher(t, &kafka.PublisherConfig{Brokers: b, TopicPrefix: prefix})
	defer p.Close()
	var msgs []outbox.Message
	var want []string // the IDs of key "hot", in call order
	for i := range 200 {
		key := "hot"
		if i%3 == 1 {
			key = fmt.Sprint("other-", i%7)
		}
		m := outbox.Message{ID: outbox.NewID(), Topic: testTopic, Key: key, Payload: fmt.Appendf(nil, "%d", i)}
		if key == "hot" {
			want = append(want, m.ID.String())
		}
		msgs = append(msgs, m)
	}
	for i, err := range publish(t, p, msgs) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	var got []string
	for _, r := range read(t, b, prefix+testTopic, prefix, len(msgs), 15*time.Second) {
		if r.Key == "hot" {
			got = append(got, r.ID)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("key hot stored as %d records, not in call order (or missing): got %v, want %v", len(got), got, want)
	}
}

// TestFailureFailsBufferedRecords: when the broker refuses a produce
// request, every record the client holds for the partition fails with it,
// those buffered behind the refused batch too, and none is stored.
func TestFailureFailsBufferedRecords(t *testing.T) {
	const n = 5
	c, b, prefix := onePartition(t)
	all := make(chan struct{})
	var partitioned atomic.Int32
	hooks := hookFuncs{partitioned: func(*kgo.Record) {
		if partitioned.Add(1) == n {
			close(all)
		}
	}}
	// The first produce request waits until the client holds all n
	// records, then is refused.
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.SleepControl(func() {
			select {
			case <-all:
			case <-time.After(10 * time.Second):
				t.Error("the client did not take all the records in 10s")
			}
		})
		return refuse(req.(*kmsg.ProduceRequest), kerr.PolicyViolation), nil, true
	})
	p := newPublisher(t, &kafka.PublisherConfig{Brokers: b, TopicPrefix: prefix, ClientOptions: []kgo.Opt{kgo.WithHooks(hooks)}})
	defer p.Close()
	msgs := keyed("k", n)
	for i, err := range publish(t, p, msgs) {
		if err == nil {
			t.Errorf("message %d stored, want it failed with the refused batch", i)
		}
	}
	// A last message after them: whatever of theirs was stored comes
	// before it in the partition.
	last := keyed("k", 1)
	if err := publish(t, p, last)[0]; err != nil {
		t.Fatalf("the message after: %v", err)
	}
	got := read(t, b, prefix+testTopic, prefix, 1, 15*time.Second)
	if len(got) != 1 || got[0].ID != last[0].ID.String() {
		t.Errorf("the topic holds %d records (%v), want only the message after the refused ones", len(got), ids(got))
	}
}

// TestRecordAfterFailureIsNotStored: a key's message handed over after
// an earlier one of the call could have failed is not stored. Hooks hold
// message 2 until message 0 has failed — which cannot happen while the
// call holds the write gate — or until the client's first produce request
// waits at the gate; the refused request then fails every message of the
// key, and the ones after the first are reported not sent. A call after
// it stores the key's messages in order.
func TestRecordAfterFailureIsNotStored(t *testing.T) {
	const n = 5
	c, b, prefix := onePartition(t)
	msgs := keyed("k", n)
	failed := make(chan struct{})
	var p *kafka.Publisher
	var armed atomic.Bool // the first call only
	armed.Store(true)
	hooks := hookFuncs{
		buffered: func(r *kgo.Record) {
			if string(r.Value) != "2" || !armed.CompareAndSwap(true, false) {
				return
			}
			deadline := time.After(10 * time.Second)
			for kafka.WritesWaiting(p) == 0 {
				select {
				case <-failed:
					return // the gate let message 0 go out: the test fails below
				case <-deadline:
					t.Error("neither did message 0 fail nor did a write wait at the gate in 10s")
					return
				case <-time.After(time.Millisecond):
				}
			}
		},
		unbuffered: closeOnFailure("0", failed),
	}
	var refused atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		refused.Store(true)
		return refuse(req.(*kmsg.ProduceRequest), kerr.PolicyViolation), nil, true // the first request only
	})
	p = newPublisher(t, &kafka.PublisherConfig{Brokers: b, TopicPrefix: prefix, ClientOptions: []kgo.Opt{kgo.WithHooks(hooks)}})
	defer p.Close()
	errs := publish(t, p, msgs)
	if !refused.Load() {
		t.Fatal("no produce request reached the broker")
	}
	if errs[0] == nil || publishers.IsNotSent(errs[0]) {
		t.Errorf("message 0: %v, want the broker's refusal", errs[0])
	}
	for i := 1; i < n; i++ {
		if !publishers.IsNotSent(errs[i]) {
			t.Errorf("message %d: %v, want an error IsNotSent (its key's message 0 failed)", i, errs[i])
		}
	}
	// Again: now every message is stored, and nothing of the first call.
	mustPublish(t, p, msgs)
	if got, want := ids(read(t, b, prefix+testTopic, prefix, n, 15*time.Second)), idsOf(msgs); !slices.Equal(got, want) {
		t.Errorf("stored %v, want only the second call's, in order: %v", got, want)
	}
}

// TestAnotherCallsFailureDoesNotSplitARun: a call's batch refused while a
// call carrying a run of the same partition hands its records over does
// not fail the first of them and leave the rest to be stored: a run
// publishes on a client of its own (a lane). Hooks hold the run's message
// 2 until the other call's message has failed.
func TestAnotherCallsFailureDoesNotSplitARun(t *testing.T) {
	c, b, prefix := onePartition(t)
	other := keyed("k", 1)
	other[0].Payload = []byte("other")
	run := keyed("k", 5)
	atBroker, half, otherFailed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	hold := holdUntil(t, "2", otherFailed, "the other call's message did not fail")
	hooks := hookFuncs{
		buffered: func(r *kgo.Record) {
			if string(r.Value) == "2" {
				close(half)
			}
			hold(r)
		},
		unbuffered: closeOnFailure("other", otherFailed),
	}
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		close(atBroker)
		c.SleepControl(func() {
			select {
			case <-half:
			case <-time.After(10 * time.Second):
				t.Error("the run was not half handed over in 10s")
			}
		})
		return refuse(req.(*kmsg.ProduceRequest), kerr.PolicyViolation), nil, true // the first request only: the other call's
	})
	p := newPublisher(t, &kafka.PublisherConfig{Brokers: b, TopicPrefix: prefix, ClientOptions: []kgo.Opt{kgo.WithHooks(hooks)}})
	defer p.Close()
	otherErr := make(chan error, 1)
	go func() { otherErr <- publish(t, p, other)[0] }()
	select {
	case <-atBroker:
	case <-time.After(15 * time.Second):
		t.Fatal("the other call's message did not reach the broker in 15s")
	}
	for i, err := range publish(t, p, run) {
		if err != nil {
			t.Errorf("run, message %d: %v", i, err)
		}
	}
	if err := <-otherErr; err == nil {
		t.Error("the other call's message stored, want it refused")
	}
	if got, want := ids(read(t, b, prefix+testTopic, prefix, len(run), 15*time.Second)), idsOf(run); !slices.Equal(got, want) {
		t.Errorf("stored %v, want the run whole, in order: %v", got, want)
	}
}

// TestWithoutKeyRunsARecordAfterFailureIsStored is why the write gate is
// there: franz-go alone sends a record produced after its partition's
// buffer failed, in a new batch, and stores it although earlier records
// of its key in the same call failed. Hooks hold message 2 until franz-go
// has failed messages 0 and 1 (a scheduler can do the same to a Publish
// call still producing). Without key runs the Publisher holds no gate;
// should a later franz-go refuse such a record, the gate could go.
func TestWithoutKeyRunsARecordAfterFailureIsStored(t *testing.T) {
	const n = 5
	c, b, prefix := onePartition(t)
	msgs := keyed("k", n)
	failed := make(chan struct{})
	hooks := hookFuncs{
		buffered:   holdUntil(t, "2", failed, "message 0 did not fail"),
		unbuffered: closeOnFailure("0", failed),
	}
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		return refuse(req.(*kmsg.ProduceRequest), kerr.PolicyViolation), nil, true // the first request only
	})
	p := newPublisher(t, &kafka.PublisherConfig{Brokers: b, TopicPrefix: prefix, NoKeyRuns: true, ClientOptions: []kgo.Opt{kgo.WithHooks(hooks)}})
	defer p.Close()
	errs := publish(t, p, msgs)
	if errs[0] == nil {
		t.Fatal("message 0 stored, want it refused")
	}
	var want []string
	for i := range msgs {
		if errs[i] == nil {
			want = append(want, msgs[i].ID.String())
		}
	}
	got := ids(read(t, b, prefix+testTopic, prefix, len(want), 15*time.Second))
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("stored %v (acknowledged %v): franz-go no longer stores a key's records after an earlier one failed; the write gate may go", got, want)
	}
}

// holdUntil returns a hook that holds the record whose value is v, as it
// is buffered, until ch is closed: at most 10 seconds, after which the
// test fails with what.
func holdUntil(t *testing.T, v string, ch <-chan struct{}, what string) func(*kgo.Record) {
	return func(r *kgo.Record) {
		if string(r.Value) != v {
			return
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Errorf("%s in 10s", what)
		}
	}
}

// closeOnFailure returns a hook that closes ch when the record whose
// value is v fails.
func closeOnFailure(v string, ch chan<- struct{}) func(*kgo.Record, error) {
	var once sync.Once
	return func(r *kgo.Record, err error) {
		if err != nil && string(r.Value) == v {
			once.Do(func() { close(ch) })
		}
	}
}

// mustPublish publishes msgs and fails the test unless every one is
// stored.
func mustPublish(t *testing.T, p *kafka.Publisher, msgs []outbox.Message) {
	t.Helper()
	for i, err := range publish(t, p, msgs) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
}

// idsOf returns the IDs of msgs, in order.
func idsOf(msgs []outbox.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID.String()
	}
	return out
}

// onePartition starts a kfake cluster of its own whose topics have one
// partition, creates the test's topic and returns the cluster, its
// brokers and the topic prefix.
func onePartition(t *testing.T) (*kfake.Cluster, []string, string) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(1))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	b := c.ListenAddrs()
	prefix := newTopicName(t) + "."
	createTopic(t, b, prefix+testTopic)
	return c, b, prefix
}

// keyed returns n messages of key, whose payloads are "0", "1", ….
func keyed(key string, n int) []outbox.Message {
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: testTopic, Key: key, Payload: fmt.Appendf(nil, "%d", i)}
	}
	return msgs
}

// publish publishes msgs within 15 seconds.
func publish(t *testing.T, p *kafka.Publisher, msgs []outbox.Message) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return p.Publish(ctx, msgs)
}

// refuse answers a produce request with code for every partition in it.
func refuse(req *kmsg.ProduceRequest, code *kerr.Error) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func ids(rs []publishertest.Received) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// hookFuncs is a kgo hook of the producer's record hooks; nil ones do
// nothing.
type hookFuncs struct {
	buffered    func(*kgo.Record)
	partitioned func(*kgo.Record)
	unbuffered  func(*kgo.Record, error)
}

func (h hookFuncs) OnProduceRecordBuffered(r *kgo.Record) {
	if h.buffered != nil {
		h.buffered(r)
	}
}

func (h hookFuncs) OnProduceRecordPartitioned(r *kgo.Record, _ int32) {
	if h.partitioned != nil {
		h.partitioned(r)
	}
}

func (h hookFuncs) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if h.unbuffered != nil {
		h.unbuffered(r, err)
	}
}
