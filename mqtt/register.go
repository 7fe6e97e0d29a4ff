package mqtt

import (
	"context"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/publishers"
)

func init() {
	backend.RegisterBroker(backend.Broker{
		Name:     "MQTT",
		Forms:    []string{"mqtt://user:pass@host:1883", "mqtts://user:pass@host:8883"},
		Schemes:  []string{"mqtt", "mqtts"},
		Params:   params,
		Validate: validateURL,
		Open:     open,
	})
}

// params are the URL parameters of ConfigFromURL.
var params = []backend.Param{
	{Name: paramTopicPrefix, Default: "", Usage: "prefix of every MQTT topic: topic T goes to the MQTT topic topic_prefix+T (no separator added)", Flag: true},
	{Name: paramRetain, Default: "false", Usage: "publish with the RETAIN flag: the broker keeps each topic's last message for new subscribers"},
	{Name: paramClientID, Default: "outbox-pub-<random>", Usage: "MQTT client identifier; give each relay instance its own (one ID, one connection)"},
	{Name: paramKeepAlive, Default: DefaultKeepAlive.String(), Usage: "MQTT keep-alive: PINGREQ after this much silence; a silent broker drops the connection"},
	{Name: paramConnectTimeout, Default: DefaultConnectTimeout.String(), Usage: "how long the dial, TLS handshake and CONNACK may take"},
	{Name: paramAckTimeout, Default: DefaultAckTimeout.String(), Usage: "how long a publish waits for PUBACKs when its context has no deadline"},
	{Name: paramMaxPacketSize, Default: "0", Usage: "largest PUBLISH packet in bytes (0: the broker's Maximum Packet Size); a larger message fails for good, unsent"},
	{Name: paramCAFile, Default: "", Usage: "mqtts only: PEM file of the CA certificates to trust (default: the system's)"},
}

// validateURL is the Broker's Validate.
func validateURL(rawURL string) error {
	_, err := ConfigFromURL(rawURL)
	return err
}

// open is the Broker's Open: a publisher configured by the URL, logging
// to o.Logger. Like NewPublisher it does not connect: the caller's Check
// proves the credentials, and Publish fails as unavailable while the
// broker is down.
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
		return nil, err
	}
	return p, nil
}
