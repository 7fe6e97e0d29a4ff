// Package publishers defines the contract between the relay and a broker.
//
// Each broker lives in a package (and module) of its own — nats, kafka,
// rabbitmq, redis — holding its publisher and its subscriber; each
// publisher passes the conformance suite in publishers/publishertest
// unchanged.
//
// A Publisher publishes a batch pipelined — every message in flight at once,
// acknowledgements awaited together — and reports one result per message.
// Results are classified with the helpers of this package so the relay can
// tell an outage (stop and back off, charge nobody) from a refused
// configuration (wrong credentials, a missing exchange: stop, charge nobody,
// and say so loudly) from a message the broker will never take (dead-letter
// it now) from an ordinary failure (retry it with backoff).
package publishers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outboxgo/outbox"
)

// Publisher publishes messages to a broker. Its methods are safe for
// concurrent use: the relay's workers call Publish at once.
type Publisher interface {
	// Publish sends msgs and waits until the broker has acknowledged each
	// or ctx is done. It returns one error per message, in order: nil means
	// acknowledged (stored by the broker). A Publisher must carry the
	// message ID as the broker's dedup key where one exists, and the
	// headers, key and type as the broker allows.
	//
	// An error does not prove the message was not stored (an ack may be
	// lost in flight): that is why the ID travels as the dedup key. When
	// ctx ends first, or after Close, the messages not acknowledged fail
	// with Unavailable errors, never Permanent ones.
	Publish(ctx context.Context, msgs []outbox.Message) []error
	// Close releases every resource; no goroutine outlives it. It may be
	// called more than once.
	Close() error
}

// Checker is implemented by publishers that can verify their configuration
// with the broker before the first publish: the credentials, and the fixed
// targets the configuration names (RabbitMQ's vhost and exchange, Redis's
// database, a JetStream account). Every broker package implements it; the
// CLI calls it at start so a refused configuration fails there, in one
// line, instead of every event failing later.
type Checker interface {
	// Check returns nil when the broker accepts the configuration, an
	// error classified Misconfigured when it refuses it, and one
	// classified Unavailable when the broker cannot be reached.
	Check(ctx context.Context) error
}

// OrderKeeper is implemented by publishers that can keep each key's order
// within one Publish call by themselves, whatever fails: a message of a key
// is stored only after every earlier message of that key in the call, and
// once one fails, no later message of its key in the call is stored (each
// fails too, with an error IsNotSent: the relay leaves it pending behind
// the failed one and charges it no attempt). Retries that keep a partition
// in order are not enough: the
// producer must also refuse a key's later messages once an earlier one
// failed, however the failure and the call interleave. Google Pub/Sub's
// client does (it pauses the ordering key: pubsub declares it); franz-go
// fails the records it holds but sends the ones produced after the
// failure, so kafka holds its writes until a call's records are all in the
// client. KeepsKeyOrder reports whether the publisher, as
// configured, does; the relay then sends a batch's events of a key in one
// pipelined call instead of one call per event. A publisher that cannot
// promise it must not implement it or must report false: the relay's
// default, one event of a key in flight at a time, keeps the order on any
// broker.
type OrderKeeper interface {
	KeepsKeyOrder() bool
}

// ErrUnavailable marks an error as the broker (or the path to it) being
// unavailable: the relay stops publishing, backs off as a whole and does not
// count an attempt against the message.
var ErrUnavailable = errors.New("broker unavailable")

// ErrPermanent marks an error as one the broker will return every time for
// this message (too large, rejected by policy): the relay dead-letters the
// message at once.
var ErrPermanent = errors.New("rejected permanently")

// ErrMisconfigured marks an error as the broker refusing the publisher's
// configuration rather than one message: wrong credentials, no permission,
// an unknown database, vhost or exchange. It is no outage — retrying does
// not help until someone fixes the configuration — and it is never the
// event's fault: the relay charges no attempt, pauses as a whole like in an
// outage, and logs every refusal as an error. A publisher must never report
// a message published when the broker refused it this way.
var ErrMisconfigured = errors.New("broker refused the configuration")

// ErrNotSent marks the error of a message a publisher did not send because
// an earlier message of its key in the same call failed (an OrderKeeper
// must not store it): the message itself was never tried. The relay leaves
// it pending, uncharged, behind the failed one, as it does the events of a
// failed key it holds back itself. An error may be NotSent and also
// Unavailable or Misconfigured, saying why the earlier one failed.
var ErrNotSent = errors.New("not sent after an earlier message of its key failed")

type classified struct {
	err  error
	kind error
}

func (c *classified) Error() string        { return c.err.Error() }
func (c *classified) Unwrap() []error      { return []error{c.err, c.kind} }
func (c *classified) Is(target error) bool { return target == c.kind }

// Unavailable wraps err so that errors.Is(err, ErrUnavailable) holds.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, kind: ErrUnavailable}
}

// Permanent wraps err so that errors.Is(err, ErrPermanent) holds.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, kind: ErrPermanent}
}

// Misconfigured wraps err so that errors.Is(err, ErrMisconfigured) holds.
func Misconfigured(err error) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, kind: ErrMisconfigured}
}

// NotSent wraps err so that errors.Is(err, ErrNotSent) holds.
func NotSent(err error) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, kind: ErrNotSent}
}

// NotSentAfter is the error of a message not sent because an earlier
// message of its key failed with cause; what names the message (e.g.
// "redis publish <ID>"). It is NotSent, and also Unavailable or
// Misconfigured when cause is — an outage or a refusal is the follower's
// too — but not Permanent: a message the broker refuses for good says
// nothing of the next one.
func NotSentAfter(what string, cause error) error {
	if IsUnavailable(cause) || IsMisconfigured(cause) {
		return NotSent(fmt.Errorf("%s: not sent after an earlier message of its key failed: %w", what, cause))
	}
	return NotSent(fmt.Errorf("%s: not sent after an earlier message of its key failed: %v", what, cause))
}

// IsNotSent reports whether err says the message was not sent, because an
// earlier message of its key in the call failed.
func IsNotSent(err error) bool { return errors.Is(err, ErrNotSent) }

// IsUnavailable reports whether err says the broker is unavailable.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// IsPermanent reports whether err says the message can never be published.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }

// IsMisconfigured reports whether err says the broker refused the
// publisher's configuration.
func IsMisconfigured(err error) bool { return errors.Is(err, ErrMisconfigured) }

// MaxRetryAfter bounds the wait RetryAfter asks for: a broker's hint of
// days would park an event for days; longer hints wait this long.
const MaxRetryAfter = time.Hour

type retryAfter struct {
	err error
	d   time.Duration
}

func (r *retryAfter) Error() string { return r.err.Error() }
func (r *retryAfter) Unwrap() error { return r.err }

// RetryAfter wraps err, an ordinary failure of one message, with the
// broker's word on when to try again (an HTTP Retry-After, a throttling
// hint): the relay retries the message no sooner than d after the failure
// (at most MaxRetryAfter), later if its backoff says so. A d of zero or
// less returns err as it is.
func RetryAfter(err error, d time.Duration) error {
	if err == nil || d <= 0 {
		return err
	}
	return &retryAfter{err: err, d: min(d, MaxRetryAfter)}
}

// RetryDelay reports the wait err asks for (see RetryAfter), and whether
// it asks for one.
func RetryDelay(err error) (time.Duration, bool) {
	var r *retryAfter
	if errors.As(err, &r) {
		return r.d, true
	}
	return 0, false
}
