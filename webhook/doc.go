// Package webhook is the HTTP webhook backend: a Publisher that POSTs each
// outbox message to an HTTP endpoint, signed as the Standard Webhooks
// specification (https://www.standardwebhooks.com) describes, for the
// relay; and, in package webhook/verify, what a Go receiver needs to check
// those requests and feed an inbox.Inbox.
//
//	pub, err := webhook.New(&webhook.Config{
//		Endpoint: "https://hooks.example.com/outbox/{topic}",
//		Secrets:  []string{"whsec_…"},
//	})
//
// Importing the package registers the schemes webhook+https:// and
// webhook+http:// with package backend: backend.OpenBroker makes a
// Publisher from a URL (see URLs below).
//
// # Requests
//
// A message becomes one POST to the URL of its topic: Config.Endpoints[topic]
// when set, else Config.Endpoint, with "{topic}" in the path replaced by the
// topic, path-escaped ("/" becomes %2F; "." and ".." are escaped too, so a
// topic is always one path segment). A topic with no URL fails as
// misconfigured (ErrNoEndpoint). The body is Message.Payload, bytes as they
// are; the headers are:
//
//	Webhook-Id          the event ID (a UUID): the receiver's dedup key
//	Webhook-Timestamp   the attempt's time in Unix seconds (Config.Clock)
//	Webhook-Signature   "v1,<base64>" per secret, space-separated
//	Idempotency-Key     the event ID again
//	Outbox-Topic        Message.Topic, when a header carries it unchanged
//	Outbox-Topic-Base64 Message.Topic in base64, when one would not
//	Outbox-Key          Message.Key, likewise (with Outbox-Key-Base64)
//	Outbox-Type         Message.Type, likewise (with Outbox-Type-Base64)
//	Outbox-Created-At   Message.CreatedAt, RFC 3339 with nanoseconds
//	Content-Type        Config.ContentType (application/octet-stream), or
//	                    the message's own Content-Type header
//	User-Agent          outbox-webhook
//	Authorization       Basic, when the endpoint URL has a user-info
//
// and every entry of Message.Headers, under its canonical name (HTTP header
// names are case-insensitive; HTTP/2 sends them in lower case). A Topic,
// Key or Type goes in its plain header when it is printable ASCII without
// leading or trailing spaces, else in its -Base64 header as standard base64
// with padding of its UTF-8 bytes, so that CR, LF, control characters,
// spaces at the ends and non-ASCII arrive byte for byte (the NATS
// backend's rule, made stricter: some HTTP stacks read bytes above 0x7e as
// Latin-1). At most one of the two is set, none for an empty value;
// verify.Decoded reads them back. Message header values travel as they
// are, UTF-8 included. A message header that a request cannot carry as it
// is fails the message as permanent, unsent: a name HTTP gives a meaning
// to (Host, Content-Length, Transfer-Encoding, Connection, Authorization,
// Expect, Upgrade, …), one starting with Webhook- (the specification's) or
// Outbox-, two names that differ only in case, or a value with control
// characters or spaces at its ends (HTTP trims them).
//
// # Signatures
//
// With Config.Secrets (each "whsec_" + base64 of 24 to 512 random bytes),
// every request carries, per secret, "v1," + base64 of the HMAC-SHA256 of
// "{Webhook-Id}.{Webhook-Timestamp}.{body}", space-separated in
// Webhook-Signature: give the new and the old secret during a key
// rotation, and receivers accept either. The timestamp is the attempt's,
// so a retried event is signed anew; receivers refuse a timestamp far from
// their clock (5 minutes by default, verify.DefaultTolerance), which
// defeats replays. The signature covers the ID, the timestamp and the
// body, not the other headers, as the specification says: post to https://
// endpoints. Without secrets requests go unsigned (a warning is logged).
//
// # Responses and errors
//
// The publisher never retries by itself: the relay owns retries and
// backoff. A message is acknowledged by a 2xx. Otherwise its error holds
// a StatusError (errors.As) with the status, the Retry-After the receiver
// sent and the first 256 bytes of the body, and is classified:
//
//   - 3xx: permanent. Redirects are never followed (that would post to a
//     URL nobody configured, maybe past the SSRF guard); the error names
//     the Location: update the endpoint.
//   - 401 and 403: misconfigured. The receiver refuses the publisher's
//     credentials or signature: a wrong or rotated secret, a wrong
//     password. That is the same for every message until someone fixes
//     the configuration, so the relay pauses and charges no attempt
//     rather than dead-lettering every event of the outage; a receiver
//     that refuses one event for its content should answer 422 (or
//     another 4xx), which is permanent.
//   - 408, 425, 429 and 5xx: a plain error, retried with the relay's
//     backoff per message — but never sooner than the response's
//     Retry-After (publishers.RetryAfter, at most an hour), which is also
//     in the error's text and in StatusError.RetryAfter. The publisher
//     does not retry the message by itself, so it does not hammer a
//     receiver that asked it to slow down.
//   - any other 4xx (400, 404, 410 Gone, 413, 422): permanent; the relay
//     dead-letters the event, which stays replayable.
//
// Without a response: an address the SSRF guard refuses (ErrForbiddenAddress)
// or a server certificate that does not verify is misconfigured; a refused
// or reset connection, a DNS failure, a request slower than Config.Timeout
// (15 s by default) and the caller's context ending are unavailable (the
// relay backs off as a whole). A payload over Config.MaxPayload fails as
// permanent, unsent (ErrTooLarge); a receiver's 413 does as well.
//
// # SSRF guard
//
// By default the publisher connects to public unicast addresses only: it
// refuses loopback (127.0.0.0/8, ::1), private (RFC 1918, fc00::/7),
// link-local (169.254.0.0/16 — cloud metadata services — and fe80::/10),
// unspecified, multicast, carrier-grade NAT (100.64.0.0/10) and reserved
// ranges, IPv4-mapped and NAT64 forms included. Config.AllowPrivate
// (allow_private=true) lifts the guard; Config.AllowCIDRs (allow_cidr)
// allows ranges of its own. The check runs in the net.Dialer's Control
// function, on the address actually dialed after name resolution, so a
// name that resolves to a refused address — DNS rebinding included —
// does not pass. No proxy is used (HTTP_PROXY is ignored): the address
// dialed is the receiver's.
//
// # Concurrency and order
//
// One http.Client and Transport serve every request, and reuse
// connections (HTTP/1.1 keep-alive, HTTP/2 over TLS when the server
// offers it). At most Config.MaxInFlight requests (16 by default) are in
// flight to one host at a time. A Publish call sends its messages
// concurrently, except those of one key: they go one after the other, in
// batch order, one request in flight per key; once one fails other than
// permanently, the later ones of that key in the call are not sent and
// fail as well (of the same class, never permanent). The relay itself
// sends one event of a key at a time (the Publisher does not implement
// publishers.OrderKeeper), so a key's events reach its endpoint in commit
// order; a receiver that must apply them in order handles them one at a
// time per key.
//
// # Duplicates
//
// A receiver sees an event again when its 2xx was lost, or when a relay
// died before marking the event published; the retry carries the same
// Webhook-Id (and Idempotency-Key). Receivers deduplicate by it: an
// inbox.Inbox does (see verify.Verifier.Message and the package example).
//
// # Check
//
// Check validates the configuration and probes each endpoint with a
// signed HEAD request — HTTP's safe method, which must have no side effect
// on the receiver — that carries no event (Webhook-Id "outbox-check", an
// empty body); an endpoint with {topic} in Config.Endpoint is probed for
// the topic "outbox-check", where a 404 passes. A 401 or 403 (a refused
// secret or password), a refused address, a bad certificate, a redirect,
// or another 4xx is misconfigured; a 405 or 501 passes (the receiver takes
// POST only: that proves the path and the connection, not the
// credentials); a 5xx or a failed connection is unavailable. See Check.
//
// # URLs
//
// backend.OpenBroker and ConfigFromURL take
//
//	webhook+https://[user:password@]host[:port]/path[/{topic}]?secret=whsec_…&…
//	webhook+http://…
//
// The URL less "webhook+" and the query is Config.Endpoint; its user-info
// is sent as Basic authentication and never printed. The parameters:
//
//	secret         signing secret, whsec_ + base64; repeat it, or separate
//	               several with commas, to sign with each (an unescaped "+"
//	               of base64 is read as "+")
//	timeout        bound of each request (15s)
//	max_in_flight  requests and connections in flight per host (16)
//	max_payload    largest body in bytes, 0 for no limit (0)
//	content_type   Content-Type of the requests (application/octet-stream)
//	allow_private  lift the SSRF guard (false)
//	allow_cidr     ranges allowed despite the guard, comma-separated or
//	               repeated (none)
//
// Any other parameter is an error naming it: the URL form cannot carry a
// query of the endpoint's own, nor per-topic URLs (Config.Endpoint and
// Config.Endpoints can). Errors never show a secret or a password.
package webhook
