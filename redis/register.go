package redis

import (
	"context"
	"strconv"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/publishers"
)

func init() {
	backend.RegisterBroker(backend.Broker{
		Name:    "Redis",
		Forms:   []string{"redis://:pass@host:6379/0", "rediss://…"},
		Schemes: []string{"redis", "rediss"},
		Params:  params,
		Open:    open,
	})
}

// params are the URL parameters of ConfigFromURL: the publisher's own,
// then the connection options of go-redis most worth knowing (it reads
// the others of redis.ParseURL as well).
var params = []backend.Param{
	{Name: paramStreamPrefix, Default: "", Usage: "prefix of every stream key: topic T goes to the stream stream_prefix+T", Flag: true},
	{Name: paramMaxLen, Default: "0", Usage: "trim each stream to about this many entries at every XADD (0: never trim)"},
	{Name: paramMaxPayload, Default: strconv.Itoa(DefaultMaxPayload), Usage: "largest payload (and headers' JSON) in bytes; a larger message fails for good, unsent"},
	{Name: paramKeyRuns, Default: "true", Usage: "keep each key's order in the publisher (a script per key run), so the relay sends a key's events together; false: one at a time"},
	{Name: "dial_timeout", Default: "5s", Usage: "go-redis: how long a connection may take to open"},
	{Name: "read_timeout", Default: "5s", Usage: "go-redis: how long a reply may take (a publish's own deadline bounds it too)"},
	{Name: "write_timeout", Default: "read_timeout", Usage: "go-redis: how long a write may take"},
	{Name: "max_retries", Default: "0", Usage: "go-redis: retries of a failed command (0: none; a retried XADD may append twice)"},
}

// open is the Broker's Open: a publisher configured by the URL, logging to
// o.Logger. Like NewPublisher it does not connect: the caller's Check
// proves the credentials, and Publish fails as unavailable while Redis is
// down.
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
