// Package saga is the outbox pattern's saga, running in one process with
// nothing installed but Go: `go run ./cmd/outbox demo`. It is meant to be
// read and copied.
//
// # The story
//
// Two services, each with its own SQLite database, talk through a broker
// (NATS JetStream, embedded in the process):
//
//  1. The orders service confirms orders. Each confirmation updates the
//     order's row and records an OrderConfirmed event in the service's
//     outbox table, in one transaction (Orders.Confirm). Nothing else: the
//     request depends only on the database.
//  2. Relays (Options.Relays per service, package relay) drain each outbox
//     to the broker: claim a batch (a lease, in SQLite), publish it, mark
//     it. Publish first, mark after: a relay that dies in between makes a
//     duplicate, never a loss.
//  3. The stock service consumes OrderConfirmed (nats.NewSubscriber) through
//     its inbox (sqlite.DB.Inbox). Stock.OnOrderConfirmed runs once per
//     event ID, in the transaction that records the ID: it reserves stock
//     and records StockReserved in the stock service's own outbox — the
//     effect, the dedup record and the next event commit together.
//  4. The orders service consumes StockReserved through its inbox and marks
//     the order reserved (Orders.OnStockReserved): the saga is complete.
//
// Midway, once a third of the orders are confirmed, the broker goes down
// for Options.Outage. Orders keep being confirmed; the relays find the
// broker unavailable, pause as a whole and charge no event an attempt; the
// backlog grows in the outbox tables. When the broker returns, the relays
// drain it and the saga completes.
//
// With Options.Crash, the first orders relay dies between publish and mark
// on one batch (its AfterPublish hook stops it and never returns until the
// end, so the batch is never marked) and a fresh relay takes over. When the
// batch's lease runs out (claimTimeout) another relay publishes it again;
// the stream's duplicate window is kept short (duplicateWindow) so that the
// re-publish reaches the consumer, and the stock service's inbox drops it:
// "duplicates dropped" goes up, the stock does not move.
//
// # Verification
//
// At the end Run reads both databases: every confirmed order must have
// exactly one reservation (the reservations table has no unique key, so a
// reservation applied twice would show), none lost, none without a
// confirmed order, stock levels down by exactly what the orders bought,
// every order back as reserved, both outboxes empty. Report has the
// numbers; Run returns an error wrapping ErrVerification when they are off.
//
// # Where the code is
//
//   - services.go: the two services — the business code a user writes:
//     Orders.Confirm (outbox.Enqueue in the business transaction), the two
//     inbox handlers (Stock.OnOrderConfirmed chains the next event).
//   - plumbing.go: the wiring — SQLite files (sqlite.Open, one sqlite.DB
//     each for enqueue, the relay's store and the inbox, migrations), the
//     streams, the relays (relay.New over the sqlite store and a nats
//     publisher), the subscribers (nats.NewSubscriber over the inbox). The constants there are tuned for
//     a demo of seconds; their comments give production's defaults.
//   - saga.go: Run, the script — the outage, the crash, the pacing.
//   - progress.go and verify.go: the progress lines, the wait for the saga
//     to complete, the verification and the report.
//
// The embedded broker (nats/natsembed) stands in for a real NATS server;
// in your code, give the nats package's publisher and subscriber the URL of
// one.
package saga
