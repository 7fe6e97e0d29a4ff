// Package subscribertest is the conformance suite of the subscriber
// contract: every package under subscribers runs Run against its real
// broker, unchanged, and is done when it passes.
//
// The contract: a subscriber hands each broker message to an inbox.Inbox
// and settles it only once the inbox transaction has committed (or the
// message proved a duplicate); a failed handler's message comes back after
// a growing backoff and, after Config.MaxDeliveries deliveries or at once
// for a permanent error or an undecodable message, goes to the dead-letter
// destination with its error; Stop lets in-flight handlers finish, and a
// Stop whose context ends cancels them without dead-lettering anything.
//
// A broker package supplies a Harness: how to make an isolated
// environment (a topic of its own, a dead-letter destination, a way to
// publish as publishers/<broker> does and to see what the broker still
// holds), how to build a subscriber from the suite's knobs, and the
// optional capabilities where brokers differ. The inbox side is the
// suite's own: each case gets a PostgreSQL schema (internal/pgtest) with an
// inbox table (postgres.New(…).Inbox(), pgx.Tx) and an effects table, and checks what a
// user would: effects committed, what the broker still holds, dead letters,
// the subscriber's hooks.
package subscribertest

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/subscribers"
)

// Harness adapts one broker's subscriber to the suite.
type Harness struct {
	// Setup returns a fresh Env for one case; it registers its own
	// cleanups with t. Required.
	Setup func(t *testing.T) Env
	// Outage returns an Env whose subscribers reach the broker through a
	// path the case may cut (internal/tcpproxy). Nil skips Outage.
	Outage func(t *testing.T) Outage
	// Features declares what the broker's subscriber promises beyond the
	// contract's core.
	Features Features
	// Refusals are subscribers the broker must refuse (wrong credentials,
	// unknown targets), each checked on a fresh Setup. Every broker has
	// credentials to refuse: none fails the suite.
	Refusals []Refusal
}

// Features are the optional promises of a subscriber; a case that needs
// one is skipped without it.
type Features struct {
	// Concurrency: Config.Concurrency handlers run at once, and no more
	// (false for Kafka, which handles a partition at a time).
	Concurrency bool
	// OrderPerKey: the messages of one key are handled in the order they
	// were published, whatever the concurrency (Kafka: a key's partition).
	OrderPerKey bool
	// HeldWhileDelivered: Env.Held counts a message delivered to a running
	// subscriber and not yet acknowledged (false for RabbitMQ, whose queue
	// counts only the messages ready for delivery).
	HeldWhileDelivered bool
	// CountsDeliveries: the delivery count of a message goes on across
	// consumers, those that died without a result included (NATS,
	// Redis; not RabbitMQ's classic queues, nor Kafka, whose count is the
	// subscriber's own), so that such deliveries count toward
	// MaxDeliveries.
	CountsDeliveries bool
	// Redelivers: the broker gives a message whose consumer fell silent
	// for Config.RedeliverAfter to another consumer, and the subscriber
	// keeps a slow handler's message alive meanwhile (NATS AckWait, Redis
	// ClaimIdle). Without it Config.RedeliverAfter is ignored.
	Redelivers bool
}

// Env is one case's broker side: a topic no other case uses, its
// dead-letter destination, and subscribers built on them.
type Env struct {
	// New builds a subscriber of the Env's topic from c (Start not yet
	// called), returning the constructor's error as it is. Required.
	New func(t *testing.T, c Config) (Subscriber, error)
	// Publish stores msgs on the topic, in order, as publishers/<broker>
	// does (through it, ideally). Every message is stored, copies of one
	// event included (for a broker that drops them within a duplicate
	// window, by waiting the window out). The suite's messages have topic
	// "orders". Required.
	Publish func(t *testing.T, msgs ...outbox.Message)
	// PublishNoID stores on the topic a message without an event ID whose
	// body is payload. Required.
	PublishNoID func(t *testing.T, payload string)
	// Held returns how many messages of the topic the broker holds for
	// group: not yet delivered, or delivered and not acknowledged (see
	// Features.HeldWhileDelivered). Required.
	Held func(t *testing.T, group string) int
	// DeadLetters returns every dead letter so far, waiting until there
	// are at least n or timeout passed. Required.
	DeadLetters func(t *testing.T, n int, timeout time.Duration) []DeadLetter
	// Source is where a dead letter says its message came from: the
	// broker's name of the topic (subject, topic, routing key, stream).
	Source string
	// Consumer maps a group to the consumer a dead letter names (durable,
	// group, queue). Nil: the group itself.
	Consumer func(group string) string
	// Orphan hands the next n messages of the topic to a consumer of
	// c.Group that then dies without acknowledging them, so that the next
	// subscriber New(c) makes gets them again (after c.RedeliverAfter, for
	// a broker that Redelivers). Nil skips Orphan.
	Orphan func(t *testing.T, c Config, n int)
}

// Outage is an Env whose subscribers' connections can be cut.
type Outage struct {
	Env
	// Cut closes every connection of the subscribers New made and refuses
	// new ones — or, where the broker's test server cannot take a cut
	// connection, holds them, forwarding nothing (the harness says why);
	// Publish, Held and DeadLetters may fail until Restore.
	Cut func()
	// Restore accepts connections again, or lets them go on.
	Restore func(t testing.TB)
}

// Config is what the suite asks of a subscriber; the harness turns it into
// the broker's own config, with quick timings for what the suite leaves
// out (poll intervals, reconnect delays).
type Config struct {
	Inbox   *inbox.Inbox[pgx.Tx]
	Handler inbox.Handler[pgx.Tx]
	// Group: subscribers with the same group share the topic's messages
	// (a JetStream durable, a consumer group; RabbitMQ's one queue).
	Group string
	// RedeliverAfter is how long a silent consumer keeps a message (see
	// Features.Redelivers); 0 leaves the harness's choice.
	RedeliverAfter time.Duration
	// Options go to the subscriber's as they are: the suite sets
	// MaxDeliveries, Concurrency, a Backoff without jitter and the Hooks;
	// the harness may add a Logger.
	Options subscribers.Options
}

// Subscriber is the contract the suite holds a subscriber to.
type Subscriber = subscribers.Subscriber

// DeadLetter is a message of the dead-letter destination, translated.
type DeadLetter struct {
	// ID is the event ID it carries; "" when it had none.
	ID      string
	Payload string
	// Headers are its headers as strings (the event's own among them).
	Headers    map[string]string
	Error      string
	Deliveries int
	// Source and Consumer say where it was consumed and who gave up.
	Source, Consumer string
}
