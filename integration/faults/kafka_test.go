package faults

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	kafkapub "github.com/outboxgo/outbox/kafka"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/subscribers"
)

// kafkaBroker is a private kfake cluster (franz-go's in-process Kafka) of
// one broker in the test process, with its data in a directory of its own
// (kfake.DataDir), so that it can be stopped and started again on the same
// port with what it stored. The relays, in processes of their own, reach it
// through the proxy: their client dials the proxy whatever address the
// metadata advertises. The checker and the inbox's consumer connect to it
// directly.
//
// Topics (the publisher's TopicPrefix is kafkaPrefix):
//   - kafkaPrefix+"orders", kafkaPartitions partitions: every good event;
//   - kafkaPrefix+"capped", 1 partition, max.message.bytes 32 KiB: only the
//     bad event the broker itself refuses;
//   - kafkaPrefix+"dead", 1 partition: the inbox consumer's dead letters.
type kafkaBroker struct {
	t    testing.TB
	dir  string // kfake's data
	port int
	addr string // 127.0.0.1:port
	px   *tcpproxy.Proxy

	mu sync.Mutex
	c  *kfake.Cluster // nil while stopped
}

// Environment of the helper processes, besides envBroker (the proxy),
// envBrokerDir (the broker) and envPrefix (the topic prefix).
const (
	envKafkaGroup = "OUTBOX_FAULTS_KAFKA_GROUP" // the inbox's consumer group
)

const (
	kafkaPrefix     = "outbox-faults."
	kafkaPartitions = 4
	kafkaGroup      = "outbox-faults-inbox"
	// kafkaMaxRecord is the relays' publisher's MaxRecordBytes: a larger
	// record is refused by the client, not sent.
	kafkaMaxRecord = 64 << 10
	// kafkaCappedMax is the max.message.bytes of the "capped" topic: a
	// larger batch (compressed) is refused by the broker.
	kafkaCappedMax = 32 << 10
)

func (b *kafkaBroker) ordersTopic() string { return kafkaPrefix + "orders" }

func newKafka(t *testing.T) *kafkaBroker {
	t.Helper()
	b := &kafkaBroker{t: t, dir: t.TempDir()}
	c, err := kfake.NewCluster(b.opts()...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	b.c = c
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.c != nil {
			b.c.Close()
			b.c = nil
		}
	})
	b.addr = c.ListenAddrs()[0]
	_, port, err := net.SplitHostPort(b.addr)
	if err == nil {
		b.port, err = strconv.Atoi(port)
	}
	if err != nil {
		t.Fatalf("kfake address %q: %v", b.addr, err)
	}
	b.faults()

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	capped := strconv.Itoa(kafkaCappedMax)
	for _, tp := range []struct {
		name  string
		parts int32
		cfg   map[string]*string
	}{
		{b.ordersTopic(), kafkaPartitions, nil},
		{kafkaPrefix + "capped", 1, map[string]*string{"max.message.bytes": &capped}},
		{kafkaPrefix + "dead", 1, nil},
	} {
		resp, err := adm.CreateTopic(ctx, tp.parts, 1, tp.cfg, tp.name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create topic %s: %v", tp.name, err)
		}
	}
	b.px = tcpproxy.Start(t, b.addr)
	return b
}

// opts are the cluster's options; the port is the first start's.
func (b *kafkaBroker) opts() []kfake.Opt {
	o := []kfake.Opt{kfake.NumBrokers(1), kfake.DataDir(b.dir), kfake.DefaultNumPartitions(kafkaPartitions)}
	if b.port != 0 {
		o = append(o, kfake.Ports(b.port))
	}
	return o
}

// faults makes kfake refuse what Kafka refuses and kfake does not: kfake
// serves (and creates) topics of any name, where Kafka answers
// INVALID_TOPIC_EXCEPTION for a name outside [a-zA-Z0-9._-]. Faults are
// not persisted: installed at every start.
func (b *kafkaBroker) faults() {
	b.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata, kmsg.Produce}, Topic: kafkaPrefix + "bad topic",
		Err: kerr.InvalidTopicException, Count: -1})
}

func (b *kafkaBroker) name() string           { return "Kafka (kfake, in process)" }
func (b *kafkaBroker) proxy() *tcpproxy.Proxy { return b.px }

func (b *kafkaBroker) env() []string {
	return []string{envBrokerKind + "=kafka", envBroker + "=" + b.px.Addr, envBrokerDir + "=" + b.addr,
		envPrefix + "=" + kafkaPrefix, envKafkaGroup + "=" + kafkaGroup}
}

// stop is a real broker outage, as far as kfake goes: the cluster is
// closed — its listener closed (connections refused), every client
// connection dropped, requests in flight unanswered — after it saved its
// state (records, topics and their configs, committed offsets, static
// group members, idempotent producers' sequences) to its data directory.
// start makes a new cluster on the same port from that directory. What a
// kfake restart does not give is a crash: Close saves cleanly, where a
// killed broker would recover from its log.
func (b *kafkaBroker) stop() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.c != nil {
		b.c.Close()
		b.c = nil
	}
	return nil
}

