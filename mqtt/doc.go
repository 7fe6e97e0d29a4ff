// Package mqtt is the MQTT 5 backend, built on Eclipse Paho's
// github.com/eclipse/paho.golang (its plain paho client): a Publisher that
// publishes outbox messages at QoS 1, for the relay.
//
//	// The relay's side: topic T goes to the MQTT topic "events/"+T.
//	pub, err := mqtt.NewPublisher(&mqtt.PublisherConfig{
//		URL: "mqtt://relay:secret@127.0.0.1:1883", TopicPrefix: "events/",
//	})
//
// Importing the package registers the schemes mqtt:// and mqtts:// with
// package backend: backend.OpenBroker makes a Publisher from a URL (see
// URLs below). There is no Subscriber yet: consumers subscribe with any
// MQTT 5 client at QoS 1 and turn a message into an inbox.Message with
// Decode.
//
// # Why paho.golang
//
// MQTT 5, which github.com/eclipse/paho.golang speaks and the older
// github.com/eclipse/paho.mqtt.golang (3.1.1) does not, is what makes the
// broker usable for an outbox: user properties carry the event ID, key,
// type and headers beside a payload left as it is (3.1.1 has no
// properties: they would have to go into the payload), the PUBACK's
// reason code tells a refusal (0x87 Not authorized, 0x95 Packet too large)
// from a success (3.1.1's PUBACK says nothing, and a broker drops a
// refused message silently or closes the connection), and the CONNACK
// gives the broker's Maximum Packet Size and Receive Maximum. The plain
// paho client rather than autopaho: the publisher decides when to
// connect, so a refused CONNACK reaches Publish and Check as an error
// with its reason code (autopaho retries it in the background), and a
// lost connection fails its in-flight messages at once instead of
// re-sending them on a later connection behind the relay's back.
//
// # Mapping
//
// A message becomes one PUBLISH at QoS 1 to the MQTT topic
// PublisherConfig.Topic(topic) when set, else PublisherConfig.TopicPrefix
// + topic (default prefix "": the MQTT topic is the outbox topic; no
// separator is added, so say "events/" for a level of its own). The
// payload is Message.Payload as it is; RETAIN is off unless
// PublisherConfig.Retain (URL retain=true) is set. (With RETAIN, MQTT
// takes an empty payload as "remove this topic's retained message": an
// event without a payload is still delivered to the current subscribers,
// but clears what a later one would get.) The rest travels as
// MQTT 5 user properties, in this order:
//
//   - PropID ("outbox-id"): the event ID, the consumer's dedup key;
//   - PropKey ("outbox-key"): Message.Key, absent when empty;
//   - PropType ("outbox-type"): Message.Type, absent when empty;
//   - PropCreatedAt ("outbox-created-at"): Message.CreatedAt in RFC 3339
//     with nanoseconds, absent when zero;
//   - each header H of Message.Headers as the property H, in name order.
//
// MQTT 5 (section 1.5.4) lets a receiver treat a string holding a control
// character (U+0001–U+001F, U+007F–U+009F) or a Unicode non-character as
// a malformed packet, and Mosquitto does: it closes the connection. An
// outbox key, type or header value may hold such characters (a TAB, a CR,
// an escape), so such a value travels in standard base64 under the name
// PrefixBase64 + name instead ("outbox-b64-outbox-key",
// "outbox-b64-my-header"); every other value travels as text. Decode and
// Properties undo it; a consumer of its own strips the prefix and decodes
// the value.
//
// A topic name MQTT cannot publish to — empty, over 65,535 bytes, with a
// wildcard ('+' or '#'), or with one of those characters — fails its
// message as permanent (ErrInvalidTopic), unsent. Topics starting with
// '$' are the broker's (Mosquitto's $SYS); MQTT's wildcard subscriptions
// do not match them.
//
// # Publishing
//
// Publish sends a batch pipelined on one connection: every PUBLISH goes
// out in the batch's order without waiting (paho holds back only beyond
// the broker's Receive Maximum — Mosquitto's max_inflight_messages, 20 by
// default — until a PUBACK frees a slot), then the PUBACKs are awaited
// together, one result per message. A message is acknowledged when its
// PUBACK carries a success reason code: 0x00, or 0x10 No matching
// subscribers (MQTT hands a message to the subscriptions that exist when
// it arrives; one that arrives while nobody is subscribed is accepted and
// dropped, unless retained, or queued for the persistent sessions that
// match). Concurrent calls share the connection.
//
// The connection is opened by the first Publish (or Check), with Clean
// Start and a Session Expiry of 0, and opened again by the next call
// once it is lost. Nothing outlives a connection: when it drops, the
// messages waiting for their PUBACK fail as unavailable and are not
// re-sent on the next connection (the relay re-sends them, so a message
// the broker stored before its PUBACK was lost arrives twice: consumers
// deduplicate by "outbox-id").
//
// Publish's errors are classified:
//
//   - publishers.Misconfigured: the broker refuses the configuration — the
//     CONNACK's 0x86 Bad User Name or Password, 0x87 Not authorized
//     (Mosquitto's answer to a wrong password, a missing one and an
//     unknown user alike), 0x85 Client Identifier not valid, 0x8A Banned,
//     0x84 Unsupported Protocol Version (a broker without MQTT 5), 0x8C,
//     0x9D Server moved; a PUBACK's 0x87 Not authorized (the ACL forbids
//     the topic); a broker whose Maximum QoS is 0, or without retained
//     messages when Retain is set; a TLS certificate the configuration
//     does not trust. The relay charges no attempt, pauses as a whole and
//     logs the refusal.
//   - publishers.Permanent: a PUBLISH packet larger than the broker's
//     Maximum Packet Size (from the CONNACK) or PublisherConfig.MaxPacketSize
//     (ErrTooLarge, checked before sending: a broker closes the connection
//     on an oversize packet, which would fail the whole batch at every
//     retry); a topic MQTT cannot take (ErrInvalidTopic); a PUBACK's 0x90
//     Topic Name invalid, 0x95 Packet too large (Mosquitto's
//     message_size_limit) or 0x99 Payload format invalid. The relay
//     dead-letters the message, with the error naming why.
//     A DISCONNECT from the broker with 0x86, 0x87 or 0x8A fails the
//     messages in flight as Misconfigured too.
//   - publishers.Unavailable: the broker cannot be reached, or the
//     connection was lost before the PUBACK (0x8E Session taken over:
//     another connection uses the client ID); the CONNACK's 0x88 Server
//     unavailable, 0x89 Server busy, 0x9F Connection rate exceeded, …; a
//     PUBACK's 0x97 Quota exceeded or 0x96 Message rate too high; the
//     context ended (bounded by PublisherConfig.AckTimeout when it has no
//     deadline); Close.
//   - unclassified (retried with backoff): any other PUBACK reason code
//     (0x80 Unspecified error, 0x83 Implementation specific error).
//
// Check connects (when not connected already), which proves the
// credentials and the client ID. MQTT cannot tell whether a user may
// publish to a topic without publishing there, so a topic the ACL
// forbids passes Check and fails its messages at Publish, as
// Misconfigured.
//
// # Ordering
//
// MQTT 5 (section 4.6) orders delivery per topic: a server delivers the
// QoS 1 messages of one topic from one client's session to each
// subscriber in the order the client sent them. The Publisher sends a
// batch in order on one connection, so the messages of one topic in one
// Publish call are delivered in the call's order. Ordering is lost across
// connections (after a reconnect) and for a subscriber at QoS 0 or with
// messages that expired; a shared subscription spreads a topic over
// several consumers.
//
// The Publisher does not implement publishers.OrderKeeper: a failure of
// one message does not stop a later one of its key in the same call — a
// PUBACK refusal (0x95, 0x87) comes after the later PUBLISH has already
// been sent and stored, and a message failed before sending (too large)
// does not hold back the next. So the relay keeps its default, one event
// of a key in flight at a time, which keeps each key's order on any
// broker: with it, every event of a key goes out after the previous one
// was acknowledged.
//
// # Deduplication
//
// MQTT has no dedup key: QoS 1 is at least once, and a re-sent message is
// delivered again (the DUP flag marks only paho's own re-sends on one
// session, which this publisher does not do). The event ID travels as
// the "outbox-id" user property so that consumers deduplicate (the
// inbox).
//
// # URLs
//
// The registered form is mqtt://user:pass@host:1883?param=value…, or
// mqtts://…:8883 for TLS (the system's roots, or ca_file's). The user
// information is the MQTT user name and password (never printed: errors
// show the URL redacted). ConfigFromURL reads these parameters and
// refuses any other by name:
//
//   - topic_prefix (default ""): PublisherConfig.TopicPrefix;
//   - retain (default false): PublisherConfig.Retain;
//   - client_id (default "outbox-pub-" and 16 random hex digits):
//     PublisherConfig.ClientID. Two connections with one ID take each
//     other's place: give each relay instance its own;
//   - keepalive (default 30s), connect_timeout (default 10s), ack_timeout
//     (default 30s): PublisherConfig.KeepAlive, ConnectTimeout, AckTimeout;
//   - max_packet_size (default 0: the broker's): PublisherConfig.MaxPacketSize;
//   - ca_file (mqtts only): a PEM file of the CA certificates to trust.
//
// # Limits
//
// A PUBLISH packet is at most the broker's Maximum Packet Size (Mosquitto:
// max_packet_size, none by default) and MQTT's own 256 MiB; the payload
// at most Mosquitto's message_size_limit where set. Topic names are at
// most 65,535 bytes; every user property is at most 65,535 bytes of
// UTF-8 (outbox keys and types are at most 255 bytes; a header value
// longer than 65,535 bytes, or 49,149 bytes when it goes in base64,
// cannot travel: its message fails as permanent).
//
// Compared with the brokers that keep a log (JetStream, Kafka, Redis
// Streams): MQTT stores nothing for a topic nobody subscribes to (only a
// retained topic's last message, or the queues of persistent sessions),
// so a consumer must hold a persistent session (Clean Start 0 and a
// Session Expiry) or a shared subscription before events are published;
// there is no replay, no dedup window, and ordering holds per topic and
// connection rather than per key.
package mqtt
