package sqs

import (
	"context"
	"strconv"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/publishers"
)

func init() {
	backend.RegisterBroker(backend.Broker{
		Name:     "Amazon SQS",
		Forms:    []string{"sqs://REGION/QUEUE_PREFIX", "sqs://ACCOUNT.REGION/QUEUE_PREFIX?fifo=true"},
		Schemes:  []string{"sqs"},
		Params:   params,
		Validate: func(rawURL string) error { _, err := ConfigFromURL(rawURL); return err },
		Open:     open,
	})
}

// params are the URL parameters of ConfigFromURL.
var params = []backend.Param{
	{Name: paramEndpoint, Default: "", Usage: "SQS endpoint URL instead of AWS's for the region (LocalStack, a test server)"},
	{Name: paramFIFO, Default: "false", Usage: "append .fifo to every queue name: topic T goes to the FIFO queue QUEUE_PREFIX+T.fifo", Flag: true},
	{Name: paramMaxSize, Default: strconv.Itoa(DefaultMaxSize), Usage: "largest message in bytes (body and attributes); a larger one fails for good, unsent"},
	{Name: paramMaxInFlight, Default: strconv.Itoa(DefaultMaxInFlight), Usage: "SendMessageBatch calls in flight at once"},
	{Name: paramMaxAttempts, Default: strconv.Itoa(DefaultMaxAttempts), Usage: "the SDK's attempts per call (retries throttling, 5xx and network errors)"},
	{Name: paramCheckTopics, Default: "", Usage: "comma-separated topics whose queues the start-up check resolves (default: a ListQueues call proves the credentials)"},
}

// open is the Broker's Open: a publisher configured by the URL, with
// credentials from the SDK's default chain, logging to o.Logger. It does
// not call SQS: the caller's Check proves the credentials.
func open(ctx context.Context, rawURL string, o *backend.BrokerOptions) (publishers.Publisher, error) {
	cfg, err := ConfigFromURL(rawURL)
	if err != nil {
		return nil, err
	}
	if o != nil {
		cfg.Logger = o.Logger
	}
	return NewPublisher(ctx, cfg)
}
