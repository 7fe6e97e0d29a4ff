package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outboxgo/outbox/internal/sqlkit"
	"github.com/outboxgo/outbox/stores"
)

// The schema of each table is a numbered series of migrations, up and
// down, kept as templates over the table's (validated) name. Migration 001
// of each is the schema of the first release: a table created then is at
// version 1. The plain files under migrations/ are these templates rendered
// with the default names, for teams that migrate with goose,
// golang-migrate or atlas (a test keeps them equal).
//
//go:embed schema
var schemaFS embed.FS

// The directories of schemaFS that hold each table's migrations.
const (
	outboxMigrations = "schema/outbox"
	inboxMigrations  = "schema/inbox"
)

// tableSchema is one table's migrations, rendered for its name.
type tableSchema struct {
	name       string
	migrations []sqlkit.Migration
}

func loadSchema(dir, table string) (tableSchema, error) {
	ms, err := sqlkit.LoadMigrations(schemaFS, dir, map[string]string{"Table": table})
	if err != nil {
		return tableSchema{}, fmt.Errorf("sqlite: %w", err)
	}
	return tableSchema{name: table, migrations: ms}, nil
}

func (t tableSchema) latest() int { return sqlkit.Latest(t.migrations) }

// upSQL is every up migration of t, in order.
func (t tableSchema) upSQL() string {
	ups := make([]string, len(t.migrations))
	for i, m := range t.migrations {
		ups[i] = m.Up
	}
	return strings.Join(ups, "\n")
}

// Migration is one table's migration step: see stores.Migration.
type Migration = stores.Migration

// Migrations returns the migrations of the tables cfg names (nil: the
// defaults), rendered for their names: the outbox table's in order, then
// the inbox table's. Teams that migrate with their own tool and other names
// than the defaults take them from here.
func Migrations(cfg *Config) ([]Migration, error) {
	ts, err := schemas(cfg)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, t := range ts {
		for _, m := range t.migrations {
			out = append(out, Migration{Table: t.name, Version: m.Version, Name: m.Name, Up: m.Up, Down: m.Down})
		}
	}
	return out, nil
}

// SchemaSQL returns the SQL that Migrate runs on an empty database for cfg
// (nil: the defaults), for `outbox migrate --print` and teams that apply it
// by hand: every up migration of the outbox table, then of the inbox table,
// then the version rows, which Migrate reads. Each statement is idempotent,
// so it may be run again; run it in one transaction.
func SchemaSQL(cfg *Config) (string, error) {
	ts, err := schemas(cfg)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	var rows []string
	for _, t := range ts {
		b.WriteString(t.upSQL())
		b.WriteString("\n")
		rows = append(rows, fmt.Sprintf("('%s', %d, %s)", t.name, t.latest(), nowMicros))
	}
	b.WriteString("-- The schema version of each table, which Migrate reads.\n")
	b.WriteString(versionTableSQL + ";\n")
	fmt.Fprintf(&b, "INSERT INTO %s AS v (table_name, version, applied_at)\n    VALUES %s\n", quote(VersionTable), strings.Join(rows, ", "))
	b.WriteString("    ON CONFLICT (table_name) DO UPDATE SET version = excluded.version, applied_at = excluded.applied_at\n")
	b.WriteString("    WHERE v.version < excluded.version;\n")
	return b.String(), nil
}

// nowMicros is the time in SQL, in microseconds since the Unix epoch.
const nowMicros = `CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)`

// schemas are the migrations of cfg's tables: the outbox's, the inbox's.
func schemas(cfg *Config) ([]tableSchema, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ob, err := loadSchema(outboxMigrations, c.Table)
	if err != nil {
		return nil, err
	}
	ib, err := loadSchema(inboxMigrations, c.InboxTable)
	if err != nil {
		return nil, err
	}
	return []tableSchema{ob, ib}, nil
}

// versionTableSQL creates the version table. Times are microseconds since
// the Unix epoch, as in the outbox table.
var versionTableSQL = `CREATE TABLE IF NOT EXISTS ` + quote(VersionTable) + ` (
    table_name TEXT    PRIMARY KEY,
    version    INTEGER NOT NULL,
    applied_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID`

var (
	setVersionSQL = `INSERT INTO ` + quote(VersionTable) + ` (table_name, version, applied_at) VALUES (?1, ?2, ?3)
		ON CONFLICT (table_name) DO UPDATE SET version = ?2, applied_at = ?3`
	deleteVersionSQL = `DELETE FROM ` + quote(VersionTable) + ` WHERE table_name = ?`
	readVersionSQL   = `SELECT version, applied_at FROM ` + quote(VersionTable) + ` WHERE table_name = ?`
	tableExistsSQL   = `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`
)

// rowQuerier is QueryRowContext, of a *sql.DB or a write transaction.
type rowQuerier func(ctx context.Context, query string, args ...any) *sql.Row

// tableState is a table's schema version as the database has it.
type tableState struct {
	// version is the table's: its row in the version table, or 1 for a
	// table without one (created before versions were recorded), or 0
	// when the table does not exist.
	version int
	// recorded says the version table has the table's row.
	recorded bool
	// applied is when the row was written (zero without one).
	applied time.Time
}

func readState(ctx context.Context, q rowQuerier, table string) (tableState, error) {
	var st tableState
	var tables, versions int
	if err := q(ctx, tableExistsSQL, table).Scan(&tables); err != nil {
		return st, err
	}
	if err := q(ctx, tableExistsSQL, VersionTable).Scan(&versions); err != nil {
		return st, err
	}
	if versions > 0 {
		var v, at int64
		switch err := q(ctx, readVersionSQL, table).Scan(&v, &at); {
		case err == nil:
			st.version, st.recorded, st.applied = int(v), true, micros(at)
		case !errors.Is(err, sql.ErrNoRows):
			return st, err
		}
	}
	switch {
	case tables == 0:
		st.version, st.applied = 0, time.Time{} // dropped by hand, if recorded
	case !st.recorded:
		st.version = 1
	}
	return st, nil
}

