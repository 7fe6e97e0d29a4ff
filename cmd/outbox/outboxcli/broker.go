package outboxcli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/backoff"
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/nats/natsembed"
	"github.com/outboxgo/outbox/publishers"
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
// publishers.Unavailable (or is a network error)
// and not publishers.Misconfigured.
func brokerError(prefix, where string, err error) error {
	if publishers.IsMisconfigured(err) {
		return fmt.Errorf("%s %s refused the configuration: %s", prefix, where, redact.Text(err.Error()))
	}
	e := fmt.Errorf("%s %s: %s", prefix, where, redact.Text(err.Error()))
	var ne net.Error
	if publishers.IsUnavailable(err) || errors.As(err, &ne) {
		return unreachableError{e}
	}
	return e
}

// brokerURL is raw with the broker parameter flags given (--stream,
// --subject-prefix, …) replacing the URL's parameters.
func (f *relayFlags) brokerURL(raw string) (string, error) {
	set := map[string]string{}
	for _, pf := range f.params {
		if pf.changed {
			set[pf.param] = pf.value
		}
	}
	return backend.ApplyParams(raw, set)
}

// embeddedURL is the embedded broker's URL at base: its stream captures
// the prefix's subjects unless --stream names another.
func embeddedURL(base string) string {
	return base + "?stream=" + embeddedStream
}

// checkBroker validates the broker URL raw and the parameter flags without
// connecting: the scheme, that each flag given is one of this broker's, and
// the parameters' values. what names the broker in messages.
func (f *relayFlags) checkBroker(cmd *cobra.Command, g *globals, c *checks, what, raw string) {
	b, err := backend.LookupBroker(raw)
	if err != nil {
		c.add(flagError("broker-url", err))
		return
	}
	ok := true
	var given []string
	for name, pf := range f.params {
		if cmd.Flags().Changed(name) {
			given = append(given, g.flagRef(cmd, name))
		}
		if pf.changed && !slices.Contains(pf.brokers, b.Name) {
			c.add(fmt.Errorf("%s is a %s setting, and --broker-url is a %s:// URL",
				g.flagRef(cmd, name), strings.Join(pf.brokers, " and "), backend.Scheme(raw)))
			ok = false
		}
	}
	if !ok || b.Validate == nil {
		return
	}
	u, err := f.brokerURL(raw)
	if err == nil {
		err = b.Validate(u)
	}
	if err != nil && len(given) > 0 {
		// The URL in the message has the flags' values as parameters.
		slices.Sort(given)
		err = fmt.Errorf("%s with %s: %w", what, strings.Join(given, ", "), err)
	}
	c.add(err)
}

// openPublisher opens the publisher of the broker URL and, when it is a
// publishers.Checker, checks its configuration with the broker.
func (f *relayFlags) openPublisher(cmd *cobra.Command, log *slog.Logger) (publishers.Publisher, string, error) {
	ctx := cmd.Context()
	where := redact.URL(f.rawBrokerURL)
	u, err := f.brokerURL(f.rawBrokerURL)
	if err != nil {
		return nil, "", err
	}
	p, err := backend.OpenBroker(ctx, u, &backend.BrokerOptions{Logger: log.With("component", "publisher")})
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
	return p, where, nil
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
	f.rawBrokerURL = embeddedURL(srv.URL())
	stream, prefix := embeddedStream, defaultSubjectPrefix
	if p := f.params["stream"]; p.changed {
		stream = p.value
	}
	if p := f.params["subject-prefix"]; p.changed {
		prefix = p.value
	}
	fmt.Fprintf(g.stdout, "embedded NATS JetStream at %s (data in %s): events on subjects %s.<topic>, stream %s\n",
		srv.URL(), f.dataDir, prefix, stream)
	return srv.Shutdown, nil
}
