// Package languages tests the outbox written from other languages: Ruby on
// Rails' ActiveRecord, Python's psycopg 3 and Node's pg each write events in
// their own transactions through the outbox.enqueue SQL function
// (examples/languages), while a Go relay publishes them to NATS JetStream.
// Each writer is the example's writer script, run as a child process.
package languages

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/relay"
)

// examples is where the writers' scripts are.
var examples = filepath.Join("..", "..", "examples", "languages")

// keys is how many orders (keys) the writers share.
const keys = 5

// writer is one language's writer script and what it needs.
type writer struct {
	name string
	// cmd is the command line, after which the script's path comes.
	cmd []string
	// script is the path of the writer, relative to examples.
	script string
	// check is a command that succeeds when the language and its client
	// library are installed; what it wants, said when it fails.
	check []string
	wants string
}

var writers = []writer{
	{name: "ruby", cmd: []string{"ruby"}, script: "ruby/writer.rb",
		check: []string{"ruby", "-e", "require 'active_record'; require 'pg'"},
		wants: "Ruby with ActiveRecord and pg (Debian: ruby-activerecord ruby-pg)"},
	{name: "python", cmd: []string{python()}, script: "python/writer.py",
		check: []string{python(), "-c", "import psycopg"},
		wants: "Python 3 with psycopg 3 (Debian: python3-psycopg; OUTBOX_PYTHON names the interpreter)"},
	{name: "node", cmd: []string{"node"}, script: "node/writer.js",
		check: []string{"node", "-e", "require(process.argv[1])", filepath.Join(examples, "node", "node_modules", "pg")},
		wants: "Node.js with pg (npm install in examples/languages/node)"},
}

// python is the interpreter with psycopg: OUTBOX_PYTHON, or Debian's.
func python() string {
	if p := os.Getenv("OUTBOX_PYTHON"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

// require ends the test (skip, or fail with CI=true) unless w can run.
func (w writer) require(t *testing.T) {
	t.Helper()
	if out, err := exec.Command(w.check[0], w.check[1:]...).CombinedOutput(); err != nil {
		testenv.Unreachable(t, w.wants, fmt.Errorf("%v: %s", err, bytes.TrimSpace(out)))
	}
}

// jitterMS is the writers' pause after enqueueing in the race (up to, in
// ms): without the key's lock, a writer that enqueued later would often
// commit first.
const jitterMS = 3

// run runs w's script with n transactions, every failEvery-th rolled
// back, pausing up to jitter ms after each enqueue, and returns the IDs it
// rolled back.
func (w writer) run(ctx context.Context, e *env, n, failEvery, jitter int) ([]uuid.UUID, error) {
	return w.runOn(ctx, pgtest.URL(), e.schema, w.name, n, failEvery, jitter)
}

// runOn is run on any database: dbURL as the script's client takes it,
// schema the outbox's (MySQL: the database), as writer name.
func (w writer) runOn(ctx context.Context, dbURL, schema, name string, n, failEvery, jitter int) ([]uuid.UUID, error) {
	args := append(w.cmd[1:], filepath.Join(examples, w.script))
	cmd := exec.CommandContext(ctx, w.cmd[0], args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "OUTBOX_SCHEMA="+schema, "WRITER="+name,
		"N="+strconv.Itoa(n), "KEYS="+strconv.Itoa(keys), "FAIL_EVERY="+strconv.Itoa(failEvery), "JITTER_MS="+strconv.Itoa(jitter))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s writer: %w: %s", name, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return parseRolled(name, out)
}

// parseRolled reads the IDs a writer script printed as rolled back.
func parseRolled(name string, out []byte) ([]uuid.UUID, error) {
	var rolled []uuid.UUID
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "rollback "); ok {
			id, err := uuid.Parse(s)
			if err != nil {
				return nil, fmt.Errorf("%s writer printed %q: %w", name, sc.Text(), err)
			}
			rolled = append(rolled, id)
		}
	}
	return rolled, nil
}

