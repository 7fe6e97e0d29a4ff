package kafka_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgo/outbox/internal/testenv"
)

// partitions of every test topic: more than one, so order per key is
// order per partition.
const partitions = 3

var topicSeq atomic.Int64

// newTopicName returns a topic name no other test uses.
func newTopicName(t testing.TB) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	if len(name) > 80 {
		name = name[len(name)-80:]
	}
	return fmt.Sprintf("outbox-test-%d-%d-%s", os.Getpid(), topicSeq.Add(1), name)
}

// realBrokers are the brokers of a real Kafka to test against, from
// OUTBOX_TEST_KAFKA_BROKERS (comma-separated), or nil: test against kfake.
func realBrokers() []string {
	v := os.Getenv("OUTBOX_TEST_KAFKA_BROKERS")
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// brokers returns the brokers a test publishes to: the real Kafka's, or a
// kfake cluster's of its own, closed at cleanup.
func brokers(t testing.TB) []string {
	if b := realBrokers(); b != nil {
		testenv.RequireTCP(t, "Kafka (OUTBOX_TEST_KAFKA_BROKERS)", b[0])
		return b
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(partitions))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// createTopic creates topic on brokers (with the client options opts) and
// deletes it at cleanup.
func createTopic(t testing.TB, brokers []string, topic string, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
		if err != nil {
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopics(ctx, topic)
	})
}

// The SASL user of the refusals' kfake clusters.
const (
	saslUser     = "outbox"
	saslPassword = "right-password"
)

// fake is a kfake cluster that keeps its data in a directory, so it can be
// stopped and started again on the same port with what it stored.
type fake struct {
	dir  string
	port int
	c    *kfake.Cluster
}

func startKfake(t *testing.T) *fake {
	f := &fake{dir: t.TempDir()}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(f.dir), kfake.DefaultNumPartitions(partitions))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	f.c = c
	_, port, _ := net.SplitHostPort(c.ListenAddrs()[0])
	f.port, _ = strconv.Atoi(port)
	t.Cleanup(func() {
		if f.c != nil {
			f.c.Close()
		}
	})
	return f
}

func (f *fake) addrs() []string { return []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(f.port))} }

func (f *fake) stop(*testing.T) {
	f.c.Close()
	f.c = nil
}

func (f *fake) start(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(f.dir), kfake.Ports(f.port), kfake.DefaultNumPartitions(partitions))
	if err != nil {
		t.Fatalf("kfake restart on port %d: %v", f.port, err)
	}
	f.c = c
}

// advertised is a listener that gives another address (a proxy's) as its
// own, which kfake advertises to clients.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }
