// Package pgcdc is a change-data-capture relay for the PostgreSQL outbox:
// it streams the outbox table's inserts from the write-ahead log (logical
// replication, the built-in pgoutput plugin) and publishes them through a
// publishers.Publisher, as Debezium does, without a JVM and without
// polling the table. docs/cdc.md is the full guide.
//
// # How it works
//
// New takes a Config (the database's connection string, the outbox table,
// a publication and a slot name) and a publisher. Start opens a streaming
// session (replication=database), creates the publication (FOR TABLE the
// outbox, publish = 'insert') and the logical slot when they are missing,
// and streams from the slot's confirmed position. Each committed insert of
// the outbox table becomes an outbox.Message (ID, Topic, Key, Type,
// Payload, Headers, CreatedAt; NotBefore from available_at); a rolled-back
// transaction never reaches the log's decoded stream.
//
// Events are published pipelined, up to Config.Calls calls in flight. The
// relay confirms a transaction's end LSN to the server (a standby status
// update, every StatusInterval and whenever the server asks) only once the
// broker has acknowledged every event of it and of every transaction
// before it, and its rows are marked. A relay that crashes resumes from the
// slot's confirmed position and sends the unconfirmed events again, with
// the same IDs (the broker's dedup key): at least once, never lost.
//
// # Ordering
//
// Per key, publish order is commit order. A publisher that keeps key
// order by itself (publishers.OrderKeeper reporting true) gets a key's
// events pipelined in one call (up to PerKey); any other gets at most one
// event of a key in flight, many keys at once. Unkeyed events go out in
// any order.
//
// # Failures
//
// A failing event follows the polling relay's policy (Config.KeyedFailure,
// relay.BlockKey or relay.DeadLetterKey, and MaxAttempts): it blocks its
// key — retried with backoff while its key's later events wait and the
// other keys flow — or becomes dead after MaxAttempts (at once when the
// broker rejects it permanently): the relay writes its row dead (status 2,
// last_error) and the key goes on. An unavailable broker, or one refusing
// the configuration, pauses the stream: the relay stops reading, keeps the
// slot's position, probes with backoff and resumes; nothing is charged,
// nothing confirmed past an unpublished event.
//
// # Modes
//
// MarkRows (the default) deletes published rows in batches, or marks them
// published with Retention, so `outbox status` stays true. InsertDelete is
// for applications that insert and delete each event in one transaction:
// the table stays empty and the relay writes nothing for a published
// event. Config.Debezium streams a table in Debezium's outbox layout (id,
// aggregatetype, aggregateid, type, payload) instead, routed by aggregate
// type.
//
// # Delayed events
//
// An event whose available_at is after its created_at (NotBefore) is not
// published from the stream: its row stays pending (in InsertDelete mode
// the relay writes it back, pending) and a timer-driven sweep publishes it
// once due, every PollInterval: never early, and a restart loses nothing.
// The same sweep publishes dead events retried with `outbox dead retry`.
//
// # Slot health
//
// Heartbeats (pg_logical_emit_message) keep the slot's confirmed position
// moving on an idle outbox, so the slot pins no WAL. SlotStatusOf and
// Relay.Status read the slot's lag, retained WAL and wal_status, and fail
// with ErrSlotLost when the server invalidated it; Relay.Behind is the
// relay's lag in time. `outbox status` lists the slots, and the metrics
// module reports them (metrics.RegisterCDC).
//
// # Limits
//
// PostgreSQL 14 or later (pgoutput's messages option), one database and
// one outbox table per relay, one active relay per slot (a second one
// waits as a hot standby and takes over within StandbyRetry of the first
// one's death). Events committed before the slot existed are not in its
// stream: drain them once with the polling relay.
package pgcdc
