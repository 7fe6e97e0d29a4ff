package pubsub

import (
	"context"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/publishers"
)

func init() {
	backend.RegisterBroker(backend.Broker{
		Name:     "Google Cloud Pub/Sub",
		Forms:    []string{"pubsub://PROJECT?topic_prefix=…"},
		Schemes:  []string{"pubsub"},
		Params:   params,
		Validate: func(rawURL string) error { _, err := ConfigFromURL(rawURL); return err },
		Open:     open,
	})
}

// params are the URL parameters of ConfigFromURL.
var params = []backend.Param{
	{Name: paramTopicPrefix, Default: "", Usage: "prefix of every Pub/Sub topic: outbox topic T goes to the topic topic_prefix+T", Flag: true},
	{Name: paramOrdering, Default: "true", Usage: "publish a keyed event with its key as the ordering key (per-key order; subscriptions need message ordering on)"},
	{Name: paramCheckTopics, Default: "", Usage: "comma-separated outbox topics the start-up check proves exist and may be published to"},
	{Name: paramPublishTimeout, Default: DefaultPublishTimeout.String(), Usage: "how long the client keeps trying to send a batch, retries included"},
}

// open is the Broker's Open: a publisher configured by the URL, logging to
// o.Logger. It does not wait for Pub/Sub: the caller's Check proves the
// configuration.
func open(ctx context.Context, rawURL string, o *backend.BrokerOptions) (publishers.Publisher, error) {
	cfg, err := ConfigFromURL(rawURL)
	if err != nil {
		return nil, err
	}
	if o != nil {
		cfg.Logger = o.Logger
	}
	p, err := NewPublisher(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}
