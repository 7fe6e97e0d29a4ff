package faults

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testkit/redistest"
	"github.com/outboxgo/outbox/publishers"
	redispub "github.com/outboxgo/outbox/redis"
	"github.com/outboxgo/outbox/subscribers"
)

// The Redis run's environment, besides envBroker (the relays' URL, through
// the proxy), envBrokerDir (the server's own URL) and envPrefix (the
// publisher's StreamPrefix).
const (
	envRedisGroup = "OUTBOX_FAULTS_REDIS_GROUP" // the inbox's consumer group
	envRedisDLQ   = "OUTBOX_FAULTS_REDIS_DLQ"   // the inbox's dead-letter stream
	// envRedisServer is the redis-server binary (default: $PATH).
	envRedisServer = "OUTBOX_FAULTS_REDIS_SERVER"
)

const (
	redisPrefix = "outbox-faults:"
	redisGroup  = "outbox-faults-inbox"
	// redisProtoMaxBulkLen is the server's proto-max-bulk-len, as low as
	// Redis allows (1 MiB): a larger bulk string — any one field of an
	// XADD — makes the server reply an error and close the connection.
	redisProtoMaxBulkLen = 1 << 20
	// redisMaxPayload is the relays' publisher's MaxPayload, below the
	// server's limit as the redis publisher asks: a larger payload is refused
	// by the publisher, not sent.
	redisMaxPayload = 512 << 10
)

// redisBroker is a private redis-server (internal/testkit/redistest: a child
// process of the test, on a free port of 127.0.0.1, its data in an
// append-only file in a temporary directory), stopped cleanly and started
// again on the same port and directory for the outage. The relays
// publish (the redis publisher, StreamPrefix redisPrefix) through a proxy;
// every good event goes to the stream redisPrefix+"orders". The checker
// (XRANGE) and the inbox's consumer (the redis subscriber, consumer group
// redisGroup) connect to the server directly.
type redisBroker struct {
	srv     *redistest.Server
	rdb     *goredis.Client // the checker's, direct
	px      *tcpproxy.Proxy
	version string
}

func (b *redisBroker) ordersStream() string { return redisPrefix + "orders" }
func (b *redisBroker) deadStream() string   { return redisPrefix + "inbox-dead" }

