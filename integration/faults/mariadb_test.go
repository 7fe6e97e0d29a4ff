package faults

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testenv"
	mysqlstore "github.com/outboxgo/outbox/mysql"
	"github.com/outboxgo/outbox/stores"
)

// mariaDatabase is MariaDB: a private server (mariadb-install-db into a
// temporary directory, mariadbd on a free port) when this machine can make
// one — its restart is a crash, SIGKILL and InnoDB recovery — else a
// database of the shared server, with no restart. The relays and the
// inbox consumer connect as a user of their own, so that their sessions,
// and no one else's, can be killed.
type mariaDatabase struct {
	db     *sql.DB // the test's, as root
	server *mariaServer
	dsn    mysql.Config // the relays' and the inbox's
	dbName string
	ob     *outbox.Outbox[*sql.Tx]
}

// mariaServer is a private mariadbd.
type mariaServer struct {
	dir, data string
	port      int
	runAs     string
	cmd       *exec.Cmd
}

func newMariaDB(t *testing.T) *mariaDatabase {
	t.Helper()
	d := &mariaDatabase{dbName: "faults"}
	// The driver logs every connection the crash and the kills break.
	_ = mysql.SetLogger(stdlog.New(io.Discard, "", 0))
	admin := mysql.NewConfig()
	admin.User, admin.Net = "root", "tcp"
	if s, err := startMariaServer(t); err == nil {
		d.server = s
		admin.Addr = fmt.Sprintf("127.0.0.1:%d", s.port)
	} else {
		t.Logf("no private MariaDB server (%v): using the shared one; the database restart is not done", err)
		shared, perr := mysql.ParseDSN(testenv.Getenv("OUTBOX_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test"))
		if perr != nil {
			t.Fatal(perr)
		}
		admin = shared
		d.dbName = fmt.Sprintf("faults_%d", time.Now().UnixNano())
	}
	admin.ParseTime, admin.Loc, admin.InterpolateParams = true, time.UTC, true
	admin.DBName = ""
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	root, err := sql.Open("mysql", admin.FormatDSN())
	if err == nil {
		err = root.PingContext(ctx)
	}
	if err != nil {
		testenv.Unreachable(t, "MariaDB at "+admin.Addr, err)
	}
	user := "faults_" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	for _, q := range []string{
		"CREATE DATABASE `" + d.dbName + "`",
		"CREATE USER '" + user + "'@'localhost', '" + user + "'@'127.0.0.1', '" + user + "'@'%'",
		"GRANT ALL ON `" + d.dbName + "`.* TO '" + user + "'@'localhost', '" + user + "'@'127.0.0.1', '" + user + "'@'%'",
	} {
		if _, err := root.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		if d.server == nil { // the shared server: leave nothing behind
			_, _ = root.Exec("DROP DATABASE IF EXISTS `" + d.dbName + "`")
			_, _ = root.Exec("DROP USER IF EXISTS '" + user + "'@'localhost', '" + user + "'@'127.0.0.1', '" + user + "'@'%'")
		}
		_ = root.Close()
	})
	_ = root.Close()
	admin.DBName = d.dbName
	if d.db, err = sql.Open("mysql", admin.FormatDSN()); err != nil {
		t.Fatal(err)
	}
	d.db.SetMaxOpenConns(20)
	t.Cleanup(func() { _ = d.db.Close() })
	d.dsn = *admin.Clone()
	d.dsn.User = user
	mdb, err := mysqlstore.New(d.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.ob = outbox.New(mdb, nil)
	return d
}

