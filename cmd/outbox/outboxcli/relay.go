package outboxcli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/internal/backoff"
	"github.com/outboxgo/outbox/internal/natsembed"
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
	kafkapub "github.com/outboxgo/outbox/publishers/kafka"
	natspub "github.com/outboxgo/outbox/publishers/nats"
	rabbitpub "github.com/outboxgo/outbox/publishers/rabbitmq"
	redispub "github.com/outboxgo/outbox/publishers/redis"
	"github.com/outboxgo/outbox/relay"
)

var brokerSchemes = []string{"nats", "kafka", "kafka+tls", "amqp", "amqps", "redis", "rediss"}

type relayFlags struct {
	brokerURL     string
	brokerWait    time.Duration
	dataDir       string
	embeddedPort  int
	subjectPrefix string
	stream        string
	keyedFailure  string
	cfg           relay.Config
}

func newRelay(g *globals) *cobra.Command {
	f := &relayFlags{}
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Publish pending events to the broker until interrupted",
		Long: `relay drains the outbox to the broker: it claims a batch of pending events
(FOR UPDATE SKIP LOCKED, so any number of relays may run), publishes the batch
pipelined, and marks or deletes it once the broker has acknowledged it.

Events with a key are published one at a time per key, in the order their
transactions committed, however many relays run; --unordered turns that off.
A failed event is retried with exponential backoff. An unkeyed one becomes
dead after --max-attempts; a keyed one holds its key until it succeeds or is
dead-lettered by hand ('outbox dead-letter ID'), unless --keyed-failure is
dead-letter. See 'outbox dead' and 'outbox replay'. While the broker is
unreachable the relay pauses as a whole and charges no event an attempt; one
started while the broker is unreachable waits for it (see --broker-wait).
SIGINT or SIGTERM stop it gracefully: in-flight batches finish first.

Without --broker-url it runs an embedded NATS JetStream server under
--data-dir and prints its URL, for trying things out.

Brokers, by URL scheme:
  nats://host:4222              NATS JetStream (a stream must capture the
                                subjects; --stream creates or extends one)
  kafka://host:9092,host2:9092  Kafka (?topic_prefix=…; kafka+tls:// for TLS)
  amqp://user:pass@host:5672/   RabbitMQ (?exchange=…&routing_key_prefix=…)
  redis://host:6379/0           Redis Streams (?stream_prefix=…&maxlen=…)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRelay(cmd, g, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.brokerURL, "broker-url", "", "the broker: nats://, kafka://, amqp:// or redis:// URL (none: run an embedded NATS JetStream)")
	fl.DurationVar(&f.brokerWait, "broker-wait", 0, "at start, how long to keep trying an unreachable broker before giving up (0: until interrupted)")
	fl.StringVar(&f.dataDir, "data-dir", "outbox-data", "without --broker-url: where the embedded NATS JetStream keeps its data")
	fl.IntVar(&f.embeddedPort, "embedded-port", 0, "without --broker-url: the embedded NATS server's port on 127.0.0.1 (0: a free one)")
	fl.StringVar(&f.subjectPrefix, "subject-prefix", "", "NATS: publish topic T on subject PREFIX.T (default: on T)")
	fl.StringVar(&f.stream, "stream", "", "NATS: create (or extend) this JetStream stream to capture the subjects")
	fl.IntVar(&f.cfg.BatchSize, "batch-size", relay.DefaultBatchSize, "events per claim")
	fl.IntVar(&f.cfg.Workers, "workers", relay.DefaultWorkers, "claim/publish loops running at once")
	fl.DurationVar(&f.cfg.PollInterval, "poll-interval", relay.DefaultPollInterval, "how often to look for events without a wake-up")
	fl.DurationVar(&f.cfg.PublishTimeout, "publish-timeout", relay.DefaultPublishTimeout, "how long a batch may wait for the broker's acks")
	fl.DurationVar(&f.cfg.StoreTimeout, "store-timeout", relay.DefaultStoreTimeout, "how long one claim or mark may take before it counts as a database error")
	fl.IntVar(&f.cfg.MaxAttempts, "max-attempts", relay.DefaultMaxAttempts, "failed attempts that make an event dead")
	fl.DurationVar(&f.cfg.Retention, "retention", 0, "keep published events this long (0: delete at once)")
	fl.DurationVar(&f.cfg.ShutdownTimeout, "shutdown-timeout", relay.DefaultShutdownTimeout, "how long to let in-flight batches finish on SIGTERM")
	fl.BoolVar(&f.cfg.DisableListen, "no-listen", false, "poll only; do not LISTEN for new events")
	fl.BoolVar(&f.cfg.Unordered, "unordered", false, "publish keyed events in any order (default: one at a time per key, in commit order)")
	fl.StringVar(&f.keyedFailure, "keyed-failure", "block", "a failing keyed event: block its key until it succeeds or is dead-lettered by hand (block), or dead-letter it after --max-attempts (dead-letter)")
	return cmd
}

func runRelay(cmd *cobra.Command, g *globals, f *relayFlags) error {
	ctx := cmd.Context()
	log, err := g.logger()
	if err != nil {
		return err
	}
	if f.cfg.KeyedFailure, err = relay.ParseFailurePolicy(f.keyedFailure); err != nil {
		return fmt.Errorf("--keyed-failure: %w", err)
	}
	// Check both URLs before connecting to either.
	if f.brokerURL != "" {
		if _, err := scheme("broker-url", f.brokerURL, brokerSchemes...); err != nil {
			return err
		}
	}
	d, err := g.openDB(ctx)
	if err != nil {
		return err
	}
	defer d.close()
	if err := d.check(ctx); err != nil {
		return schemaMissing(err, d)
	}
	if f.brokerURL == "" {
		stop, err := f.startEmbedded(cmd, g, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	pub, where, err := f.connect(cmd, log)
	if errors.Is(err, context.Canceled) {
		return nil // interrupted while waiting for the broker
	}
	if err != nil {
		return err
	}
	defer pub.Close()

	f.cfg.Logger = log
	r, err := relay.New(d.store, pub, &f.cfg)
	if err != nil {
		return err
	}
	log.Info("relaying", "database", d.where, "broker", where, "table", g.schema+"."+g.table)
	start := time.Now()
	err = r.Run(ctx)
	st := r.Stats()
	log.Info("relay done", "published", st.Published, "retried", st.Retried, "dead", st.Dead,
		"outages", st.Outages, "uptime", time.Since(start).Round(time.Second))
	return err
}

// connect opens the publisher. While the broker is unreachable it tries
// again, 0.5 s apart doubling to 30 s, until interrupted or for at most
// --broker-wait: a relay started during a broker outage waits for the
// broker, as a running one does. Any other error (a bad URL parameter,
// refused credentials, a stream that cannot be made) ends it at once.
func (f *relayFlags) connect(cmd *cobra.Command, log *slog.Logger) (publishers.Publisher, string, error) {
	ctx := cmd.Context()
	start := time.Now()
	for n := 1; ; n++ {
		p, where, err := f.openPublisher(cmd, log)
		var u unreachableError
		if err == nil || !errors.As(err, &u) {
			return p, where, err
		}
		d := backoff.Delay(500*time.Millisecond, 30*time.Second, 0.2, n)
		if f.brokerWait > 0 && time.Since(start)+d > f.brokerWait {
			return nil, "", fmt.Errorf("%w (still unreachable after --broker-wait %v)", err, f.brokerWait)
		}
		log.Warn("broker unreachable; trying again", "retry_in", d.Round(time.Millisecond), "error", err)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, "", ctx.Err()
		case <-t.C:
		}
	}
}

// unreachableError marks an error that says the broker could not be
// reached, as opposed to refusing what it was given.
type unreachableError struct{ error }

func (e unreachableError) Unwrap() error { return e.error }

// brokerError is the error of opening the publisher at where: one line,
// redacted, marked unreachableError when err says the broker could not be
// reached (connection refused, timed out, no server).
func brokerError(prefix, where string, err error) error {
	e := fmt.Errorf("%s %s: %s", prefix, where, redact.Text(err.Error()))
	var ne net.Error
	if publishers.IsUnavailable(err) || errors.Is(err, nats.ErrNoServers) || errors.As(err, &ne) {
		return unreachableError{e}
	}
	return e
}

func (f *relayFlags) openPublisher(cmd *cobra.Command, log *slog.Logger) (publishers.Publisher, string, error) {
	sch, err := scheme("broker-url", f.brokerURL, brokerSchemes...)
	if err != nil {
		return nil, "", err
	}
	where := redact.URL(f.brokerURL)
	var p publishers.Publisher
	switch sch {
	case "kafka", "kafka+tls":
		p, err = kafkapub.NewFromURL(f.brokerURL)
	case "amqp", "amqps":
		p, err = rabbitpub.NewFromURL(f.brokerURL)
	case "redis", "rediss":
		p, err = redispub.NewFromURL(f.brokerURL)
	}
	if p != nil || err != nil {
		if err != nil {
			return nil, "", brokerError("broker", where, err)
		}
		return p, where, nil
	}
	switch sch {
	case "nats":
		p, err := natspub.New(natspub.Config{URL: f.brokerURL, SubjectPrefix: f.subjectPrefix})
		if err != nil {
			return nil, "", brokerError("cannot reach NATS at", where, err)
		}
		if f.stream != "" {
			subj := ">"
			if f.subjectPrefix != "" {
				subj = f.subjectPrefix + ".>"
			}
			if err := p.EnsureStream(cmd.Context(), f.stream, []string{subj}); err != nil {
				_ = p.Close()
				return nil, "", fmt.Errorf("stream %s at %s: %s", f.stream, where, redact.Text(err.Error()))
			}
			log.Info("stream ready", "stream", f.stream, "subjects", subj)
		}
		return p, where, nil
	}
	return nil, "", fmt.Errorf("unreachable: scheme %q", sch)
}

// startEmbedded runs an in-process NATS server with JetStream under
// --data-dir and points the relay at it: subjects outbox.<topic>, captured
// by the stream OUTBOX (unless --subject-prefix and --stream say otherwise).
func (f *relayFlags) startEmbedded(cmd *cobra.Command, g *globals, log *slog.Logger) (stop func(), err error) {
	srv, err := natsembed.Start(cmd.Context(), natsembed.Config{DataDir: f.dataDir, Host: "127.0.0.1", Port: f.embeddedPort, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("embedded NATS under %s: %w", f.dataDir, err)
	}
	f.brokerURL = srv.URL()
	if f.subjectPrefix == "" {
		f.subjectPrefix = "outbox"
	}
	if f.stream == "" {
		f.stream = "OUTBOX"
	}
	fmt.Fprintf(g.stdout, "embedded NATS JetStream at %s (data in %s): events on subjects %s.<topic>, stream %s\n",
		srv.URL(), f.dataDir, f.subjectPrefix, f.stream)
	return srv.Shutdown, nil
}
