package outboxcli

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/stores"
)

// formatCursor writes a position in the dead list (see stores.DeadCursor)
// as `dead list --after` takes it: the record's creation time (RFC 3339,
// UTC, to the nanosecond), a comma, its ID.
func formatCursor(c stores.DeadCursor) string {
	return c.CreatedAt.UTC().Format(time.RFC3339Nano) + "," + c.ID.String()
}

// parseCursor reads what formatCursor wrote.
func parseCursor(s string) (*stores.DeadCursor, error) {
	at, id, ok := strings.Cut(s, ",")
	if !ok {
		return nil, fmt.Errorf("%s is not a cursor (TIME,ID, as the previous page printed it)", display(s))
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return nil, fmt.Errorf("%s is not a cursor: %s is not an RFC 3339 time", display(s), display(at))
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return nil, fmt.Errorf("%s is not a cursor: %s is not an event ID", display(s), display(id))
	}
	return &stores.DeadCursor{CreatedAt: t, ID: u}, nil
}

// timeFlag checks an RFC 3339 time given to flag and returns it; zero
// when it is empty or bad (the error is in c).
func (c *checks) timeFlag(flag, s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		c.failf(flag, "%s: not an RFC 3339 time (like 2026-01-02T15:04:05Z)", display(s))
		return time.Time{}
	}
	return t
}

// ageFlag checks a non-negative duration given to flag and returns the
// time that much before now: what is older was created (or published)
// before it. Zero when the flag was not given.
func (c *checks) ageFlag(flag string, d time.Duration, now time.Time) time.Time {
	if !c.cmd.Flags().Changed(flag) {
		return time.Time{}
	}
	if d < 0 {
		c.failf(flag, "%v: must not be negative", d)
		return time.Time{}
	}
	return now.Add(-d)
}
