package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/cputime"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/postgres"
)

// ErrUnreachable wraps the error of a service that does not answer.
var ErrUnreachable = errors.New("service unreachable")

// Ping checks that the database (PostgreSQL, or MySQL/MariaDB for a
// mysql:// URL) and NATS JetStream answer.
func Ping(ctx context.Context, dbURL, natsURL string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if isMySQL(dbURL) {
		if err := pingMySQL(ctx, dbURL); err != nil {
			return fmt.Errorf("%w: MySQL at %s: %v", ErrUnreachable, dbURL, err)
		}
	} else {
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return fmt.Errorf("%w: PostgreSQL at %s: %v", ErrUnreachable, dbURL, err)
		}
		_ = conn.Close(ctx)
	}
	nc, err := nats.Connect(natsURL, nats.Timeout(2*time.Second))
	if err != nil {
		return fmt.Errorf("%w: NATS at %s: %v", ErrUnreachable, natsURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err == nil {
		_, err = js.AccountInfo(ctx)
	}
	if err != nil {
		return fmt.Errorf("%w: JetStream at %s: %v", ErrUnreachable, natsURL, err)
	}
	return nil
}

func machine(ctx context.Context, dbURL string) map[string]any {
	m := map[string]any{"go": runtime.Version(), "cpus": runtime.NumCPU(), "goos": runtime.GOOS, "goarch": runtime.GOARCH,
		"syscall_ns": cputime.Syscall().Nanoseconds()}
	if isMySQL(dbURL) {
		if v, err := mysqlVersion(ctx, dbURL); err == nil {
			m["mysql"] = v
		}
	} else if conn, err := pgx.Connect(ctx, dbURL); err == nil {
		var v string
		_ = conn.QueryRow(ctx, `SHOW server_version`).Scan(&v)
		m["postgres"] = v
		_ = conn.Close(ctx)
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	return m
}

// env is one workload's private schema and stream, dropped by close.
type env struct {
	o      *Options
	name   string // schema, stream and subject prefix
	pool   *pgxpool.Pool
	nc     *nats.Conn
	js     jetstream.JetStream
	cfg    *postgres.Config
	store  *postgres.Store
	ob     *outbox.Outbox[pgx.Tx]
	my     *myEnv // for a mysql:// URL, instead of the fields above
	closes []func()
}

// newEnv creates a schema (with the outbox table migrated) and a stream
// capturing name.> and name_wm (Watermill's dot-free subject). For a
// mysql:// URL it creates a database instead (see newMySQLEnv); pgcfg and
// maxConns are PostgreSQL's.
func (r *runner) newEnv(ctx context.Context, prefix string, pgcfg *postgres.Config, maxConns int) (*env, error) {
	e := &env{o: &r.o, name: uniqueName(prefix)}
	ok := false
	defer func() {
		if !ok {
			e.close()
		}
	}()
	if isMySQL(r.o.DatabaseURL) {
		if err := r.newMySQLEnv(ctx, e); err != nil {
			return nil, err
		}
		if err := r.newStream(ctx, e); err != nil {
			return nil, err
		}
		ok = true
		return e, nil
	}
	pool, err := e.newPool(ctx, maxConns)
	if err != nil {
		return nil, err
	}
	e.pool = pool
	e.closes = append(e.closes, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS "`+e.name+`" CASCADE`); err != nil {
			r.logf("  drop schema %s: %v", e.name, err)
		}
	})
	if _, err := pool.Exec(ctx, `CREATE SCHEMA "`+e.name+`"`); err != nil {
		return nil, err
	}
	cfg := postgres.Config{}
	if pgcfg != nil {
		cfg = *pgcfg
	}
	cfg.Schema = e.name
	e.cfg = &cfg
	db, err := postgres.New(pool, e.cfg)
	if err != nil {
		return nil, err
	}
	e.store = db.Store()
	if err := e.store.Migrate(ctx); err != nil {
		return nil, err
	}
	e.ob = outbox.New(db, nil)
	if err := r.newStream(ctx, e); err != nil {
		return nil, err
	}
	ok = true
	return e, nil
}

// newStream connects e to NATS and creates its stream, deleted by close.
func (r *runner) newStream(ctx context.Context, e *env) error {
	var err error
	if e.nc, err = nats.Connect(r.o.NatsURL, nats.Name("outbox-bench")); err != nil {
		return err
	}
	e.closes = append(e.closes, e.nc.Close)
	if e.js, err = jetstream.New(e.nc); err != nil {
		return err
	}
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:              e.name,
		Subjects:          []string{e.name + ".>", e.name + "_wm"},
		Duplicates:        natspub.DuplicateWindow,
		Storage:           jetstream.FileStorage,
		AllowBatchPublish: !r.o.NoKeyRuns, // nats-server 2.9–2.13 ignore it
	}); err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	e.closes = append(e.closes, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.js.DeleteStream(ctx, e.name); err != nil {
			r.logf("  delete stream %s: %v", e.name, err)
		}
	})
	return nil
}

// newPool connects with search_path set to the env's schema (Watermill's
// tables land there).
func (e *env) newPool(ctx context.Context, maxConns int) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(e.o.DatabaseURL)
	if err != nil {
		return nil, err
	}
	pc.ConnConfig.RuntimeParams["search_path"] = e.name
	pc.ConnConfig.RuntimeParams["application_name"] = "outbox-bench"
	if maxConns > 0 {
		pc.MaxConns = int32(maxConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// extraPool returns another pool on the env's database, closed by close.
func (e *env) extraPool(ctx context.Context, maxConns int) (*pgxpool.Pool, error) {
	p, err := e.newPool(ctx, maxConns)
	if err != nil {
		return nil, err
	}
	e.closes = append(e.closes, p.Close)
	return p, nil
}

// publisher returns our JetStream publisher on subjects name.<topic>.
func (e *env) publisher() (*natspub.Publisher, error) {
	p, err := natspub.NewPublisher(&natspub.PublisherConfig{URL: e.o.NatsURL, SubjectPrefix: e.name, FastKeyRuns: e.o.FastKeyRuns, NoKeyRuns: e.o.NoKeyRuns})
	if err != nil {
		return nil, err
	}
	if e.o.FastKeyRuns && !p.KeepsKeyOrder() {
		_ = p.Close()
		return nil, fmt.Errorf("-fast-key-runs: the publisher cannot send fast-ingest batches to %s (nats-server 2.14 or later is needed)", e.o.NatsURL)
	}
	e.closes = append(e.closes, func() { _ = p.Close() })
	return p, nil
}

func (e *env) close() {
	for i := len(e.closes) - 1; i >= 0; i-- {
		e.closes[i]()
	}
	if e.pool != nil {
		e.pool.Close()
	}
}

func (e *env) table() string { return `"` + e.name + `".messages` }

// seed inserts n pending events (payload bytes each, keys "0".."keys-1"
// round robin, or no key when keys is 0) with one INSERT … SELECT, then
// VACUUM ANALYZE. IDs are random UUIDs; seq orders them.
func (e *env) seed(ctx context.Context, n, payload, keys int) error {
	if e.my != nil {
		return e.my.seed(ctx, n, payload, keys)
	}
	key := `''`
	if keys > 0 {
		key = fmt.Sprintf(`(g %% %d)::text`, keys)
	}
	const chunk = 250_000
	for lo := 0; lo < n; lo += chunk {
		hi := min(n, lo+chunk)
		_, err := e.pool.Exec(ctx, `INSERT INTO `+e.table()+` (id, topic, key, type, payload, created_at, available_at)
			SELECT gen_random_uuid(), 'bench', `+key+`, 'Bench', convert_to(repeat('x', $3), 'UTF8'), clock_timestamp(), now()
			FROM generate_series($1::int, $2::int) g`, lo, hi-1, payload)
		if err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	_, err := e.pool.Exec(ctx, `VACUUM ANALYZE `+e.table())
	return err
}

// streamMsgs is how many messages the env's stream holds.
func (e *env) streamMsgs(ctx context.Context) (uint64, error) {
	s, err := e.js.Stream(ctx, e.name)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}

// waitStream waits until the stream holds n messages (and cond, when set,
// holds), or timeout.
func (e *env) waitStream(ctx context.Context, n int, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		got, err := e.streamMsgs(ctx)
		if err != nil {
			return err
		}
		if got >= uint64(n) && (cond == nil || cond()) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stream holds %d of %d messages after %v", got, n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// rssMeter measures the process's peak resident set from now on: it resets
// the kernel's high-water mark (clear_refs 5) where allowed and samples
// VmRSS every 10ms as well.
type rssMeter struct {
	stop  chan struct{}
	done  chan struct{}
	peak  int64 // KiB, sampled
	base  int64 // KiB, at start
	reset bool  // the kernel's high-water mark was reset
}

func startRSS() *rssMeter {
	runtime.GC()
	debug.FreeOSMemory()
	m := &rssMeter{stop: make(chan struct{}), done: make(chan struct{})}
	m.reset = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	m.base = procStatus("VmRSS")
	go func() {
		defer close(m.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if v := procStatus("VmRSS"); v > m.peak {
				m.peak = v
			}
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

// baseMiB is the RSS when the meter started: the harness's own share.
func (m *rssMeter) baseMiB() float64 { return float64(m.base) / 1024 }

// peakMiB stops the meter and returns the peak RSS in MiB.
func (m *rssMeter) peakMiB() float64 {
	close(m.stop)
	<-m.done
	peak := m.peak
	if m.reset {
		peak = max(peak, procStatus("VmHWM"))
	}
	return float64(peak) / 1024
}

// procStatus returns a "kB" field of /proc/self/status, or 0.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == field {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// awaitAcks waits for every acknowledgement of futs, 30 s at most each.
func awaitAcks(futs []jetstream.PubAckFuture) error {
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("publish ack: %w", err)
		case <-time.After(30 * time.Second):
			return fmt.Errorf("publish ack: timeout")
		}
	}
	return nil
}
