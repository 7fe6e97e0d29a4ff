package redis

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/outboxgo/outbox/publishers"
)

// replyError is a Redis error reply, as go-redis returns it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

func TestClassify(t *testing.T) {
	const (
		unmarked = iota
		unavailable
		misconfigured
	)
	for _, c := range []struct {
		err  error
		want int
	}{
		{replyError("WRONGPASS invalid username-password pair or user is disabled."), misconfigured},
		{fmt.Errorf("failed to authenticate: %w", replyError("WRONGPASS invalid username-password pair")), misconfigured},
		{replyError("NOAUTH Authentication required."), misconfigured},
		{replyError("NOPERM this user has no permissions to run the 'xadd' command"), misconfigured},
		{replyError("ERR AUTH <password> called without any password configured for the default user."), misconfigured},
		{fmt.Errorf("failed to initialize connection options: %w", replyError("ERR DB index is out of range")), misconfigured},
		{replyError("ERR invalid DB index"), misconfigured},
		{replyError("ERR Protocol error: unauthenticated multibulk length"), misconfigured},
		{replyError("LOADING Redis is loading the dataset in memory"), unavailable},
		{replyError("READONLY You can't write against a read only replica."), unavailable},
		{io.EOF, unavailable},
		{errors.New("dial tcp: connection refused"), unavailable},
		{fmt.Errorf("%w: reply %q", errNotAppended, "QUEUED"), unavailable},
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), unmarked},
	} {
		err := classify(c.err)
		got := unmarked
		switch {
		case publishers.IsMisconfigured(err) && publishers.IsUnavailable(err):
			t.Errorf("%v: classified twice", c.err)
		case publishers.IsMisconfigured(err):
			got = misconfigured
		case publishers.IsUnavailable(err):
			got = unavailable
		}
		if got != c.want || publishers.IsPermanent(err) {
			t.Errorf("%v: got class %d (permanent %v), want %d", c.err, got, publishers.IsPermanent(err), c.want)
		}
	}
}

func TestIsEntryID(t *testing.T) {
	for s, want := range map[string]bool{"1700000000000-0": true, "0-1": true, "": false, "QUEUED": false, "1-": false, "-1": false, "1-a": false} {
		if isEntryID(s) != want {
			t.Errorf("isEntryID(%q) = %v", s, !want)
		}
	}
}
