package rabbitmq

import (
	"errors"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox/publishers"
)

// ConfigRefusal returns the broker's error when err — from amqp091: a
// dial, a channel's or a connection's close — says that the broker refuses
// the configuration rather than being down or refusing one message, nil
// otherwise. subscribers/rabbitmq uses it too. The refusals:
//
//   - 403 ACCESS_REFUSED: wrong credentials (at the handshake), or no
//     permission on the exchange or queue, or an internal exchange (on
//     the channel);
//   - 404 NOT_FOUND: the exchange (a subscriber's queue) does not exist
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
