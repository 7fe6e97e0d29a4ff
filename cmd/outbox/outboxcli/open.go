package outboxcli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/stores"
)

// db is an opened outbox database.
type db struct {
	backend.DB
	store stores.Store
	where string // the redacted URL, for messages
	table string // the table as the database names it: outbox.messages, outbox_messages
}

// openMode says whether a command may create the database.
type openMode int

const (
	// existing refuses a database that does not exist yet (a SQLite
	// file): every command but migrate.
	existing openMode = iota
	// create makes it (migrate).
	create
)

// databaseOptions maps the flags to what every database takes.
func (g *globals) databaseOptions(mode openMode) *backend.DatabaseOptions {
	return &backend.DatabaseOptions{Schema: g.schema, Table: g.table, ClaimTimeout: g.claimTimeout,
		Create: mode == create, Logger: g.logger(), Application: g.application}
}

// checkDB validates the database flags without connecting: the URL's
// scheme and form, the schema and table names.
func (g *globals) checkDB(c *checks) {
	g.checkNames(c)
	if g.databaseURL == "" {
		c.add(fmt.Errorf("no database-url: set --database-url or %s", envName("database-url")))
		return
	}
	d, err := backend.LookupDatabase(g.databaseURL)
	if err != nil {
		c.add(flagError("database-url", err))
		return
	}
	if d.Validate != nil {
		c.add(d.Validate(g.databaseURL))
	}
	if d.SchemaSQL != nil { // the names, as this database spells them
		_, err := d.SchemaSQL(g.databaseOptions(existing))
		c.add(err)
	}
}

// flagError names the flag in a registry error, which starts with the
// redacted URL: "--database-url mysqlx://…: unsupported scheme".
func flagError(flag string, err error) error {
	return fmt.Errorf("--%s %w", flag, err)
}

// openDB connects to the database the flags name. It pings, so an
// unreachable database is reported here, once, by name. The caller has
// validated the flags (checkDB).
func (g *globals) openDB(ctx context.Context, mode openMode) (*db, error) {
	d, err := backend.OpenDatabase(ctx, g.databaseURL, g.databaseOptions(mode))
	if err != nil {
		return nil, err
	}
	return &db{DB: d, store: d.Store(), where: redact.URL(g.databaseURL), table: d.Table()}, nil
}

// openChecked is how a command that reads or changes an existing outbox
// table starts: it adds the database flags' checks to c, returns every
// error c gathered, and only then opens the database.
func (g *globals) openChecked(cmd *cobra.Command, c *checks) (*db, error) {
	g.checkDB(c)
	if err := c.err(); err != nil {
		return nil, err
	}
	return g.openDB(cmd.Context(), existing)
}

// close releases the database; its error does not change the command's.
func (d *db) close() { _ = d.Close() }

// check returns the advice the user needs when the outbox table is missing.
func (d *db) check(ctx context.Context) error {
	return schemaMissing(d.CheckSchema(ctx), d)
}

// schemaMissing turns ErrSchemaMissing into the advice the user needs.
func schemaMissing(err error, d *db) error {
	if errors.Is(err, outbox.ErrSchemaMissing) {
		return fmt.Errorf("the outbox table %s does not exist in %s: run `outbox migrate` first", d.table, d.where)
	}
	return err
}
