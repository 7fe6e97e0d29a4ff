package nats

import (
	"context"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/publishers"
)

func init() {
	backend.RegisterBroker(backend.Broker{
		Name:    "NATS",
		Forms:   []string{"nats://host:4222,nats://host2:4222", "nats://token@host:4222"},
		Schemes: []string{"nats"},
		Params:  urlParams,
		Validate: func(rawURL string) error {
			_, err := ConfigFromURL(rawURL)
			return err
		},
		Open: open,
	})
}

// open is the NATS broker's backend.Broker.Open: a Publisher configured
// by the URL (ConfigFromURL), logging to o.Logger, whose stream — when the
// URL names one — exists and captures PREFIX.> once it returns ("stream
// ready" at Info). Its errors are NewPublisher's and SetupStream's, as
// they are: classified, the URL's secrets hidden.
func open(ctx context.Context, rawURL string, o *backend.BrokerOptions) (publishers.Publisher, error) {
	opts := o.WithDefaults()
	cfg, err := ConfigFromURL(rawURL)
	if err != nil {
		return nil, err
	}
	cfg.Logger = opts.Logger
	p, err := NewPublisher(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Stream != "" {
		if err := p.SetupStream(ctx); err != nil {
			_ = p.Close()
			return nil, err // it names the stream, and the server with its secrets hidden
		}
		opts.Logger.Info("stream ready", "stream", cfg.Stream, "subjects", p.cfg.streamSubjects()[0])
	}
	return p, nil
}
