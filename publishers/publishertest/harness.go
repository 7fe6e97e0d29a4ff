// Package publishertest is the conformance suite of the publisher contract:
// every broker package runs Run against a real broker, unchanged, and is
// done when it passes.
//
// A broker package supplies a Harness: how to make an isolated environment
// (a topic of its own, a publisher that writes to it, and a plain consumer
// of the broker — not the outbox's code — that reads it back) and,
// optionally, a private broker instance it can stop and start for the
// outage cases.
package publishertest

import (
	"testing"
	"time"

	"github.com/outboxgo/outbox/publishers"
)

// Harness adapts one broker to the suite.
type Harness struct {
	// Setup returns a fresh environment for one test; it registers its own
	// cleanups with t. Required.
	Setup func(t *testing.T) Env
	// Outage returns an environment on a broker instance private to this
	// test, with the means to stop and start it. Nil skips the outage
	// cases.
	Outage func(t *testing.T) Outage
	// Refusals are publishers the broker must refuse (wrong credentials,
	// unknown targets), each checked on a fresh Setup. Every broker has
	// credentials to refuse: none fails the suite.
	Refusals []Refusal
}

// Env is what one test of the suite works with.
type Env struct {
	// NewPublisher returns a new publisher whose messages for Topic land
	// where Read sees them. The suite closes every publisher it gets, at
	// the latest at cleanup, and may close one twice.
	NewPublisher func(t *testing.T) publishers.Publisher
	// Topic is a topic no other test uses.
	Topic string
	// Dedup declares that the broker drops a re-sent message with an ID it
	// has already stored (JetStream's duplicate window): the suite then
	// checks that no copy is stored twice. False skips those checks.
	Dedup bool
	// Read returns what a plain consumer of the broker received on Topic
	// since the environment was set up, in the order the broker stored it,
	// waiting until at least n messages arrived or timeout passed. It may
	// return more than n (everything that arrived), or fewer on timeout;
	// it fails the test only when the broker cannot be read.
	Read func(t *testing.T, n int, timeout time.Duration) []Received
	// MaxPayload is a payload size in bytes that the broker refuses
	// (counting what the publisher adds) while taking the suite's other
	// messages, which are under 1 KiB. Zero skips the oversize case.
	MaxPayload int
}

// Outage is an Env on a broker the test may stop and start.
type Outage struct {
	Env
	// Stop takes the broker down and returns once it is down.
	Stop func(t *testing.T)
	// Start brings it back, with the data it stored, at the same address,
	// and returns once it accepts clients.
	Start func(t *testing.T)
}

// Received is a message as a plain consumer of the broker sees it,
// translated back by the harness (e.g. the ID from Nats-Msg-Id).
type Received struct {
	ID      string
	Key     string
	Type    string
	Headers map[string]string // the broker's headers, including the message's own
	Payload []byte
	Topic   string
}
