package postgres

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/sqlkit"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/stores"
)

// tracedStore is a migrated store whose pool counts its round trips.
func tracedStore(t *testing.T) (*pgxpool.Pool, *DB, *roundTrips) {
	t.Helper()
	pgtest.Pool(t) // skips, or fails under CI, without PostgreSQL
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	rt := &roundTrips{}
	cfg.ConnConfig.Tracer = rt
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db, err := New(pool, &Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pool, db, rt
}

// roundTrips counts the statements and pipelines a pool's connections
// send, each one round trip to the server, and keeps the statements.
type roundTrips struct {
	n    atomic.Int64
	mu   sync.Mutex
	sqls []string
}

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	c.record(d.SQL)
	return ctx
}
func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *roundTrips) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.record(d.SQL)
}
func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *roundTrips) record(sql string) {
	c.mu.Lock()
	c.sqls = append(c.sqls, sql)
	c.mu.Unlock()
}

// reset forgets what was counted and kept.
func (c *roundTrips) reset() {
	c.n.Store(0)
	c.mu.Lock()
	c.sqls = nil
	c.mu.Unlock()
}

// walks returns how many walks of the keys each key-walk statement sent
// since reset held (see keyedSQL), in the order they were sent.
func (c *roundTrips) walks() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, q := range c.sqls {
		if strings.Contains(q, "WITH RECURSIVE after(") {
			out = append(out, 1+strings.Count(q, "upto(key, tid) AS ("))
		}
	}
	return out
}

// TestTrickleClaimRoundTrips: an ordered claim that finds a few events, a
// key's head with nothing behind it and an unkeyed event, takes one
// pipeline: BEGIN, the heads, the first event of each head's run and the
// unkeyed events in one round trip (see keyedSQL and opening). A key with
// more events behind its head than its first run took costs one more, for
// the rest of its run, claimed in order.
func TestTrickleClaimRoundTrips(t *testing.T) {
	ctx := context.Background()
	pool, db, rt := tracedStore(t)
	ob := outbox.New(db, nil)
	seq := 0
	enqueue := func(keys ...string) {
		t.Helper()
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for _, k := range keys {
				seq++
				m := outbox.Message{Topic: "orders", Key: k, Payload: []byte(k + "#" + strconv.Itoa(seq))}
				if err := ob.Enqueue(ctx, tx, m); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	s := db.Store()
	claim := func(want []string, trips int64) {
		t.Helper()
		rt.reset()
		b, err := s.Claim(ctx, stores.ClaimParams{Limit: 1000, Now: time.Now().Add(time.Second), PerKey: 1000})
		if err != nil {
			t.Fatal(err)
		}
		n := rt.n.Load()
		var got []string
		last := map[string]int{}
		for _, r := range b.Records() {
			p := string(r.Payload)
			got = append(got, p)
			n, _ := strconv.Atoi(p[strings.IndexByte(p, '#')+1:])
			if n < last[r.Key] {
				t.Errorf("claimed %s after #%d of its key", p, last[r.Key])
			}
			last[r.Key] = n
		}
		if err := b.Abort(ctx); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("claimed %q, want %q", got, want)
		}
		if n != trips {
			t.Errorf("the claim took %d round trips, want %d", n, trips)
		}
	}

	enqueue("k1", "")
	claim([]string{"#2", "k1#1"}, 1)
	enqueue("k1", "k2")
	claim([]string{"#2", "k1#1", "k1#3", "k2#4"}, 1) // k1's head and its first run, k2's head
	enqueue("k1", "k1")
	claim([]string{"#2", "k1#1", "k1#3", "k1#5", "k1#6", "k2#4"}, 2)
}

// TestDeepKeysClaimRoundTrips: an ordered claim for a pipelined publisher
// over more deep keys than its walk takes heads (a backlog over many keys)
// takes the walk's pipeline (BEGIN, heads and first runs) and the runs'
// pipeline, which also asks whether keys lie beyond the walk (whether the
// batch may be continued): two round trips, where BEGIN used to take one
// of its own and the question a fourth.
func TestDeepKeysClaimRoundTrips(t *testing.T) {
	ctx := context.Background()
	pool, db, rt := tracedStore(t)
	s := db.Store()
	const keys, per = 20, 200
	if _, err := pool.Exec(ctx, `INSERT INTO `+s.nm.table+` (id, topic, key, type, payload, created_at, available_at)
		SELECT gen_random_uuid(), 'orders', 'k' || lpad((g % $1)::text, 2, '0'), 'T', '\x00', now(), now()
		FROM generate_series(0, $2 - 1) g`, keys, keys*per); err != nil {
		t.Fatal(err)
	}
	p := stores.ClaimParams{Limit: 1000, Now: time.Now().Add(time.Second), PerKey: 1000, Pipelined: true}
	heads := sqlkit.HeadLimit(p.Limit, p.PerKey, p.Pipelined)
	if heads >= keys {
		t.Fatalf("the walk takes %d heads: the test needs more keys than that", heads)
	}
	rt.reset()
	b, err := s.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	n := rt.n.Load()
	defer b.Abort(ctx) //nolint:errcheck // read only
	byKey := map[string]int{}
	for _, r := range b.Records() {
		byKey[r.Key]++
	}
	if len(b.Records()) != p.Limit || len(byKey) != heads {
		t.Fatalf("claimed %d events of %d keys, want %d of %d", len(b.Records()), len(byKey), p.Limit, heads)
	}
	if n != 2 {
		t.Errorf("the claim took %d round trips, want 2", n)
	}
}

// TestClaimFromTheStartWalksOnce: a claim whose key cursor is at the start
// — every claim at a trickle, where the cursor goes back to the start
// after each walk that did not fill up — sends the key walk without its
// second walk, the one that wraps around to the keys before the cursor
// (see keyedSQL's fromStart), and a claim whose cursor moved on sends both
// and reaches the keys on either side of it.
func TestClaimFromTheStartWalksOnce(t *testing.T) {
	ctx := context.Background()
	pool, db, rt := tracedStore(t)
	s := db.Store()
	if _, err := pool.Exec(ctx, `INSERT INTO `+s.nm.table+` (id, topic, key, type, payload, created_at, available_at)
		SELECT gen_random_uuid(), 'orders', 'k' || g, 'T', '\x00', now(), now() FROM generate_series(1, 3) g`); err != nil {
		t.Fatal(err)
	}
	claim := func(want []string, walks []int) {
		t.Helper()
		rt.reset()
		// Two heads a claim (PerKey 1: the walk's limit is the batch's),
		// so a claim of the three keys fills its walk and moves the cursor.
		b, err := s.Claim(ctx, stores.ClaimParams{Limit: 2, Now: time.Now().Add(time.Second), PerKey: 1})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range b.Records() {
			got = append(got, r.Key)
		}
		if err := b.Abort(ctx); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("claimed the keys %q, want %q", got, want)
		}
		if w := rt.walks(); !slices.Equal(w, walks) {
			t.Errorf("the key-walk statements held %v walks, want %v", w, walks)
		}
	}
	claim([]string{"k1", "k2"}, []int{1}) // from the start: one walk
	claim([]string{"k1", "k3"}, []int{2}) // after k2: k3, then around to k1
}
