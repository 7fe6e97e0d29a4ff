package sqs

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/outboxgo/outbox/internal/redact"
)

// The URL parameters of ConfigFromURL.
const (
	paramEndpoint    = "endpoint"
	paramFIFO        = "fifo"
	paramMaxSize     = "max_size"
	paramMaxInFlight = "max_in_flight"
	paramMaxAttempts = "max_attempts"
	paramCheckTopics = "check_topics"
)

var paramNames = []string{paramEndpoint, paramFIFO, paramMaxSize, paramMaxInFlight, paramMaxAttempts, paramCheckTopics}

// ConfigFromURL parses an sqs:// URL into a PublisherConfig:
//
//	sqs://REGION/QUEUE_PREFIX?PARAMS
//	sqs://ACCOUNT.REGION/QUEUE_PREFIX?PARAMS
//
// REGION is the AWS region ("eu-west-1"); ACCOUNT, 12 digits, the account
// that owns the queues (default: the credentials' own). QUEUE_PREFIX (the
// path without its leading slash, may be empty) is PublisherConfig's
// QueuePrefix. The parameters are endpoint, fifo, max_size,
// max_in_flight, max_attempts and check_topics (see the package
// documentation); any other is an error that names it. The URL carries
// no credentials: they come from the SDK's default chain (AWS_ACCESS_KEY_ID
// and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, SSO, the container's or the
// instance's role), and a URL with user-info is refused. Errors never
// print the URL unredacted.
func ConfigFromURL(rawURL string) (*PublisherConfig, error) {
	fail := func(format string, args ...any) (*PublisherConfig, error) {
		return nil, fmt.Errorf("sqs publisher: URL %s: %s", shownURL(rawURL), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fail("not a URL")
	}
	if u.Scheme != "sqs" {
		return fail("scheme %q, want sqs", u.Scheme)
	}
	if u.User != nil {
		return fail("credentials in the URL are not read: give them through the SDK's default chain (AWS_ACCESS_KEY_ID, AWS_PROFILE, a role)")
	}
	q := u.Query()
	var unknown []string
	for k := range q {
		if !slices.Contains(paramNames, k) {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fail("unknown parameter %s (the publisher reads %s)", strings.Join(unknown, ", "), strings.Join(paramNames, ", "))
	}
	cfg := &PublisherConfig{}
	host := u.Host
	if strings.Contains(host, ":") {
		return fail("host %q is no AWS region: want REGION or ACCOUNT.REGION (sqs://eu-west-1/QUEUE_PREFIX); a server's address goes in %s=", host, paramEndpoint)
	}
	if acct, region, ok := strings.Cut(host, "."); ok {
		cfg.Account, host = acct, region
		if !accountID(acct) {
			return fail("account %q: want 12 digits (sqs://ACCOUNT.REGION/…)", acct)
		}
	}
	if !regionName(host) {
		return fail("region %q: want an AWS region such as eu-west-1 (sqs://REGION/QUEUE_PREFIX)", host)
	}
	cfg.Region = host
	cfg.QueuePrefix = strings.TrimPrefix(u.Path, "/")
	if strings.Contains(cfg.QueuePrefix, "/") {
		return fail("queue prefix %q: a queue name has no slash", cfg.QueuePrefix)
	}
	if v := q.Get(paramEndpoint); v != "" {
		e, err := url.Parse(v)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil {
			return fail("%s: want http://host:port or https://host, without user-info", paramEndpoint)
		}
		cfg.Endpoint = v
	}
	if v := q.Get(paramFIFO); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fail("%s %q: want true or false", paramFIFO, v)
		}
		cfg.FIFO = b
	}
	num := func(name string, dst *int) error {
		v := q.Get(name)
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("%s %q: want a whole number, 1 or more", name, v)
		}
		*dst = n
		return nil
	}
	for name, dst := range map[string]*int{paramMaxSize: &cfg.MaxSize, paramMaxInFlight: &cfg.MaxInFlight, paramMaxAttempts: &cfg.MaxAttempts} {
		if err := num(name, dst); err != nil {
			return fail("%v", err)
		}
	}
	if v := q.Get(paramCheckTopics); v != "" {
		for t := range strings.SplitSeq(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				cfg.CheckTopics = append(cfg.CheckTopics, t)
			}
		}
	}
	return cfg, nil
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

// shownURL is rawURL as errors show it: redacted, and without the
// user-info of the URL in its endpoint parameter, which redact.URL does
// not look into.
func shownURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return redact.URL(rawURL)
	}
	q := u.Query()
	if e := q.Get(paramEndpoint); strings.Contains(e, "@") {
		q.Set(paramEndpoint, redact.Mask)
		u.RawQuery = q.Encode()
		return redact.URL(u.String())
	}
	return redact.URL(rawURL)
}
