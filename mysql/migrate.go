package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/outboxgo/outbox/internal/sqlkit"
	"github.com/outboxgo/outbox/stores"
)

// schemaFS holds the migrations of each table as templates over validated
// names: schema/outbox/NNN_name.up.sql and .down.sql ({{.Table}}, and
// {{.Keys}} for the key-lock table), schema/inbox/… ({{.Table}}). The plain
// files under migrations/ are these rendered with the default names, for
// teams that migrate with goose, golang-migrate or atlas (a test keeps them
// equal).
//
//go:embed schema
var schemaFS embed.FS

// Migration is one table's migration step: see stores.Migration.
type Migration = stores.Migration

// SchemaVersion is one table's schema version: see stores.SchemaVersion.
type SchemaVersion = stores.SchemaVersion

// tableMigrations are the migrations of one table.
type tableMigrations struct {
	table string
	ms    []sqlkit.Migration
}

// loadMigrations renders the migrations of the outbox table and of the
// inbox table, in that order, for c.
func loadMigrations(c Config) ([]tableMigrations, error) {
	ob, err := sqlkit.LoadMigrations(schemaFS, "schema/outbox", map[string]string{"Table": c.Table, "Keys": c.keysTable(),
		"Enqueue": c.routine("_enqueue"), "KeyHash": c.routine("_key_hash")})
	if err != nil {
		return nil, fmt.Errorf("mysql: outbox %w", err)
	}
	in, err := sqlkit.LoadMigrations(schemaFS, "schema/inbox", map[string]string{"Table": c.InboxTable})
	if err != nil {
		return nil, fmt.Errorf("mysql: inbox %w", err)
	}
	return []tableMigrations{{c.Table, ob}, {c.InboxTable, in}}, nil
}

// Migrations returns the migrations of the outbox table, then those of the
// inbox table, each table's in version order, rendered for cfg (nil: the
// defaults). The files under migrations/ are these for the defaults.
func Migrations(cfg *Config) ([]Migration, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	tables, err := loadMigrations(c)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, t := range tables {
		for _, m := range t.ms {
			out = append(out, Migration{Table: t.table, Version: m.Version, Name: m.Name, Up: m.Up, Down: m.Down})
		}
	}
	return out, nil
}

// SchemaSQL returns what Migrate runs on an empty database for cfg (nil:
// the defaults), as one script: every up migration of the outbox table and
// of the inbox table, then the version table and its rows, so that Migrate
// finds the tables up to date. It is for `outbox migrate --print` and for
// teams that run the SQL themselves; it creates everything in the current
// database.
func SchemaSQL(cfg *Config) (string, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return "", err
	}
	tables, err := loadMigrations(c)
	if err != nil {
		return "", err
	}
	return schemaSQL(c, tables), nil
}

