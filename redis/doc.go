// Package redis publishes outbox messages to Redis Streams with
// github.com/redis/go-redis/v9.
//
// # Mapping
//
// A message becomes one stream entry, appended with XADD (ID "*", so Redis
// numbers entries in append order) to the stream Config.Stream(topic)
// when set, else Config.StreamPrefix + topic (default prefix "": the
// stream key is the topic). Every entry has the same fields, in this order:
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
// With Config.MaxLen > 0 every XADD trims the stream to about that many
// entries (MAXLEN ~ n): Redis trims whole macro nodes, so the stream may
// hold somewhat more. Trimming drops the oldest entries whether or not a
// consumer group read them.
//
// # Delivery
//
// Publish sends a batch as one pipeline (one round trip) and reports each
// XADD's own result. Redis acknowledges an entry once it is in memory;
// whether it survives a Redis crash depends on the server's persistence
// (appendonly yes, appendfsync) and replication (see WAIT), which the
// publisher does not change. The entries of one pipeline are appended in
// order, but one that fails does not stop the next: Capabilities reports
// OrderedRetries false. Redis 7 keeps no record of entry IDs chosen by the
// application, so Capabilities reports Dedup false; consumers deduplicate
// by the "id" field (the inbox).
//
// The client the publisher makes does not retry commands itself
// (MaxRetries -1, unless the URL sets max_retries to a positive number): a retried XADD whose
// first attempt reached Redis would append the entry twice, and the relay
// retries anyway.
//
// # Errors
//
// Only an XADD that returned an entry ID counts as appended. When a
// connection cannot be set up — Redis refuses the AUTH, the SELECT of the
// URL's database, or is not there — go-redis sends no command of the
// pipeline, and every message fails with the setup's error. Every new
// connection ends its setup with a PING, so a URL without the password a
// server requires fails with NOAUTH before any XADD is sent.
//
//   - publishers.Misconfigured: Redis refuses the configuration — the
//     credentials (WRONGPASS, NOAUTH, ERR AUTH …), the user's permissions
//     (NOPERM: no XADD, or no write on the stream's key) or the database
//     (ERR DB index is out of range, ERR invalid DB index, SELECT on a
//     cluster). The relay charges no attempt, pauses as a whole and logs
//     the refusal; nothing changes until someone fixes the configuration.
//   - publishers.Permanent: the payload, or the headers' JSON, is larger
//     than Config.MaxPayload (checked before sending; Redis refuses bulk
//     strings over its proto-max-bulk-len, 512 MiB by default, by closing
//     the connection, which fails the whole pipeline as an outage).
//   - publishers.Unavailable: closed publisher, ended context, network
//     errors and timeouts, a closed client, and the server errors that say
//     Redis cannot take writes now: LOADING, BUSY, MASTERDOWN, TRYAGAIN,
//     CLUSTERDOWN, READONLY, OOM, NOREPLICAS.
//   - unmarked (retried, then dead-lettered): any other server error
//     (WRONGTYPE: the key is not a stream, …).
//
// # Check
//
// Publisher implements publishers.Checker. Check opens a connection of its
// own from Config.URL — the AUTH (or HELLO) and SELECT of a new connection,
// then a PING — and then proves the user may run XADD without appending
// anything: MULTI, an XADD of a probe entry to the stream of the topic
// "outbox-check", DISCARD (Redis checks a queued command's permissions when
// it queues it). A refusal is Misconfigured, an unreachable server
// Unavailable. Key permissions depend on the topics, which Check does not
// know: a NOPERM for the probe's key passes, and the messages of a stream
// the user may not write fail at Publish, as Misconfigured. A user without
// MULTI skips the probe. With Config.Client, Check only sends a PING
// through that client.
//
// # URLs
//
// NewFromURL takes redis://[user:password@]host:port/db?params (or
// rediss:// for TLS) with the query parameters:
//
//   - stream_prefix: Config.StreamPrefix;
//   - maxlen: Config.MaxLen;
//   - max_payload: Config.MaxPayload in bytes.
//
// The other query parameters go-redis knows (dial_timeout, read_timeout,
// pool_size, max_retries, …, see redis.ParseURL) are passed to it.
// Passwords never appear in errors or logs.
package redis
