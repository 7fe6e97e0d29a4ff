package pubsub

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/outboxgo/outbox/internal/redact"
)

// The URL's parameters.
const (
	paramTopicPrefix    = "topic_prefix"
	paramOrdering       = "ordering"
	paramCheckTopics    = "check_topics"
	paramPublishTimeout = "publish_timeout"
)

var paramNames = []string{paramTopicPrefix, paramOrdering, paramCheckTopics, paramPublishTimeout}

// ConfigFromURL parses a pubsub://PROJECT URL into a PublisherConfig: the
// host is the project ID, and the query parameters topic_prefix, ordering,
// check_topics and publish_timeout (see the package documentation) set
// its fields. Credentials come from the environment, never from the URL:
// a URL with user-info, a port or a path is refused, as is any other
// parameter, by name. Errors never print a secret of the URL.
func ConfigFromURL(rawURL string) (*PublisherConfig, error) {
	fail := func(format string, args ...any) (*PublisherConfig, error) {
		return nil, fmt.Errorf("pubsub publisher: URL %s: %s", redact.URL(rawURL), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fail("not a URL")
	}
	if u.Scheme != "pubsub" {
		return fail("scheme %q, want pubsub", u.Scheme)
	}
	if u.User != nil {
		return fail("user-info in the URL: credentials come from the environment (Application Default Credentials)")
	}
	if u.Port() != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" {
		return fail("want pubsub://PROJECT?…: the host is the project ID (the emulator's address goes in PUBSUB_EMULATOR_HOST)")
	}
	if u.Hostname() == "" {
		return fail("no project: want pubsub://PROJECT")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fail("query: %v", redact.Text(err.Error()))
	}
	var unknown []string
	for k := range q {
		if !contains(paramNames, k) {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) > 0 {
		return fail("unknown parameter %s (the publisher reads %s)", strings.Join(unknown, ", "), strings.Join(paramNames, ", "))
	}
	cfg := &PublisherConfig{Project: u.Hostname(), TopicPrefix: q.Get(paramTopicPrefix)}
	if v := q.Get(paramOrdering); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fail("%s %q: want true or false", paramOrdering, v)
		}
		cfg.NoOrdering = !on
	}
	if v := q.Get(paramCheckTopics); v != "" {
		cfg.CheckTopics = strings.Split(v, ",")
	}
	if v := q.Get(paramPublishTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fail("%s %q: want a positive duration (30s)", paramPublishTimeout, v)
		}
		cfg.PublishTimeout = d
	}
	if err := cfg.WithDefaults().validate(); err != nil {
		return fail("%v", err)
	}
	return cfg, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