// startMariaServer installs and starts a private server, stopped and
// removed at cleanup.
func startMariaServer(t testing.TB) (*mariaServer, error) {
	t.Helper()
	install, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("mariadbd"); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "outbox-faults-mariadb-")
	if err != nil {
		return nil, err
	}
	s := &mariaServer{dir: dir, data: filepath.Join(dir, "data")}
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o700); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if os.Geteuid() == 0 { // mariadbd refuses root unless told; run it as mysql
		u, err := user.Lookup("mysql")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root and no mysql user to run MariaDB as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, d := range []string{dir, filepath.Join(dir, "tmp")} {
			if err := os.Chown(d, uid, gid); err != nil {
				_ = os.RemoveAll(dir)
				return nil, err
			}
		}
		s.runAs = "mysql"
	}
	args := []string{"--no-defaults", "--datadir=" + s.data, "--auth-root-authentication-method=normal", "--skip-test-db",
		"--tmpdir=" + filepath.Join(dir, "tmp")} // passed on to the bootstrap mariadbd: see start
	if s.runAs != "" {
		args = append(args, "--user="+s.runAs)
	}
	if out, err := exec.Command(install, args...).CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("mariadb-install-db: %v: %s", err, lastLine(out))
	}
	if s.port, err = freePort(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	t.Cleanup(func() {
		s.kill()
		_ = os.RemoveAll(dir)
	})
	return s, s.start()
}

// start runs mariadbd and waits until it accepts connections.
func (s *mariaServer) start() error {
	args := []string{"--no-defaults", "--datadir=" + s.data, fmt.Sprintf("--port=%d", s.port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(s.dir, "sock"), "--pid-file=" + filepath.Join(s.dir, "pid"),
		"--log-error=" + filepath.Join(s.dir, "error.log"), "--max-connections=300",
		// A tmpdir of its own: at start, mariadbd deletes every #sql* file
		// in its tmpdir, and in the default /tmp those include the shared
		// server's temporary tables, in use.
		"--tmpdir=" + filepath.Join(s.dir, "tmp")}
	if s.runAs != "" {
		args = append(args, "--user="+s.runAs)
	}
	s.cmd = exec.Command("mariadbd", args...)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/", s.port))
		if err == nil {
			err = db.Ping()
			_ = db.Close()
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "error.log"))
			return fmt.Errorf("mariadbd on port %d not ready in 60s: %v: %s", s.port, err, lastLine(log))
		}
		time.Sleep(50 * time.Millisecond) // polling the server's readiness, with a deadline
	}
}

// kill SIGKILLs the server: a crash, recovered by InnoDB at the next start.
func (s *mariaServer) kill() {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

func lastLine(b []byte) string {
	l := strings.Split(strings.TrimSpace(string(b)), "\n")
	return l[len(l)-1]
}

func (d *mariaDatabase) name() string {
	if d.server == nil {
		return "MariaDB (shared server)"
	}
	return "MariaDB"
}

func (d *mariaDatabase) env() []string {
	return []string{envDBKind + "=mariadb", envDB + "=" + d.dsn.FormatDSN()}
}

func (d *mariaDatabase) prepare(ctx context.Context, keys []string) error {
	mdb, err := mysqlstore.New(d.db, nil)
	if err != nil {
		return err
	}
	if err := mdb.Migrate(ctx); err != nil { // the outbox and the inbox tables
		return err
	}
	for _, q := range []string{
		"CREATE TABLE counters (`key` VARCHAR(64) PRIMARY KEY, n INT NOT NULL DEFAULT 0)",
		"CREATE TABLE log (id BINARY(16) PRIMARY KEY, `key` VARCHAR(64) NOT NULL, n INT NOT NULL)",
		"CREATE TABLE effects (msg_id BINARY(16) NOT NULL)",
	} {
		if _, err := d.db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	for _, k := range keys {
		if _, err := d.db.ExecContext(ctx, "INSERT INTO counters (`key`) VALUES (?)", k); err != nil {
			return err
		}
	}
	return nil
}

// inTx runs fn in a transaction, committed when fn returns nil.
func (d *mariaDatabase) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

func (d *mariaDatabase) write(ctx context.Context, m outbox.Message, rollback bool) error {
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		if err := d.ob.Enqueue(ctx, tx, m); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE counters SET n = LAST_INSERT_ID(n + 1) WHERE `key` = ?", m.Key); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO log (id, `key`, n) VALUES (?, ?, LAST_INSERT_ID())", m.ID[:], m.Key); err != nil {
			return err
		}
		if rollback {
			return errRollbackOnPurpose
		}
		return nil
	})
	if errors.Is(err, errRollbackOnPurpose) {
		return errRollbackOnPurpose
	}
	return err
}

