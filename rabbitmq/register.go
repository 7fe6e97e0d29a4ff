package rabbitmq

import (
	"context"
	"fmt"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/publishers"
)

func init() {
	backend.RegisterBroker(backend.Broker{
		Name:     "RabbitMQ",
		Schemes:  []string{"amqp", "amqps"},
		Forms:    []string{"amqp://user:pass@host:5672/", "amqps://user:pass@host:5671/vhost"},
		Params:   params,
		Validate: validate,
		Open:     open,
	})
}

// validate is the registered Broker's Validate: ConfigFromURL's checks,
// without connecting.
func validate(rawURL string) error {
	_, err := ConfigFromURL(rawURL)
	return err
}

// open is the registered Broker's Open: the publisher of ConfigFromURL's
// config, logging to o.Logger. Like NewPublisher it dials the broker (a
// refused login or vhost is publishers.Misconfigured, an unreachable
// broker publishers.Unavailable), bounded by the URL's dial_timeout rather
// than ctx; it does not look at the exchange: the caller's Check does.
func open(ctx context.Context, rawURL string, o *backend.BrokerOptions) (publishers.Publisher, error) {
	cfg, err := ConfigFromURL(rawURL)
	if err != nil {
		return nil, err
	}
	cfg.Logger = o.WithDefaults().Logger
	if err := ctx.Err(); err != nil {
		return nil, publishers.Unavailable(fmt.Errorf("rabbitmq publisher: not dialed: %w", err))
	}
	p, err := NewPublisher(cfg)
	if err != nil {
		return nil, err // a nil *Publisher is no nil Publisher
	}
	return p, nil
}
