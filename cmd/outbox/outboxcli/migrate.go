package outboxcli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/redact"
)

func newMigrate(g *globals) *cobra.Command {
	var print bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create the outbox schema, table and indexes (idempotent)",
		Long: `migrate brings the outbox table and the inbox table to the latest schema
version: it applies, in order and under a lock, the numbered migrations
newer than the version the database records. It is safe to run again and
from several processes at once. On PostgreSQL and MySQL a step that
changes a table another transaction is using waits for it 2 s at a time,
letting the application's writes through in between, for about a minute;
then it fails, naming the table. On SQLite it creates the database file if
need be: the only command that does.

With --print it connects to nothing and prints the SQL instead, for teams
that migrate with goose, golang-migrate or atlas: that of the database of
--database-url's scheme, PostgreSQL's without one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := g.checks(cmd)
			if print {
				return g.printSchema(c)
			}
			g.checkDB(c)
			if err := c.err(); err != nil {
				return err
			}
			d, err := g.openDB(cmd.Context(), create)
			if err != nil {
				return err
			}
			defer d.close()
			if err := d.Migrate(cmd.Context()); err != nil {
				return fmt.Errorf("migrate %s: %s", d.where, redact.Text(err.Error()))
			}
			fmt.Fprintf(g.stdout, "outbox table %s is ready in %s\n", d.table, d.where)
			vs, err := d.SchemaVersions(cmd.Context())
			if err != nil {
				return fmt.Errorf("schema versions in %s: %s", d.where, redact.Text(err.Error()))
			}
			for _, v := range vs {
				fmt.Fprintf(g.stdout, "  %s: schema version %d of %d\n", v.Table, v.Version, v.Latest)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&print, "print", false, "print the SQL instead of running it")
	return cmd
}

// printSchema prints the SQL that migrate runs, for the database of
// --database-url (PostgreSQL's without one), connecting to nothing.
func (g *globals) printSchema(c *checks) error {
	g.checkNames(c)
	if err := c.err(); err != nil {
		return err
	}
	u := g.databaseURL
	if u == "" {
		u = "postgres:"
	}
	d, err := backend.LookupDatabase(u)
	if err != nil {
		return flagError("database-url", err)
	}
	if d.SchemaSQL == nil {
		return fmt.Errorf("%s has no SQL to print", d.Name)
	}
	ddl, err := d.SchemaSQL(g.databaseOptions(existing))
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(g.stdout, ddl)
	return err
}
