package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox/internal/sqlkit"
	"github.com/outboxgo/outbox/stores"
)

// The migrations of each table, as templates over the validated schema and
// table names ({{.Schema}}, {{.Table}}): schema/outbox for the outbox table,
// schema/inbox for the inbox table. Version 1 of each is the schema as it
// was before versioning, so a table any earlier Migrate created is version
// 1. The plain files under migrations/ are these rendered with the default
// names, for goose, golang-migrate or atlas (a test keeps them equal).
//
//go:embed schema
var schemaFS embed.FS

// Migration is one table's migration step: see stores.Migration.
type Migration = stores.Migration

// SchemaVersion is one table's schema version: see stores.SchemaVersion.
type SchemaVersion = stores.SchemaVersion

// Migrations returns the migrations of the tables cfg names (nil: the
// defaults), rendered for its names: the outbox table's in order, then the
// inbox table's. Teams that migrate with their own tool and other names
// than the defaults take them from here.
func Migrations(cfg *Config) ([]Migration, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMigrator(c)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, t := range []*migTable{m.outbox, m.inbox} {
		for _, s := range t.steps {
			out = append(out, Migration{Table: t.display, Version: s.Version, Name: s.Name, Up: s.Up, Down: s.Down})
		}
	}
	return out, nil
}

// SchemaSQL returns the SQL that Migrate runs on an empty database for cfg
// (nil: the defaults), for `outbox migrate --print` and teams that apply it
// by hand: every up migration of the outbox table, then of the inbox table,
// then the version rows. Each statement is idempotent, so it may be run
// again; run it in one transaction.
func SchemaSQL(cfg *Config) (string, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return "", err
	}
	m, err := newMigrator(c)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	var rows []string
	for _, t := range []*migTable{m.outbox, m.inbox} {
		for _, s := range t.steps {
			b.WriteString(s.Up)
			b.WriteString("\n")
		}
		rows = append(rows, fmt.Sprintf("('%s', %d, now())", t.name, sqlkit.Latest(t.steps)))
	}
	b.WriteString("-- The schema version of each table, which Migrate reads.\n")
	b.WriteString(m.versionsDDL)
	fmt.Fprintf(&b, "INSERT INTO %s AS v (table_name, version, applied_at)\n    VALUES %s\n", m.nm.versions, strings.Join(rows, ", "))
	b.WriteString("    ON CONFLICT (table_name) DO UPDATE SET version = EXCLUDED.version, applied_at = EXCLUDED.applied_at\n")
	b.WriteString("    WHERE v.version < EXCLUDED.version;\n")
	return b.String(), nil
}

// migrator applies the migrations of a Config's tables.
type migrator struct {
	cfg           Config
	nm            names
	schemaLock    int64
	outbox, inbox *migTable
	versionsDDL   string
	tableLock     sqlkit.TableLock // for each try of a migration (see inTx)
}

// migTable is one table's migrations.
type migTable struct {
	name      string // messages: the version row's table_name
	display   string // outbox.messages
	qualified string // "outbox"."messages"
	// lock is the advisory lock Migrate took for this table before
	// versioning, taken still so that an older process migrating at the
	// same moment waits.
	lock  int64
	steps []sqlkit.Migration
}

func newMigrator(c Config) (*migrator, error) {
	nm := c.names()
	load := func(dir, table, lockPrefix string) (*migTable, error) {
		steps, err := sqlkit.LoadMigrations(schemaFS, "schema/"+dir, map[string]any{"Schema": c.Schema, "Table": table,
			"Enqueue": nm.enqueue, "Channel": nm.channel, "LockSpace": nm.lockSpace})
		if err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		return &migTable{name: table, display: c.Schema + "." + table, qualified: `"` + c.Schema + `"."` + table + `"`,
			lock: lockKey(lockPrefix + c.Schema + "." + table), steps: steps}, nil
	}
	ob, err := load("outbox", c.Table, "outbox-migrate:")
	if err != nil {
		return nil, err
	}
	ib, err := load("inbox", c.InboxTable, "outbox-inbox-migrate:")
	if err != nil {
		return nil, err
	}
	return &migrator{cfg: c, nm: nm, schemaLock: lockKey("outbox-migrate-schema:" + c.Schema), outbox: ob, inbox: ib,
		tableLock: sqlkit.DefaultTableLock,
		versionsDDL: `CREATE TABLE IF NOT EXISTS ` + nm.versions + ` (
    table_name text        PRIMARY KEY,
    version    integer     NOT NULL,
    applied_at timestamptz NOT NULL
);
`}, nil
}

func lockKey(s string) int64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return int64(h.Sum64())
}