func newRedis(t *testing.T) *redisBroker {
	t.Helper()
	// Durable across the outage (see redistest.Options.AppendOnly): the
	// stop is a clean shutdown, so Redis loses nothing it acknowledged.
	srv := redistest.Start(t, redistest.Options{Bin: os.Getenv(envRedisServer), AppendOnly: true,
		Args: []string{"--proto-max-bulk-len", strconv.Itoa(redisProtoMaxBulkLen)}})
	b := &redisBroker{srv: srv}
	b.rdb = goredis.NewClient(&goredis.Options{Addr: srv.Addr(), DialTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = b.rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if info, err := b.rdb.InfoMap(ctx, "server").Result(); err == nil {
		b.version = info["Server"]["redis_version"]
	}
	// The inbox's group, reading from the start, before anything is
	// published (the redis subscriber would create it too, at Start).
	if err := b.rdb.XGroupCreateMkStream(ctx, b.ordersStream(), redisGroup, "0").Err(); err != nil {
		t.Fatalf("create the consumer group: %v", err)
	}
	b.px = tcpproxy.Start(t, srv.Addr())
	return b
}

func (b *redisBroker) name() string {
	if b.version == "" {
		return "Redis Streams"
	}
	return "Redis " + b.version + " Streams"
}

func (b *redisBroker) proxy() *tcpproxy.Proxy { return b.px }

func (b *redisBroker) env() []string {
	return []string{envBrokerKind + "=redis", envBroker + "=redis://" + b.px.Addr + "/0?dial_timeout=1s",
		envBrokerDir + "=" + b.srv.URL(), envPrefix + "=" + redisPrefix,
		envRedisGroup + "=" + redisGroup, envRedisDLQ + "=" + b.deadStream()}
}

func (b *redisBroker) stop() error  { return b.srv.Stop() }
func (b *redisBroker) start() error { return b.srv.Start() }

// badInput: what the redis publisher refuses for good (Permanent) before
// sending. Redis itself refuses nothing an outbox message can hold except a
// bulk string over its proto-max-bulk-len, and that it does by closing the
// connection, which the publisher can only take for an outage: so the
// publisher must refuse such a field first. The payload is checked
// against its MaxPayload; so are the headers, which Redis gets as one JSON
// field (here 1.5 MiB: with the publisher's MaxPayload below the server's
// limit, as its documentation asks, it never reaches the server). Before
// the publisher checked the headers, that event reached the server, which
// closed the connection: every retry failed its whole batch as an outage,
// and the event and the next one on its key stayed pending. A topic
// whose stream key holds another type (WRONGTYPE) is not here: the
// publisher leaves it unmarked, retried, as a configuration error.
func (b *redisBroker) badInput() []badCase {
	return []badCase{
		{"a 600 KiB payload over the publisher's 512 KiB MaxPayload", "message too large",
			outbox.Message{Topic: "big", Type: "Big", Payload: make([]byte, 600<<10)}},
		{"a 700 KiB payload (keyed) over the publisher's 512 KiB MaxPayload", "message too large: 716800 bytes",
			outbox.Message{Topic: "orders", Key: badKey, Type: "Big", Payload: make([]byte, 700<<10)}},
		{"a 1.5 MiB header value: a headers field over the server's 1 MiB proto-max-bulk-len", "message too large: headers",
			outbox.Message{Topic: "orders", Key: badKey, Type: "Bad", Payload: []byte("{}"),
				Headers: map[string]string{"big": strings.Repeat("h", 3<<19)}}},
	}
}

// consume reads the orders stream from the start with XRANGE, in pages,
// until it has want distinct event IDs (the entries' id field) or ctx ends.
// Redis keeps every re-publish: the duplicates are there, in stream order.
func (b *redisBroker) consume(ctx context.Context, want int) ([]uuid.UUID, error) {
	var ids []uuid.UUID
	distinct := map[uuid.UUID]bool{}
	start := "-"
	for len(distinct) < want {
		entries, err := b.rdb.XRangeN(ctx, b.ordersStream(), start, "+", 10000).Result()
		if ctx.Err() != nil {
			return ids, nil //nolint:nilerr // the run is over: what is missing is lost
		}
		if err != nil {
			return ids, fmt.Errorf("XRANGE %s: %w", b.ordersStream(), err)
		}
		for _, e := range entries {
			raw, _ := e.Values[redispub.FieldID].(string)
			id, err := uuid.Parse(raw)
			if err != nil {
				return ids, fmt.Errorf("entry %s with %s %q: %w", e.ID, redispub.FieldID, raw, err)
			}
			ids = append(ids, id)
			distinct[id] = true
		}
		if len(entries) > 0 {
			start = "(" + entries[len(entries)-1].ID
			continue
		}
		select { // read everything there is: wait for more
		case <-ctx.Done():
			return ids, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	return ids, nil
}

// inboxBacklog is what the inbox's group has not acknowledged: its pending
// entries (delivered, not XACKed: a killed consumer's are there) and its
// lag (entries not yet delivered to the group), from XINFO GROUPS; when
// Redis cannot tell the lag (7.0 cannot after a restart, until the group
// has caught up), the entries after the group's last-delivered ID are
// counted.
func (b *redisBroker) inboxBacklog(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	groups, err := b.rdb.XInfoGroups(ctx, b.ordersStream()).Result()
	if err != nil {
		return 0, err
	}
	var g *goredis.XInfoGroup
	for i := range groups {
		if groups[i].Name == redisGroup {
			g = &groups[i]
		}
	}
	if g == nil {
		return 0, fmt.Errorf("no consumer group %s on %s", redisGroup, b.ordersStream())
	}
	lag := g.Lag
	if lag < 0 {
		lag = 0
		for start := "(" + g.LastDeliveredID; ; {
			es, err := b.rdb.XRangeN(ctx, b.ordersStream(), start, "+", 10000).Result()
			if err != nil {
				return 0, err
			}
			if len(es) == 0 {
				break
			}
			lag += int64(len(es))
			start = "(" + es[len(es)-1].ID
		}
	}
	n := int(g.Pending + lag)
	dead, err := b.rdb.XLen(ctx, b.deadStream()).Result()
	if err != nil {
		return n, err
	}
	if dead > 0 {
		// A dead letter is an effect that will never be applied: say so
		// rather than wait for it.
		return n, fmt.Errorf("the inbox dead-lettered %d entries", dead)
	}
	return n, nil
}

// republished: Redis drops no re-publish (it keeps no record of event
// IDs); they are all in the stream, counted as duplicates delivered.
func (b *redisBroker) republished() (int, bool) { return 0, false }

// redisRelayPublisher is the relay process's publisher, through the proxy.
// redis.NewPublisher does not connect (its client dials on first use),
// so a relay started while the server or the path to it is down starts
// anyway: no lazy wrapper is needed.
func redisRelayPublisher(log *slog.Logger) (publishers.Publisher, error) {
	goredis.SetLogger(quietRedis{})
	return redispub.NewPublisher(&redispub.PublisherConfig{URL: os.Getenv(envBroker), StreamPrefix: os.Getenv(envPrefix),
		MaxPayload: redisMaxPayload, Logger: log})
}

// redisSubscribe starts the inbox process's subscriber, straight to the
// server, in the group envRedisGroup under one consumer name for every
// incarnation of the process. ClaimIdle is short (1 s, polled every
// 200 ms): the entries a killed process left pending are claimed again a
// second after its last keep-alive. MaxDeliveries 10,000 so that a
// database restart cannot dead-letter an effect. Start fails while the
// server is down (it creates the group): tried again until it works; after
// that the subscriber rides out outages by itself.
func redisSubscribe(ctx context.Context, in *inbox.Inbox[*sql.Tx], h inbox.Handler[*sql.Tx]) error {
	opts, err := goredis.ParseURL(os.Getenv(envBrokerDir))
	if err != nil {
		return err
	}
	opts.DialTimeout = 2 * time.Second
	goredis.SetLogger(quietRedis{})
	prefix := os.Getenv(envPrefix)
	sub, err := redispub.NewSubscriber(goredis.NewClient(opts), in, h, &redispub.SubscriberConfig{
		Streams: []string{prefix + "orders"}, StreamPrefix: prefix, Group: os.Getenv(envRedisGroup),
		Consumer: "outbox-faults-inbox-0", DeadLetterStream: os.Getenv(envRedisDLQ),
		ClaimIdle: time.Second, PollInterval: 200 * time.Millisecond, Block: 500 * time.Millisecond,
		OpTimeout: 2 * time.Second,
		Options: subscribers.Options{MaxDeliveries: 10000,
			Backoff:     outbox.Backoff{Min: 20 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: 0.2},
			Concurrency: 4, ShutdownTimeout: 5 * time.Second,
			Logger: helperLogger(), Hooks: subscribers.Hooks{AfterCommit: printDup}}})
	if err != nil {
		return err
	}
	return startRetrying(ctx, sub.Start)
}

// quietRedis discards go-redis's own log in the helper processes: a line
// for every dial that an outage or a proxy cut refuses. The relays and the
// subscriber log what matters.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