func (d *mariaDatabase) enqueue(ctx context.Context, m outbox.Message) (enqErr, err error) {
	err = d.inTx(ctx, func(tx *sql.Tx) error {
		enqErr = d.ob.Enqueue(ctx, tx, m)
		return nil
	})
	return enqErr, err
}

// scan reads rows of (BINARY(16) id, T).
func scanIDs[T any](ctx context.Context, db *sql.DB, q string) (map[uuid.UUID]T, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[uuid.UUID]T{}
	for rows.Next() {
		var (
			b []byte
			v T
		)
		if err := rows.Scan(&b, &v); err != nil {
			return nil, err
		}
		id, err := uuid.FromBytes(b)
		if err != nil {
			return nil, err
		}
		out[id] = v
	}
	return out, rows.Err()
}

func (d *mariaDatabase) committed(ctx context.Context) (map[uuid.UUID]commit, error) {
	rows, err := d.db.QueryContext(ctx, "SELECT id, `key`, n FROM log")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	log := map[uuid.UUID]commit{}
	for rows.Next() {
		var (
			b []byte
			c commit
		)
		if err := rows.Scan(&b, &c.key, &c.rank); err != nil {
			return nil, err
		}
		id, err := uuid.FromBytes(b)
		if err != nil {
			return nil, err
		}
		log[id] = c
	}
	return log, rows.Err()
}

func (d *mariaDatabase) dead(ctx context.Context) (map[uuid.UUID]string, error) {
	return scanIDs[string](ctx, d.db, "SELECT id, coalesce(last_error, '') FROM outbox_messages WHERE status = 2")
}

func (d *mariaDatabase) pending(ctx context.Context) (n int, err error) {
	err = d.db.QueryRowContext(ctx, "SELECT count(*) FROM outbox_messages WHERE status = 3").Scan(&n)
	return n, err
}

func (d *mariaDatabase) exists(ctx context.Context, id uuid.UUID) (ok bool, err error) {
	err = d.db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM outbox_messages WHERE id = ?)", id[:]).Scan(&ok)
	return ok, err
}

func (d *mariaDatabase) effects(ctx context.Context) (map[uuid.UUID]int, error) {
	return scanIDs[int](ctx, d.db, "SELECT msg_id, count(*) FROM effects GROUP BY msg_id")
}

func (d *mariaDatabase) killConns(ctx context.Context) (int, error) {
	rows, err := d.db.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE user = ?", d.dsn.User)
	if err != nil {
		return 0, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			_ = rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	_ = rows.Close()
	n := 0
	for _, id := range ids {
		if _, err := d.db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10)); err == nil {
			n++ // a session may have ended meanwhile (unknown thread id)
		}
	}
	return n, rows.Err()
}

func (d *mariaDatabase) restart() error {
	if d.server == nil {
		return errNoRestart
	}
	d.server.kill()
	return d.server.start()
}

// mariaRelayStore is the relay process's store.
func mariaRelayStore(context.Context) (stores.Store, error) {
	db, err := sql.Open("mysql", os.Getenv(envDB))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	mdb, err := mysqlstore.New(db, &mysqlstore.Config{ClaimTimeout: claimTimeout})
	if err != nil {
		return nil, err
	}
	return mdb.Store(), nil
}

// mariaInbox is the inbox process's inbox and effect.
func mariaInbox(context.Context) (*inbox.Inbox[*sql.Tx], inbox.Handler[*sql.Tx], error) {
	db, err := sql.Open("mysql", os.Getenv(envDB))
	if err != nil {
		return nil, nil, err
	}
	mdb, err := mysqlstore.New(db, nil)
	if err != nil {
		return nil, nil, err
	}
	in, err := inbox.New(mdb.Inbox(), nil)
	if err != nil {
		return nil, nil, err
	}
	return in, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO effects (msg_id) VALUES (?)", m.ID[:])
		return err
	}, nil
}
