package faults

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/publishers"
	rabbitpub "github.com/outboxgo/outbox/rabbitmq"
	"github.com/outboxgo/outbox/subscribers"
)

// The RabbitMQ run's environment, besides envBroker (the relays' URL,
// through the proxy), envBrokerDir (the node's own URL) and envPrefix (the
// run's exchange).
const (
	envRabbitInboxQueue = "OUTBOX_FAULTS_RABBIT_INBOX_QUEUE" // the inbox's queue
	envRabbitDLQ        = "OUTBOX_FAULTS_RABBIT_DLQ"         // the inbox's dead letters (a queue)
	// envRabbitBin is the directory of rabbitmq-server and rabbitmqctl
	// (default: $PATH, then /usr/sbin).
	envRabbitBin = "OUTBOX_FAULTS_RABBIT_BIN"
)

// rabbitRoutingPrefix goes before a topic in its routing key: a prefix is
// what makes a routing key longer than an outbox topic may be.
const rabbitRoutingPrefix = "faults."

// The node's max_message_size, and the relays' MaxMessageSize, set above
// it on purpose so that a message between the two reaches the node and is
// refused there: the node closes the channel, and the publisher must find
// which message it was.
const (
	rabbitNodeMaxMessageSize = 64 << 10
	rabbitMaxMessageSize     = 128 << 10
)

// rabbitBroker is a private RabbitMQ node (rabbitmq-server in a temporary
// directory, on free ports of 127.0.0.1, stopped and started for the
// outage), with one durable topic exchange and two durable queues bound
// to all of it: the checker's and the inbox's. The relays publish through
// a proxy; the checker and the inbox connect to the node directly.
type rabbitBroker struct {
	node     *rabbitNode
	px       *tcpproxy.Proxy
	version  string
	exchange string
	checkQ   string
	inboxQ   string
	dlq      string
}

func newRabbitMQ(t *testing.T) *rabbitBroker {
	t.Helper()
	node, err := startRabbitNode(t)
	if err != nil {
		testenv.Unreachable(t, "a private RabbitMQ node (rabbitmq-server run as root, which drops to the rabbitmq user)", err)
	}
	name := fmt.Sprintf("outbox-faults-%08x", rand.Uint32())
	b := &rabbitBroker{node: node, exchange: name, checkQ: name + ".check", inboxQ: name + ".inbox", dlq: name + ".dead"}

	// The topology, before any relay publishes: mandatory publishes no
	// queue takes would fail as unroutable.
	conn, err := b.dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b.version, _ = conn.Properties["version"].(string)
	ch, err := conn.Channel()
	if err == nil {
		err = ch.ExchangeDeclare(b.exchange, amqp.ExchangeTopic, true, false, false, false, nil)
	}
	for _, q := range []string{b.checkQ, b.inboxQ, b.dlq} {
		if err == nil {
			_, err = ch.QueueDeclare(q, true, false, false, false, nil)
		}
	}
	for _, q := range []string{b.checkQ, b.inboxQ} {
		if err == nil {
			err = ch.QueueBind(q, "#", b.exchange, false, nil)
		}
	}
	if err != nil {
		t.Fatalf("declare the exchange and queues: %v", err)
	}
	b.px = tcpproxy.Start(t, node.addr())
	return b
}

func (b *rabbitBroker) name() string {
	if b.version == "" {
		return "RabbitMQ"
	}
	return "RabbitMQ " + b.version
}

func (b *rabbitBroker) proxy() *tcpproxy.Proxy { return b.px }

func (b *rabbitBroker) env() []string {
	return []string{envBrokerKind + "=rabbitmq", envBroker + "=amqp://guest:guest@" + b.px.Addr + "/",
		envBrokerDir + "=" + b.node.url(), envPrefix + "=" + b.exchange,
		envRabbitInboxQueue + "=" + b.inboxQ, envRabbitDLQ + "=" + b.dlq}
}

func (b *rabbitBroker) stop() error  { return b.node.stop() }
func (b *rabbitBroker) start() error { return b.node.start() }

