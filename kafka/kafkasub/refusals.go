package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgo/outbox/internal/redact"
)

// refusals records the brokers refusing the client at the connection
// level (SASL authentication), which franz-go only logs while it retries:
// Start fails at the first one instead of waiting out its context.
type refusals struct {
	mu   sync.Mutex
	last error
	next chan struct{} // closed, and replaced, at each refusal
}

func newRefusals() *refusals { return &refusals{next: make(chan struct{})} }

func (r *refusals) record(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = err
	close(r.next)
	r.next = make(chan struct{})
}

func (r *refusals) wait() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

func (r *refusals) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// refusal reports whether err says the brokers refuse the client's
// credentials or permissions.
func refusal(err error) bool {
	for _, k := range []*kerr.Error{
		kerr.SaslAuthenticationFailed, kerr.UnsupportedSaslMechanism, kerr.IllegalSaslState,
		kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.GroupAuthorizationFailed,
	} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// keySASLAuthenticate is the SaslAuthenticate request's key.
const keySASLAuthenticate = 36

// OnBrokerE2E records a broker that hangs up in answer to the SASL
// credentials (older brokers and kfake do instead of answering
// SASL_AUTHENTICATION_FAILED).
func (r *refusals) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key == keySASLAuthenticate && e2e.WriteErr == nil && errors.Is(e2e.ReadErr, io.EOF) {
		r.record(fmt.Errorf("%w: broker %s:%d closed the connection in answer to the SASL credentials (wrong user or password?): %w",
			kerr.SaslAuthenticationFailed, meta.Host, meta.Port, e2e.ReadErr))
	}
}

// logger adapts slog to kgo.Logger, warnings and errors only, and records
// the refusals the client logs.
type logger struct {
	l   *slog.Logger
	ref *refusals
}

func (g *logger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (g *logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelWarn
	if level == kgo.LogLevelError {
		lv = slog.LevelError
	}
	for i := 1; i < len(keyvals); i += 2 {
		if err, ok := keyvals[i].(error); ok {
			if refusal(err) {
				g.ref.record(err)
			}
			keyvals[i] = redact.Text(err.Error())
		}
	}
	g.l.Log(context.Background(), lv, "kafka subscriber: "+msg, keyvals...)
}
