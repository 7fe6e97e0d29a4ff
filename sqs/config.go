package sqs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// PublisherConfig configures a Publisher. Region is required unless
// Client is set; zero means the default for every other field.
type PublisherConfig struct {
	// Region is the AWS region of the queues ("eu-west-1"). Required
	// unless Client is set.
	Region string
	// Account, when set, is the 12-digit account owning the queues: their
	// URLs are then GetQueueUrl's with QueueOwnerAWSAccountId, for queues
	// of another account the credentials may write to. Default "": the
	// credentials' own account.
	Account string
	// Endpoint overrides the SQS endpoint (http://127.0.0.1:4566 for
	// LocalStack, a test server). Default "": AWS's endpoint of Region.
	Endpoint string
	// Credentials override the SDK's default chain (environment,
	// shared files, SSO, container and instance roles). Default nil: the
	// default chain.
	Credentials aws.CredentialsProvider
	// Client is an existing client to publish with; Region, Endpoint,
	// Credentials and MaxAttempts are then ignored. Default nil: one is
	// made from them.
	Client *sqs.Client

	// QueuePrefix puts topic T on the queue QueuePrefix+T (no separator is
	// added). Default "".
	QueuePrefix string
	// FIFO appends ".fifo" to every queue name that does not end in it, so
	// that every topic goes to a FIFO queue. Either way, a queue is FIFO
	// when its name ends in .fifo, and only then. Default false.
	FIFO bool
	// Queue maps a topic to a queue name, overriding QueuePrefix and FIFO.
	// Default nil.
	Queue func(topic string) string

	// MaxSize is the largest message (body plus attributes' names, types
	// and values) the publisher sends; a larger one fails as permanent,
	// unsent. It bounds each SendMessageBatch's total too. Default
	// DefaultMaxSize (256 KiB; SQS takes up to 1 MiB since 2025 where the
	// queue's MaximumMessageSize allows it).
	MaxSize int
	// MaxInFlight is how many SendMessageBatch calls the publisher has in
	// flight at once, over all Publish calls. Default DefaultMaxInFlight.
	MaxInFlight int
	// MaxAttempts is the SDK's attempts per call (its standard retryer,
	// with backoff, for throttling, 5xx and network errors). Default
	// DefaultMaxAttempts. A retried batch may store a message twice on a
	// standard queue; a FIFO queue drops the copy.
	MaxAttempts int
	// CheckTopics are topics whose queues Check resolves with GetQueueUrl.
	// Default none: Check calls ListQueues instead (see Check).
	CheckTopics []string

	// Logger receives the publisher's logs. Default: discarded.
	Logger *slog.Logger
}

// Defaults of PublisherConfig.
const (
	DefaultMaxSize     = 256 << 10
	DefaultMaxInFlight = 16
	DefaultMaxAttempts = 3
)

// WithDefaults returns a copy of c with every zero field set to its default.
func (c PublisherConfig) WithDefaults() PublisherConfig {
	if c.MaxSize == 0 {
		c.MaxSize = DefaultMaxSize
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c PublisherConfig) validate() error {
	var errs []error
	if c.Region == "" && c.Client == nil {
		errs = append(errs, errors.New("Region is required"))
	}
	if c.Account != "" && !accountID(c.Account) {
		errs = append(errs, fmt.Errorf("Account %q: want 12 digits", c.Account))
	}
	if c.MaxSize < 0 {
		errs = append(errs, fmt.Errorf("MaxSize %d: must not be negative", c.MaxSize))
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("MaxInFlight %d: must not be negative", c.MaxInFlight))
	}
	if c.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("MaxAttempts %d: must not be negative", c.MaxAttempts))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqs publisher config: %w", err)
	}
	return nil
}

func accountID(s string) bool {
	if len(s) != 12 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// queueName maps a topic to its queue's name.
func (c *PublisherConfig) queueName(topic string) string {
	if c.Queue != nil {
		return c.Queue(topic)
	}
	name := c.QueuePrefix + topic
	if c.FIFO && !isFIFO(name) {
		name += ".fifo"
	}
	return name
}

// ClientOptions are what NewClient needs to make a client.
type ClientOptions struct {
	Region, Endpoint string
	Credentials      aws.CredentialsProvider
	MaxAttempts      int
	// MaxConns bounds the client's connections to the endpoint. Default 64.
	MaxConns int
}

// NewClient returns an SQS client of o on an HTTP transport of its own,
// and a func that closes that transport's idle connections (call it once
// the client is no longer used). Credentials come from o.Credentials, or
// else from the SDK's default chain.
func NewClient(ctx context.Context, o ClientOptions) (*sqs.Client, func(), error) {
	if o.MaxConns == 0 {
		o.MaxConns = 64
	}
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = o.MaxConns, o.MaxConns
	})
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(o.Region),
		awsconfig.WithHTTPClient(hc),
	}
	if o.MaxAttempts > 0 {
		opts = append(opts, awsconfig.WithRetryMaxAttempts(o.MaxAttempts))
	}
	if o.Credentials != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(o.Credentials))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("sqs: load the AWS configuration: %w", err)
	}
	// The configuration may have replaced the client (a CA bundle): take
	// its transport, now final, into a client of this package's own, so
	// that closeIdle reaches it (the SDK's wraps it out of reach).
	closeIdle := func() {}
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		tr := bc.GetTransport()
		cfg.HTTPClient = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		closeIdle = tr.CloseIdleConnections
	}
	client := sqs.NewFromConfig(cfg, func(so *sqs.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(strings.TrimSuffix(o.Endpoint, "/"))
		}
	})
	return client, closeIdle, nil
}
