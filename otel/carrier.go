package otel

import (
	"strings"
	"unicode/utf8"

	"github.com/outboxgo/outbox"
)

// carrier is a message's headers as a propagation.TextMapCarrier. Get
// matches names in any case, since some brokers and HTTP hops change it
// (Traceparent).
type carrier map[string]string

// Get returns the value of the header named key, in any case.
func (c carrier) Get(key string) string {
	if v, ok := c[key]; ok {
		return v
	}
	for k, v := range c {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return ""
}

// Set sets the header key to value.
func (c carrier) Set(key, value string) { c[key] = value }

// Keys lists the header names.
func (c carrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// has reports whether h holds one of fields (lower-case names), in any
// case.
func has(h map[string]string, fields []string) bool {
	if len(h) == 0 {
		return false
	}
	for _, f := range fields {
		if carrier(h).Get(f) != "" {
			return true
		}
	}
	return false
}

// validHeader reports whether outbox.Enqueue would accept the header: an
// RFC 9110 token outside outbox.ReservedHeaderPrefixes, a value without
// control characters (TAB aside) or surrounding space. A propagator's
// header that fails is not injected, so that the message stays valid for
// every store and publisher.
func validHeader(k, v string) bool {
	if k == "" {
		return false
	}
	for i := range len(k) {
		c := k[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	lower := strings.ToLower(k)
	for _, p := range outbox.ReservedHeaderPrefixes {
		if strings.HasPrefix(lower, p) {
			return false
		}
	}
	for i := range len(v) {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return utf8.ValidString(v) && strings.Trim(v, " \t") == v
}
