package kafka

import (
	"context"
	"strconv"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/publishers"
)

// params are the query parameters of a kafka:// URL (see ConfigFromURL).
var params = []backend.Param{
	{Name: "topic_prefix", Default: "", Usage: "prefix of every Kafka topic: the topic of an event is topic_prefix + its topic", Flag: true},
	{Name: "client_id", Default: DefaultClientID, Usage: "client ID the brokers see"},
	{Name: "delivery_timeout", Default: DefaultDeliveryTimeout.String(), Usage: "how long a record may wait for its acknowledgement (a Go duration)"},
	{Name: "dial_timeout", Default: DefaultDialTimeout.String(), Usage: "bound of each connection attempt (a Go duration)"},
	{Name: "max_record_bytes", Default: strconv.Itoa(DefaultMaxRecordBytes), Usage: "largest record sent; keep it at or below the topics' max.message.bytes"},
	{Name: "tls", Default: "false", Usage: "true: connect with TLS, system roots (kafka+tls:// says the same)"},
	{Name: "sasl", Default: "plain", Usage: "SASL mechanism of the URL's user: plain, scram-sha-256 or scram-sha-512"},
	{Name: "key_runs", Default: "true", Usage: "false: one event of a key in flight, instead of a batch's events of a key in one call"},
}

func init() {
	backend.RegisterBroker(backend.Broker{
		Name:    "Kafka",
		Forms:   []string{"kafka://host:9092,host2:9092", "kafka+tls://user:pass@host:9093"},
		Schemes: []string{"kafka", "kafka+tls"},
		Params:  params,
		Open:    open,
	})
}

// open is the registered Broker's Open: the publisher of ConfigFromURL's
// config, logging to o.Logger.
func open(_ context.Context, rawURL string, o *backend.BrokerOptions) (publishers.Publisher, error) {
	cfg, err := ConfigFromURL(rawURL)
	if err != nil {
		return nil, err
	}
	if o != nil {
		cfg.Logger = o.Logger
	}
	p, err := NewPublisher(cfg)
	if err != nil {
		return nil, err // a nil *Publisher is no nil Publisher
	}
	return p, nil
}