// dial connects to the node directly.
func (b *rabbitBroker) dial() (*amqp.Connection, error) {
	return amqp.DialConfig(b.node.url(), amqp.Config{Dial: amqp.DefaultDial(5 * time.Second),
		Properties: amqp.Table{"connection_name": "outbox-faults-checker"}})
}

// badInput: what the rabbitmq publisher refuses for good (Permanent) before
// sending (too large, not representable, a CC or BCC header), and a
// message the node itself refuses (over its max_message_size: it closes
// the channel with 406, and the publisher publishes the batch's
// unconfirmed messages one by one to find it). A missing exchange is not
// here: it is a configuration error (Misconfigured: the relay pauses), not
// a bad event.
func (b *rabbitBroker) badInput() []badCase {
	return []badCase{
		{"a 200 KiB payload over the publisher's 128 KiB MaxMessageSize", "message too large",
			outbox.Message{Topic: "big", Type: "Big", Payload: make([]byte, 200<<10)}},
		{"a 100 KiB payload over the node's 64 KiB max_message_size", "refused by the broker",
			outbox.Message{Topic: "orders", Key: badKey, Type: "Big", Payload: make([]byte, 100<<10)}},
		{"a header name over AMQP's 255-byte short string", "not representable in AMQP 0-9-1: header name",
			outbox.Message{Topic: "orders", Key: badKey, Type: "Bad", Payload: []byte("{}"),
				Headers: map[string]string{strings.Repeat("h", 300): "x"}}},
		{"a topic whose routing key (prefix + topic) is over 255 bytes", "not representable in AMQP 0-9-1: routing key",
			outbox.Message{Topic: strings.Repeat("t", 250), Key: badKey, Type: "Bad", Payload: []byte("{}")}},
		{"a header named CC (RabbitMQ's sender-selected distribution: more routing keys)", "header reserved by RabbitMQ",
			outbox.Message{Topic: "orders", Key: badKey, Type: "Bad", Payload: []byte("{}"),
				Headers: map[string]string{"CC": rabbitRoutingPrefix + "orders"}}},
	}
}

// consume reads the checker's queue with a plain amqp091 consumer, without
// acknowledging (closing the connection hands everything back), until it
// has want distinct message IDs or ctx ends. RabbitMQ keeps every
// re-publish: the duplicates are there, in queue order.
func (b *rabbitBroker) consume(ctx context.Context, want int) ([]uuid.UUID, error) {
	conn, err := b.dial()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	deliveries, err := ch.Consume(b.checkQ, "outbox-faults-checker", false, false, false, false, nil)
	if err != nil {
		return nil, err
	}
	var ids []uuid.UUID
	distinct := map[uuid.UUID]bool{}
	for len(distinct) < want {
		select {
		case <-ctx.Done():
			return ids, nil // what is missing is lost
		case d, ok := <-deliveries:
			if !ok {
				return ids, errors.New("the checker's consumer was closed")
			}
			id, err := uuid.Parse(d.MessageId)
			if err != nil {
				return ids, fmt.Errorf("delivery with message ID %q: %w", d.MessageId, err)
			}
			ids = append(ids, id)
			distinct[id] = true
		}
	}
	return ids, nil
}