// schemaSQL renders tables' up migrations and their version rows.
func schemaSQL(c Config, tables []tableMigrations) string {
	var b strings.Builder
	for _, t := range tables {
		for _, m := range t.ms {
			fmt.Fprintf(&b, "-- %s, version %d (%s).\n%s", t.table, m.Version, m.Name, m.Up)
			if !strings.HasSuffix(m.Up, "\n") {
				b.WriteString("\n")
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("-- The schema version of each table, for Migrate.\n")
	b.WriteString(versionTableSQL() + ";\n")
	for _, t := range tables {
		v := strconv.Itoa(sqlkit.Latest(t.ms))
		fmt.Fprintf(&b, "INSERT INTO %s (`table_name`, version, applied_at) VALUES ('%s', %s, UTC_TIMESTAMP(6))\n"+
			"    ON DUPLICATE KEY UPDATE version = %s, applied_at = UTC_TIMESTAMP(6);\n", quote(VersionTable), t.table, v, v)
	}
	return b.String()
}

// versionTableSQL creates the version table: one row per table Migrate
// manages, with the version applied. The names are plain identifiers
// (CheckIdent), at most 64 bytes.
func versionTableSQL() string {
	return "CREATE TABLE IF NOT EXISTS " + quote(VersionTable) + ` (
    ` + "`table_name`" + ` VARCHAR(64) NOT NULL,
    version      INT         NOT NULL,
    applied_at   DATETIME(6) NOT NULL,
    PRIMARY KEY (` + "`table_name`" + `)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`
}

// outboxTables and inboxTables are the tables Store.Migrate and
// Inbox.Migrate manage; DB.Migrate manages both.
func (d *DB) outboxTables() []tableMigrations { return d.migs[:1] }
func (d *DB) inboxTables() []tableMigrations  { return d.migs[1:] }

// Migrate brings the outbox table and the inbox table to the latest schema
// version, applying the pending migrations in order and recording each in
// the version table. It is idempotent, and safe when several processes
// migrate at once: they take turns on a lock of the database (GET_LOCK),
// and each finds what the previous one did.
//
// MySQL commits each DDL statement by itself, so a migration that fails
// halfway stays half applied, its version not recorded; the migrations are
// written so that running them again completes them (CREATE TABLE IF NOT
// EXISTS, DROP TABLE IF EXISTS).
//
// A statement that changes a table another transaction is using waits for
// it 2 s a try (the session's lock_wait_timeout), so that the
// application's writes are never held behind it for longer, and is tried
// again, eight times in about a minute, before Migrate fails naming the
// table.
func (d *DB) Migrate(ctx context.Context) error {
	return d.migrate(ctx, d.migs)
}

// migrateLockWait is how long Migrate and MigrateDown wait for another
// process's migration when ctx has no deadline.
const migrateLockWait = time.Minute

func (d *DB) migrate(ctx context.Context, tables []tableMigrations) error {
	err := d.locked(ctx, func(conn *sql.Conn) error {
		for _, t := range tables {
			cur, _, recorded, err := d.version(ctx, conn, t)
			if err != nil {
				return err
			}
			if latest := sqlkit.Latest(t.ms); cur > latest {
				d.cfg.Logger.Warn("table is at a newer schema version than this code knows; leaving it as it is",
					"table", t.table, "version", cur, "latest", latest)
				continue
			}
			switch {
			case cur > 0 && !recorded:
				// A table created before versions were recorded.
				if err := d.record(ctx, conn, t.table, cur); err != nil {
					return err
				}
			case cur == 0 && recorded:
				d.cfg.Logger.Warn("table is recorded in the version table but missing; creating it again", "table", t.table)
			}
			for _, m := range sqlkit.Pending(t.ms, cur) {
				if err := d.run(ctx, conn, m.Up); err != nil {
					return fmt.Errorf("%s version %d (%s): %w", t.table, m.Version, m.Name, err)
				}
				if err := d.record(ctx, conn, t.table, m.Version); err != nil {
					return err
				}
				d.cfg.Logger.Info("migrated", "table", t.table, "version", m.Version, "name", m.Name)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mysql: migrate: %w", err)
	}
	return nil
}

// MigrateDown takes the inbox table, then the outbox table, down to version
// to, running their down migrations in reverse order: MigrateDown(ctx, 0)
// drops both tables, with every event and record in them. Tables at or
// below to are left as they are. It takes the same lock as Migrate.
func (d *DB) MigrateDown(ctx context.Context, to int) error {
	if to < 0 {
		return fmt.Errorf("mysql: migrate down: version %d, must not be negative", to)
	}
	err := d.locked(ctx, func(conn *sql.Conn) error {
		for i := len(d.migs) - 1; i >= 0; i-- {
			t := d.migs[i]
			cur, _, _, err := d.version(ctx, conn, t)
			if err != nil {
				return err
			}
			if latest := sqlkit.Latest(t.ms); cur > latest {
				return fmt.Errorf("%s is at version %d, newer than this code's %d: it cannot take it down", t.table, cur, latest)
			}
			for v := cur; v > to; v-- {
				m := t.ms[v-1]
				if err := d.run(ctx, conn, m.Down); err != nil {
					return fmt.Errorf("%s down from version %d (%s): %w", t.table, m.Version, m.Name, err)
				}
				if err := d.record(ctx, conn, t.table, v-1); err != nil {
					return err
				}
				d.cfg.Logger.Info("migrated down", "table", t.table, "version", v-1, "from", m.Name)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mysql: migrate down: %w", err)
	}
	return nil
}

// SchemaVersions reports where the outbox table's and the inbox table's
// schemas stand, in that order.
func (d *DB) SchemaVersions(ctx context.Context) ([]SchemaVersion, error) {
	out := make([]SchemaVersion, 0, len(d.migs))
	for _, t := range d.migs {
		v, at, _, err := d.version(ctx, d.db, t)
		if err != nil {
			return nil, fmt.Errorf("mysql: schema versions: %w", err)
		}
		out = append(out, SchemaVersion{Table: t.table, Version: v, Latest: sqlkit.Latest(t.ms), AppliedAt: at})
	}
	return out, nil
}

// rowQueryer is *sql.DB or *sql.Conn.
type rowQueryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// version returns t's version as recorded, or (not recorded) 1 when the
// table exists and 0 when it does not. A table recorded but missing
// (dropped by hand) is at 0.
func (d *DB) version(ctx context.Context, q rowQueryer, t tableMigrations) (v int, at time.Time, recorded bool, err error) {
	err = q.QueryRowContext(ctx, `SELECT version, CAST(applied_at AS CHAR) FROM `+quote(VersionTable)+
		" WHERE `table_name` = ?", t.table).Scan(&v, utcTime{&at})
	switch {
	case err == nil:
		recorded = true
	case !errors.Is(err, sql.ErrNoRows) && !isSchemaMissing(err): // no version table: nothing recorded
		return 0, time.Time{}, false, err
	}
	var n int
	err = q.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = ?`, t.table).Scan(&n)
	switch {
	case err != nil:
		return 0, time.Time{}, false, err
	case n == 0:
		return 0, time.Time{}, recorded, nil
	case !recorded:
		return 1, time.Time{}, false, nil
	}
	return v, at, true, nil
}

// record sets table's version in the version table, or deletes its row at
// version 0.
func (d *DB) record(ctx context.Context, conn *sql.Conn, table string, v int) error {
	vt := quote(VersionTable)
	var err error
	if v == 0 {
		_, err = conn.ExecContext(ctx, `DELETE FROM `+vt+" WHERE `table_name` = ?", table)
	} else {
		now := dbTime(d.cfg.Clock.Now())
		_, err = conn.ExecContext(ctx, `INSERT INTO `+vt+" (`table_name`, version, applied_at) VALUES (?, ?, ?)"+
			` ON DUPLICATE KEY UPDATE version = ?, applied_at = ?`, table, v, now, v, now)
	}
	if err != nil {
		return fmt.Errorf("record %s at version %d: %w", table, v, err)
	}
	return nil
}

// locked runs f on a connection that holds the database's migration lock,
// creating the version table first. The lock is the session's: it ends
// with the connection, whatever happens to this process.
func (d *DB) locked(ctx context.Context, f func(conn *sql.Conn) error) error {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Whole seconds, rounded down: the server gives up before ctx ends,
	// and says why.
	wait := migrateLockWait
	if dl, ok := ctx.Deadline(); ok {
		wait = max(time.Until(dl).Truncate(time.Second), 0)
	}
	const name = `CONCAT('outbox_migrate_', SHA1(COALESCE(DATABASE(), '')))` // 55 bytes of the 64 allowed
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(`+name+`, ?)`, int64(wait/time.Second)).Scan(&got); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if got.Int64 != 1 {
		return fmt.Errorf("lock: another migration of this database held it for more than %v", wait)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if _, err := conn.ExecContext(rctx, `DO RELEASE_LOCK(`+name+`)`); err != nil {
			// Closing the connection releases it.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	// The session's lock wait, for the migration's statements only: the
	// connection goes back to the pool afterwards.
	if _, err := conn.ExecContext(ctx, `SET SESSION lock_wait_timeout = ?`, max(1, int64(d.tableLock.Timeout/time.Second))); err != nil {
		return fmt.Errorf("lock wait: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if _, err := conn.ExecContext(rctx, `SET SESSION lock_wait_timeout = DEFAULT`); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	if _, err := conn.ExecContext(ctx, versionTableSQL()); err != nil {
		return fmt.Errorf("version table: %w", err)
	}
	return f(conn)
}

// run runs a migration script statement by statement: the driver sends one
// statement at a time unless the DSN enables multiStatements. A statement
// whose table another transaction holds waits for it d.tableLock.Timeout a
// try (the session's lock_wait_timeout, see locked), and is tried again:
// a statement that timed out waiting changed nothing, and meanwhile the
// application's writes, queued behind it, go through.
func (d *DB) run(ctx context.Context, conn *sql.Conn, script string) error {
	for _, q := range statements(script) {
		err := d.tableLock.Retry(ctx, d.cfg.Logger, isLockWaitTimeout, func() error {
			_, err := conn.ExecContext(ctx, q)
			return err
		})
		if isLockWaitTimeout(err) {
			if o := openTransactions(ctx, conn); o != "" {
				err = fmt.Errorf("%w; %s", err, o)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// openTransactions lists the other sessions with a transaction open now,
// oldest first, for the error of a migration that could not lock a table:
// one of them holds it (neither server tells which without a plugin or
// the performance schema). Ids, users, commands and how long, never
// statements (which may hold secrets). Best effort: "" when it cannot
// tell.
func openTransactions(ctx context.Context, conn *sql.Conn) string {
	var list sql.NullString
	if err := conn.QueryRowContext(ctx, `SELECT GROUP_CONCAT(CONCAT('id ', t.trx_mysql_thread_id, ' (user ', p.user, ', ',
			p.command, ', open for ', TIMESTAMPDIFF(SECOND, t.trx_started, NOW()), 's)')
			ORDER BY t.trx_started SEPARATOR ', ')
		FROM information_schema.innodb_trx t JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id
		WHERE t.trx_mysql_thread_id <> CONNECTION_ID()`).Scan(&list); err != nil || !list.Valid {
		return ""
	}
	return "transactions open now: " + list.String
}

// statements splits a script of ours into its statements: each ends with
// the delimiter at the end of a line, and pieces with nothing but comments
// are dropped. The delimiter is ";" until a line "DELIMITER d" changes it,
// as in the mysql client (a routine's body holds semicolons). It is not a
// general SQL splitter; the migrations are written for it.
func statements(script string) []string {
	var out []string
	delim := ";"
	var cur strings.Builder
	code := false
	flush := func() {
		if code {
			out = append(out, strings.TrimSpace(cur.String()))
		}
		cur.Reset()
		code = false
	}
	for _, line := range strings.SplitAfter(script, "\n") {
		l := strings.TrimSpace(line)
		if d, ok := strings.CutPrefix(l, "DELIMITER "); ok {
			flush()
			delim = strings.TrimSpace(d)
			continue
		}
		if l != "" && !strings.HasPrefix(l, "--") {
			code = true
		}
		if strings.HasSuffix(l, delim) && code {
			cur.WriteString(strings.TrimSuffix(strings.TrimRight(line, " \t\r\n"), delim))
			flush()
			continue
		}
		cur.WriteString(line)
	}
	flush()
	return out
}
