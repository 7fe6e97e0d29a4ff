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
// otherwise (KeyAndType does; so does subscribers/nats), and gets the key
// byte for byte as it was enqueued.
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
// second copy. Duplicates counts those acknowledgements.
//
// # Errors
//
// New fails with an error classified publishers.Misconfigured when the
// server refuses the credentials (authorization violation: a wrong token,
// user or password), and with one classified publishers.Unavailable when no
// server can be reached. Check (publishers.Checker) asks JetStream for the
// account's information: Misconfigured when the server refuses the
// credentials, or JetStream is not enabled for the account (or on the
// server); Unavailable when the server cannot be reached or does not
// answer.
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
//     to publish on the subject (noticed at once, on a connection New
//     made), or JetStream is not enabled for the account.
//   - publishers.Unavailable: the connection is down, reconnecting or
//     closed; JetStream is not answering; no acknowledgement within
//     Config.AckTimeout or before the context ended (the message may have
//     been stored: re-sending it is deduplicated).
//   - unmarked: JetStream refused this message. No stream captures its
//     subject (ErrNoStream: the error says "no JetStream stream captures
//     subject X"), or the stream is full, say. Retry it.
//
// While disconnected, publishes fail at once rather than queue; the
// connection reconnects forever in the background and the same Publisher
// publishes again once the server is back. Errors and logs never show a
// password or token of the URL.
//
// # Streams
//
// EnsureStream creates the stream that captures the publisher's subjects,
// or adds them to an existing one. It refuses, before asking the server, a
// subject whose first token is a wildcard — ">" alone captures JetStream's
// API ($JS.API.>), advisories and _INBOX replies on nats-server 2.9 and is
// refused by 2.10 and later — or one in a system namespace ($JS, $SYS, …,
// _INBOX): give the stream a prefix of its own, such as "outbox.>"
// (ErrUnsafeSubjects). A subject another stream captures already fails
// with an error that names that stream (ErrSubjectsOverlap). Both are
// classified publishers.Misconfigured.
package nats
