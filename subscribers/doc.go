// Package subscribers holds the consumer side's broker adapters: each
// package below this one (subscribers/nats, …) receives messages from one
// broker and feeds them to an inbox.Inbox, acknowledging a message only once
// its handler's transaction has committed.
//
// Every adapter passes subscribers/subscribertest, the conformance suite of
// that contract, unchanged; what they share beyond the broker (the
// Start/Stop lifecycle, how a delivery settles) is in
// subscribers/internal/consumer.
package subscribers
