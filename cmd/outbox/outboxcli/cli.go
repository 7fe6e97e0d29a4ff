// Package outboxcli is the outbox command line: `outbox migrate`, `relay`,
// `status`, `dead` and `replay`. It is importable so that a program can embed
// the commands (or test them) without a subprocess.
package outboxcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Main runs the command line args and returns the process exit code. Errors
// are printed to stderr as one line, "outbox: <what went wrong>".
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "outbox: "+oneLine(err.Error()))
		return 1
	}
	return 0
}

// globals are the flags every command takes.
type globals struct {
	databaseURL string
	schema      string
	table       string
	logFormat   string
	logLevel    string
	stdout      io.Writer
	stderr      io.Writer
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
  outbox relay   --database-url postgres://localhost/app --broker-url nats://localhost:4222
  outbox status  --database-url postgres://localhost/app

Every flag can also be set by an environment variable, named after the flag:
--database-url is OUTBOX_DATABASE_URL, --broker-url is OUTBOX_BROKER_URL.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.databaseURL, "database-url", "", "the outbox's database: postgres://user:pass@host:5432/db, mysql://user:pass@host:3306/db or sqlite:///path/to/file.db")
	pf.StringVar(&g.schema, "schema", "outbox", "schema that holds the outbox table (MySQL, SQLite: the table is <schema>_<table>)")
	pf.StringVar(&g.table, "table", "messages", "name of the outbox table")
	pf.StringVar(&g.logFormat, "log-format", "text", "log format: text or json")
	pf.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.AddCommand(newMigrate(g), newRelay(g), newStatus(g), newDead(g), newDeadLetter(g), newReplay(g), newDemo(g))
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := envDefaults(cmd.Flags()); err != nil {
			return err
		}
		_, err := g.logger() // a bad --log-format fails every command, early
		return err
	}
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
		name := "OUTBOX_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			}
		}
	})
	return errors.Join(errs...)
}

func (g *globals) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch g.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(g.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(g.stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", g.logFormat)
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
