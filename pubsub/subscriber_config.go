package pubsub

import (
	"errors"
	"fmt"
	"strings"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"

	"github.com/outboxgo/outbox/subscribers"
)

// SubscriberConfig configures a Subscriber. Subscription and
// DeadLetterTopic are required, and Project unless Client is set; zero
// means the default for every other field.
//
// Of the embedded subscribers.Options, Concurrency bounds the messages
// handled at once (the client's MaxOutstandingMessages); with a
// subscription that has message ordering on, a key's messages are handled
// one at a time whatever it says.
type SubscriberConfig struct {
	subscribers.Options

	// Project is the Google Cloud project of Subscription and
	// DeadLetterTopic, when they are IDs. Required unless Client is set.
	Project string
	// Subscription is the subscription to consume, an ID or a full name
	// (projects/P/subscriptions/S). It must exist; instances with the
	// same subscription share its messages. Create it with message
	// ordering on to have a key's messages handled in order. Required.
	Subscription string
	// DeadLetterTopic receives the messages that exhausted MaxDeliveries
	// or failed permanently: the original data and attributes plus
	// AttrError and the AttrDead* attributes. An ID or a full name; it
	// must exist and must not be Subscription's topic. Required.
	DeadLetterTopic string
	// TopicPrefix is stripped from the subscription's topic ID to give
	// inbox.Message.Topic for a message without an AttrTopic attribute.
	// Default "".
	TopicPrefix string
	// OpTimeout bounds each call other than the streaming pull (checks at
	// Start, dead-letter publishes). Default DefaultOpTimeout (10 s).
	OpTimeout time.Duration

	// Client is an existing client to consume with; the Subscriber does
	// not close it. Default nil: NewSubscriber makes one (see
	// PublisherConfig.ClientOptions) and Stop closes it.
	Client *gpubsub.Client
	// ClientOptions are passed to pubsub.NewClient when Client is nil.
	ClientOptions []option.ClientOption
}

// DefaultOpTimeout is SubscriberConfig.OpTimeout's default.
const DefaultOpTimeout = 10 * time.Second

// WithDefaults returns a copy of c with every zero field set to its
// default, the embedded Options' included.
func (c SubscriberConfig) WithDefaults() SubscriberConfig {
	c.Options = c.Options.WithDefaults()
	if c.OpTimeout == 0 {
		c.OpTimeout = DefaultOpTimeout
	}
	if c.Project == "" && c.Client != nil {
		c.Project = c.Client.Project()
	}
	return c
}

// Validate reports what NewSubscriber refuses in c, each field by name.
func (c *SubscriberConfig) Validate() error { return c.WithDefaults().validate() }

func (c SubscriberConfig) validate() error {
	var errs []error
	if err := c.Options.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Project == "" {
		errs = append(errs, errors.New("Project is required (or Client)"))
	}
	if c.Subscription == "" {
		errs = append(errs, errors.New("Subscription is required"))
	}
	if c.DeadLetterTopic == "" {
		errs = append(errs, errors.New("DeadLetterTopic is required"))
	}
	if c.OpTimeout < 0 {
		errs = append(errs, fmt.Errorf("OpTimeout %v: must not be negative", c.OpTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pubsub subscriber config: %w", err)
	}
	return nil
}

// fullName is id as a full resource name of kind in project.
func fullName(project, kind, id string) string {
	if strings.HasPrefix(id, "projects/") {
		return id
	}
	return "projects/" + project + "/" + kind + "/" + id
}

// lastSegment is the ID of a full resource name.
func lastSegment(name string) string {
	return name[strings.LastIndex(name, "/")+1:]
}
