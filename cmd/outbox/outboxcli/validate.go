package outboxcli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// checks collects flag errors, each naming its flag, so that a command
// reports every bad flag at once and before it connects to anything.
type checks struct {
	g    *globals
	cmd  *cobra.Command
	errs []error
}

func (g *globals) checks(cmd *cobra.Command) *checks { return &checks{g: g, cmd: cmd} }

func (c *checks) failf(flag, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s %s", c.g.flagRef(c.cmd, flag), fmt.Sprintf(format, args...)))
}

// intIn wants lo <= v <= hi.
func (c *checks) intIn(flag string, v, lo, hi int) {
	if v < lo || v > hi {
		c.failf(flag, "%d: must be %d to %d", v, lo, hi)
	}
}

// durIn wants lo <= d <= hi.
func (c *checks) durIn(flag string, d, lo, hi time.Duration) {
	switch {
	case d < 0:
		c.failf(flag, "%v: must not be negative", d)
	case d < lo || d > hi:
		if lo == 0 {
			c.failf(flag, "%v: must be at most %v", d, hi)
		} else {
			c.failf(flag, "%v: must be %v to %v", d, lo, hi)
		}
	}
}

// notEmpty wants a non-empty string.
func (c *checks) notEmpty(flag, v, what string) {
	if v == "" {
		c.failf(flag, "is empty: %s", what)
	}
}

// conflict fails when both flags were set (on the command line or by
// their environment variables).
func (c *checks) conflict(a, b, why string) {
	if c.cmd.Flags().Changed(a) && c.cmd.Flags().Changed(b) {
		c.errs = append(c.errs, fmt.Errorf("%s and %s do not go together: %s", c.g.flagRef(c.cmd, a), c.g.flagRef(c.cmd, b), why))
	}
}

func (c *checks) add(err error) {
	if err != nil {
		c.errs = append(c.errs, err)
	}
}

func (c *checks) err() error { return errors.Join(c.errs...) }

// checkNames validates --schema and --table: an empty identifier is an
// error, not "no schema" (PostgreSQL would fall back to its default
// schema, MySQL and SQLite would name the table "_messages").
func (g *globals) checkNames(c *checks) {
	c.notEmpty("schema", g.schema, "name the schema that holds the outbox table (default outbox)")
	c.notEmpty("table", g.table, "name the outbox table (default messages)")
}
