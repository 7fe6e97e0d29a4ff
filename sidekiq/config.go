package sidekiq

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox"
)

// PublisherConfig configures a Publisher. Zero means the default, for
// every field: the zero value pushes to the queue "default" of the Redis at
// redis://127.0.0.1:6379/0, without a namespace, and fails every message
// as permanent until a class is named (Class or Routes).
type PublisherConfig struct {
	// URL is the Redis URL, redis:// or rediss:// (see redis.ParseURL; its
	// connection options, dial_timeout and the others, are go-redis's).
	// ConfigFromURL makes it from a sidekiq:// URL. Default DefaultURL.
	// Ignored when Client is set.
	URL string
	// Client is an existing client to publish with. When set, NewPublisher
	// does not connect and Close does not close it; give it
	// ContextTimeoutEnabled, or Publish may outlast its context's deadline
	// by the client's ReadTimeout. Default nil: NewPublisher makes one from
	// URL.
	Client goredis.UniversalClient

	// Namespace prefixes every key with Namespace + ":", as Sidekiq does
	// with redis-namespace (Sidekiq's redis option namespace: "…"):
	// "ns:queues", "ns:queue:NAME", "ns:schedule". Default "": none.
	Namespace string
	// Class is the job class of a topic that Routes does not name, or
	// whose Route leaves Class empty ("OrderEventJob", "Billing::EventJob").
	// Default "": such a topic has no class, and its messages fail as
	// permanent (dead-lettered), the error naming the topic.
	Class string
	// Queue is the Sidekiq queue of a topic whose Route names none.
	// Default DefaultQueue ("default", Sidekiq's own default).
	Queue string
	// Retry is the job's "retry" option for a topic whose Route names
	// none: "true" (Sidekiq's default: 25 retries), "false" (a failed job
	// is discarded), or a number of retries ("0": straight to the Dead
	// set). Default "true".
	Retry string
	// Routes maps a topic to its job class, queue and retry option; an
	// empty field of a Route takes Class, Queue or Retry. Default nil:
	// every topic takes Class, Queue and Retry.
	Routes map[string]Route

	// MaxPayload is the largest job the publisher pushes: the job's JSON,
	// the payload as args carries it (base64 adds a third) included; a
	// larger one fails as permanent without being sent. Keep it at most
	// the server's proto-max-bulk-len: Redis answers a longer bulk string
	// by closing the connection, which fails the whole pipeline as an
	// outage. Default DefaultMaxPayload: 512 MiB (Redis's default
	// proto-max-bulk-len) minus 1 KiB.
	MaxPayload int
	// Clock stamps enqueued_at (and created_at when a message has no
	// CreatedAt) and decides whether a NotBefore is still ahead. Default
	// outbox.SystemClock.
	Clock outbox.Clock
	// Logger receives the publisher's logs. Default: discarded.
	Logger *slog.Logger
}

// Route is where the jobs of one topic go. An empty field takes the
// PublisherConfig's Class, Queue or Retry.
type Route struct {
	// Class is the job class, a Ruby constant path ("OrderJob",
	// "Billing::EventJob").
	Class string
	// Queue is the Sidekiq queue.
	Queue string
	// Retry is the job's "retry" option: "true", "false" or a number.
	Retry string
}

// Defaults of PublisherConfig.
const (
	DefaultURL        = "redis://127.0.0.1:6379/0"
	DefaultQueue      = "default"
	DefaultRetry      = "true"
	DefaultMaxPayload = 512<<20 - 1<<10
)

