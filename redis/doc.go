// Package redis is the Redis Streams backend, built on
// github.com/redis/go-redis/v9: a Publisher that appends outbox messages
// to streams, for the relay, and a Subscriber that feeds an inbox.Inbox
// from those streams through a consumer group.
//
//	// The relay's side: topic T goes to the stream "events:"+T.
//	pub, err := redis.NewPublisher(&redis.PublisherConfig{
//		URL: "redis://127.0.0.1:6379/0", StreamPrefix: "events:",
//	})
//
//	// The consumer's side: the stream's entries, through the inbox.
//	sub, err := redis.NewSubscriber(rdb, in, handler, &redis.SubscriberConfig{
//		Streams: []string{"events:orders"}, StreamPrefix: "events:",
//		Group: "billing", DeadLetterStream: "dead:billing",
//	})
//	err = sub.Start(ctx)
//	defer sub.Stop(ctx)
//
// Importing the package registers the schemes redis:// and rediss:// with
// package backend: backend.OpenBroker makes a Publisher from a URL (see
// URLs below).
//
// # Mapping
//
// A message becomes one stream entry, appended with XADD (ID "*", so Redis
// numbers entries in append order) to the stream PublisherConfig.Stream(topic)
// when set, else PublisherConfig.StreamPrefix + topic (default prefix "":
// the stream key is the topic). Every entry has the same fields, in this
// order:
//
//   - FieldID ("id"): the event ID (the consumer's dedup key);
//   - FieldKey ("key"): Message.Key, "" when none;
//   - FieldType ("type"): Message.Type, "" when none;
//   - FieldPayload ("payload"): Message.Payload, bytes as they are;
//   - FieldCreatedAt ("created_at"): Message.CreatedAt in RFC 3339 with
//     nanoseconds, "" when zero;
//   - FieldHeaders ("headers"): Message.Headers as a JSON object of
//     strings, "{}" when none.
//
// Decode turns such an entry back into an inbox.Message. With
// PublisherConfig.MaxLen > 0 every XADD trims the stream to about that
// many entries (MAXLEN ~ n): Redis trims whole macro nodes, so the stream
// may hold somewhat more. Trimming drops the oldest entries whether or not
// a consumer group read them.
//
// # Publishing
//
// Publish sends a batch as one pipeline (one round trip) and reports each
// XADD's own result (a key's runs go as scripts in the same pipeline: see
// Key order). Redis acknowledges an entry once it is in memory;
// whether it survives a Redis crash depends on the server's persistence
// (appendonly yes, appendfsync) and replication (see WAIT), which the
// publisher does not change. The entries of one pipeline are appended in
// order, but one that fails does not stop the next (except within a key's
// run). Redis 7 keeps no
// record of entry IDs chosen by the application, so a re-sent message is
// appended again: consumers deduplicate by the "id" field (the inbox).
//
// The client the publisher makes does not retry commands itself
// (MaxRetries -1, unless the URL sets max_retries to a positive number): a
// retried XADD whose first attempt reached Redis would append the entry
// twice, and the relay retries anyway.
//
// Only an XADD that returned an entry ID counts as appended. When a
// connection cannot be set up — Redis refuses the AUTH, the SELECT of the
// URL's database, or is not there — go-redis sends no command of the
// pipeline, and every message fails with the setup's error. Every new
// connection ends its setup with a PING, so a URL without the password a
// server requires fails with NOAUTH before any XADD is sent. Publish's
// errors are classified:
//
//   - publishers.Misconfigured: Redis refuses the configuration — the
//     credentials (WRONGPASS, NOAUTH, ERR AUTH …), the user's permissions
//     (NOPERM: no XADD, or no write on the stream's key) or the database
//     (ERR DB index is out of range, ERR invalid DB index, SELECT on a
//     cluster). The relay charges no attempt, pauses as a whole and logs
//     the refusal; nothing changes until someone fixes the configuration.
//   - publishers.Permanent: the payload, or the headers' JSON, is larger
//     than PublisherConfig.MaxPayload (checked before sending; Redis
//     refuses bulk strings over its proto-max-bulk-len, 512 MiB by default,
//     by closing the connection, which fails the whole pipeline as an
//     outage).
//   - publishers.Unavailable: closed publisher, ended context, network
//     errors and timeouts, a closed client, and the server errors that say
//     Redis cannot take writes now: LOADING, BUSY, MASTERDOWN, TRYAGAIN,
//     CLUSTERDOWN, READONLY, OOM, NOREPLICAS.
//   - unmarked (retried, then dead-lettered): any other server error
//     (WRONGTYPE: the key is not a stream, …).
//
// # Key order
//
// The relay keeps a key's order on any broker by having one event of a
// key in flight at a time; a publisher that keeps the order by itself
// (publishers.OrderKeeper) gets a batch's events of a key in one call
// instead, which is what makes ordered drains over few keys fast. A
// pipeline alone does not keep it: Redis runs a pipeline's XADDs in
// order, but one that fails (WRONGTYPE, OOM, NOPERM on one stream) does
// not stop the next, and another client's commands run between them. So,
// once KeepsKeyOrder has said yes, Publish sends the messages of each key
// that has more than one in the call as one run: a Lua script (EVAL, in
// the same pipeline, one round trip for the call) that XADDs them in order
// and stops at the first that fails. The key's earlier messages are
// appended, the failed one gets Redis's error, its later ones are not sent
// (publishers.NotSent: the relay leaves them pending behind it, uncharged).
// A script runs as one step of the server, so no other command comes in
// between, and a connection lost meanwhile leaves a prefix of the run
// appended, never a gap. A message the publisher refuses itself (too large)
// stops its key's run the same way.
//
// KeepsKeyOrder says yes when the client talks to one server and the user
// may run scripts: its first call runs the script on no key to find out.
// A cluster or ring client gets no key runs (a run's streams could be on
// different servers); a user without EVAL (ACL -@scripting) neither, said
// once at level Info, and the relay asks again every minute. Scripts run
// with the user's ACL: a stream the user may not write fails its message
// as Misconfigured, as it does outside a run. NoKeyRuns (key_runs=false)
// turns key runs off. A 200,000-event ordered drain from PostgreSQL over
// one key went from 0.17–0.18 to 0.74–0.77 × the unordered rate with key
// runs, over ten keys from 0.35–0.38 to 0.64–0.82 (docs/benchmarks.md,
// "Redis").
//
// # Check
//
// Publisher implements publishers.Checker. Check opens a connection of its
// own from PublisherConfig.URL — the AUTH (or HELLO) and SELECT of a new
// connection, then a PING — and then proves the user may run XADD without
// appending anything: MULTI, an XADD of a probe entry to the stream of the
// topic "outbox-check", DISCARD (Redis checks a queued command's
// permissions when it queues it). A refusal is Misconfigured, an
// unreachable server Unavailable. Key permissions depend on the topics,
// which Check does not know: a NOPERM for the probe's key passes, and the
// messages of a stream the user may not write fail at Publish, as
// Misconfigured. A user without MULTI skips the probe. With
// PublisherConfig.Client, Check only sends a PING through that client.
//
// # URLs
//
// ConfigFromURL, and backend.OpenBroker, take
// redis://[user:password@]host:port/db?params (rediss:// for TLS). The
// publisher's own query parameters are
//
//   - stream_prefix: PublisherConfig.StreamPrefix (default "");
//   - maxlen: PublisherConfig.MaxLen (default 0: no trimming);
//   - max_payload: PublisherConfig.MaxPayload in bytes (default
//     DefaultMaxPayload);
//   - key_runs: true (the default) or false (PublisherConfig.NoKeyRuns;
//     see Key order).
//
// Every other parameter is one of go-redis's connection options and is
// passed to it: dial_timeout, read_timeout, write_timeout, pool_size,
// max_retries, client_name, protocol, … (see redis.ParseURL). That keeps
// every option go-redis has, under go-redis's own names and meaning, one
// URL for both. A parameter neither knows is an error that names it.
// Passwords never appear in errors or logs.
//
// # Consuming
//
// A Subscriber reads SubscriberConfig.Streams as a member of the consumer
// group SubscriberConfig.Group. New entries are read with XREADGROUP …
// BLOCK, as many at a time as there are free handler slots
// (SubscriberConfig.Concurrency). Each entry runs through Inbox.Handle:
// the handler's effect and the entry's inbox record commit in one
// transaction, and only then is the entry acknowledged (XACK). A duplicate
// — an entry whose event ID the inbox holds already — is acknowledged
// without running the handler. A crash between commit and XACK leaves the
// entry pending; it is claimed again and dropped by the inbox as a
// duplicate.
//
// A failed handler leaves its entry pending: Redis has no negative
// acknowledgement. The subscriber sets the entry's idle time (XCLAIM …
// IDLE … JUSTID, which does not count a delivery, in a script that first
// checks with XPENDING that this consumer still owns the entry) so that it
// reaches SubscriberConfig.ClaimIdle after the backoff
// (SubscriberConfig.Backoff, doubling with each delivery), and every
// instance of the group claims entries idle for ClaimIdle with XAUTOCLAIM,
// every SubscriberConfig.PollInterval, and again as soon as a handler slot
// is free while a claim fills every free slot (a backlog of due entries
// drains at the handlers' pace). The delivery count is the entry's
// XPENDING counter. While a handler runs its entry is kept alive (its idle
// time reset) every ClaimIdle/3, so a slow handler is not claimed by
// another instance; an entry whose consumer crashed is claimed ClaimIdle
// after its last keep-alive. Hence Backoff.Max may not exceed ClaimIdle.
//
// After SubscriberConfig.MaxDeliveries deliveries, or at once for an error
// marked inbox.Permanent or an entry without a usable id field, the entry
// is added to SubscriberConfig.DeadLetterStream — its fields plus
// FieldError and the FieldDead* fields — and then acknowledged. An entry
// delivered more than MaxDeliveries times (its earlier deliveries ended in
// a crash) is dead-lettered without running the handler again, unless the
// inbox shows it was handled. The XADD and the XACK are two commands: when
// the XACK is lost the entry may be dead-lettered twice. The Hooks'
// subscribers.Settlement names the stream as its Source.
//
// # Subscriber errors
//
// Start creates the consumer group on each stream (XGROUP CREATE …
// MKSTREAM, BUSYGROUP ignored); it is the first command the subscriber
// sends, so a client Redis refuses fails Start at once. When the refusal
// is of the configuration — wrong credentials (WRONGPASS, NOAUTH, ERR
// AUTH), no permission (NOPERM), an unknown database (ERR DB index is out
// of range) — the error wraps ErrRefused: retrying does not help until
// someone fixes the configuration. Other errors (Redis unreachable) are
// returned as they are; retrying Start is the caller's choice. Once
// running, the subscriber retries failed reads by itself: an outage is
// logged as a warning, a refusal (credentials changed under it) as an
// error, every second, until it is fixed. The client is the caller's: how
// it connects (URL, password, database, TLS) is set there.
//
// # Stop
//
// Stop stops reading and claiming, lets in-flight handlers finish and
// acknowledges their entries. Entries read but not yet started, and those
// whose handler a hard Stop cut short, are left pending with their idle
// time at ClaimIdle: another instance claims them at once. Several
// instances may share one group; the inbox catches the deliveries that
// overlap (a handler that outlived a keep-alive that came too late).
package redis
