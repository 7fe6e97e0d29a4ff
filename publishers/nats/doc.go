// Package nats publishes outbox messages to NATS JetStream.
//
// # Subjects
//
// A message goes to the subject its topic maps to: the topic itself, or
// Config.SubjectPrefix + "." + topic, or whatever Config.Subject returns. A
// stream must capture that subject (EnsureStream creates one); JetStream
// acknowledges a message only once the stream stored it.
//
// # Headers
//
// Every entry of Message.Headers becomes a NATS header, and the publisher
// adds:
//
//	Nats-Msg-Id        the message ID (JetStream's dedup key)
//	Outbox-Key         Message.Key, when not empty
//	Outbox-Type        Message.Type, when not empty
//	Outbox-Created-At  Message.CreatedAt, RFC 3339 with nanoseconds
//
// These win over message headers of the same name. Message headers named
// Nats-… are JetStream control headers and act as such.
//
// # Duplicates
//
// JetStream drops a message whose Nats-Msg-Id the stream stored within its
// duplicate window (two minutes by default) and acknowledges it as a
// duplicate: a relay re-sending after a crash between ack and mark causes no
// second copy. Duplicates counts those acknowledgements.
//
// # Errors
//
// Publish returns one error per message, classified for the relay:
//
//   - publishers.Permanent: larger than the server's max_payload (or the
//     stream's max message size), a topic that maps to an invalid subject
//     (empty token, whitespace, wildcard), a header NATS cannot carry.
//     Checked before sending where possible; never stored.
//   - publishers.Unavailable: the connection is down, reconnecting or
//     closed; JetStream is not enabled or not answering; no acknowledgement
//     within Config.AckTimeout or before the context ended (the message may
//     have been stored: re-sending it is deduplicated).
//   - unmarked: JetStream refused this message, for instance because no
//     stream captures its subject or the stream is full. Retry it.
//
// While disconnected, publishes fail at once rather than queue; the
// connection reconnects forever in the background and the same Publisher
// publishes again once the server is back.
package nats
