package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
)

// bodyExcerpt is how many bytes of a refusal's body its error quotes.
const bodyExcerpt = 256

// drainLimit is how much of a response body is read to reuse the
// connection; a longer body closes it.
const drainLimit = 64 << 10

// StatusError is the error of a response other than 2xx: its status, its
// Retry-After (when the receiver sent one) and the first bytes of its body.
// Get it with errors.As.
type StatusError struct {
	StatusCode int
	// RetryAfter is the receiver's Retry-After as a duration (an HTTP date
	// is taken relative to now), zero when absent or unreadable.
	RetryAfter time.Duration
	// Location is a redirect's target, redacted.
	Location string
	// Body is the first bytes of the body, at most 256.
	Body string
}

func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Location != "" {
		fmt.Fprintf(&b, ", redirect to %s not followed (update the endpoint)", e.Location)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, ", Retry-After %v", e.RetryAfter)
	}
	if e.Body != "" {
		fmt.Fprintf(&b, ", body %q", e.Body)
	}
	return b.String()
}

// responseError reads (part of) resp's body, which the caller closes, and
// returns nil for a 2xx, else its StatusError after prefix, classified:
//   - 3xx: permanent (redirects are never followed);
//   - 401 and 403: misconfigured (the receiver refuses the credentials or
//     the signature, the same for every message);
//   - 408, 425, 429 and 5xx: a plain error, retried with the relay's backoff;
//   - any other 4xx: permanent (410 Gone, 413, a 400 the receiver will
//     give again).
func responseError(prefix error, resp *http.Response) error {
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
		return nil
	}
	se := &StatusError{StatusCode: code, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	buf := make([]byte, bodyExcerpt)
	n, _ := io.ReadFull(resp.Body, buf)
	se.Body = strings.ToValidUTF8(string(buf[:n]), "\uFFFD")
	if n == bodyExcerpt {
		se.Body = strings.TrimRightFunc(se.Body, func(r rune) bool { return r == utf8.RuneError }) + "…"
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	if code >= 300 && code < 400 {
		se.Location = redact.URL(resp.Header.Get("Location"))
		if se.Location == "" {
			se.Location = "(no Location)"
		}
	}
	err := fmt.Errorf("%v: %w", prefix, se)
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return publishers.Misconfigured(err)
	case code == http.StatusRequestTimeout, code == http.StatusTooEarly, code == http.StatusTooManyRequests, code >= 500:
		return publishers.RetryAfter(err, se.RetryAfter)
	default: // 1xx never gets here; 3xx and the other 4xx
		return publishers.Permanent(err)
	}
}

// retryAfter reads a Retry-After value, seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now).Round(time.Second)
	}
	return 0
}

// transportError classifies an error of the request itself (no response):
// an address the SSRF guard refuses, or a certificate that does not
// verify, is misconfigured; anything else — refused or reset connections,
// DNS failures, timeouts, ctx or the publisher closing — unavailable.
func transportError(prefix, err error, ctx, closing context.Context) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its URL may hold secrets of the query; prefix has it redacted
	}
	switch {
	case ctx.Err() != nil:
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	case closing.Err() != nil:
		err = fmt.Errorf("%w (%v)", ErrClosed, err)
	case errors.Is(err, context.DeadlineExceeded):
		err = fmt.Errorf("timed out: %w", err)
	}
	wrapped := &shownError{msg: prefix.Error() + ": " + redact.Text(err.Error()), err: err}
	var (
		cve *tls.CertificateVerificationError
		uae x509.UnknownAuthorityError
		he  x509.HostnameError
		cie x509.CertificateInvalidError
	)
	switch {
	case errors.Is(err, ErrForbiddenAddress):
		return publishers.Misconfigured(wrapped)
	case errors.As(err, &cve), errors.As(err, &uae), errors.As(err, &he), errors.As(err, &cie):
		return publishers.Misconfigured(wrapped)
	}
	return publishers.Unavailable(wrapped)
}

// shownError is err under a message of its own (its text redacted),
// keeping err's chain for errors.Is and errors.As.
type shownError struct {
	msg string
	err error
}

func (e *shownError) Error() string { return e.msg }
func (e *shownError) Unwrap() error { return e.err }
