package outboxcli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/mysql"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/sqlite"
)

func newMigrate(g *globals) *cobra.Command {
	var print bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create the outbox schema, table and indexes (idempotent)",
		Long: `migrate creates the outbox schema, table and indexes if they do not exist.
It is safe to run again, and from several processes at once. On SQLite it
creates the database file if need be: the only command that does.

With --print it connects to nothing and prints the SQL instead, for teams
that migrate with goose, golang-migrate or atlas (PostgreSQL's, or MySQL's or
SQLite's when --database-url is a mysql: or sqlite: URL).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := g.checks(cmd)
			if print {
				g.checkNames(c)
				if err := c.err(); err != nil {
					return err
				}
				ddl, err := postgres.SchemaSQL(g.postgresConfig())
				switch {
				case strings.HasPrefix(g.databaseURL, "sqlite:"):
					ddl, err = sqlite.SchemaSQL(g.sqliteConfig())
				case strings.HasPrefix(g.databaseURL, "mysql:"):
					ddl, err = mysql.SchemaSQL(g.mysqlConfig())
				}
				if err != nil {
					return err
				}
				_, err = fmt.Fprint(g.stdout, ddl)
				return err
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
			if err := d.store.Migrate(cmd.Context()); err != nil {
				return fmt.Errorf("migrate %s: %s", d.where, pgErrText(err))
			}
			fmt.Fprintf(g.stdout, "outbox table %s is ready in %s\n", d.table, d.where)
			return nil
		},
	}
	cmd.Flags().BoolVar(&print, "print", false, "print the SQL instead of running it")
	return cmd
}