// up brings each of ts to its latest version in one transaction, under the
// schema's advisory lock: processes migrating at once take turns, and the
// later ones find nothing to do.
func (m *migrator) up(ctx context.Context, begin beginFunc, ts ...*migTable) error {
	return m.inTx(ctx, begin, "migrate", ts, func(tx migTx) error {
		if err := tx.exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+m.nm.schema+";\n"+m.versionsDDL); err != nil {
			return err
		}
		for _, t := range ts {
			cur, recorded, err := m.current(ctx, tx, t, true)
			if err != nil {
				return err
			}
			latest := sqlkit.Latest(t.steps)
			if cur > latest {
				m.cfg.Logger.Warn("postgres: table is at a newer schema version than this package knows; left as it is",
					"table", t.display, "version", cur, "latest_known", latest)
				continue
			}
			for _, s := range sqlkit.Pending(t.steps, cur) {
				if err := tx.exec(ctx, s.Up); err != nil {
					return fmt.Errorf("%s version %d (%s): %w", t.display, s.Version, s.Name, err)
				}
				m.cfg.Logger.Info("postgres: migrated", "table", t.display, "version", s.Version, "step", s.Name)
			}
			if cur == latest && recorded {
				continue
			}
			if err := m.record(ctx, tx, t, latest); err != nil {
				return err
			}
		}
		return nil
	})
}

// down takes every table above version to back to it, newest step first.
func (m *migrator) down(ctx context.Context, begin beginFunc, to int) error {
	ts := []*migTable{m.inbox, m.outbox}
	if to < 0 {
		return fmt.Errorf("postgres: migrate down: version %d: negative", to)
	}
	return m.inTx(ctx, begin, "migrate down", ts, func(tx migTx) error {
		for _, t := range ts {
			if latest := sqlkit.Latest(t.steps); to > latest {
				return fmt.Errorf("%s: version %d: above the latest, %d", t.display, to, latest)
			}
		}
		var haveVersions bool
		if err := tx.scan(ctx, `SELECT to_regclass($1) IS NOT NULL`, []any{m.nm.versions}, &haveVersions); err != nil {
			return err
		}
		for _, t := range ts {
			cur, _, err := m.current(ctx, tx, t, haveVersions)
			if err != nil {
				return err
			}
			if cur > sqlkit.Latest(t.steps) {
				return fmt.Errorf("%s is at version %d, newer than this package knows (%d): migrate it down with the version that made it",
					t.display, cur, sqlkit.Latest(t.steps))
			}
			if cur <= to {
				continue
			}
			for v := cur; v > to; v-- {
				s := t.steps[v-1]
				if err := tx.exec(ctx, s.Down); err != nil {
					return fmt.Errorf("%s version %d (%s) down: %w", t.display, s.Version, s.Name, err)
				}
				m.cfg.Logger.Info("postgres: migrated down", "table", t.display, "version", v-1, "step", s.Name)
			}
			if to == 0 {
				if haveVersions {
					if err := tx.exec(ctx, `DELETE FROM `+m.nm.versions+` WHERE table_name = $1`, t.name); err != nil {
						return err
					}
				}
				continue
			}
			if !haveVersions {
				if err := tx.exec(ctx, m.versionsDDL); err != nil {
					return err
				}
				haveVersions = true
			}
			if err := m.record(ctx, tx, t, to); err != nil {
				return err
			}
		}
		return nil
	})
}