// env is a test's schema, with the orders and ledger tables the writers
// use, its stream, and a relay publishing the schema's outbox to it.
type env struct {
	pool   *pgxpool.Pool
	schema string
	ob     *outbox.Outbox[pgx.Tx]
	js     jetstream.JetStream
	stream string
}

func setup(t *testing.T) *env {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	db, err := postgres.New(pool, &postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	q := `"` + schema + `"`
	for _, s := range []string{
		`CREATE TABLE ` + q + `.orders (id int PRIMARY KEY, version int NOT NULL DEFAULT 0, status text NOT NULL DEFAULT 'new')`,
		`INSERT INTO ` + q + `.orders (id) SELECT generate_series(0, ` + strconv.Itoa(keys-1) + `)`,
		// id: ActiveRecord's models want a primary key of their own.
		`CREATE TABLE ` + q + `.ledger (id bigserial PRIMARY KEY, event_id uuid NOT NULL UNIQUE, key text NOT NULL, n int NOT NULL, writer text NOT NULL)`,
	} {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	nc := natstest.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	pub, err := natspub.NewPublisher(&natspub.PublisherConfig{URL: natstest.URL(), SubjectPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	r, err := relay.New(db.Store(), pub, &relay.Config{PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.Stop(sctx); err != nil {
			t.Errorf("stop the relay: %v", err)
		}
	})
	return &env{pool: pool, schema: schema, ob: outbox.New(db, nil), js: natstest.JetStream(t, nc), stream: stream}
}

// goWrite is the Go writer: what the scripts do, through Enqueue.
func (e *env) goWrite(ctx context.Context, n, failEvery, jitter int) ([]uuid.UUID, error) {
	q := `"` + e.schema + `"`
	var rolled []uuid.UUID
	for i := range n {
		order := i % keys
		id := outbox.NewID()
		err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			payload, _ := json.Marshal(map[string]any{"order": order, "writer": "go", "i": i})
			if err := e.ob.Enqueue(ctx, tx, outbox.Message{ID: id, Topic: "orders", Key: fmt.Sprintf("order-%d", order),
				Type: "OrderConfirmed", Payload: payload, Headers: map[string]string{"Writer": "go"}}); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `SELECT pg_sleep($1 * random())`, float64(jitter)/1000); err != nil {
				return err
			}
			var v int
			if err := tx.QueryRow(ctx, `UPDATE `+q+`.orders SET version = version + 1, status = 'confirmed' WHERE id = $1 RETURNING version`, order).Scan(&v); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+q+`.ledger (event_id, key, n, writer) VALUES ($1, $2, $3, 'go')`, id, fmt.Sprintf("order-%d", order), v); err != nil {
				return err
			}
			if failEvery > 0 && i%failEvery == failEvery-1 {
				return errRollback
			}
			return nil
		})
		switch {
		case err == errRollback: //nolint:errorlint // our own sentinel, returned as is
			rolled = append(rolled, id)
		case err != nil:
			return nil, err
		}
	}
	return rolled, nil
}

var errRollback = fmt.Errorf("rolled back on purpose")

// ledgerEntry is one committed event, with the version its order reached
// in the event's transaction.
type ledgerEntry struct {
	key    string
	n      int
	writer string
}

