package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
)

var _ publishers.Checker = (*Publisher)(nil)

// checkID is the webhook-id of Check's probes, which carry no event.
const checkID = "outbox-check"

// Check verifies the endpoints without side effects on the receivers: it
// sends each endpoint (Config.Endpoints' URLs and Config.Endpoint) a HEAD
// request — HTTP's safe method, which a receiver must not act on — signed
// like a message (webhook-id "outbox-check", an empty body) and with the
// endpoint's Basic authentication. Config.Endpoint's {topic} is replaced
// by "outbox-check", a topic Check makes up: there a 404 passes.
//
// A 2xx, a 405 or a 501 (a receiver that takes POST only: it cannot tell
// more) pass. A 401 or 403 (the receiver refuses the credentials or the
// signature), an address the SSRF guard refuses, a certificate that does
// not verify, a redirect, or another 4xx (the endpoint is not there) is
// Misconfigured; a connection that fails, a 5xx, a 408 or a 429 is
// Unavailable. With several endpoints, Misconfigured wins.
func (p *Publisher) Check(ctx context.Context) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return publishers.Unavailable(fmt.Errorf("webhook publisher: check: %w", ErrClosed))
	}
	type probe struct {
		e     *endpoint
		topic string
	}
	var probes []probe
	seen := map[string]bool{}
	add := func(e *endpoint, topic string) {
		if e == nil {
			return
		}
		u := e.forTopic(topic)
		if !seen[u] {
			seen[u] = true
			probes = append(probes, probe{e, topic})
		}
	}
	add(p.def, checkID)
	topics := make([]string, 0, len(p.per))
	for t := range p.per {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		add(p.per[t], t)
	}
	var errs []error
	for _, pr := range probes {
		if err := p.probe(ctx, pr.e, pr.topic); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case len(errs) == 0:
		return nil
	case len(errs) == 1:
		return errs[0]
	}
	// Several: misconfigured wins over unavailable.
	err := errors.Join(errs...)
	for _, e := range errs {
		if publishers.IsMisconfigured(e) {
			return publishers.Misconfigured(err)
		}
	}
	return publishers.Unavailable(err)
}

// probe sends Check's HEAD request to e's URL for topic.
func (p *Publisher) probe(ctx context.Context, e *endpoint, topic string) error {
	target := e.forTopic(topic)
	shown := redact.URL(target)
	prefix := fmt.Errorf("webhook publisher: check %s (HEAD)", shown)
	rctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	stop := context.AfterFunc(p.closing, cancel)
	defer stop()
	req, err := http.NewRequestWithContext(rctx, http.MethodHead, target, http.NoBody)
	if err != nil {
		return publishers.Misconfigured(fmt.Errorf("%v: %s", prefix, redact.Text(err.Error())))
	}
	ts := p.cfg.Clock.Now().Unix()
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(HeaderID, checkID)
	req.Header.Set(HeaderTimestamp, fmt.Sprint(ts))
	sign(req.Header, p.keys, checkID, ts, nil)
	if e.hasUser {
		req.SetBasicAuth(e.user, e.pass)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return transportError(prefix, err, ctx, p.closing)
	}
	defer func() { _ = resp.Body.Close() }()
	code := resp.StatusCode
	err = responseError(prefix, resp)
	var se *StatusError
	switch {
	case err == nil, code == http.StatusMethodNotAllowed, code == http.StatusNotImplemented:
		return nil
	case code == http.StatusNotFound && e.template:
		return nil // the probe's topic, not the topics'
	case publishers.IsMisconfigured(err):
		return err
	case !errors.As(err, &se):
		return publishers.Unavailable(err)
	case code >= 500, code == http.StatusRequestTimeout, code == http.StatusTooEarly, code == http.StatusTooManyRequests:
		return publishers.Unavailable(fmt.Errorf("%v: %w", prefix, se))
	}
	return publishers.Misconfigured(fmt.Errorf("%v: %w", prefix, se))
}
