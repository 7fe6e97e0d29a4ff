package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/cputime"
	"github.com/outboxgo/outbox/mysql"
	"github.com/outboxgo/outbox/stores"
)

// MySQLWorkloads are the workloads that run on MySQL/MariaDB (a mysql://
// database URL): the others use PostgreSQL's own SQL (the textbook loop,
// Watermill's PostgreSQL adapter, NOTIFY, generate_series).
var MySQLWorkloads = []string{"limits", "drain", "scale"}

// isMySQL reports whether url names MySQL/MariaDB rather than PostgreSQL.
func isMySQL(url string) bool { return strings.HasPrefix(url, "mysql://") }

// mysqlOnly runs MySQLWorkloads by default, and refuses the others.
func mysqlOnly(o *Options) error {
	if len(o.Only) == 0 {
		o.Only = MySQLWorkloads
		return nil
	}
	for _, w := range o.Only {
		if !slices.Contains(MySQLWorkloads, w) {
			return fmt.Errorf("workload %q runs on PostgreSQL only (on MySQL: %s)", w, strings.Join(MySQLWorkloads, ", "))
		}
	}
	return nil
}

// openMySQL opens the database of a mysql:// URL with the driver's
// defaults.
func openMySQL(rawURL string) (*sql.DB, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	cfg := gomysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, strings.TrimPrefix(u.Path, "/")
	if u.Port() == "" {
		cfg.Addr += ":3306"
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

func pingMySQL(ctx context.Context, rawURL string) error {
	db, err := openMySQL(rawURL)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

func mysqlVersion(ctx context.Context, rawURL string) (string, error) {
	db, err := openMySQL(rawURL)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v string
	err = db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&v)
	return v, err
}

// mysqlComm is the MySQL server's command: MariaDB's mariadbd where it
// runs here, MySQL's mysqld otherwise.
func mysqlComm() string {
	if cputime.Proc("mariadbd") > 0 {
		return "mariadbd"
	}
	return "mysqld"
}

// myEnv is a workload's own MySQL database, named as the env, dropped by
// close, holding the outbox table with the default name.
type myEnv struct {
	url   string  // the env's database
	db    *sql.DB // the env's database, for seeding
	store stores.Store
	table string // quoted
}

// newMySQLEnv creates e's database on the server of the run's URL and
// migrates the outbox table there.
func (r *runner) newMySQLEnv(ctx context.Context, e *env) error {
	admin, err := openMySQL(r.o.DatabaseURL)
	if err != nil {
		return err
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+e.name+"`"); err != nil {
		_ = admin.Close()
		return err
	}
	e.closes = append(e.closes, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+e.name+"`"); err != nil {
			r.logf("  drop database %s: %v", e.name, err)
		}
		_ = admin.Close()
	})
	u, err := url.Parse(r.o.DatabaseURL)
	if err != nil {
		return err
	}
	u.Path = "/" + e.name
	m := &myEnv{url: u.String()}
	e.my = m
	if m.db, err = openMySQL(m.url); err != nil {
		return err
	}
	e.closes = append(e.closes, func() { _ = m.db.Close() })
	d, err := mysql.New(m.db, nil)
	if err != nil {
		return err
	}
	m.table = "`" + d.Config().Table + "`"
	m.store = d.Store()
	return d.Store().Migrate(ctx)
}

// open opens e's database by URL, as `outbox relay --database-url` does
// (the backend registry, the driver's pool defaults), closed by e's close.
func (m *myEnv) open(ctx context.Context, e *env) (stores.Store, error) {
	b, err := backend.LookupDatabase(m.url)
	if err != nil {
		return nil, err
	}
	db, err := b.Open(ctx, m.url, &backend.DatabaseOptions{})
	if err != nil {
		return nil, err
	}
	e.closes = append(e.closes, func() { _ = db.Close() })
	return db.Store(), nil
}

