package nats

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Defaults for PublisherConfig.
const (
	// DefaultURL is PublisherConfig.URL's default: the local server.
	DefaultURL = nats.DefaultURL // "nats://127.0.0.1:4222"
	// DefaultName is the connection name the server shows.
	DefaultName = "outbox"
	// DefaultSubjectPrefix puts topic T on subject outbox.T (publisher),
	// and makes topic T of subject outbox.T (subscriber).
	DefaultSubjectPrefix = "outbox"
	// DefaultMaxPending is how many publishes may await their
	// acknowledgement at once.
	DefaultMaxPending = 4096
	// DefaultAckTimeout is how long a publish waits for its
	// acknowledgement.
	DefaultAckTimeout = 30 * time.Second
	// DefaultConnectTimeout bounds NewPublisher's first connection attempt.
	DefaultConnectTimeout = 2 * time.Second
	// DefaultReconnectWait is the pause between reconnection attempts.
	DefaultReconnectWait = nats.DefaultReconnectWait // 2s
)

// NoSubjectPrefix is the SubjectPrefix that says there is none: the publisher
// puts each message on the subject named by its topic, and the subscriber
// takes the whole subject as the topic. (The empty SubjectPrefix means
// DefaultSubjectPrefix.) It is no valid prefix, so it cannot mean one.
const NoSubjectPrefix = "."

