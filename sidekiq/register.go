package sidekiq

import (
	"context"
	"strconv"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/publishers"
)

func init() {
	backend.RegisterBroker(backend.Broker{
		Name:    "Sidekiq",
		Forms:   []string{"sidekiq://:pass@host:6379/0?class=EventJob&queue=events", "sidekiq+rediss://… (TLS)"},
		Schemes: []string{Scheme, SchemeRedis, SchemeRediss},
		Params:  params,
		Open:    open,
	})
}

// params are the URL parameters of ConfigFromURL: the publisher's own,
// then the connection options of go-redis most worth knowing (it reads
// the others of redis.ParseURL as well).
var params = []backend.Param{
	{Name: paramClass, Default: "", Usage: "job class of every topic (Ruby class name); without it, every message fails for good: no class", Flag: true},
	{Name: paramQueue, Default: DefaultQueue, Usage: "Sidekiq queue of every job", Flag: true},
	{Name: paramNamespace, Default: "", Usage: "redis-namespace prefix (Sidekiq's namespace option): keys become NAMESPACE:queue:NAME, …"},
	{Name: paramRetry, Default: DefaultRetry, Usage: "the jobs' retry option: true, false or a number of retries"},
	{Name: paramMaxPayload, Default: strconv.Itoa(DefaultMaxPayload), Usage: "largest job JSON in bytes; a larger message fails for good, unsent"},
	{Name: "dial_timeout", Default: "5s", Usage: "go-redis: how long a connection may take to open"},
	{Name: "read_timeout", Default: "5s", Usage: "go-redis: how long a reply may take (a publish's own deadline bounds it too)"},
	{Name: "write_timeout", Default: "read_timeout", Usage: "go-redis: how long a write may take"},
	{Name: "max_retries", Default: "0", Usage: "go-redis: retries of a failed command (0: none; a retried push may store the job twice)"},
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
