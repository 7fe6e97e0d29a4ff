package relay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// The relay's state machine (breaker, wake-ups, shutdown, timeouts) tested
// on an in-memory store and publisher, so it runs without any service. The
// store keeps the contract's rules that the relay relies on — in ordered
// mode a key's head and the free records right after it (PerKey), held
// records skipped, outcomes applied at Complete — and
// nothing else; the real stores are held to the whole contract by
// stores/storetest.

// memStore is an outbox table in memory.
type memStore struct {
	mu   sync.Mutex
	recs []*memRec // in commit order

	// beforeClaim, when set, runs before each claim, outside the lock:
	// a test blocks or fails claims there.
	beforeClaim func(ctx context.Context) error
	last        stores.ClaimParams // the last claim's
}

// lastParams returns the parameters of the last claim.
func (s *memStore) lastParams() stores.ClaimParams {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

type memRec struct {
	stores.Record
	status    int // 0 pending, 1 published, 2 dead
	held      bool
	available time.Time
}

func (s *memStore) add(msgs ...outbox.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		if m.ID == uuid.Nil {
			m.ID = outbox.NewID()
		}
		s.recs = append(s.recs, &memRec{Record: stores.Record{Message: m}, available: m.NotBefore})
	}
}

// snapshot returns a copy of every record with its status.
func (s *memStore) snapshot() []memRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]memRec, len(s.recs))
	for i, r := range s.recs {
		out[i] = *r
	}
	return out
}

func (s *memStore) count(status int) int {
	n := 0
	for _, r := range s.snapshot() {
		if r.status == status {
			n++
		}
	}
	return n
}

func (s *memStore) Claim(ctx context.Context, p stores.ClaimParams) (stores.Batch, error) {
	if s.beforeClaim != nil {
		if err := s.beforeClaim(ctx); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	s.last = p
	defer s.mu.Unlock()
	b := &memBatch{s: s}
	taken := map[string]int{}    // records of each key taken
	stopped := map[string]bool{} // keys whose run ended
	for _, r := range s.recs {
		if r.status != 0 || len(b.recs) == p.Limit {
			continue
		}
		free := !r.held && !r.available.After(p.Now)
		if r.Key == "" || p.Unordered {
			if free {
				r.held = true
				b.recs = append(b.recs, r)
			}
			continue
		}
		// Ordered: the key's head and the free records right after it.
		if stopped[r.Key] || !free || taken[r.Key] == max(1, p.PerKey) {
			stopped[r.Key] = true
			continue
		}
		taken[r.Key]++
		r.held = true
		b.recs = append(b.recs, r)
	}
	return b, nil
}

type memBatch struct {
	s    *memStore
	recs []*memRec
	done bool
}

func (b *memBatch) Records() []stores.Record {
	out := make([]stores.Record, len(b.recs))
	for i, r := range b.recs {
		out[i] = r.Record
	}
	return out
}

func (b *memBatch) Complete(_ context.Context, o stores.Outcome) error {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	if b.done {
		return errors.New("memstore: batch already ended")
	}
	byID := map[uuid.UUID]*memRec{}
	for _, r := range b.recs {
		byID[r.ID] = r
	}
	for _, id := range o.Published {
		byID[id].status = 1
	}
	for _, f := range o.Retry {
		r := byID[f.ID]
		r.Attempts++
		r.LastError, r.available = f.Err, f.NextAttempt
	}
	for _, f := range o.Dead {
		r := byID[f.ID]
		r.Attempts++
		r.LastError, r.status = f.Err, 2
	}
	b.release()
	return nil
}

func (b *memBatch) Abort(context.Context) error {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	if !b.done {
		b.release()
	}
	return nil
}

func (b *memBatch) release() {
	for _, r := range b.recs {
		r.held = false
	}
	b.done = true
}

func (s *memStore) ClaimTimeout() time.Duration { return 30 * time.Second }

// The rest of the contract: the relay does not call it.
func (s *memStore) Stats(context.Context, stores.StatsParams) ([]stores.TopicStats, error) {
	return nil, nil
}
func (s *memStore) Blocked(context.Context, stores.BlockedParams) ([]stores.BlockedKey, error) {
	return nil, nil
}
func (s *memStore) Dead(context.Context, stores.DeadParams) ([]stores.Record, error) { return nil, nil }
func (s *memStore) Replay(context.Context, stores.ReplayParams) (int64, error)       { return 0, nil }
func (s *memStore) DeadLetter(context.Context, stores.DeadLetterParams) (int64, error) {
	return 0, nil
}
func (s *memStore) DeadCount(context.Context, stores.DeadParams) (int64, error)      { return 0, nil }
func (s *memStore) Discard(context.Context, stores.DiscardParams) (int64, error)     { return 0, nil }
func (s *memStore) Republish(context.Context, stores.RepublishParams) (int64, error) { return 0, nil }
func (s *memStore) Purge(context.Context, stores.PurgeParams) (int64, error)         { return 0, nil }
func (s *memStore) Migrate(context.Context) error                                    { return nil }

// memPub is a publisher whose answers a test scripts; nil fn acknowledges
// everything.
type memPub struct {
	mu    sync.Mutex
	fn    func(ctx context.Context, msgs []outbox.Message) []error
	calls atomic.Int64
}

func (p *memPub) set(fn func(ctx context.Context, msgs []outbox.Message) []error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fn = fn
}

func (p *memPub) Publish(ctx context.Context, msgs []outbox.Message) []error {
	p.calls.Add(1)
	p.mu.Lock()
	fn := p.fn
	p.mu.Unlock()
	if fn == nil {
		return make([]error, len(msgs))
	}
	return fn(ctx, msgs)
}

func (p *memPub) Close() error { return nil }

// every returns a script that fails every message with err.
func every(err error) func(context.Context, []outbox.Message) []error {
	return func(_ context.Context, msgs []outbox.Message) []error {
		errs := make([]error, len(msgs))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
}

// newMem returns a relay on a fresh memStore and memPub, with quick timings
// unless cfg says otherwise. The test must start it.
func newMem(t *testing.T, cfg Config) (*Relay, *memStore, *memPub) {
	t.Helper()
	s, p := &memStore{}, &memPub{}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	if cfg.OutageBackoff == (outbox.Backoff{}) {
		cfg.OutageBackoff = outbox.Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	}
	r, err := New(s, p, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, s, p
}

// bound is how long a condition may take before the test fails: it bounds
// a failure only, so it is generous for a loaded machine.
const bound = 60 * time.Second

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v still waiting for %s", bound, what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
}

// waitDone waits for every goroutine of a started relay to return.
func waitDone(t *testing.T, r *Relay, what string) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(bound):
		t.Fatalf("%s: the relay's goroutines still run after %v", what, bound)
	}
}

func msgs(n int, key string) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		out[i] = outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: key}
	}
	return out
}

func stop(t *testing.T, r *Relay) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func published(s *memStore) []uuid.UUID {
	var ids []uuid.UUID
	for _, r := range s.snapshot() {
		if r.status == 1 {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

func chargedAttempts(s *memStore) int {
	n := 0
	for _, r := range s.snapshot() {
		n += r.Attempts
	}
	return n
}
