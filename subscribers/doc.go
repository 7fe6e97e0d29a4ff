// Package subscribers is the consumer side's contract: what every broker's
// subscriber (nats, kafka, rabbitmq, redis, …) shares. A subscriber
// receives messages from its broker and feeds them to an inbox.Inbox,
// acknowledging a message only once its handler's transaction has
// committed; a failed message comes back after a growing backoff and, after
// Options.MaxDeliveries deliveries or at once for a permanent error or an
// undecodable message, goes to the broker's dead-letter destination with
// its error.
//
// Each broker package declares its own SubscriberConfig (where to read,
// where dead letters go) and embeds Options, the knobs every subscriber
// has, with the same names, defaults and meaning of zero everywhere. Hooks
// and Settlement report, in one vocabulary, how each delivery ended.
//
// Every subscriber passes the conformance suite of this contract,
// internal/testkit/subscribertest, unchanged.
package subscribers