// inboxBacklog is the inbox queue's message count: with the inbox process
// killed, its unacknowledged deliveries are back in it.
func (b *rabbitBroker) inboxBacklog(context.Context) (int, error) {
	conn, err := b.dial()
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	q, err := ch.QueueDeclarePassive(b.inboxQ, true, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	dl, err := ch.QueueDeclarePassive(b.dlq, true, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	if dl.Messages > 0 {
		// A dead letter is an effect that will never be applied: say so
		// rather than wait for it.
		return q.Messages, fmt.Errorf("the inbox dead-lettered %d messages", dl.Messages)
	}
	return q.Messages, nil
}

// republished: RabbitMQ drops no re-publish; they are all in the queue,
// counted as duplicates delivered.
func (b *rabbitBroker) republished() (int, bool) { return 0, false }

// rabbitRelayPublisher is the relay process's publisher, through the
// proxy. rabbitmq.NewPublisher dials at once and fails when the broker
// is down; a relay started during an outage must run anyway, so the
// publisher is made lazily (lazyRabbit), and after that redials by itself.
func rabbitRelayPublisher(log *slog.Logger) (publishers.Publisher, error) {
	cfg := &rabbitpub.PublisherConfig{URL: os.Getenv(envBroker), Name: "outbox-faults-relay", Exchange: os.Getenv(envPrefix),
		RoutingKey:     func(topic string) string { return rabbitRoutingPrefix + topic },
		MaxMessageSize: rabbitMaxMessageSize, ConfirmTimeout: 5 * time.Second, DialTimeout: 2 * time.Second, Logger: log}
	l := &lazyRabbit{cfg: cfg}
	if _, err := l.get(); err != nil && !publishers.IsUnavailable(err) {
		return nil, err
	}
	return l, nil
}

// lazyRabbit is a rabbitmq.Publisher made on first use: until
// New succeeds, every message fails as unavailable, as when a live
// publisher loses its connection.
type lazyRabbit struct {
	cfg *rabbitpub.PublisherConfig

	mu     sync.Mutex
	p      *rabbitpub.Publisher
	closed bool
}

func (l *lazyRabbit) get() (*rabbitpub.Publisher, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return nil, publishers.Unavailable(rabbitpub.ErrClosed)
	case l.p != nil:
		return l.p, nil
	}
	p, err := rabbitpub.NewPublisher(l.cfg)
	if err != nil {
		return nil, err
	}
	l.p = p
	return p, nil
}

func (l *lazyRabbit) Publish(ctx context.Context, msgs []outbox.Message) []error {
	p, err := l.get()
	if err != nil {
		errs := make([]error, len(msgs))
		for i := range errs {
			errs[i] = fmt.Errorf("rabbitmq publish %s: %w", msgs[i].ID, err)
		}
		return errs
	}
	return p.Publish(ctx, msgs)
}

func (l *lazyRabbit) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.p != nil {
		return l.p.Close()
	}
	return nil
}

// rabbitSubscribe starts the inbox process's subscriber on the inbox
// queue, straight to the node, with MaxDeliveries 10,000 so that a
// database restart cannot dead-letter an effect. Start fails when the node
// is down (it connects at once); it is tried again until it succeeds, and
// after that the subscriber reconnects by itself.
func rabbitSubscribe(ctx context.Context, in *inbox.Inbox[*sql.Tx], h inbox.Handler[*sql.Tx]) error {
	sub, err := rabbitpub.NewSubscriber(in, h, &rabbitpub.SubscriberConfig{URL: os.Getenv(envBrokerDir), DialTimeout: 2 * time.Second,
		Queue: os.Getenv(envRabbitInboxQueue), RoutingKeyPrefix: rabbitRoutingPrefix,
		DeadLetterRoutingKey: os.Getenv(envRabbitDLQ),
		ReconnectDelay:       50 * time.Millisecond, ConfirmTimeout: 5 * time.Second,
		Options: subscribers.Options{MaxDeliveries: 10000,
			Backoff:     outbox.Backoff{Min: 20 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: 0.2},
			Concurrency: 4, ShutdownTimeout: 5 * time.Second,
			Logger: helperLogger(), Hooks: subscribers.Hooks{AfterCommit: printDup}}})
	if err != nil {
		return err
	}
	return startRetrying(ctx, sub.Start)
}

// rabbitNode is a private RabbitMQ node: rabbitmq-server -detached with
// its database, logs, pid file, plugins file and configuration in a
// temporary directory of its own (owned by the rabbitmq user, as the
// server drops to it), on free ports of 127.0.0.1. It is stopped with
// rabbitmqctl stop and started again with the same environment, so its
// durable exchange, queues and persistent messages live through the
// outage; it is stopped and removed at cleanup.
type rabbitNode struct {
	bin, dir, node string
	port           int
	env            []string
}

