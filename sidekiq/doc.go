// Package sidekiq is the Sidekiq backend: a Publisher that pushes outbox
// messages as Sidekiq jobs, in Sidekiq's own Redis format, so that a Ruby
// worker (Sidekiq 6.4 and later) runs a job per committed event. It is
// built on github.com/redis/go-redis/v9. Sidekiq has no subscriber side
// here: the Ruby job is the consumer (docs/sidekiq.md).
//
//	pub, err := sidekiq.NewPublisher(&sidekiq.PublisherConfig{
//		URL: "redis://127.0.0.1:6379/0", Namespace: "app",
//		Class: "OutboxEventJob", Queue: "events",
//		Routes: map[string]sidekiq.Route{"orders": {Class: "Billing::OrderJob", Queue: "critical"}},
//	})
//
// Importing the package registers the schemes sidekiq://, sidekiq+redis://
// and sidekiq+rediss:// (TLS) with package backend (see URLs below).
//
// # Routing
//
// A topic's job goes to the class, queue and retry option of its Route in
// PublisherConfig.Routes; an empty Route field, or a topic without a
// Route, takes PublisherConfig.Class, Queue (default "default") and Retry
// (default "true"). A topic that ends without a class fails as
// publishers.Permanent (ErrNoClass, naming the topic): the relay
// dead-letters it at once.
//
// # Jobs
//
// Every key is under PublisherConfig.Namespace + ":" when a namespace is
// set, as Sidekiq's namespace option (redis-namespace) puts them. A
// message becomes one job, the JSON object Sidekiq's client writes:
//
//   - "class", "queue", "retry": from the route;
//   - "args": [payload, meta] (below);
//   - "jid": JID(message ID), the first 24 hex digits of the SHA-256 of
//     the ID's 16 bytes — the same for every push of an event;
//   - "created_at": Message.CreatedAt (the clock's now when zero), and
//     "enqueued_at": the clock's now, both as Unix seconds in a float.
//
// A due job (no NotBefore, or one that has passed by PublisherConfig.Clock)
// is pushed as Sidekiq's client pushes: SADD queues QUEUE, LPUSH
// queue:QUEUE JOB. A batch is one pipeline, one round trip, with one
// MULTI/EXEC per queue it names: MULTI, SADD queues QUEUE, an LPUSH per
// job in batch order, EXEC. Each message's result is its own LPUSH's
// reply; a command Redis refuses when queuing it (an ACL NOPERM) discards
// its queue's transaction, so nothing of it is stored and every job of it
// fails. A job whose NotBefore is still ahead (the relay publishes an
// event only once it is due, so this takes clock skew or a direct
// Publish) is added, in the same pipeline, to the sorted set "schedule"
// with its NotBefore as the score and without enqueued_at, as perform_at
// does; Sidekiq's poller moves it to its queue when due, and a re-sent
// copy is the same member, stored once.
//
// args[0] is the payload: the payload itself when it is one JSON value
// Sidekiq can parse back — valid UTF-8, no whitespace around it, at most
// 98 levels deep (Ruby's JSON.parse stops at 100, and the job adds two) —
// its bytes as enqueued; otherwise (empty, binary, text) a string holding
// the payload in standard base64. args[1] is Meta: the event ID, topic,
// key, type, headers and the encoding of args[0] ("json" or "base64").
// Every payload maps; a job larger than PublisherConfig.MaxPayload fails
// as permanent, unsent.
//
// # Duplicates and order
//
// Sidekiq does not deduplicate by jid: a job pushed twice (a relay that
// died between Redis's reply and its mark) runs twice, with the same jid.
// A job must be idempotent: record its jid (or meta["id"]) in the same
// database transaction as its effect, under a unique index
// (testdata/idempotent_job.rb, docs/sidekiq.md). The relay pushes a key's
// events in commit order, and one Sidekiq queue is a FIFO list, but
// Sidekiq runs jobs on several threads and processes: per-key order does
// not survive a queue worked with concurrency above 1, nor retries.
//
// # Errors
//
// Publish's errors are classified like the redis package's:
// publishers.Misconfigured for a refusal of the configuration (WRONGPASS,
// NOAUTH, NOPERM for a command or a key, ERR DB index is out of range) —
// a command refused when queued aborts its queue's MULTI, so none of its
// jobs is stored; publishers.Permanent for ErrNoClass and ErrTooLarge;
// publishers.Unavailable for a closed publisher, an ended context, network
// errors and LOADING, BUSY, READONLY, OOM and the like; other server
// errors unmarked (retried). The client does not retry commands itself
// unless the URL sets max_retries.
//
// # Check
//
// Publisher implements publishers.Checker: on a connection of its own,
// the handshake (AUTH, SELECT) and a PING, then MULTI, SADD to queues,
// LPUSH to every configured queue, ZADD to schedule, DISCARD: every
// command and key a push uses, permission-checked, nothing stored.
//
// # URLs
//
// ConfigFromURL, and backend.OpenBroker, take
// sidekiq://[user:password@]host:port/db?params (sidekiq+redis:// the
// same, sidekiq+rediss:// for TLS). The publisher's own parameters are
// class, queue, namespace, retry and max_payload; every other one is
// go-redis's (dial_timeout, read_timeout, pool_size, max_retries, … see
// redis.ParseURL). An unknown parameter is an error that names it; the
// password never appears in errors or logs. Routes per topic are set in
// the Go configuration only.
package sidekiq
