package outboxcli

import (
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/metrics"
	"github.com/outboxgo/outbox/pgcdc"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/stores"
	"github.com/outboxgo/outbox/ui"
)

// Bounds of the relay's flags, in --help.
const (
	maxBatchSize    = 10000
	maxWorkers      = 64
	maxMaxAttempts  = 1000
	minPollInterval = 10 * time.Millisecond
	maxTimeout      = 24 * time.Hour
	minClaimTimeout = time.Second
	// defaultSubjectPrefix puts topic T on NATS subject outbox.T, so that
	// --stream captures outbox.> — never every subject (>), which
	// nats-server 2.10+ refuses and which overlaps every other stream.
	defaultSubjectPrefix = "outbox"
	// embeddedStream captures the embedded broker's subjects.
	embeddedStream = "OUTBOX"
)

type relayFlags struct {
	rawBrokerURL string
	brokerWait   time.Duration
	dataDir      string
	embeddedPort int
	// params are the brokers' URL parameters as flags, by flag name.
	params       map[string]*paramFlag
	keyedFailure string
	claimTimeout time.Duration
	metricsAddr  string
	readyMaxLag  time.Duration
	uiAddr       string
	uiToken      string
	otel         bool
	cfg          relay.Config
	// --mode cdc: the pgcdc relay's settings.
	mode        string
	cdcRows     string
	slot        string
	publication string
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
A batch takes up to --per-key consecutive events of a key and sends each once
the broker has acknowledged the one before, many keys at once.
A failed event is retried with exponential backoff. An unkeyed one becomes
dead after --max-attempts; a keyed one holds its key until it succeeds or is
dead-lettered by hand ('outbox dead-letter ID'), unless --keyed-failure is
dead-letter. See 'outbox status' and 'outbox dead' ('outbox dead retry'). While
the broker is unreachable the relay pauses as a whole and charges no event
an attempt; one started while the broker is unreachable waits for it (see
--broker-wait). A broker that refuses the configuration (credentials, an
unknown vhost, database or exchange) is no outage: the relay fails at start.
SIGINT or SIGTERM stop it gracefully (exit 0): in-flight batches finish
first.

A claim holds its events for --claim-timeout; --publish-timeout must be
shorter, or a slow publish lets a second relay publish the same events.

Without --broker-url it runs an embedded NATS JetStream server under
--data-dir and prints its URL, for trying things out: topic T goes to
subject outbox.T (--subject-prefix), captured by the stream OUTBOX
(--stream).

Brokers, by URL scheme, and the URL parameters each reads (?name=value);
the flag named after it, where there is one (--stream), overrides the URL's:
` + brokerHelp(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRelay(cmd, g, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.rawBrokerURL, "broker-url", "", "the broker: "+strings.Join(backend.BrokerSchemes(), "://, ")+":// URL (none: run an embedded NATS JetStream)")
	fl.DurationVar(&f.brokerWait, "broker-wait", 0, "at start, how long to keep trying an unreachable broker before giving up (0: until interrupted)")
	fl.StringVar(&f.dataDir, "data-dir", "outbox-data", "without --broker-url only: where the embedded NATS JetStream keeps its data")
	fl.IntVar(&f.embeddedPort, "embedded-port", 0, "without --broker-url only: the embedded NATS server's port on 127.0.0.1, 1 to 65535 (0: a free one)")
	f.params = paramFlags(fl)
	fl.IntVar(&f.cfg.BatchSize, "batch-size", relay.DefaultBatchSize, fmt.Sprintf("events per claim, 1 to %d", maxBatchSize))
	fl.IntVar(&f.cfg.Workers, "workers", relay.DefaultWorkers, fmt.Sprintf("claim/publish loops running at once, 1 to %d", maxWorkers))
	fl.DurationVar(&f.cfg.PollInterval, "poll-interval", relay.DefaultPollInterval, fmt.Sprintf("how often to look for events without a wake-up, %v to %v", minPollInterval, time.Hour))
	fl.DurationVar(&f.cfg.PublishTimeout, "publish-timeout", relay.DefaultPublishTimeout, "how long a batch may wait for the broker's acks; above 0 and below --claim-timeout")
	fl.DurationVar(&f.claimTimeout, "claim-timeout", stores.DefaultClaimTimeout, fmt.Sprintf("how long a claim holds its events before another relay may take them, %v to %v", minClaimTimeout, maxTimeout))
	fl.DurationVar(&f.cfg.StoreTimeout, "store-timeout", relay.DefaultStoreTimeout, fmt.Sprintf("how long one claim or mark may take before it counts as a database error, above 0, at most %v", maxTimeout))
	fl.IntVar(&f.cfg.MaxAttempts, "max-attempts", relay.DefaultMaxAttempts, fmt.Sprintf("failed attempts that make an event dead, 1 to %d", maxMaxAttempts))
	fl.DurationVar(&f.cfg.Retention, "retention", 0, "keep published events this long (0: delete at once)")
	fl.DurationVar(&f.cfg.ShutdownTimeout, "shutdown-timeout", relay.DefaultShutdownTimeout, fmt.Sprintf("how long to let in-flight batches finish on SIGTERM, above 0, at most %v", maxTimeout))
	fl.BoolVar(&f.cfg.DisableListen, "no-listen", false, "poll only; do not LISTEN for new events")
	fl.BoolVar(&f.cfg.Unordered, "unordered", false, "publish keyed events in any order (default: one at a time per key, in commit order)")
	fl.IntVar(&f.cfg.PerKey, "per-key", relay.DefaultPerKey, "ordered mode only: the most events of one key a batch takes, sent one after another (1: each key's oldest only); at most --batch-size")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus /metrics, /healthz and /readyz on this host:port, e.g. 127.0.0.1:9090 (empty: none)")
	fl.DurationVar(&f.readyMaxLag, "ready-max-lag", metrics.DefaultMaxLag, "with --metrics-addr: /readyz fails once the oldest due event has waited longer (negative: never)")
	fl.StringVar(&f.uiAddr, "ui-addr", "", "serve the web dashboard, with this relay's counters, on this host:port, e.g. 127.0.0.1:8080 (empty: none; see 'outbox ui')")
	fl.StringVar(&f.uiToken, "ui-token", "", "with --ui-addr: the token every dashboard request must carry; required off loopback")
	fl.BoolVar(&f.otel, "otel", false, "export a span per publish over OTLP, linked to each event's trace context; configured by the standard OTEL_* environment (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME, …; see docs/tracing.md)")
	fl.StringVar(&f.mode, "mode", "poll", "poll: claim pending rows (any database); cdc: stream them from PostgreSQL's write-ahead log (logical replication: wal_level=logical, a role with REPLICATION; see docs/cdc.md)")
	fl.StringVar(&f.slot, "slot", pgcdc.DefaultSlot, "--mode cdc only: the logical replication slot, created when missing (a second relay on it waits as a hot standby)")
	fl.StringVar(&f.publication, "publication", pgcdc.DefaultPublication, "--mode cdc only: the publication of the outbox table's inserts, created when missing")
	fl.StringVar(&f.cdcRows, "cdc-rows", "mark", "--mode cdc only: mark (delete published rows, or mark them with --retention) or insert-delete (the application deletes each row as it inserts it)")
	fl.StringVar(&f.keyedFailure, "keyed-failure", "block", "ordered mode only: a failing keyed event blocks its key until it succeeds or is dead-lettered by hand (block), or is dead-lettered after --max-attempts (dead-letter)")
	return cmd
}

// validate checks every flag, and that they go together, before the relay
// connects to anything.
func (f *relayFlags) validate(cmd *cobra.Command, g *globals) error {
	c := g.checks(cmd)
	var err error
	if f.cfg.KeyedFailure, err = relay.ParseFailurePolicy(f.keyedFailure); err != nil {
		c.failf("keyed-failure", "%q: want block or dead-letter", f.keyedFailure)
	}
	c.intIn("batch-size", f.cfg.BatchSize, 1, maxBatchSize)
	c.intIn("workers", f.cfg.Workers, 1, maxWorkers)
	c.intIn("max-attempts", f.cfg.MaxAttempts, 1, maxMaxAttempts)
	c.intIn("per-key", f.cfg.PerKey, 1, maxBatchSize)
	if !cmd.Flags().Changed("per-key") {
		f.cfg.PerKey = 0 // the relay's default: DefaultPerKey, or --batch-size when smaller
	}
	c.durIn("poll-interval", f.cfg.PollInterval, minPollInterval, time.Hour)
	c.durIn("claim-timeout", f.claimTimeout, minClaimTimeout, maxTimeout)
	c.durIn("publish-timeout", f.cfg.PublishTimeout, time.Millisecond, maxTimeout)
	c.durIn("store-timeout", f.cfg.StoreTimeout, time.Millisecond, maxTimeout)
	c.durIn("shutdown-timeout", f.cfg.ShutdownTimeout, time.Millisecond, maxTimeout)
	c.durIn("retention", f.cfg.Retention, 0, math.MaxInt64)
	c.durIn("broker-wait", f.brokerWait, 0, math.MaxInt64)
	c.intIn("embedded-port", f.embeddedPort, 0, 65535)
	if f.cfg.PublishTimeout > 0 && f.claimTimeout > 0 && f.cfg.PublishTimeout >= f.claimTimeout {
		c.add(fmt.Errorf("%s %v must be below %s %v: a publish that outlasts the claim lets another relay publish the same events",
			g.flagRef(cmd, "publish-timeout"), f.cfg.PublishTimeout, g.flagRef(cmd, "claim-timeout"), f.claimTimeout))
	}
	if f.metricsAddr != "" {
		if _, _, err := net.SplitHostPort(f.metricsAddr); err != nil {
			c.failf("metrics-addr", "%q: want host:port, e.g. 127.0.0.1:9090 or :9090", f.metricsAddr)
		}
	} else if cmd.Flags().Changed("ready-max-lag") {
		c.add(fmt.Errorf("%s needs %s: it tunes /readyz", g.flagRef(cmd, "ready-max-lag"), g.flagRef(cmd, "metrics-addr")))
	}
	if f.otel {
		if err := checkTracing(); err != nil {
			c.add(fmt.Errorf("%s: %w", g.flagRef(cmd, "otel"), err))
		}
	}
	if f.uiAddr != "" {
		checkUIAddr(c, "ui-addr", f.uiAddr, f.uiToken, "set --ui-token or "+uiTokenEnv)
		c.conflict("mode", "ui-addr", "the dashboard shows the polling relay's counters; use 'outbox ui' beside --mode cdc")
	} else if cmd.Flags().Changed("ui-token") {
		c.add(fmt.Errorf("%s needs %s", g.flagRef(cmd, "ui-token"), g.flagRef(cmd, "ui-addr")))
	}
	if f.cfg.Unordered {
		c.conflict("keyed-failure", "unordered", "--keyed-failure says what a failing event does to its key's order, and --unordered keeps none")
		c.conflict("per-key", "unordered", "--per-key bounds the events of a key sent one after another, and --unordered sends them all at once")
	}
	for name, pf := range f.params {
		pf.changed = cmd.Flags().Changed(name)
	}
	if f.rawBrokerURL != "" {
		c.conflict("broker-url", "data-dir", "--data-dir is the embedded broker's, which runs only without --broker-url")
		c.conflict("broker-url", "embedded-port", "--embedded-port is the embedded broker's, which runs only without --broker-url")
		f.checkBroker(cmd, g, c, "--broker-url", f.rawBrokerURL)
	} else if f.params["subject-prefix"].changed {
		// The embedded broker's port is known only once it runs.
		f.checkBroker(cmd, g, c, "the embedded broker", embeddedURL("nats://127.0.0.1:4222"))
	}
	switch f.mode {
	case "poll":
		for _, name := range []string{"slot", "publication", "cdc-rows"} {
			if cmd.Flags().Changed(name) {
				c.failf(name, "is for --mode cdc only")
			}
		}
	case "cdc":
		if !strings.HasPrefix(g.databaseURL, "postgres://") && !strings.HasPrefix(g.databaseURL, "postgresql://") {
			c.failf("mode", "cdc streams from PostgreSQL only: --database-url must be a postgres:// URL")
		}
		if _, err := pgcdc.ParseMode(f.cdcRows); err != nil {
			c.failf("cdc-rows", "%q: want mark or insert-delete", f.cdcRows)
		}
		for _, name := range []string{"workers", "no-listen", "unordered", "claim-timeout", "store-timeout"} {
			c.conflict("mode", name, "--"+name+" is the polling relay's; --mode cdc claims nothing")
		}
	default:
		c.failf("mode", "%q: want poll or cdc", f.mode)
	}
	g.checkDB(c)
	return c.err()
}

func runRelay(cmd *cobra.Command, g *globals, f *relayFlags) error {
	ctx := cmd.Context()
	log := g.logger()
	if err := f.validate(cmd, g); err != nil {
		return err
	}
	g.claimTimeout = f.claimTimeout
	g.application = relayApplication()
	d, err := g.openDB(ctx, existing)
	if err != nil {
		return err
	}
	defer d.close()
	if err := d.check(ctx); err != nil {
		return schemaMissing(err, d)
	}
	// Bind --metrics-addr before the broker: a taken port fails at once.
	var rm *relayMetrics
	if f.metricsAddr != "" {
		if rm, err = listenMetrics(ctx, f.metricsAddr, d.store, log); err != nil {
			return err
		}
		defer func() { _ = rm.ln.Close() }() // a no-op once served and shut down
		if f.mode != "cdc" {
			f.cfg.Hooks = rm.m.RelayHooks(f.cfg.Hooks)
		}
	}
	// Bind --ui-addr before the broker too.
	var us *uiServer
	if f.uiAddr != "" {
		if us, err = listenUI(ctx, "--ui-addr", f.uiAddr, &ui.Options{Store: d.store, Token: f.uiToken, Title: d.where, Logger: log}); err != nil {
			return err
		}
		defer func() { _ = us.ln.Close() }() // a no-op once served and shut down
	}
	if f.rawBrokerURL == "" {
		stop, err := f.startEmbedded(cmd, g, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	var tr *tracing
	if f.otel {
		if tr, err = startTracing(ctx, log); err != nil {
			return err
		}
		if tr != nil {
			defer tr.shutdown(log) // after the relay stops: its last spans
		}
	}
	pub, where, err := f.connect(cmd, log)
	if ctx.Err() != nil {
		if pub != nil {
			_ = pub.Close()
		}
		return nil // interrupted while waiting for the broker
	}
	if err != nil {
		return err
	}
	defer pub.Close()
	if tr != nil {
		pub = tr.wrap(pub, brokerScheme(f.rawBrokerURL))
		log.Info("exporting traces", "to", tr.where)
	}

	f.cfg.Logger = log
	if f.mode == "cdc" {
		return runCDC(cmd, g, f, d, pub, where, rm)
	}
	r, err := relay.New(d.store, pub, &f.cfg)
	if err != nil {
		return err
	}
	if rm != nil {
		stop := rm.serve(r, f.readyMaxLag, log)
		defer stop()
	}
	if us != nil {
		us.addRelay("this relay", r)
		stop := us.serve(ctx, log)
		defer stop()
	}
	log.Info("relaying", "database", d.where, "broker", where, "table", d.table)
	start := time.Now()
	err = r.Run(ctx)
	st := r.Stats()
	log.Info("relay done", "published", st.Published, "retried", st.Retried, "dead", st.Dead,
		"outages", st.Outages, "uptime", time.Since(start).Round(time.Second))
	return err
}

// runCDC streams the outbox from PostgreSQL's write-ahead log to pub until
// interrupted (outbox relay --mode cdc; see docs/cdc.md).
func runCDC(cmd *cobra.Command, g *globals, f *relayFlags, d *db, pub publishers.Publisher, where string, rm *relayMetrics) error {
	log := f.cfg.Logger
	rows, _ := pgcdc.ParseMode(f.cdcRows) // validated
	cfg := &pgcdc.Config{
		ConnString: g.databaseURL, Schema: g.schema, Table: g.table,
		Slot: f.slot, Publication: f.publication, Mode: rows, Retention: f.cfg.Retention,
		BatchSize: f.cfg.BatchSize, PerKey: f.cfg.PerKey, PublishTimeout: f.cfg.PublishTimeout,
		MaxAttempts: f.cfg.MaxAttempts, KeyedFailure: f.cfg.KeyedFailure, PollInterval: f.cfg.PollInterval,
		ShutdownTimeout: f.cfg.ShutdownTimeout, Logger: log,
	}
	if rm != nil {
		cfg.Hooks.AfterPublish = rm.m.PublishHook(nil)
	}
	r, err := pgcdc.New(cfg, pub)
	if err != nil {
		return err
	}
	if rm != nil {
		stop, err := rm.serveCDC(r, f.readyMaxLag, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	log.Info("relaying from the write-ahead log", "database", d.where, "broker", where, "table", d.table,
		"slot", f.slot, "publication", f.publication, "rows", rows.String())
	start := time.Now()
	err = r.Run(cmd.Context())
	st := r.Stats()
	log.Info("relay done", "published", st.Published, "retried", st.Retried, "dead", st.Dead,
		"outages", st.Outages, "restarts", st.Restarts, "uptime", time.Since(start).Round(time.Second))
	return err
}

// relayApplication names the relay's database connections, so that the
// dashboard (stores.SessionLister) sees which relay is connected and
// holds a claim: "outbox relay <host> pid <pid>".
func relayApplication() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "?"
	}
	return fmt.Sprintf("outbox relay %s pid %d", host, os.Getpid())
}