// PublisherConfig configures a Publisher. The zero value (or nil) connects
// to DefaultURL and publishes topic T on subject outbox.T.
type PublisherConfig struct {
	// URL is the server URL, or a comma-separated list of them. Default
	// DefaultURL ("nats://127.0.0.1:4222"). Ignored when Conn is set.
	// (ConfigFromURL reads settings from its query parameters; this field
	// takes none.)
	URL string
	// Conn is an existing connection to publish on. When set, NewPublisher
	// does not connect and Close does not close it; the caller configures
	// it (see NewPublisher for the options that make a relay recover from
	// outages). The publisher sets no handler on it, so a publish the
	// server's permissions refuse fails only after AckTimeout, as
	// Unavailable. Default nil: NewPublisher connects to URL.
	Conn *nats.Conn
	// Name is the connection name the server shows. Default DefaultName
	// ("outbox").
	Name string
	// Options are extra nats.go options (credentials, TLS, …), applied
	// after the publisher's own so they may override them. A
	// nats.ErrorHandler here replaces the publisher's, which fails a
	// publish the server's permissions refuse at once (without it, the
	// publish waits out AckTimeout). Default none.
	Options []nats.Option

	// SubjectPrefix puts every message on SubjectPrefix + "." + topic.
	// Default DefaultSubjectPrefix ("outbox"); NoSubjectPrefix puts it on
	// the subject named by its topic.
	SubjectPrefix string
	// Subject maps a topic to a subject, overriding SubjectPrefix. Default
	// nil.
	Subject func(topic string) string
	// Stream names the JetStream stream that captures the publisher's
	// subjects, SubjectPrefix + ".>": SetupStream creates it, or adds the
	// subjects to it (see EnsureStream). It needs a SubjectPrefix and no
	// Subject. Default "": the publisher leaves streams to others.
	Stream string

	// MaxPending is how many publishes may wait for their acknowledgement
	// at once across all Publish calls; a publish past it waits for a slot
	// until its context ends (or AckTimeout, without a deadline). Default
	// DefaultMaxPending (4096).
	MaxPending int
	// AckTimeout is how long a publish waits for its acknowledgement before
	// it fails as unavailable, whatever the context says. It also bounds
	// how long an abandoned publish (its Publish call's context ended)
	// holds a MaxPending slot. Default DefaultAckTimeout (30s).
	AckTimeout time.Duration
	// ConnectTimeout bounds NewPublisher's first connection attempt.
	// Default DefaultConnectTimeout (2s).
	ConnectTimeout time.Duration
	// ReconnectWait is the pause between reconnection attempts; the
	// publisher reconnects forever. Default DefaultReconnectWait (2s).
	ReconnectWait time.Duration

	// AtomicKeyRuns publishes each key's run of messages within a Publish
	// call (two or more messages of one Key) as one JetStream atomic batch,
	// many keys' batches in flight at once, so that the Publisher keeps
	// each key's order by itself (publishers.OrderKeeper) and the relay
	// sends a key's events in one call instead of one per round trip. It
	// takes effect only where JetStream can do it: nats-server 2.12.1 or
	// later, and every stream the publisher's subjects go to
	// (PublisherConfig.Stream, or the streams capturing SubjectPrefix.>)
	// allows atomic publish; KeepsKeyOrder checks that once and reports
	// false otherwise, and the publisher then publishes as without it.
	// SetupStream enables atomic publish on Stream when it is set. See the
	// package documentation, "Key order". Default false.
	AtomicKeyRuns bool
	// AtomicMinRun is the shortest run AtomicKeyRuns sends as an atomic
	// batch; shorter runs go one message at a time, each key's next
	// message once its previous one is stored (all keys at once), as the
	// relay does for a publisher that does not keep key order. Default 2
	// (every run) on replicated and memory streams, 32 when a stream is
	// R1 with file storage, where each batch costs the server a synced
	// staging file store of its own; raise it for a server on the same
	// host (round trips are cheap), lower it for one across a network.
	AtomicMinRun int
	// FastKeyRuns publishes a Publish call's messages to each stream as
	// JetStream fast-ingest batches (nats-server 2.14+, ADR-50) in the
	// mode that ends a batch at its first failure, so that the Publisher
	// keeps each key's order by itself (publishers.OrderKeeper) and the
	// relay sends a key's events in one call instead of one per round
	// trip. Unlike AtomicKeyRuns nothing is staged: the server stores each
	// message as it arrives and acknowledges every few hundred, within the
	// flow window it sets. It takes effect only where JetStream can do it:
	// nats-server 2.14.0 or later, and every stream the publisher's
	// subjects go to allows batch publish (AllowBatchPublish);
	// KeepsKeyOrder checks that and reports false otherwise, and the
	// publisher then publishes as without it. SetupStream enables batch
	// publish on Stream when it is set. A batch's messages in flight are
	// bounded by the server's flow window, not by MaxPending. See the
	// package documentation, "Key order".
	//
	// It is the default: unless AtomicKeyRuns or NoKeyRuns is set, the
	// publisher sends fast-ingest batches wherever JetStream can take
	// them, and where it cannot it says why once at Info and publishes as
	// without them, asking again when the relay does (every minute), so a
	// stream that allows batch publish later is used then. Setting
	// FastKeyRuns says that you count on it: where JetStream cannot, the
	// publisher warns, once, and does not ask again. It excludes
	// AtomicKeyRuns and NoKeyRuns.
	FastKeyRuns bool
	// NoKeyRuns turns the default FastKeyRuns off: KeepsKeyOrder reports
	// false, every call's messages are all in flight at once with no
	// order between them, and the relay keeps one event of a key in
	// flight, as on a server older than 2.14. It excludes AtomicKeyRuns
	// and FastKeyRuns.
	NoKeyRuns bool

	// Logger receives connection events (disconnect at Warn, reconnect at
	// Info), the server's refusals (permission denied, credentials refused)
	// at Error, with the URL's secrets hidden. Default: a logger that
	// discards everything.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c (which may be nil) with every zero
// field set to its default.
func (c *PublisherConfig) WithDefaults() PublisherConfig {
	var out PublisherConfig
	if c != nil {
		out = *c
	}
	if out.URL == "" {
		out.URL = DefaultURL
	}
	if out.Name == "" {
		out.Name = DefaultName
	}
	if out.SubjectPrefix == "" {
		out.SubjectPrefix = DefaultSubjectPrefix
	}
	if out.MaxPending == 0 {
		out.MaxPending = DefaultMaxPending
	}
	if out.AckTimeout == 0 {
		out.AckTimeout = DefaultAckTimeout
	}
	if out.ConnectTimeout == 0 {
		out.ConnectTimeout = DefaultConnectTimeout
	}
	if out.ReconnectWait == 0 {
		out.ReconnectWait = DefaultReconnectWait
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

// prefixed reports whether the config puts messages under a prefix
// (rather than on their topic, or where Subject says).
func (c *PublisherConfig) prefixed() bool {
	return c.Subject == nil && c.SubjectPrefix != NoSubjectPrefix && c.SubjectPrefix != ""
}

// fastRuns reports whether the publisher sends fast-ingest batches where
// JetStream can take them: with FastKeyRuns, and by default.
func (c *PublisherConfig) fastRuns() bool {
	return c.FastKeyRuns || !c.AtomicKeyRuns && !c.NoKeyRuns
}

// streamSubjects are the subjects SetupStream has Stream capture.
func (c *PublisherConfig) streamSubjects() []string {
	return []string{c.SubjectPrefix + ".>"}
}

func (c *PublisherConfig) validate() error {
	var errs []error
	if c.MaxPending < 0 {
		errs = append(errs, fmt.Errorf("MaxPending is %d, must not be negative", c.MaxPending))
	}
	if c.AckTimeout < 0 {
		errs = append(errs, fmt.Errorf("AckTimeout is %v, must not be negative", c.AckTimeout))
	}
	if c.ConnectTimeout < 0 {
		errs = append(errs, fmt.Errorf("ConnectTimeout is %v, must not be negative", c.ConnectTimeout))
	}
	if c.AtomicKeyRuns && c.FastKeyRuns {
		errs = append(errs, errors.New("AtomicKeyRuns and FastKeyRuns are both set: they are two ways of keeping key order, choose one "+
			"(FastKeyRuns needs nats-server 2.14+ and costs the server less per batch)"))
	}
	if c.NoKeyRuns && (c.AtomicKeyRuns || c.FastKeyRuns) {
		errs = append(errs, errors.New("NoKeyRuns is set with AtomicKeyRuns or FastKeyRuns: it turns key runs off, they turn them on; choose one"))
	}
	if c.AtomicMinRun < 0 {
		errs = append(errs, fmt.Errorf("AtomicMinRun is %d, must not be negative", c.AtomicMinRun))
	}
	if c.ReconnectWait < 0 {
		errs = append(errs, fmt.Errorf("ReconnectWait is %v, must not be negative", c.ReconnectWait))
	}
	if c.prefixed() {
		if err := checkSubject(c.SubjectPrefix+".x", false); err != nil {
			errs = append(errs, fmt.Errorf("SubjectPrefix %q: %w", c.SubjectPrefix, err))
		}
	}
	if c.Stream != "" {
		if err := checkStreamName(c.Stream); err != nil {
			errs = append(errs, fmt.Errorf("Stream: %w", err))
		}
		switch {
		case c.Subject != nil:
			errs = append(errs, fmt.Errorf("Stream %s: the stream captures SubjectPrefix.>, and Subject maps topics elsewhere: "+
				"leave Stream empty and call EnsureStream with the subjects Subject makes", c.Stream))
		case c.SubjectPrefix == NoSubjectPrefix:
			errs = append(errs, fmt.Errorf("Stream %s: without a SubjectPrefix the stream would capture every subject (>), "+
				"which NATS refuses or overlaps with every other stream: give a prefix (default %s)", c.Stream, DefaultSubjectPrefix))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nats publisher config: %w", err)
	}
	return nil
}

// checkStreamName accepts a JetStream stream name: not empty, no
// whitespace or control characters, none of . * > / \.
func checkStreamName(name string) error {
	if name == "" {
		return errors.New("empty stream name")
	}
	if strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f || strings.ContainsRune(".*>/\\", r) }) {
		return fmt.Errorf("stream name %q: no whitespace, control characters, '.', '*', '>', '/' or '\\' allowed", name)
	}
	return nil
}
