package pubsub

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"
)

// PublisherConfig configures a Publisher. Project is required; zero means
// the default for every other field.
type PublisherConfig struct {
	// Project is the Google Cloud project of the topics. Required (unless
	// Client is set, whose project is used).
	Project string
	// TopicPrefix, when set, puts every message of outbox topic T on the
	// Pub/Sub topic TopicPrefix+T (no separator is added). Default "".
	TopicPrefix string
	// NoOrdering turns per-key order off: the outbox Key then travels only
	// as the AttrKey attribute, never as the ordering key, and publishing
	// is spread over Pub/Sub's whole capacity. Default false: a keyed
	// message's Key is its ordering key and the client publishes with
	// EnableMessageOrdering (URL: ordering=true).
	NoOrdering bool
	// CheckTopics are outbox topics Check proves exist (and may be
	// published to) at start. Default none: Check proves the credentials
	// and the project only, since topics come from the messages.
	CheckTopics []string
	// PublishTimeout is how long the client keeps trying to send one
	// batch of messages, retries included (the client's
	// PublishSettings.Timeout). A Publish call returns when its context
	// ends, whatever is left; what the client still holds is then sent
	// or fails within this time, and a key's next call waits for it.
	// Default DefaultPublishTimeout (30 s).
	PublishTimeout time.Duration

	// Client is an existing client to publish with. When set, NewPublisher
	// does not make one and Close does not close it. Default nil.
	Client *gpubsub.Client
	// ClientOptions are passed to pubsub.NewClient when Client is nil
	// (credentials files, endpoints). Default: Application Default
	// Credentials, or the emulator at PUBSUB_EMULATOR_HOST when set.
	ClientOptions []option.ClientOption

	// Logger receives the publisher's logs. Default: discarded.
	Logger *slog.Logger
}

// Defaults of PublisherConfig, and the client's batching the Publisher
// uses (see the package documentation, "Batching").
const (
	DefaultPublishTimeout = 30 * time.Second

	// countThreshold, byteThreshold and delayThreshold close a batch: a
	// relay batch of 1,000 messages of one topic goes out as 10 requests
	// sent at once rather than one, and the last partial batch leaves
	// after 1 ms, not the client's default 10 ms.
	countThreshold = 100
	byteThreshold  = 1 << 20
	delayThreshold = time.Millisecond
	// numGoroutines bounds the requests in flight per topic.
	numGoroutines = 64
)

// WithDefaults returns a copy of c with every zero field set to its default.
func (c PublisherConfig) WithDefaults() PublisherConfig {
	if c.PublishTimeout == 0 {
		c.PublishTimeout = DefaultPublishTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Project == "" && c.Client != nil {
		c.Project = c.Client.Project()
	}
	return c
}

func (c PublisherConfig) validate() error {
	var errs []error
	if c.Project == "" {
		errs = append(errs, errors.New("Project is required"))
	}
	if c.PublishTimeout < 0 {
		errs = append(errs, fmt.Errorf("PublishTimeout %v: must not be negative", c.PublishTimeout))
	}
	for _, t := range c.CheckTopics {
		if t == "" || strings.Contains(t, "/") {
			errs = append(errs, fmt.Errorf("CheckTopics: %q is not a topic name", t))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pubsub publisher config: %w", err)
	}
	return nil
}
