package redis

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/publishers"
)

// Server errors that say Redis cannot take writes now.
var unavailablePrefixes = []string{"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "OOM", "NOREPLICAS"}

// Server errors that say Redis refuses the configuration: the credentials
// (a wrong password, a password where none is set, none where one is
// required), the user's permissions, or the database index. go-redis meets
// the first and the last while it sets a connection up (HELLO or AUTH,
// then SELECT), before any command of a pipeline is sent.
var misconfiguredPrefixes = []string{
	"WRONGPASS", "NOAUTH", "NOPERM",
	"ERR AUTH",             // AUTH with no password configured (Redis 6+)
	"ERR invalid password", // Redis < 6
	"ERR Client sent AUTH", // Redis < 6: AUTH with no password configured
	"ERR DB index is out of range",
	"ERR invalid DB index",
	"ERR SELECT is not allowed in cluster mode",
	"ERR Protocol error: unauthenticated", // a long command before AUTH
	// A command of the publisher's script refused by the ACL (its command
	// or its key): Redis 7.2+, then 7.0.
	"ERR ACL failure in script",
	"ERR The user executing the script can't",
}

// classify marks an error of a go-redis command the way Publish marks its
// messages' errors, for the relay: publishers.Misconfigured when Redis
// refuses the configuration (credentials, permissions, database),
// publishers.Unavailable when it cannot be reached or cannot take writes
// now, unmarked otherwise; nil stays nil. The Subscriber uses it to tell a
// refusal from an outage.
func classify(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, ErrClosed),
		errors.Is(err, goredis.ErrClosed),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, context.Canceled),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed):
		return publishers.Unavailable(err)
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return publishers.Unavailable(err)
	}
	var re goredis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		if hasAnyPrefix(msg, misconfiguredPrefixes) {
			return publishers.Misconfigured(err)
		}
		if hasAnyPrefix(msg, unavailablePrefixes) {
			return publishers.Unavailable(err)
		}
		return err
	}
	// Not a reply from Redis: the way to it failed (e.g. a dial error
	// go-redis does not wrap as net.Error).
	return publishers.Unavailable(err)
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