func (e *env) ledger(t *testing.T) map[uuid.UUID]ledgerEntry {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT event_id, key, n, writer FROM "`+e.schema+`".ledger`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uuid.UUID]ledgerEntry{}
	for rows.Next() {
		var id uuid.UUID
		var l ledgerEntry
		if err := rows.Scan(&id, &l.key, &l.n, &l.writer); err != nil {
			t.Fatal(err)
		}
		out[id] = l
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// arrival is one event as a plain JetStream consumer read it.
type arrival struct {
	id          uuid.UUID
	key, typ    string
	writer      string
	payload     map[string]any
	streamIndex int
}

// check waits until every committed event (the ledger) arrived at the
// stream, then checks what a user would: each committed event arrived once
// (after dedup by ID) with its key, type, header and payload; no rolled-back
// one ever did; and each key's events arrived in the key's commit order
// (the versions its order took).
func (e *env) check(t *testing.T, rolled []uuid.UUID) {
	t.Helper()
	checkArrivals(t, e.js, e.stream, e.ledger(t), rolled)
}

// checkArrivals is check on any database: ledger holds the committed
// events, rolled the rolled-back ones.
func checkArrivals(t *testing.T, js jetstream.JetStream, stream string, ledger map[uuid.UUID]ledgerEntry, rolled []uuid.UUID) {
	t.Helper()
	msgs := natstest.WaitForCount(t, js, stream, len(ledger), 2*time.Minute)
	seen := map[uuid.UUID]bool{}
	var got []arrival
	for i, m := range msgs {
		id, err := uuid.Parse(m.Headers().Get(jetstream.MsgIDHeader))
		if err != nil {
			t.Fatalf("message %d: Nats-Msg-Id %q: %v", i, m.Headers().Get(jetstream.MsgIDHeader), err)
		}
		if seen[id] {
			continue // a re-send the inbox would drop
		}
		seen[id] = true
		a := arrival{id: id, key: m.Headers().Get(natspub.HeaderKey), typ: m.Headers().Get(natspub.HeaderType),
			writer: m.Headers().Get("Writer"), streamIndex: i}
		if err := json.Unmarshal(m.Data(), &a.payload); err != nil {
			t.Fatalf("message %s: payload %q: %v", id, m.Data(), err)
		}
		got = append(got, a)
	}
	for _, id := range rolled {
		if seen[id] {
			t.Errorf("event %s of a rolled-back transaction was published", id)
		}
	}
	if len(got) != len(ledger) {
		t.Errorf("%d distinct events arrived, %d committed", len(got), len(ledger))
	}
	last := map[string]int{}
	for _, a := range got {
		l, ok := ledger[a.id]
		if !ok {
			t.Errorf("event %s arrived but was never committed", a.id)
			continue
		}
		if a.key != l.key || a.typ != "OrderConfirmed" || a.writer != l.writer || a.payload["writer"] != l.writer {
			t.Errorf("event %s arrived as key %q type %q writer %q payload %v; committed by %s for %s",
				a.id, a.key, a.typ, a.writer, a.payload, l.writer, l.key)
		}
		if l.n <= last[l.key] {
			t.Errorf("key %s: event %s (version %d, %s) arrived after version %d: out of commit order",
				l.key, a.id, l.n, l.writer, last[l.key])
		}
		last[l.key] = l.n
	}
}

// Each language alone: its committed events are published in order, its
// rolled-back ones never.
func TestEachLanguage(t *testing.T) {
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) {
			w.require(t)
			e := setup(t)
			rolled, err := w.run(context.Background(), e, 20, 4, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(rolled) != 5 {
				t.Fatalf("%d transactions rolled back, want 5", len(rolled))
			}
			e.check(t, rolled)
		})
	}
}

// Every language at once with Go, on the same five keys: the function takes
// the same per-key lock as Enqueue, so each key's events are published in
// its commit order, whoever wrote them.
func TestWritersRace(t *testing.T) {
	for _, w := range writers {
		w.require(t)
	}
	e := setup(t)
	ctx := context.Background()
	var (
		mu     sync.Mutex
		rolled []uuid.UUID
		wg     sync.WaitGroup
		errs   = make(chan error, len(writers)+1)
	)
	collect := func(ids []uuid.UUID, err error) {
		if err != nil {
			errs <- err
			return
		}
		mu.Lock()
		rolled = append(rolled, ids...)
		mu.Unlock()
	}
	for _, w := range writers {
		wg.Go(func() { collect(w.run(ctx, e, 60, 7, jitterMS)) })
	}
	wg.Go(func() { collect(e.goWrite(ctx, 60, 7, jitterMS)) })
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e.check(t, rolled)
	byWriter := map[string]int{}
	for _, l := range e.ledger(t) {
		byWriter[l.writer]++
	}
	for _, w := range append([]string{"go"}, "ruby", "python", "node") {
		if byWriter[w] == 0 {
			t.Errorf("no committed event from %s: %v", w, byWriter)
		}
	}
}
