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
	"github.com/outboxgo/outbox/internal/redact"
	kafkapub "github.com/outboxgo/outbox/kafka"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/nats/natsembed"
	"github.com/outboxgo/outbox/publishers"
	rabbitpub "github.com/outboxgo/outbox/rabbitmq"
	redispub "github.com/outboxgo/outbox/redis"
)

// checkTimeout bounds the publisher's Check at start; a broker that does
// not answer within it counts as unreachable.
const checkTimeout = 15 * time.Second

// connect opens the publisher and checks its configuration with the broker
// (publishers.Checker). While the broker is unreachable it tries again,
// 0.5 s apart doubling to 30 s, until interrupted or for at most
// --broker-wait: a relay started during a broker outage waits for the
// broker, as a running one does. A broker that refuses the configuration
// (publishers.Misconfigured: credentials, an unknown vhost, database or
// exchange), and any other error (a bad URL parameter, a stream that cannot
// be made), ends it at once.
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

// brokerError is the error of opening or checking the publisher at where:
// one line, redacted, and marked unreachableError when err is classified
// publishers.Unavailable (or is a network error, or nats.ErrNoServers)
// and not publishers.Misconfigured.
func brokerError(prefix, where string, err error) error {
	if publishers.IsMisconfigured(err) {
		return fmt.Errorf("%s %s refused the configuration: %s", prefix, where, redact.Text(err.Error()))
	}
	e := fmt.Errorf("%s %s: %s", prefix, where, redact.Text(err.Error()))
	var ne net.Error
	if publishers.IsUnavailable(err) || errors.Is(err, nats.ErrNoServers) || errors.As(err, &ne) {
		return unreachableError{e}
	}
	return e
}

// openPublisher opens the publisher --broker-url names and, when it is a
// publishers.Checker, checks its configuration with the broker.
func (f *relayFlags) openPublisher(cmd *cobra.Command, log *slog.Logger) (publishers.Publisher, string, error) {
	ctx := cmd.Context()
	sch, err := scheme("broker-url", f.brokerURL, brokerSchemes...)
	if err != nil {
		return nil, "", err
	}
	where := redact.URL(f.brokerURL)
	p, err := newPublisher(sch, f.brokerURL, f.subjectPrefix, log.With("component", "publisher"))
	if err != nil {
		return nil, "", brokerError("broker", where, err)
	}
	if c, ok := p.(publishers.Checker); ok {
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		err := c.Check(cctx)
		timedOut := cctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil {
			_ = p.Close()
			e := brokerError("broker", where, err)
			if timedOut && !publishers.IsMisconfigured(err) {
				e = unreachableError{e}
			}
			return nil, "", e
		}
	}
	if np, ok := p.(*natspub.Publisher); ok && f.stream != "" {
		subj := f.subjectPrefix + ".>"
		if err := np.EnsureStream(ctx, f.stream, []string{subj}); err != nil {
			_ = p.Close()
			return nil, "", brokerError("stream "+f.stream+" at", where, err)
		}
		log.Info("stream ready", "stream", f.stream, "subjects", subj)
	}
	return p, where, nil
}

// newPublisher opens the publisher of rawURL, which has scheme sch, with
// log as its logger where it takes one.
func newPublisher(sch, rawURL, subjectPrefix string, log *slog.Logger) (publishers.Publisher, error) {
	switch sch {
	case "kafka", "kafka+tls":
		cfg, err := kafkapub.ConfigFromURL(rawURL)
		if err != nil {
			return nil, err
		}
		cfg.Logger = log
		return nilIfErr(kafkapub.New(cfg))
	case "amqp", "amqps":
		cfg, err := rabbitpub.ConfigFromURL(rawURL)
		if err != nil {
			return nil, err
		}
		cfg.Logger = log
		return nilIfErr(rabbitpub.New(cfg))
	case "redis", "rediss":
		return nilIfErr(redispub.NewFromURL(rawURL))
	case "nats":
		return nilIfErr(natspub.New(natspub.Config{URL: rawURL, SubjectPrefix: subjectPrefix, Logger: log}))
	}
	return nil, fmt.Errorf("unreachable: scheme %q", sch)
}

// nilIfErr returns a nil interface, not a nil *T in one, on an error.
func nilIfErr[T publishers.Publisher](p T, err error) (publishers.Publisher, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
}

// startEmbedded runs an in-process NATS server with JetStream under
// --data-dir and points the relay at it: subjects outbox.<topic> (or
// --subject-prefix), captured by the stream OUTBOX (or --stream).
func (f *relayFlags) startEmbedded(cmd *cobra.Command, g *globals, log *slog.Logger) (stop func(), err error) {
	srv, err := natsembed.Start(cmd.Context(), natsembed.Config{DataDir: f.dataDir, Host: "127.0.0.1", Port: f.embeddedPort,
		Logger: log.With("component", "nats-server")})
	if err != nil {
		return nil, fmt.Errorf("embedded NATS under %s: %w", f.dataDir, err)
	}
	f.brokerURL = srv.URL()
	if f.stream == "" {
		f.stream = embeddedStream
	}
	fmt.Fprintf(g.stdout, "embedded NATS JetStream at %s (data in %s): events on subjects %s.<topic>, stream %s\n",
		srv.URL(), f.dataDir, f.subjectPrefix, f.stream)
	return srv.Shutdown, nil
}
