package rabbitmq

import (
	"errors"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox/publishers"
)

// Errors of the publisher's messages, wrapped with their details, and of
// the subscriber's Start. Each says how the publisher classifies it.
var (
	// ErrConfigRefused: the broker refuses the configuration — wrong
	// credentials (403 ACCESS_REFUSED), an unknown vhost or one the user
	// may not use (530 NOT_ALLOWED), a missing exchange or queue (404
	// NOT_FOUND), no permission on it (403) — see ConfigRefusal. The
	// publisher's messages fail with it as misconfigured; the subscriber's
	// Start (and each reconnection) fails with it. Retrying does not help
	// until someone fixes the configuration.
	ErrConfigRefused = errors.New("the broker refused the configuration")

	// ErrClosed: published after Close, or waiting for its confirm when
	// Close was called (unavailable).
	ErrClosed = errors.New("rabbitmq publisher closed")
	// ErrUnroutable: no queue took the message (unmarked: retried).
	ErrUnroutable = errors.New("unroutable: returned by the broker")
	// ErrNacked: the broker nacked the message (unmarked: retried), or the
	// subscriber's republish or dead letter.
	ErrNacked = errors.New("nacked by the broker")
	// ErrTooLarge: the payload exceeds PublisherConfig.MaxMessageSize
	// (permanent).
	ErrTooLarge = errors.New("message too large")
	// ErrBlocked: the broker blocked the connection (connection.blocked,
	// a memory or disk alarm): not sent (unavailable).
	ErrBlocked = errors.New("connection blocked by the broker")
	// ErrNoChannel: the connection or channel closed before the confirm
	// (unavailable).
	ErrNoChannel = errors.New("connection or channel closed")
	// ErrNotRepresentable: the message has a routing key, header name or
	// type over AMQP's 255-byte short strings (permanent). Not sent: the
	// client library would close the whole connection over it.
	ErrNotRepresentable = errors.New("not representable in AMQP 0-9-1")
	// ErrMessageRefused: the broker refused the message and closed the
	// channel (406 PRECONDITION_FAILED, e.g. a message over the server's
	// max_message_size) (permanent).
	ErrMessageRefused = errors.New("refused by the broker")
	// ErrReservedHeader: the message has a header named CC or BCC, which
	// RabbitMQ reads as sender-selected distribution: more routing keys
	// (permanent). Not sent.
	ErrReservedHeader = errors.New("header reserved by RabbitMQ")
)

// ConfigRefusal returns the broker's error when err — from amqp091: a
// dial, a channel's or a connection's close — says that the broker refuses
// the configuration rather than being down or refusing one message, nil
// otherwise. The refusals:
//
//   - 403 ACCESS_REFUSED: wrong credentials (at the handshake), or no
//     permission on the exchange or queue, or an internal exchange (on
//     the channel);
//   - 404 NOT_FOUND: the exchange (the subscriber's queue) does not exist
//     (on the channel);
//   - 530 NOT_ALLOWED: the vhost does not exist or the user may not use
//     it — but not a connection or channel limit reached, which passes;
//   - 402 INVALID_PATH: a vhost name the broker does not accept.
func ConfigRefusal(err error) *amqp.Error {
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae == nil {
		return nil
	}
	switch ae.Code {
	case amqp.AccessRefused, amqp.NotFound, amqp.InvalidPath:
		return ae
	case amqp.NotAllowed:
		if !strings.Contains(ae.Reason, "limit") {
			return ae
		}
	}
	return nil
}

// classifyClose marks wrapped, whose cause is the amqp091 error cause
// (a dial, channel or close error): Misconfigured when the broker refused
// the configuration, Unavailable otherwise.
func classifyClose(wrapped, cause error) error {
	if ConfigRefusal(cause) != nil {
		return publishers.Misconfigured(wrapped)
	}
	return publishers.Unavailable(wrapped)
}