// seed inserts n pending events as env.seed does for PostgreSQL (payload
// bytes each, keys "0".."keys-1" round robin or none, random IDs), with an
// INSERT … SELECT per 250,000 events over a table of digits (MySQL 8 has
// no sequence tables), then ANALYZE TABLE.
func (m *myEnv) seed(ctx context.Context, n, payload, keys int) error {
	key := `''`
	if keys > 0 {
		key = fmt.Sprintf(`CAST(g.n %% %d AS CHAR)`, keys)
	}
	digits := `(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
		UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)`
	var from strings.Builder
	places := len(strconv.Itoa(max(n-1, 1)))
	sum := make([]string, places)
	for i := range places {
		if i > 0 {
			from.WriteString(" CROSS JOIN ")
		}
		fmt.Fprintf(&from, "%s d%d", digits, i)
		sum[i] = fmt.Sprintf("d%d.d*%d", i, pow10(i))
	}
	gen := `(SELECT ` + strings.Join(sum, "+") + ` AS n FROM ` + from.String() + `) g`
	const chunk = 250_000
	for lo := 0; lo < n; lo += chunk {
		hi := min(n, lo+chunk)
		_, err := m.db.ExecContext(ctx, "INSERT INTO "+m.table+" (id, topic, `key`, type, payload, created_at, available_at)"+`
			SELECT UNHEX(REPLACE(UUID(), '-', '')), 'bench', `+key+`, 'Bench', REPEAT('x', ?), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)
			FROM `+gen+` WHERE g.n BETWEEN ? AND ? ORDER BY g.n`, payload, lo, hi-1)
		if err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	_, err := m.db.ExecContext(ctx, `ANALYZE TABLE `+m.table)
	return err
}

func pow10(i int) int {
	p := 1
	for range i {
		p *= 10
	}
	return p
}

// plainBatchMySQL is plainBatch on MySQL: in a READ COMMITTED
// transaction, it claims 1,000 due unkeyed rows of our table with FOR
// UPDATE SKIP LOCKED along its pending index, publishes them all async to
// JetStream with the event ID as Nats-Msg-Id, waits for every ack, deletes
// them by primary key in one statement and commits, as the store's
// Complete does.
func plainBatchMySQL(ctx context.Context, e *env) (int, error) {
	tx, err := e.my.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	rows, err := tx.QueryContext(ctx, "SELECT seq, id, topic, `key`, payload FROM "+e.my.table+` FORCE INDEX (pending)
		WHERE status = 3 AND available_at <= UTC_TIMESTAMP(6) ORDER BY available_at, seq LIMIT 1000 FOR UPDATE SKIP LOCKED`)
	if err != nil {
		return 0, err
	}
	var seqs []string
	var futs []jetstream.PubAckFuture
	for rows.Next() {
		var (
			seq        uint64
			id         []byte
			topic, key string
			payload    []byte
		)
		if err := rows.Scan(&seq, &id, &topic, &key, &payload); err != nil {
			_ = rows.Close()
			return 0, err
		}
		eid, err := uuid.FromBytes(id)
		if err != nil {
			_ = rows.Close()
			return 0, err
		}
		f, err := e.js.PublishMsgAsync(&nats.Msg{Subject: e.name + "." + topic, Data: payload, Header: nats.Header{
			jetstream.MsgIDHeader: []string{eid.String()}, "Outbox-Key": []string{key},
		}})
		if err != nil {
			_ = rows.Close()
			return 0, err
		}
		seqs, futs = append(seqs, strconv.FormatUint(seq, 10)), append(futs, f)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if err := awaitAcks(futs); err != nil {
		return 0, err
	}
	if len(seqs) > 0 {
		// One primary-key lookup per row: `seq IN (1, 2, …, 1000)` is
		// read as a range, whose scan waits for the row past its end,
		// which the other worker may hold.
		if _, err := tx.ExecContext(ctx, `DELETE t FROM JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT UNSIGNED PATH '$')) AS f
			STRAIGHT_JOIN `+e.my.table+` AS t FORCE INDEX (PRIMARY) ON t.seq = f.seq`, "["+strings.Join(seqs, ",")+"]"); err != nil {
			return 0, err
		}
	}
	return len(seqs), tx.Commit()
}