// versions reads each table's version, without a lock.
func (m *migrator) versions(ctx context.Context, begin beginFunc) ([]SchemaVersion, error) {
	var out []SchemaVersion
	err := m.inTx(ctx, begin, "schema versions", nil, func(tx migTx) error {
		var haveVersions bool
		if err := tx.scan(ctx, `SELECT to_regclass($1) IS NOT NULL`, []any{m.nm.versions}, &haveVersions); err != nil {
			return err
		}
		for _, t := range []*migTable{m.outbox, m.inbox} {
			v := SchemaVersion{Table: t.display, Latest: sqlkit.Latest(t.steps)}
			var recorded bool
			var err error
			if v.Version, recorded, err = m.current(ctx, tx, t, haveVersions); err != nil {
				return err
			}
			if recorded {
				if err := tx.scan(ctx, `SELECT applied_at FROM `+m.nm.versions+` WHERE table_name = $1`, []any{t.name}, &v.AppliedAt); err != nil {
					return err
				}
				v.AppliedAt = v.AppliedAt.UTC()
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// current returns t's version: its version row's when there is one
// (recorded), else 1 when the table exists (made before versioning), else 0.
func (m *migrator) current(ctx context.Context, tx migTx, t *migTable, haveVersions bool) (v int, recorded bool, err error) {
	if haveVersions {
		var n int
		if err := tx.scan(ctx, `SELECT count(*), coalesce(max(version), 0) FROM `+m.nm.versions+` WHERE table_name = $1`,
			[]any{t.name}, &n, &v); err != nil {
			return 0, false, err
		}
		if n > 0 {
			return v, true, nil
		}
	}
	var exists bool
	if err := tx.scan(ctx, `SELECT to_regclass($1) IS NOT NULL`, []any{t.qualified}, &exists); err != nil {
		return 0, false, err
	}
	if exists {
		return 1, false, nil
	}
	return 0, false, nil
}

// record sets t's version row.
func (m *migrator) record(ctx context.Context, tx migTx, t *migTable, v int) error {
	return tx.exec(ctx, `INSERT INTO `+m.nm.versions+` (table_name, version, applied_at) VALUES ($1, $2, now())
		ON CONFLICT (table_name) DO UPDATE SET version = EXCLUDED.version, applied_at = EXCLUDED.applied_at`, t.name, v)
}

// inTx runs fn in a transaction that holds the schema's advisory lock and
// the old per-table locks of ts (none: no lock), in that order, and commits.
// With ts, fn changes tables: each try waits for a table at most
// m.tableLock.Timeout, and a try that timed out is made again (see
// sqlkit.TableLock).
func (m *migrator) inTx(ctx context.Context, begin beginFunc, op string, ts []*migTable, fn func(migTx) error) error {
	if ts == nil {
		return m.try(ctx, begin, op, ts, fn)
	}
	err := m.tableLock.Retry(ctx, m.cfg.Logger, isLockNotAvailable, func() error { return m.try(ctx, begin, op, ts, fn) })
	if isLockNotAvailable(err) {
		if h := m.holders(ctx, begin, ts); h != "" {
			err = fmt.Errorf("%w; %s", err, h)
		}
	}
	return err
}

// holders says which other sessions hold locks on ts now, for the error of
// a migration that could not lock them: their pids, users, applications,
// states and since when, never their statements (which may hold secrets).
// Best effort: "" when it cannot tell.
func (m *migrator) holders(ctx context.Context, begin beginFunc, ts []*migTable) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.qualified
	}
	tx, err := begin(ctx)
	if err != nil {
		return ""
	}
	defer tx.rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	var h string
	if err := tx.scan(ctx, `SELECT coalesce(string_agg(format('pid %s (%s%s%s, %s since %s)',
			a.pid, a.backend_type, coalesce(', user ' || a.usename, ''),
			CASE WHEN a.application_name <> '' THEN format(', application %L', a.application_name) ELSE '' END,
			coalesce(a.state, 'running'), to_char(coalesce(a.xact_start, a.backend_start) AT TIME ZONE 'UTC', 'HH24:MI:SS"Z"')),
			', ' ORDER BY a.pid), '')
		FROM pg_stat_activity a
		WHERE a.pid <> pg_backend_pid() AND a.pid IN (SELECT l.pid FROM pg_locks l
			WHERE l.granted AND l.relation IN (SELECT to_regclass(n) FROM unnest($1::text[]) AS n))`, []any{names}, &h); err != nil || h == "" {
		return ""
	}
	return "held now by " + h
}

// try is one try of inTx.
func (m *migrator) try(ctx context.Context, begin beginFunc, op string, ts []*migTable, fn func(migTx) error) (err error) {
	tx, err := begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	defer func() {
		if err != nil {
			_ = tx.rollback(context.WithoutCancel(ctx))
			err = fmt.Errorf("postgres: %s: %w", op, err)
		}
	}()
	if ts != nil {
		locks := []int64{m.schemaLock}
		for _, t := range []*migTable{m.outbox, m.inbox} { // one order for every caller
			for _, u := range ts {
				if u == t {
					locks = append(locks, t.lock)
				}
			}
		}
		for _, l := range locks {
			if err := tx.exec(ctx, `SELECT pg_advisory_xact_lock($1)`, l); err != nil {
				return err
			}
		}
		// After the advisory locks: another process's migration is waited
		// for as long as it takes.
		timeout := strconv.FormatInt(max(1, m.tableLock.Timeout.Milliseconds()), 10)
		if err := tx.exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, timeout); err != nil {
			return err
		}
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.commit(ctx)
}

// migTx is a transaction of either pgx or database/sql.
type migTx interface {
	exec(ctx context.Context, q string, args ...any) error
	scan(ctx context.Context, q string, args []any, dest ...any) error
	commit(ctx context.Context) error
	rollback(ctx context.Context) error
}

type beginFunc func(ctx context.Context) (migTx, error)

func pgxBegin(pool *pgxpool.Pool) beginFunc {
	return func(ctx context.Context) (migTx, error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return nil, err
		}
		return pgxMigTx{tx}, nil
	}
}

type pgxMigTx struct{ tx pgx.Tx }

func (t pgxMigTx) exec(ctx context.Context, q string, args ...any) error {
	_, err := t.tx.Exec(ctx, q, args...)
	return err
}

func (t pgxMigTx) scan(ctx context.Context, q string, args []any, dest ...any) error {
	return t.tx.QueryRow(ctx, q, args...).Scan(dest...)
}
func (t pgxMigTx) commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t pgxMigTx) rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

func sqlBegin(db *sql.DB) beginFunc {
	return func(ctx context.Context) (migTx, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		return sqlMigTx{tx}, nil
	}
}

type sqlMigTx struct{ tx *sql.Tx }

func (t sqlMigTx) exec(ctx context.Context, q string, args ...any) error {
	_, err := t.tx.ExecContext(ctx, q, args...)
	return err
}

func (t sqlMigTx) scan(ctx context.Context, q string, args []any, dest ...any) error {
	return t.tx.QueryRowContext(ctx, q, args...).Scan(dest...)
}
func (t sqlMigTx) commit(context.Context) error { return t.tx.Commit() }
func (t sqlMigTx) rollback(context.Context) error {
	if err := t.tx.Rollback(); !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}
