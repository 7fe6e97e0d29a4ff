package sns

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
	"github.com/aws/aws-sdk-go-v2/service/sns"
)

// PublisherConfig configures a Publisher. Region and Account are required
// (they make the topics' ARNs); zero means the default for every other
// field.
type PublisherConfig struct {
	// Region is the AWS region of the topics ("eu-west-1"). Required.
	Region string
	// Account is the 12-digit account owning the topics. Required.
	Account string
	// Endpoint overrides the SNS endpoint (LocalStack, a test server).
	// Default "": AWS's endpoint of Region.
	Endpoint string
	// Credentials override the SDK's default chain. Default nil: the
	// default chain (environment, shared files, SSO, container and
	// instance roles).
	Credentials aws.CredentialsProvider
	// Client is an existing client to publish with; Endpoint, Credentials
	// and MaxAttempts are then ignored. Default nil: one is made.
	Client *sns.Client

	// TopicPrefix puts outbox topic T on the SNS topic TopicPrefix+T.
	// Default "".
	TopicPrefix string
	// FIFO appends ".fifo" to every topic name that does not end in it.
	// Either way a topic is FIFO when its name ends in .fifo. Default false.
	FIFO bool
	// Topic maps an outbox topic to an SNS topic name, overriding
	// TopicPrefix and FIFO. Default nil.
	Topic func(topic string) string

	// MaxSize is the largest message (body plus attributes) the publisher
	// sends; a larger one fails as permanent, unsent. It bounds each
	// PublishBatch's total too. Default DefaultMaxSize (256 KiB, SNS's
	// limit).
	MaxSize int
	// MaxInFlight is how many PublishBatch calls are in flight at once.
	// Default DefaultMaxInFlight.
	MaxInFlight int
	// MaxAttempts is the SDK's attempts per call. Default
	// DefaultMaxAttempts.
	MaxAttempts int
	// CheckTopics are outbox topics whose SNS topics Check looks up with
	// GetTopicAttributes. Default none: Check calls ListTopics.
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
	if !regionName(c.Region) {
		errs = append(errs, fmt.Errorf("Region %q: want an AWS region such as eu-west-1", c.Region))
	}
	if !accountID(c.Account) {
		errs = append(errs, fmt.Errorf("Account %q: want the 12 digits of the account owning the topics", c.Account))
	}
	if c.MaxSize < 0 || c.MaxInFlight < 0 || c.MaxAttempts < 0 {
		errs = append(errs, errors.New("MaxSize, MaxInFlight and MaxAttempts must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sns publisher config: %w", err)
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

// regionName reports whether s looks like an AWS region: lower-case
// letters, digits and hyphens, a letter first.
func regionName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// topicName maps an outbox topic to its SNS topic's name.
func (c *PublisherConfig) topicName(topic string) string {
	if c.Topic != nil {
		return c.Topic(topic)
	}
	name := c.TopicPrefix + topic
	if c.FIFO && !isFIFO(name) {
		name += ".fifo"
	}
	return name
}

// partition is the ARN partition of a region.
func partition(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "aws-cn"
	case strings.HasPrefix(region, "us-gov-"):
		return "aws-us-gov"
	case strings.HasPrefix(region, "us-iso-"):
		return "aws-iso"
	case strings.HasPrefix(region, "us-isob-"):
		return "aws-iso-b"
	case strings.HasPrefix(region, "eu-isoe-"):
		return "aws-iso-e"
	}
	return "aws"
}

// arn is the ARN of the SNS topic name.
func (c *PublisherConfig) arn(name string) string {
	return "arn:" + partition(c.Region) + ":sns:" + c.Region + ":" + c.Account + ":" + name
}

// newClient returns an SNS client on a transport of its own and a func
// that closes the transport's idle connections.
func newClient(ctx context.Context, c *PublisherConfig) (*sns.Client, func(), error) {
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = c.MaxInFlight+4, c.MaxInFlight+4
	})
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(c.Region), awsconfig.WithHTTPClient(hc)}
	if c.MaxAttempts > 0 {
		opts = append(opts, awsconfig.WithRetryMaxAttempts(c.MaxAttempts))
	}
	if c.Credentials != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(c.Credentials))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	// The configuration may have replaced the client (a CA bundle): take
	// its final transport into a client of this package's own, so that
	// the idle connections can be closed (the SDK's wraps it out of reach).
	closeIdle := func() {}
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		tr := bc.GetTransport()
		cfg.HTTPClient = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		closeIdle = tr.CloseIdleConnections
	}
	client := sns.NewFromConfig(cfg, func(o *sns.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(strings.TrimSuffix(c.Endpoint, "/"))
		}
	})
	return client, closeIdle, nil
}
