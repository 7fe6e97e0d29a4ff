// Package nats is the outbox's NATS JetStream backend: a Publisher that the
// relay drains the outbox into, and a Subscriber that feeds an inbox.Inbox
// from a durable pull consumer, side by side.
//
//	// The relay's side: topic T goes on subject shop.T, captured by the
//	// stream SHOP.
//	pub, _ := nats.NewPublisher(&nats.PublisherConfig{
//		URL: "nats://localhost:4222", SubjectPrefix: "shop", Stream: "SHOP",
//	})
//	_ = pub.SetupStream(ctx)
//	r, _ := relay.New(store, pub, nil)
//
//	// The consumer's side: the durable "billing" reads shop.orders.>.
//	js, _ := jetstream.New(pub.Conn()) // or a connection of its own
//	sub, _ := nats.NewSubscriber(js, in, handler, &nats.SubscriberConfig{
//		Stream: "SHOP", Durable: "billing", SubjectPrefix: "shop",
//		FilterSubjects:    []string{"shop.orders.>"},
//		DeadLetterSubject: "DEAD.billing", // captured by a stream of its own
//	})
//	_ = sub.Start(ctx)
//	defer sub.Stop(ctx)
//
// Importing the package registers the scheme nats:// with package backend
// (the outbox CLI opens its --broker-url so): ConfigFromURL reads every
// publisher setting from the URL's query parameters (subject_prefix,
// stream, name, max_pending, ack_timeout, connect_timeout, reconnect_wait,
// atomic_key_runs, fast_key_runs, token), and opening the URL creates the
// stream it names.
//
// The embedded server the CLI runs without a broker is package natsembed.
//
// # Subjects
//
// A message goes to the subject its topic maps to:
// PublisherConfig.SubjectPrefix + "." + topic (outbox.T by default), or the
// topic itself (NoSubjectPrefix), or whatever PublisherConfig.Subject
// returns. A stream must capture that subject (PublisherConfig.Stream with
// SetupStream, or EnsureStream, creates one); JetStream acknowledges a
// message only once the stream stored it. The subscriber strips
// SubscriberConfig.SubjectPrefix from the subject to give the topic back.
//
// # Headers
//
// Every entry of Message.Headers becomes a NATS header, and the publisher
// adds:
//
//	Nats-Msg-Id         the message ID (JetStream's dedup key)
//	Outbox-Key          Message.Key, when not empty and a header carries it unchanged
//	Outbox-Key-Base64   Message.Key in base64, when a header would alter it
//	Outbox-Type         Message.Type, likewise
//	Outbox-Type-Base64  Message.Type in base64, when a header would alter it
//	Outbox-Created-At   Message.CreatedAt, RFC 3339 with nanoseconds
//
// NATS headers do not carry every string: nats.go trims a value's leading
// and trailing spaces, TABs, CRs and LFs and turns the CRs and LFs inside
// it into spaces. So a Key (or Type) that begins or ends with a space or
// TAB, or holds a CR or LF (PlainHeaderValue says which), goes in
// Outbox-Key-Base64 instead, as standard base64 with padding (RFC 4648 §4)
// of its UTF-8 bytes; any other goes in Outbox-Key as it is (control
// characters and non-ASCII included). At most one of the two is set. A
// consumer reads the -Base64 header when there is one and the plain one
// otherwise (KeyAndType does; so does Decode), and gets the key byte for
// byte as it was enqueued.
//
// The publisher's headers win over message headers of the same name (in
// any case), which it drops. Message headers must have names of RFC 9110
// token characters (letters, digits, !#$%&'*+-.^_`|~ — what nats.go
// accepts) and values a header carries unchanged; others fail the message
// as permanent. Message headers named Nats-… are JetStream control headers
// and act as such (the outbox's Enqueue refuses them).
//
// # Duplicates
//
// JetStream drops a message whose Nats-Msg-Id the stream stored within its
// duplicate window (two minutes by default) and acknowledges it as a
// duplicate: a relay re-sending after a crash between ack and mark causes no
// second copy. Duplicates counts those acknowledgements; with FastKeyRuns
// it misses the duplicates inside a batch, which the server drops without
// saying so (the batch's acknowledgement counts them as stored).
//
// # Publisher errors
//
// NewPublisher fails with an error classified publishers.Misconfigured
// when the server refuses the credentials (authorization violation: a
// wrong token, user or password), and with one classified
// publishers.Unavailable when no server can be reached. Check
// (publishers.Checker) asks JetStream for the account's information:
// Misconfigured when the server refuses the credentials, or JetStream is
// not enabled for the account (or on the server); Unavailable when the
// server cannot be reached or does not answer.
//
// Publish returns one error per message, classified for the relay:
//
//   - publishers.Permanent: larger than the server's max_payload (or the
//     stream's max message size), a topic that maps to an invalid subject
//     (empty token, whitespace, wildcard), a header NATS cannot carry.
//     Checked before sending where possible; never stored.
//   - publishers.Misconfigured: the server refused the credentials (a
//     connection the server closed for good after refusing them on
//     reconnect: a token rotated under the relay), refused the permission
//     to publish on the subject (noticed at once, on a connection
//     NewPublisher made), or JetStream is not enabled for the account.
//   - publishers.Unavailable: the connection is down, reconnecting or
//     closed; JetStream is not answering; no acknowledgement within
//     PublisherConfig.AckTimeout or before the context ended (the message
//     may have been stored: re-sending it is deduplicated).
//   - unmarked: JetStream refused this message. No stream captures its
//     subject (ErrNoStream: the error says "no JetStream stream captures
//     subject X"), or the stream is full, say. Retry it.
//
// While disconnected, publishes fail at once rather than queue; the
// connection reconnects forever in the background and the same Publisher
// publishes again once the server is back. Errors and logs never show a
// password or token of the URL.
//
// # Key order
//
// By default the Publisher promises no order between the messages of one
// Publish call: they are all in flight at once, and one can fail (a
// leader change, a stream limit with DiscardNew, a lost connection) while
// a later one of the same key is stored. So it does not implement
// publishers.OrderKeeper's promise, and the relay keeps one event of a key
// in flight at a time.
//
// By default (PublisherConfig.FastKeyRuns, on nats-server 2.14.0 or later,
// every stream of the publisher's subjects with AllowBatchPublish;
// SetupStream sets it on Stream) or with AtomicKeyRuns (below) it does:
// KeepsKeyOrder checks and reports true, and the relay then sends a key's
// events in one call. Where JetStream cannot, it logs why and reports
// false, and the publisher publishes as without the option: by default
// at Info, once for each reason, asking again at the next check (a relay
// checks every minute); with FastKeyRuns or AtomicKeyRuns set, at Warn,
// once for good. NoKeyRuns turns the default off.
//
// FastKeyRuns sends each stream's share of a call — its messages in call
// order, every key's and the unkeyed ones — as one JetStream fast-ingest
// batch (ADR-50) in the mode that fails on a gap: the batch lives in the
// messages' reply subjects (batch ID, sequence 1…n, a commit after the
// last), the server stores each message as it arrives, acknowledges every
// few hundred (a flow acknowledgement) and answers the commit with how
// many it stored; nothing is staged. The first message it refuses (over a
// stream limit, say) or misses ends the batch: nothing after it is stored,
// and the count says exactly where it stopped. The refused message fails;
// its key's later messages fail too, unsent (an unmarked error); the other
// keys' messages the batch's end left unsent go again, in a new batch, in
// the same call, so another key's failure costs them nothing. Duplicates
// (a Nats-Msg-Id the stream stored within its duplicate window, as after a
// relay crash) count as stored. The publisher keeps at most two flows of a
// batch past the last flow acknowledgement in flight, as the server asks;
// a batch with no acknowledgement for AckTimeout, or whose connection
// drops, fails as unavailable from the first message the server did not
// acknowledge (its re-send is deduplicated, and nothing after a missing
// message is stored). A stream's share of a call with fewer than 32
// messages, no two of one key, has no order to keep and goes as plain
// publishes, which cost it less than a batch (a call of two messages takes
// about half the time and the CPU); the messages of a key that go to more
// than one stream go one at a time, each once the one before is stored;
// and so does a batch JetStream
// refuses as a batch (the stream no longer allows batch publish, too many
// batches in flight). At most 32 batches a Publisher are in flight at
// once, under the server's 1,000 a stream. nats-server 2.14.0 brought
// fast-ingest batches, with deduplication inside them; 2.14.3 fixed a
// batch left without its commit when the commit message itself fails,
// which the publisher never sends (its commit carries no message).
//
// One batch per stream rather than one per key: the server shares its
// flow among a stream's batches in flight (a batch that starts beside
// another gets a flow of one, doubled at each acknowledgement), so many
// short batches cost an acknowledgement per message or two, where one
// batch costs one per few hundred. Measured on a development machine
// (relay and in-process server, R1 file stream, 1,000-event calls), a
// batch per key cost 22–31 µs of CPU an event over 1,000 keys against
// 15–20 for a batch per stream, and no less over 10 keys. Where
// nats-server is 2.14 or later, FastKeyRuns, the default, is the one to
// keep: it stages nothing, where AtomicKeyRuns costs an R1 file stream a
// synced staging store per batch.
//
// With PublisherConfig.AtomicKeyRuns it does, where JetStream can
// (nats-server 2.12.1 or later, every stream of the publisher's subjects
// with AllowAtomicPublish; SetupStream sets it on Stream): KeepsKeyOrder
// checks once and reports true, and each key's run of messages within a
// call — its messages in call order — goes as one JetStream atomic batch
// (ADR-50): Nats-Batch-Id (a fresh UUID per attempt), Nats-Batch-Sequence
// 1…n, and Nats-Batch-Commit: 1 on the last, which alone has a reply
// subject and gets the batch's acknowledgement. The server stages the
// batch and stores all of it, in order, at the commit, or none of it: a
// gap (a message it refused, a connection lost mid-batch), a message over
// a stream limit, a leader change, or no commit within its batch timeout
// (10 s) abandons it. Many keys' batches are in flight at once (at most 32
// a Publisher, under the server's 50 a stream), beside the plain
// publishes of unkeyed messages and of keys with one message. A batch
// whose acknowledgement is lost to an outage fails all its messages as
// unavailable; a batch JetStream refused for any other reason stored
// nothing, and the Publisher then publishes that key's messages one at a
// time, each once the one before is stored, to say exactly which one
// fails: the later ones of the key fail too, unsent.
//
// Deduplication: JetStream refuses a whole batch that holds a Nats-Msg-Id
// it stored within the duplicate window (error 10201); the relay
// re-sending after a crash meets exactly that, and the one-at-a-time
// retry stores what is new and acknowledges the rest as duplicates. A
// re-send after the window is stored again, as without batches.
//
// A batch costs the server a fixed price besides its messages: on an R1
// stream with file storage the server stages each batch in a file store of
// its own, synced at the commit (3–8 ms a batch on a development machine,
// one batch after the other per stream), where a replicated or memory
// stream stages in memory. So a run shorter than
// PublisherConfig.AtomicMinRun (default 2, and 32 when a stream is R1 with
// file storage) goes one message at a time instead, each key's next
// message once the one before is stored, all keys at once — what the
// relay does for a publisher that does not keep key order. With a server
// on the same host round trips are cheap and batches of R1 file streams
// pay only for long runs (raise AtomicMinRun); across a network each
// round trip saved is worth more. Runs longer than 1,000 messages (the
// server's max_batch_size) go as a batch of 1,000 and then one at a time.
// A server configured with lower batch limits refuses the batches over
// them, and they go one at a time too: slower, in order.
//
// # Streams
//
// EnsureStream (and SetupStream, for PublisherConfig.Stream) creates the
// stream that captures the publisher's subjects, or adds them to an
// existing one. It refuses, before asking the server, a subject whose
// first token is a wildcard — ">" alone captures JetStream's API
// ($JS.API.>), advisories and _INBOX replies on nats-server 2.9 and is
// refused by 2.10 and later — or one in a system namespace ($JS, $SYS, …,
// _INBOX): give the stream a prefix of its own, such as "outbox.>"
// (ErrUnsafeSubjects). A subject another stream captures already fails
// with an error that names that stream (ErrSubjectsOverlap). Both are
// classified publishers.Misconfigured.
//
// # Subscriber messages
//
// Decode reads what the Publisher wrote: the ID from Nats-Msg-Id, Key and
// Type from Outbox-Key-Base64 and Outbox-Type-Base64 when they are set
// (base64 of a key or type a NATS header would alter: leading or trailing
// spaces or TABs, CR, LF), else from Outbox-Key and Outbox-Type, so that
// the handler gets them byte for byte as they were enqueued; CreatedAt
// from Outbox-Created-At; the other headers, but Nats-* and the
// publisher's own, as inbox.Message.Headers. A message whose ID or
// encoded headers cannot be read is dead-lettered at once.
//
// # Subscriber refusals
//
// The subscriber works on a connection the caller makes: a server that
// refuses its credentials fails nats.Connect. Start asks JetStream for the
// account's information first, and fails at once, saying so, when the
// server refuses JetStream to the account.
//
// # Delivery
//
// Each message runs through Inbox.Handle: the handler's effect and the
// message's inbox record commit in one transaction, and only then is the
// message acknowledged (and the ack confirmed by the server). A duplicate —
// a message whose ID the inbox holds already — is acknowledged without
// running the handler. A crash between commit and ack makes JetStream
// redeliver the message after AckWait; the redelivery is a duplicate, so the
// effect happens once.
//
// A failed handler is negatively acknowledged with a delay that doubles with
// each delivery (SubscriberConfig.Backoff, of subscribers.Options). After
// MaxDeliveries deliveries, or at once for an error marked inbox.Permanent
// or a message without a usable Nats-Msg-Id (or with an encoded key or type
// that is not base64), the message is published to
// SubscriberConfig.DeadLetterSubject with the error in the Outbox-Error
// header, and then acknowledged. The hooks (subscribers.Hooks) see each
// settlement as a subscribers.Settlement whose Source is the subject.
//
// The subscriber counts deliveries itself and leaves the server's MaxDeliver
// unlimited: a message the server stops delivering stays in the stream,
// unacknowledged and never dead-lettered. Here a message delivered more than
// MaxDeliveries times (its earlier deliveries ended in a crash or a stall)
// is dead-lettered without running the handler again — unless the inbox
// shows it was handled, in which case it is acknowledged — and a message
// whose dead-letter publish fails is redelivered until the publish
// succeeds. (The server refuses a consumer BackOff list with an unlimited
// MaxDeliver, so retries are spaced by NakWithDelay, and a crashed
// consumer's messages come back after AckWait.)
//
// # Stop
//
// Stop stops fetching, lets in-flight handlers finish and acknowledges
// their messages; messages fetched but not yet started are handed back
// (Nak) for another instance. Several instances may share one durable
// consumer: JetStream gives each message to one at a time, and the inbox
// catches the redeliveries that overlap.
//
// While the connection is down (when Stop is called, or while it waits),
// and once Stop's context has ended, Stop does not wait on the server: it
// stops the iterator instead of draining it, and acks stop waiting for
// their confirmation. The in-flight handlers still finish and commit.
// Nothing is lost: what is left unacknowledged JetStream redelivers after
// AckWait, and a message whose handler committed comes back as a
// duplicate.
package nats
