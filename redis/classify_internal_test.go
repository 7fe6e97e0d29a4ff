package redis

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/outboxgo/outbox/publishers"
)

// TestClassify: the classes of Redis's replies (serverError stands for
// one, as go-redis returns it) and of other errors.
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
		{serverError("WRONGPASS invalid username-password pair or user is disabled."), misconfigured},
		{fmt.Errorf("failed to authenticate: %w", serverError("WRONGPASS invalid username-password pair")), misconfigured},
		{serverError("NOAUTH Authentication required."), misconfigured},
		{serverError("NOPERM this user has no permissions to run the 'xadd' command"), misconfigured},
		{serverError("ERR AUTH <password> called without any password configured for the default user."), misconfigured},
		{fmt.Errorf("failed to initialize connection options: %w", serverError("ERR DB index is out of range")), misconfigured},
		{serverError("ERR invalid DB index"), misconfigured},
		{serverError("ERR Protocol error: unauthenticated multibulk length"), misconfigured},
		{serverError("ERR ACL failure in script: User keys has no permissions to access the 'other:events' key"), misconfigured},
		{serverError("ERR The user executing the script can't run this command or subcommand"), misconfigured},
		{serverError("ERR The user executing the script can't access at least one of the keys mentioned in the command"), misconfigured},
		{serverError("LOADING Redis is loading the dataset in memory"), unavailable},
		{serverError("READONLY You can't write against a read only replica."), unavailable},
		{io.EOF, unavailable},
		{errors.New("dial tcp: connection refused"), unavailable},
		{fmt.Errorf("%w: reply %q", errNotAppended, "QUEUED"), unavailable},
		{serverError("WRONGTYPE Operation against a key holding the wrong kind of value"), unmarked},
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
