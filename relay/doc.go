// Package relay drains an outbox table to a broker: claim a batch, publish it
// pipelined, mark (or delete) it in one statement. Publish first, mark after,
// so a crash duplicates and never loses.
//
// # Per-key order
//
// Events with a non-empty Key are published in the order their transactions
// committed, one at a time per key, across any number of relays and workers,
// through retries, crashes and stalls. Events without a key take the
// unordered path: any number in flight, in any order. Config.Unordered turns
// ordering off for keyed events too.
//
// The design has four parts, three in the store and one in the relay:
//
//   - Commit order at enqueue. Two transactions enqueueing for one key take
//     a transaction-scoped lock on the key (PostgreSQL: an advisory lock;
//     MySQL: a row of a key table), so the second waits until the first ends
//     and the key's rows take their sequence numbers in commit order. A plain
//     sequence would not do: it hands out numbers at insert, and two
//     transactions can commit in the other order.
//   - Heads, then runs. A claim takes, for each key, its head (its oldest
//     pending event) and, with room in the batch, the run of due events
//     right after it (Config.PerKey, shared evenly among the keys the claim
//     found). A later event of a key is never a candidate while its head is
//     held by another batch, whatever its own due time.
//   - Skip held heads. A head another relay holds is skipped (FOR UPDATE SKIP
//     LOCKED), which is safe because a held head's successors are not heads:
//     nobody can overtake it. There are no leases to renew or rebalance: a
//     relay that dies releases its heads with its database session, at once;
//     one that stalls (SIGSTOP, a long pause) loses them when the database
//     ends its idle transaction (the store's claim timeout, 30s by default).
//   - One in flight per key. A batch goes out in rounds: round i holds the
//     i-th event of every key in the batch (and round 0 the unkeyed events),
//     one pipelined call each, so a key's next event is sent only once the
//     broker has acknowledged the one before, while all the batch's keys
//     share every round. An event that fails ends its key's part of the
//     batch: the events after it stay pending, uncharged, and the failed one
//     is first again at the next claim. The whole batch is then marked in
//     one statement. A publisher that keeps a key's order by itself through
//     failures and retries (publishers.OrderKeeper) gets the batch in one
//     call instead.
//   - The next batch claimed ahead. A batch whose claim reached every key
//     due and free (fewer keys than its limit) is continued: while the
//     relay publishes it, a second transaction claims each of its keys' next
//     events, right after the batch's (stores.Continuer; PostgreSQL only
//     for now). That batch goes out once the first completed, so a few busy
//     keys never stop for a claim between batches. A key with an event that
//     failed or was deferred in the first batch sends nothing of the
//     continuation; a batch that met an outage or failed to complete drops
//     its continuation, and the relay claims afresh. Eight continuations in
//     a row at most, then a fresh claim, which reaches keys and unkeyed
//     events that appeared meanwhile. The continuation's transaction is
//     checked (stores.Resumer) before its events are sent, so its claim
//     timeout counts from then, as a fresh claim's does.
//
// Work divides among relays by key: each claim takes heads its peers do not
// hold, visiting keys round-robin so none starves, and at first at most a
// quarter of a batch's size of them, so that a peer finds keys too (on
// PostgreSQL a hundredth when the publisher keeps key order by itself, whose
// runs cost no publish rounds, and more when the runs behind them leave
// room in the batch: many keys of a few events each). A batch that finds
// few keys takes long runs of each, so one busy key moves at the broker's
// one-message-at-a-time rate (JetStream's synchronous publish) rather than at
// one event per claim-publish-mark cycle; one that finds many keys takes
// short runs of each, in few rounds of many events.
//
// A failing event blocks its key only. By default (KeyedFailure: BlockKey)
// it is retried with backoff for ever, and the key's later events wait until
// it succeeds or someone dead-letters it by hand (`outbox dead-letter ID`);
// DeadLetterKey makes it dead after MaxAttempts and lets the key go on. Other
// keys flow either way. A head delayed by NotBefore delays its key likewise.
//
// Limits. A relay that stalls past its claim timeout and then wakes may
// publish its old batch late, after newer events of those keys: a duplicate,
// which JetStream's duplicate window drops when it is recent and the
// consumer's inbox drops in any case, so the consumer still sees each key in
// order. Without an inbox, expect such late duplicates. The relay keeps
// one event per key in flight whatever the broker, unless the publisher
// declares that it keeps key order by itself (publishers.OrderKeeper).
//
// # Failures
//
// A publish error schedules the event's retry with exponential backoff and
// jitter; a permanent rejection (publishers.ErrPermanent) makes an unkeyed
// event dead at once. A broker that is unreachable opens a breaker shared by
// the relay's workers: they stop claiming (holding no transaction), probe
// with one batch after a backoff, and no event is charged an attempt. A
// broker that refuses the relay's configuration (publishers.ErrMisconfigured:
// wrong credentials, no permission, a deleted exchange) does the same — it
// is nobody's event's fault — and every refusal is logged as an error, since
// only a person can fix it; Stats.Refusals counts them.
//
// Every failure shows in the log, rate-limited so a broker that fails every
// event does not write a line per event: per topic and outcome, the first
// failure at once, then one line per 10 s counting the ones left out
// (more_since_last_line). A retry logs at WARN, a dead event and a failing
// head that holds its key back at ERROR. `outbox status` lists the blocked
// keys with their heads and last errors.
//
// # Timeouts
//
// Config.PublishTimeout bounds a batch's publish and must be shorter than
// the store's claim timeout (New refuses it otherwise): a publish that
// outlived its claim would let another relay publish the same events.
// Config.StoreTimeout bounds each claim and completion. Cancelling the
// context given to Start or Run ends every goroutine at once, whatever the
// breaker's state; Stop is the graceful way.
package relay