// WithDefaults returns a copy of c with every zero field set to its
// default. Routes is copied, so the Publisher does not share the caller's
// map.
func (c PublisherConfig) WithDefaults() PublisherConfig {
	if c.URL == "" && c.Client == nil {
		c.URL = DefaultURL
	}
	if c.Queue == "" {
		c.Queue = DefaultQueue
	}
	if c.Retry == "" {
		c.Retry = DefaultRetry
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = DefaultMaxPayload
	}
	if c.Clock == nil {
		c.Clock = outbox.SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Routes != nil {
		routes := make(map[string]Route, len(c.Routes))
		for k, v := range c.Routes {
			routes[k] = v
		}
		c.Routes = routes
	}
	return c
}

// rubyConstant is a Ruby constant path: what Sidekiq constantizes.
var rubyConstant = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*(::[A-Z][A-Za-z0-9_]*)*$`)

// validate reports every field of c (with its defaults) the publisher
// cannot run with, by name.
func (c PublisherConfig) validate() error {
	var errs []error
	if c.Class != "" && !rubyConstant.MatchString(c.Class) {
		errs = append(errs, fmt.Errorf("Class %q: want a Ruby class name (OrderJob, Billing::EventJob)", c.Class))
	}
	if _, err := retryJSON(c.Retry); err != nil {
		errs = append(errs, fmt.Errorf("Retry: %w", err))
	}
	if c.MaxPayload < 0 {
		errs = append(errs, fmt.Errorf("MaxPayload %d: must not be negative", c.MaxPayload))
	}
	topics := make([]string, 0, len(c.Routes))
	for t := range c.Routes {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		r := c.Routes[t]
		if r.Class != "" && !rubyConstant.MatchString(r.Class) {
			errs = append(errs, fmt.Errorf("Routes[%q].Class %q: want a Ruby class name (OrderJob, Billing::EventJob)", t, r.Class))
		}
		if r.Retry != "" {
			if _, err := retryJSON(r.Retry); err != nil {
				errs = append(errs, fmt.Errorf("Routes[%q].Retry: %w", t, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sidekiq publisher config: %w", err)
	}
	return nil
}

// retryJSON is the JSON of a Retry option: true, false or a number of
// retries.
func retryJSON(s string) ([]byte, error) {
	switch s {
	case "true", "false":
		return []byte(s), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%q: want true, false or a number of retries, 0 or more", s)
	}
	return []byte(strconv.Itoa(n)), nil
}

// target is where one topic's jobs go, resolved.
type target struct {
	class string
	queue string
	retry []byte // JSON
	// classJSON and queueJSON are class and queue as JSON strings.
	classJSON, queueJSON []byte
}

// route resolves topic's target; ok is false when the topic has no class.
func (c *PublisherConfig) route(topic string) (target, bool) {
	r := c.Routes[topic]
	t := target{class: r.Class, queue: r.Queue}
	if t.class == "" {
		t.class = c.Class
	}
	if t.queue == "" {
		t.queue = c.Queue
	}
	retry := r.Retry
	if retry == "" {
		retry = c.Retry
	}
	t.retry, _ = retryJSON(retry) // validated
	t.classJSON, _ = marshal(t.class)
	t.queueJSON, _ = marshal(t.queue)
	return t, t.class != ""
}

// targets resolves every Route, and the default target of the topics
// without one (ok false when there is no default class).
func (c *PublisherConfig) targets() (routes map[string]target, def target, defOK bool) {
	routes = make(map[string]target, len(c.Routes))
	for topic := range c.Routes {
		if t, ok := c.route(topic); ok {
			routes[topic] = t
		}
	}
	def, defOK = c.route("\x00 no route") // topics cannot hold NUL
	return routes, def, defOK
}

// queues are the queues the configuration names: Queue and each Route's,
// sorted, each once.
func (c *PublisherConfig) queues() []string {
	set := map[string]bool{c.Queue: true}
	for _, r := range c.Routes {
		if r.Queue != "" {
			set[r.Queue] = true
		}
	}
	out := make([]string, 0, len(set))
	for q := range set {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

// key is a Redis key under the namespace.
func (c *PublisherConfig) key(k string) string {
	if c.Namespace == "" {
		return k
	}
	return c.Namespace + ":" + k
}