// Migrate brings the outbox table and the inbox table to their latest
// schema versions: see Store.Migrate.
func (d *DB) Migrate(ctx context.Context) error {
	return d.migrate(ctx, d.outboxSchema, d.inboxSchema)
}

// MigrateDown takes the outbox table and the inbox table back to schema
// version to, running their down migrations newest first, in one
// transaction; a table at or below to is left alone. Version 0 drops the
// tables, with every event and record in them. Migrate brings them up
// again.
func (d *DB) MigrateDown(ctx context.Context, to int) error {
	return d.migrateDown(ctx, to, d.outboxSchema, d.inboxSchema)
}

// SchemaVersion is one table's schema version: see stores.SchemaVersion.
type SchemaVersion = stores.SchemaVersion

// SchemaVersions reports the schema versions of the outbox table and the
// inbox table, in that order. It reads; it writes nothing.
func (d *DB) SchemaVersions(ctx context.Context) ([]SchemaVersion, error) {
	var out []SchemaVersion
	for _, t := range []tableSchema{d.outboxSchema, d.inboxSchema} {
		st, err := readState(ctx, d.db.QueryRowContext, t.name)
		if err != nil {
			return nil, fmt.Errorf("sqlite: schema versions: %w", err)
		}
		out = append(out, SchemaVersion{Table: t.name, Version: st.version, Latest: t.latest(), AppliedAt: st.applied})
	}
	return out, nil
}

// migrate applies the pending migrations of ts in one IMMEDIATE
// transaction, so that processes migrating together take turns: the second
// finds nothing left to do. A database already up to date costs a few
// reads and never takes the write lock.
func (d *DB) migrate(ctx context.Context, ts ...tableSchema) error {
	upToDate := func(ctx context.Context, tx *wtx) (bool, error) {
		for _, t := range ts {
			// On an error, the transaction finds out what is wrong.
			if st, err := readState(ctx, tx.queryRow, t.name); err == nil && st.recorded && st.version >= t.latest() {
				continue
			}
			return false, nil
		}
		return true, nil
	}
	type step struct {
		table    string
		from, to int
	}
	var steps []step
	w := wait{until: time.Now().Add(maxLockWait), gate: d.gate, skip: upToDate}
	err := immediate(ctx, d.db, w, func(ctx context.Context, tx *wtx) error {
		steps = steps[:0]
		if _, err := tx.exec(ctx, versionTableSQL); err != nil {
			return err
		}
		now := d.cfg.Clock.Now().UnixMicro()
		for _, t := range ts {
			st, err := readState(ctx, tx.queryRow, t.name)
			if err != nil {
				return err
			}
			pending := sqlkit.Pending(t.migrations, st.version)
			for _, m := range pending {
				if _, err := tx.exec(ctx, m.Up); err != nil {
					return fmt.Errorf("%s: migration %03d_%s: %w", t.name, m.Version, m.Name, err)
				}
			}
			if len(pending) == 0 && st.recorded {
				continue
			}
			to := max(st.version, t.latest())
			if _, err := tx.exec(ctx, setVersionSQL, t.name, to, now); err != nil {
				return err
			}
			steps = append(steps, step{t.name, st.version, to})
		}
		return nil
	})
	if errors.Is(err, errSkipped) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	for _, s := range steps {
		if s.from == s.to {
			d.cfg.Logger.Info("sqlite: recorded the schema version of an existing table", "table", s.table, "version", s.to)
		} else {
			d.cfg.Logger.Info("sqlite: migrated", "table", s.table, "from", s.from, "to", s.to)
		}
	}
	return nil
}

// migrateDown runs the down migrations of ts above version to, newest
// first, in one IMMEDIATE transaction.
func (d *DB) migrateDown(ctx context.Context, to int, ts ...tableSchema) error {
	if to < 0 {
		return fmt.Errorf("sqlite: migrate down to %d: versions start at 0 (no table)", to)
	}
	type step struct {
		table    string
		from, to int
	}
	var steps []step
	w := wait{until: time.Now().Add(maxLockWait), gate: d.gate}
	err := immediate(ctx, d.db, w, func(ctx context.Context, tx *wtx) error {
		steps = steps[:0]
		if _, err := tx.exec(ctx, versionTableSQL); err != nil {
			return err
		}
		now := d.cfg.Clock.Now().UnixMicro()
		for _, t := range ts {
			st, err := readState(ctx, tx.queryRow, t.name)
			if err != nil {
				return err
			}
			if st.version > t.latest() {
				return fmt.Errorf("%s is at version %d, newer than this package knows (%d): migrate it down with the release that took it there",
					t.name, st.version, t.latest())
			}
			for v := st.version; v > to; v-- {
				m := t.migrations[v-1]
				if _, err := tx.exec(ctx, m.Down); err != nil {
					return fmt.Errorf("%s: migration %03d_%s down: %w", t.name, m.Version, m.Name, err)
				}
			}
			switch {
			case to == 0:
				_, err = tx.exec(ctx, deleteVersionSQL, t.name)
			case st.version > to:
				_, err = tx.exec(ctx, setVersionSQL, t.name, to, now)
			}
			if err != nil {
				return err
			}
			if st.version > to {
				steps = append(steps, step{t.name, st.version, to})
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: migrate down: %w", err)
	}
	for _, s := range steps {
		d.cfg.Logger.Info("sqlite: migrated down", "table", s.table, "from", s.from, "to", s.to)
	}
	return nil
}