// startRabbitNode starts a private node, stopped and removed at cleanup.
// It returns an error (the caller decides) when that is not possible here.
func startRabbitNode(t testing.TB) (*rabbitNode, error) {
	t.Helper()
	bin := os.Getenv(envRabbitBin)
	if bin == "" {
		if p, err := exec.LookPath("rabbitmq-server"); err == nil {
			bin = filepath.Dir(p)
		} else {
			bin = "/usr/sbin"
		}
	}
	for _, name := range []string{"rabbitmq-server", "rabbitmqctl"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return nil, fmt.Errorf("no %s (set %s): %w", name, envRabbitBin, err)
		}
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("not root: rabbitmq-server's wrapper runs the node as the rabbitmq user only when started by root")
	}
	u, err := user.Lookup("rabbitmq")
	if err != nil {
		return nil, fmt.Errorf("no rabbitmq user to run the node as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	distPort, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "outbox-faults-rabbit-")
	if err != nil {
		return nil, err
	}
	// The node's configuration, in place of /etc/rabbitmq/rabbitmq.conf
	// (whose listener is the shared server's port).
	conf := fmt.Sprintf("max_message_size = %d\ndisk_free_limit.absolute = 10MB\n", rabbitNodeMaxMessageSize)
	files := map[string]string{"rabbitmq.conf": conf, "enabled_plugins": "[].\n"}
	for name, content := range files {
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
		}
	}
	if err == nil {
		err = filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Chown(p, uid, gid)
		})
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	n := &rabbitNode{bin: bin, dir: dir, port: port,
		node: fmt.Sprintf("outbox-faults-%d-%08x@localhost", os.Getpid(), rand.Uint32())}
	n.env = []string{
		"RABBITMQ_NODENAME=" + n.node,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(port),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(distPort),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
		"RABBITMQ_PID_FILE=" + n.pidFile(),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(dir, "advanced.config"), // none
	}
	t.Cleanup(func() {
		if pid := n.pid(); pid > 0 && syscall.Kill(pid, 0) == nil {
			if err := n.stop(); err != nil {
				t.Logf("stop the private RabbitMQ node: %v", err)
			}
		}
		if pid := n.pid(); pid > 0 && syscall.Kill(pid, 0) == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = os.RemoveAll(dir)
	})
	if err := n.start(); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *rabbitNode) addr() string    { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }
func (n *rabbitNode) url() string     { return "amqp://guest:guest@" + n.addr() + "/" }
func (n *rabbitNode) pidFile() string { return filepath.Join(n.dir, "rabbitmq.pid") }

// pid is the node's OS process, 0 when unknown.
func (n *rabbitNode) pid() int {
	b, err := os.ReadFile(n.pidFile())
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// run runs one of the node's scripts with the node's environment.
func (n *rabbitNode) run(timeout time.Duration, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(n.bin, name), args...)
	cmd.Env = append(os.Environ(), n.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// start starts the node and waits until it accepts AMQP connections.
func (n *rabbitNode) start() error {
	if err := n.run(time.Minute, "rabbitmq-server", "-detached"); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute) // ~5 s on a quiet machine
	for {
		c, err := amqp.DialConfig(n.url(), amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
		if err == nil {
			_ = c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the RabbitMQ node %s accepts no connection on %s after 2m (%v); its log:\n%s", n.node, n.addr(), err, n.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop stops the node, waiting for its process to exit, so that start can
// take the same ports again.
func (n *rabbitNode) stop() error {
	return n.run(time.Minute, "rabbitmqctl", "-n", n.node, "stop", n.pidFile())
}

// logTail is the end of the node's log, for an error.
func (n *rabbitNode) logTail() string {
	b, err := os.ReadFile(filepath.Join(n.dir, "log", n.node+".log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > 4<<10 {
		b = b[len(b)-4<<10:]
	}
	return string(b)
}
