// Package outboxcli is the outbox command line: `outbox migrate`, `relay`,
// `status`, `dead` (list, show, retry, discard), `dead-letter`, `replay`,
// `purge`, `ui` and `demo`. It is importable so
// that a program can embed the commands (or test them) without a
// subprocess.
package outboxcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/redact"
)

// ExitInterrupted is Main's exit code when the command was interrupted
// (its context was cancelled: SIGINT, SIGTERM) before it finished, as a
// shell reports a process killed by SIGINT. `outbox relay` is the
// exception: an interrupted relay has stopped as asked and exits 0.
const ExitInterrupted = 130

// Main runs the command line args and returns the process exit code: 0 on
// success, 1 on an error, ExitInterrupted when ctx ended first. Errors are
// printed to stderr as one line, "outbox: <what went wrong>", with every
// secret in it hidden.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		return 0
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "outbox: interrupted")
		return ExitInterrupted
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "outbox: interrupted: "+oneLine(redact.Text(err.Error())))
		return ExitInterrupted
	}
	fmt.Fprintln(stderr, "outbox: "+oneLine(redact.Text(err.Error())))
	return 1
}

// globals are the flags every command takes, and what the commands share.
type globals struct {
	databaseURL string
	schema      string
	table       string
	logFormat   string
	logLevel    string
	stdout      io.Writer
	stderr      io.Writer

	// claimTimeout is the stores' Config.ClaimTimeout (relay's
	// --claim-timeout); zero elsewhere: the store's default.
	claimTimeout time.Duration
	// application names the command's database connections (PostgreSQL's
	// application_name): "outbox <command>", and for a relay "outbox
	// relay <host> pid <pid>", which the dashboard lists as a relay seen.
	application string
	// onCommandLine are the flags given on the command line (not from the
	// environment).
	onCommandLine map[string]bool
	log           *slog.Logger
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "outbox",
		Short: "A transactional outbox: record events in your database transaction, relay them to a broker",
		Long: `outbox relays events that your services record in their own database
transactions to a message broker: at least once, never lost, never from a
transaction that rolled back.

Get started:
  outbox migrate --database-url postgres://localhost/app
  outbox relay   --database-url postgres://localhost/app --broker-url nats://localhost:4222 --stream EVENTS
  outbox status  --database-url postgres://localhost/app

Databases, by URL scheme:
` + databaseHelp() + `

Every flag can also be set by an environment variable, named after the flag:
--database-url is OUTBOX_DATABASE_URL, --broker-url is OUTBOX_BROKER_URL.
Passwords, tokens and secret-looking URL parameters are never printed.

Exit status: 0 on success, 1 on an error (one line on stderr), 130 when
interrupted (SIGINT, SIGTERM) before the command finished; a relay stopped
by a signal has done as asked and exits 0.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.databaseURL, "database-url", "", "the outbox's database: a "+strings.Join(backend.DatabaseSchemes(), ":, ")+": URL (see 'outbox --help')")
	pf.StringVar(&g.schema, "schema", "outbox", "schema that holds the outbox table, not empty (MySQL, SQLite: the table is <schema>_<table>)")
	pf.StringVar(&g.table, "table", "messages", "name of the outbox table, not empty")
	pf.StringVar(&g.logFormat, "log-format", "text", "log format: text or json")
	pf.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.AddCommand(newMigrate(g), newRelay(g), newStatus(g), newDead(g), newDeadLetter(g), newReplay(g), newPurge(g), newDemo(g), newUI(g))
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		g.application = cmd.CommandPath()
		g.onCommandLine = map[string]bool{}
		cmd.Flags().Visit(func(f *pflag.Flag) { g.onCommandLine[f.Name] = true })
		if err := envDefaults(cmd.Flags()); err != nil {
			return err
		}
		log, err := g.newLogger() // a bad --log-format fails every command, early
		g.log = log
		return err
	}
	// Help goes through the redactor too: a flag's default may be a URL.
	defaultHelp := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		var buf bytes.Buffer
		cmd.SetOut(&buf)
		defaultHelp(cmd, args)
		cmd.SetOut(stdout)
		_, _ = io.WriteString(stdout, redact.Text(buf.String()))
	})
	return root
}

// envDefaults sets every flag not given on the command line from its
// environment variable, OUTBOX_ + the flag's name in upper case with dashes
// as underscores.
func envDefaults(fs *pflag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		name := envName(f.Name)
		if v, ok := os.LookupEnv(name); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, redact.URL(v), err))
			}
		}
	})
	return errors.Join(errs...)
}

// envName is the environment variable of flag name.
func envName(flag string) string {
	return "OUTBOX_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// flagRef names flag name for a message: "--batch-size", or "--batch-size
// (OUTBOX_BATCH_SIZE)" when its value came from the environment.
func (g *globals) flagRef(cmd *cobra.Command, name string) string {
	if f := cmd.Flags().Lookup(name); f != nil && f.Changed && !g.onCommandLine[name] {
		return "--" + name + " (" + envName(name) + ")"
	}
	return "--" + name
}

// oneLine folds a multi-line error (pgx lists every address it tried) into
// one line, dropping repeated lines.
func oneLine(s string) string {
	var b strings.Builder
	prev := ""
	for _, l := range strings.Split(s, "\n") {
		l = strings.Join(strings.Fields(l), " ")
		if l == "" || l == prev {
			continue
		}
		if b.Len() > 0 {
			if strings.HasSuffix(prev, ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(l)
		prev = l
	}
	return b.String()
}
