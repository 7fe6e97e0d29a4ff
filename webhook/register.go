package webhook

import (
	"context"
	"strconv"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/publishers"
)

func init() {
	backend.RegisterBroker(backend.Broker{
		Name:    "Webhook",
		Forms:   []string{"webhook+https://user:pass@host/path/{topic}?secret=whsec_…", "webhook+http://…"},
		Schemes: []string{SchemeHTTPS, SchemeHTTP},
		Params:  params,
		Validate: func(rawURL string) error {
			cfg, err := ConfigFromURL(rawURL)
			if err != nil {
				return err
			}
			if _, _, _, err := cfg.WithDefaults().validate(); err != nil {
				return publishers.Misconfigured(err)
			}
			return nil
		},
		Open: open,
	})
}

// params are the URL parameters of ConfigFromURL.
var params = []backend.Param{
	{Name: paramSecret, Default: "", Usage: "signing secret, whsec_ + base64 (repeat it, or separate with commas, to sign with several during a key rotation); none: unsigned"},
	{Name: paramTimeout, Default: DefaultTimeout.String(), Usage: "bound of each request, dial to response; a slower one fails as unavailable"},
	{Name: paramMaxInFlight, Default: strconv.Itoa(DefaultMaxInFlight), Usage: "requests (and connections) in flight per endpoint host"},
	{Name: paramMaxPayload, Default: "0", Usage: "largest body in bytes; a larger message fails for good, unsent (0: no limit)"},
	{Name: paramContentType, Default: DefaultContentType, Usage: "Content-Type of the requests (a message's own Content-Type header wins)"},
	{Name: paramAllowPrivate, Default: "false", Usage: "allow loopback, private, link-local, unspecified and multicast addresses (the SSRF guard refuses them)"},
	{Name: paramAllowCIDR, Default: "", Usage: "address ranges allowed despite the SSRF guard, comma-separated (10.1.0.0/16,127.0.0.1)"},
}

// open is the Broker's Open: a publisher configured by the URL, logging
// to o.Logger. It does not connect: the caller's Check probes the
// endpoint.
func open(_ context.Context, rawURL string, o *backend.BrokerOptions) (publishers.Publisher, error) {
	cfg, err := ConfigFromURL(rawURL)
	if err != nil {
		return nil, err
	}
	if o != nil {
		cfg.Logger = o.Logger
	}
	return New(cfg)
}
