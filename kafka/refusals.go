package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// refusals records the brokers refusing the client at the connection
// level — SASL authentication failed, a mechanism they do not offer —
// which franz-go only logs, retrying the connection while the records and
// requests that need it wait out their context. The client's logger
// reports each refusal here; Publish, Check and Subscriber.Start, waiting,
// fail at the next one as misconfigured instead of waiting for nothing.
type refusals struct {
	// hangUps counts the broker hanging up on the first request of a
	// connection as a refusal (the publisher); the subscriber's Start
	// reports it itself, with its own words.
	hangUps bool

	active atomic.Bool // a refusal came, and no success since
	mu     sync.Mutex
	last   error
	next   chan struct{} // closed, and replaced, at each refusal
}

func newRefusals(hangUps bool) *refusals {
	return &refusals{hangUps: hangUps, next: make(chan struct{})}
}

// report records err when it is a refusal, or (hangUps) the broker
// hanging up on the first request of a connection: it wants SASL or TLS
// the client does not give.
func (r *refusals) report(err error) {
	var eof *kgo.ErrFirstReadEOF
	switch {
	case err == nil:
	case refusal(err):
		r.record(err)
	case r.hangUps && errors.As(err, &eof):
		r.record(fmt.Errorf("%w (%w)", kerr.SaslAuthenticationFailed, err))
	}
}

func (r *refusals) record(err error) {
	r.active.Store(true)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = err
	close(r.next)
	r.next = make(chan struct{})
}

// ok records a success: the brokers take the client now.
func (r *refusals) ok() {
	if r.active.Load() {
		r.active.Store(false)
	}
}

// current returns the refusal in force — one came and nothing succeeded
// since — or nil.
func (r *refusals) current() error {
	if !r.active.Load() {
		return nil
	}
	return r.err()
}

// wait returns a channel closed at the next refusal.
func (r *refusals) wait() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

// err is the last refusal.
func (r *refusals) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return errors.New("the brokers refused the connection")
	}
	return r.last
}

// saslHook reports a broker that hangs up in answer to the client's SASL
// credentials — what older brokers (SaslAuthenticate v0) and kfake do
// instead of answering SASL_AUTHENTICATION_FAILED — as a refusal.
type saslHook struct{ ref *refusals }

// keySASLAuthenticate is the SaslAuthenticate request's key.
const keySASLAuthenticate = 36

func (h saslHook) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != keySASLAuthenticate || e2e.WriteErr != nil || e2e.ReadErr == nil || !errors.Is(e2e.ReadErr, io.EOF) {
		return
	}
	h.ref.record(fmt.Errorf("%w: broker %s:%d closed the connection in answer to the SASL credentials (wrong user or password?): %w",
		kerr.SaslAuthenticationFailed, meta.Host, meta.Port, e2e.ReadErr))
}

// logger adapts slog to kgo.Logger, warnings and errors only, hides the
// secrets in the errors it logs, and reports the brokers' refusals of the
// client to ref.
type logger struct {
	l      *slog.Logger
	ref    *refusals
	prefix string // "kafka publisher: "
}

func (g *logger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (g *logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelWarn
	if level == kgo.LogLevelError {
		lv = slog.LevelError
	}
	for i := 1; i < len(keyvals); i += 2 {
		if err, ok := keyvals[i].(error); ok {
			g.ref.report(err)
			keyvals[i] = redactText(err.Error())
		}
	}
	g.l.Log(context.Background(), lv, g.prefix+msg, keyvals...)
}
