// Package faults holds the fault-injection suite (issue 9): relays and
// the inbox's consumer in processes of their own are SIGKILLed and
// SIGSTOPped, the broker is stopped and its path stalled, dropped and cut,
// the database's connections are killed and the database restarted, while
// writers enqueue; a checker then proves that nothing was lost, nothing
// phantom arrived, per-key order held and the inbox applied every effect
// exactly once. One run serves every database and broker through two
// interfaces (database, broker); TestFaults runs PostgreSQL with NATS
// JetStream, RabbitMQ, Kafka (kfake), Redis Streams and Google's Pub/Sub
// emulator, and MariaDB with NATS JetStream, each on private servers;
// TestFaultsCDC runs the CDC relay (`outbox relay --mode cdc`, a hot
// standby pair) from a logical-replication PostgreSQL cluster to NATS
// JetStream. See docs/faults.md.
//
// The package has tests only; run them with
//
//	(cd integration && go test ./faults/)       # short mode (CI)
//	(cd integration && OUTBOX_FAULTS=long go test -v -timeout 30m ./faults/)
package faults
