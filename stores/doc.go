// Package stores defines the contract between the relay and a database: the
// relay-side half of a store (claim, complete, stats, dead letters, purge).
// The write side is outbox.Driver, in the root package.
//
// Each database lives in a package (and module) of its own — postgres,
// mysql, sqlite — whose one object per database handle serves enqueue, the
// relay (its Store() is a Store) and the inbox; each passes the conformance
// suite in stores/storetest unchanged.
//
// # Claims
//
// Claim returns a Batch of due pending records that no other relay can claim
// until the batch is completed or aborted, or its holder dies. How is the
// store's business: PostgreSQL holds the rows with FOR UPDATE SKIP LOCKED in
// a short transaction that dies with its connection. The relay publishes the
// records and then calls Complete once, which applies every outcome in one
// statement per kind and releases the batch. Records the outcome does not
// name stay pending, with their attempts unchanged: that is how an outage is
// not charged to the events.
package stores