func (b *kafkaBroker) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var err error
	for range 50 { // the port may linger a moment
		var c *kfake.Cluster
		if c, err = kfake.NewCluster(b.opts()...); err == nil {
			b.c = c
			b.faults()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("kfake restart on port %d: %w", b.port, err)
}

func (b *kafkaBroker) badInput() []badCase {
	// Incompressible, so that the batch the broker sees is over its limit
	// too (franz-go compresses; Kafka's limit is on the compressed batch).
	big := make([]byte, 40<<10)
	_, _ = rand.NewChaCha8([32]byte{9}).Read(big)
	return []badCase{
		{"a 100 KiB payload over the publisher's 64 KiB MaxRecordBytes (refused by the client, not sent)", "MESSAGE_TOO_LARGE",
			outbox.Message{Topic: "orders", Type: "Big", Payload: make([]byte, 100<<10)}},
		// franz-go adds compressed_bytes only to the broker's refusal.
		{"a 40 KiB record over the topic's 32 KiB max.message.bytes (refused by the broker)", ", compressed_bytes=",
			outbox.Message{Topic: "capped", Key: badKey, Type: "Big", Payload: big}},
		{"a topic name Kafka refuses (a space)", "INVALID_TOPIC_EXCEPTION",
			outbox.Message{Topic: "bad topic", Key: badKey, Type: "Bad", Payload: []byte("{}")}},
	}
}

// consume reads every partition of the orders topic from the start with a
// plain franz-go client until it has want distinct events or ctx ends, and
// returns the event IDs partition by partition, each in offset order (a
// key lives in one partition).
func (b *kafkaBroker) consume(ctx context.Context, want int) ([]uuid.UUID, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumeTopics(b.ordersTopic()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	parts := map[int32][]uuid.UUID{}
	distinct := map[uuid.UUID]bool{}
	for len(distinct) < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				b.t.Logf("checker: fetch %s/%d: %v", topic, p, err)
			}
		})
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			var id uuid.UUID
			err := fmt.Errorf("no %s header", kafkapub.HeaderID)
			for _, h := range r.Headers {
				if h.Key == kafkapub.HeaderID {
					id, err = uuid.ParseBytes(h.Value)
				}
			}
			if err != nil {
				bad = fmt.Errorf("record %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
				return
			}
			parts[r.Partition] = append(parts[r.Partition], id)
			distinct[id] = true
		})
		if bad != nil {
			return nil, bad
		}
	}
	if len(distinct) < want {
		b.t.Logf("checker: %d distinct events of %d when reading stopped (%v)", len(distinct), want, ctx.Err())
	}
	var ids []uuid.UUID
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		ids = append(ids, parts[p]...)
	}
	return ids, nil
}

// inboxBacklog is the inbox group's lag on the orders topic: end offsets
// minus committed offsets.
func (b *kafkaBroker) inboxBacklog(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, b.ordersTopic())
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, err
	}
	committed, err := adm.FetchOffsets(ctx, kafkaGroup)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return 0, err
	}
	lag := int64(0)
	ends.Each(func(o kadm.ListedOffset) {
		c, _ := committed.Lookup(o.Topic, o.Partition)
		lag += o.Offset - max(c.At, 0)
	})
	return int(lag), nil
}

// republished: Kafka drops no re-publish (the idempotent producer only
// drops its own retries, uncounted); they all land in the topic, and the
// checker counts them as duplicates delivered.
func (b *kafkaBroker) republished() (int, bool) { return 0, false }

// kafkaRelayPublisher is the relay process's publisher. Its client dials
// the proxy for every broker, whatever address the metadata advertises, so
// that all of the relay's traffic goes through it. franz-go connects
// lazily: a relay started while the broker (or the path to it) is down
// starts anyway. DeliveryTimeout is short so that a record the client
// keeps retrying past the relay's publish timeout does not linger long.
func kafkaRelayPublisher(log *slog.Logger) (publishers.Publisher, error) {
	px := os.Getenv(envBroker)
	d := &net.Dialer{Timeout: 2 * time.Second}
	p, err := kafkapub.NewPublisher(&kafkapub.PublisherConfig{Brokers: []string{px}, ClientID: "outbox-faults-relay",
		TopicPrefix: os.Getenv(envPrefix), MaxRecordBytes: kafkaMaxRecord, DeliveryTimeout: 5 * time.Second, Logger: log,
		ClientOptions: []kgo.Opt{kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, px)
		})}})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// kafkaSubscribe starts the inbox process's subscriber, straight to the
// broker, in the consumer group envKafkaGroup as a static member (one
// instance ID for every incarnation of the process): a process started
// after a SIGKILL takes the killed member's place at once, where a new
// member would wait for the old one's session to time out. MaxDeliveries
// 10,000 so that a database restart cannot dead-letter an effect. Start
// fails while the broker is down (it pings): tried again until it works.
func kafkaSubscribe(ctx context.Context, in *inbox.Inbox[*sql.Tx], h inbox.Handler[*sql.Tx]) error {
	prefix, group := os.Getenv(envPrefix), os.Getenv(envKafkaGroup)
	cfg := &kafkapub.SubscriberConfig{Brokers: []string{os.Getenv(envBrokerDir)}, ClientID: "outbox-faults-inbox",
		Topics: []string{prefix + "orders"}, TopicPrefix: prefix, Group: group, DeadLetterTopic: prefix + "dead",
		CommitTimeout: 2 * time.Second,
		Options: subscribers.Options{MaxDeliveries: 10000,
			Backoff:         outbox.Backoff{Min: 20 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: 0.2},
			ShutdownTimeout: 5 * time.Second, Logger: helperLogger(),
			Hooks: subscribers.Hooks{AfterCommit: printDup}},
		ClientOptions: []kgo.Opt{kgo.InstanceID(group + "-0"), kgo.SessionTimeout(10 * time.Second),
			kgo.FetchMaxWait(250 * time.Millisecond)}}
	if _, err := kafkapub.NewSubscriber(in, h, cfg); err != nil {
		return err // a bad configuration: no use retrying
	}
	// A subscriber starts once: each attempt gets a new one.
	return startRetrying(ctx, func(ctx context.Context) error {
		sub, _ := kafkapub.NewSubscriber(in, h, cfg)
		return sub.Start(ctx)
	})
}
