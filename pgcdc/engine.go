package pgcdc

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
)

// event is one decoded outbox row on its way to the broker.
type event struct {
	msg      outbox.Message
	q        *keyq
	tx       *txn // nil for a delayed event the sweeper found
	epoch    int
	attempts int
	retryAt  time.Time
	mark     bool // its row is deleted or marked once acknowledged
}

// keyq holds one key's events in commit order; an unkeyed event has a
// queue of its own.
type keyq struct {
	name string
	evs  []*event
	busy bool // its head (or, with an OrderKeeper, a run) is in flight
}

// txn is one transaction of the stream, or a heartbeat: its end LSN is
// confirmable once it is committed, all its events are done (acknowledged
// and marked, or dead), and so is every transaction before it.
type txn struct {
	xid       uint32    // the transaction's id, 0 for a heartbeat
	commit    time.Time // its commit time, zero for a heartbeat
	end       pglogrepl.LSN
	open      int
	committed bool
}

// engine holds the window of decoded events and publishes them: per-key
// queues, the transactions in stream order, the breaker.
type engine struct {
	r *Relay

	// wg tracks the goroutines of calls and failures.
	wg sync.WaitGroup

	mu          sync.Mutex
	changed     chan struct{} // closed and replaced on every change
	epoch       int
	keys        map[string]*keyq
	txns        []*txn
	events      int // events in the window
	swept       map[uuid.UUID]bool
	confirmable pglogrepl.LSN
	calls       int // Publish calls in flight
	marks       []*event
	outages     int       // consecutive failed probes; 0 = broker up
	openUntil   time.Time // no publish before (wall clock)
	probing     bool
	// pausedSince is when the current outage began, by the relay's clock
	// (zero while the broker is up); refused says the broker refused the
	// relay's configuration at the last probe, rather than being down.
	pausedSince time.Time
	refused     bool
}

func newEngine(r *Relay) *engine {
	return &engine{r: r, changed: make(chan struct{}), keys: map[string]*keyq{}, swept: map[uuid.UUID]bool{}}
}

// paused reports whether the stream and the due sweep should take no more
// events: the broker is down and the window holds an event for the breaker
// to probe it with. With an empty window (after a reconnection drops it)
// they must take one, or the breaker would wait for it forever; e.mu is
// held.
func (e *engine) paused() bool { return e.outages > 0 && e.events > 0 }

// notify wakes every waiter; e.mu is held.
func (e *engine) notify() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// reset drops the window (the stream will send it again from the slot's
// confirmed position) once no call is in flight.
func (e *engine) reset(ctx context.Context, confirmed pglogrepl.LSN) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.calls > 0 {
		ch := e.changed
		e.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		e.mu.Lock()
		if ctx.Err() != nil {
			break
		}
	}
	e.epoch++
	e.keys = map[string]*keyq{}
	e.txns = nil
	e.events = 0
	e.swept = map[uuid.UUID]bool{}
	e.marks = nil
	e.confirmable = confirmed
	e.notify()
}

// add puts ev at the end of its key's queue; e.mu is held. It wakes no
// one: the caller notifies once it has added what it had (the stream at
// the transaction's commit), so that a transaction of a thousand events
// wakes the dispatcher once, not a thousand times.
func (e *engine) add(ev *event) {
	name := ev.msg.Key
	if name == "" {
		name = "\x00" + ev.msg.ID.String()
	}
	q := e.keys[name]
	if q == nil {
		q = &keyq{name: name}
		e.keys[name] = q
	}
	ev.q, ev.epoch = q, e.epoch
	q.evs = append(q.evs, ev)
	e.events++
	if ev.tx != nil {
		ev.tx.open++
	}
}

// done retires ev; e.mu is held.
func (e *engine) done(ev *event) {
	if ev.epoch != e.epoch {
		return
	}
	q := ev.q
	if len(q.evs) > 0 && q.evs[0] == ev {
		q.evs[0] = nil
		q.evs = q.evs[1:]
	}
	if len(q.evs) == 0 && !q.busy && e.keys[q.name] == q {
		delete(e.keys, q.name)
	}
	e.events--
	if ev.tx == nil {
		delete(e.swept, ev.msg.ID)
	} else {
		ev.tx.open--
		e.advance()
	}
	e.notify()
}

// advance moves the confirmable LSN past every finished transaction at the
// head of the stream; e.mu is held.
func (e *engine) advance() {
	n := 0
	for n < len(e.txns) && e.txns[n].committed && e.txns[n].open == 0 {
		e.confirmable = max(e.confirmable, e.txns[n].end)
		n++
	}
	if n > 0 {
		clear(e.txns[:n])
		e.txns = e.txns[n:]
	}
}

// take returns the events to publish now, their keys marked busy, and the
// time the next retry is due (zero: none waits); e.mu is held.
func (e *engine) take(now time.Time) ([]*event, time.Time) {
	var out []*event
	var next time.Time
	per := 1
	if e.r.order.Keeps(now) {
		per = e.r.cfg.PerKey
	}
	for _, q := range e.keys {
		if len(out) >= e.r.cfg.BatchSize {
			break
		}
		if q.busy || len(q.evs) == 0 {
			continue
		}
		if at := q.evs[0].retryAt; at.After(now) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
			continue
		}
		n := min(per, len(q.evs), e.r.cfg.BatchSize-len(out))
		out = append(out, q.evs[:n]...)
		q.busy = true
	}
	return out, next
}

// dispatch publishes the window's events as they become sendable, up to
// Config.Calls calls at once, until ctx ends.
func (e *engine) dispatch(ctx context.Context) {
	for {
		e.mu.Lock()
		var batch []*event
		wait := time.Duration(-1)
		now := time.Now()
		switch {
		case e.calls >= e.r.cfg.Calls:
		case e.outages > 0 && e.probing:
			// A probe is out: wait for its answer.
		case e.outages > 0 && now.Before(e.openUntil):
			wait = e.openUntil.Sub(now)
		default:
			var next time.Time
			batch, next = e.take(now)
			if len(batch) == 0 && !next.IsZero() {
				wait = max(next.Sub(now), time.Millisecond)
			}
			if len(batch) > 0 {
				e.calls++
				e.probing = e.outages > 0
			}
		}
		ch, epoch := e.changed, e.epoch
		e.mu.Unlock()
		if len(batch) > 0 {
			e.wg.Go(func() { e.call(ctx, epoch, batch) })
			continue
		}
		var t *time.Timer
		var tc <-chan time.Time
		if wait >= 0 {
			t = time.NewTimer(wait)
			tc = t.C
		}
		select {
		case <-ctx.Done():
		case <-ch:
		case <-tc:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// call publishes one batch and acts on the results.
func (e *engine) call(ctx context.Context, epoch int, batch []*event) {
	r := e.r
	msgs := make([]outbox.Message, len(batch))
	for i, ev := range batch {
		msgs[i] = ev.msg
	}
	pctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	errs := r.pub.Publish(pctx, msgs)
	cancel()
	if len(errs) != len(msgs) {
		errs = make([]error, len(msgs))
		for i := range errs {
			errs[i] = errors.New("pgcdc: the publisher returned a wrong number of results")
		}
	}
	if h := r.cfg.Hooks.AfterPublish; h != nil {
		// What was tried: not the events an OrderKeeper did not send
		// after an earlier one of their key failed.
		tried, res := msgs[:0:0], errs[:0:0]
		for i, err := range errs {
			if !publishers.IsNotSent(err) {
				tried, res = append(tried, msgs[i]), append(res, err)
			}
		}
		h(tried, res)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	defer e.notify()
	e.calls--
	if ctx.Err() != nil || epoch != e.epoch {
		// Stopped hard, or the stream restarted: nothing is acted on,
		// the events come again from the slot's confirmed position.
		e.probing = false
		return
	}
	now := r.cfg.Clock.Now()
	var outage error
	answered := false
	for i := 0; i < len(batch); {
		q := batch[i].q
		j := i
		for j < len(batch) && batch[j].q == q {
			j++
		}
		held := false // a failure holds the key until it is stored
	run:
		for k := i; k < j; k++ {
			ev, err := batch[k], errs[k]
			switch {
			case err == nil:
				answered = true
				r.stats.published.Add(1)
				if ev.mark {
					// Done once its row is marked; it leaves its queue
					// now so that the key goes on.
					q.evs[0] = nil
					q.evs = q.evs[1:]
					e.marks = append(e.marks, ev)
				} else {
					e.done(ev)
				}
			case publishers.IsUnavailable(err) || publishers.IsMisconfigured(err):
				if outage == nil {
					outage = err
				}
				break run
			default:
				answered, held = true, true
				ev.attempts++
				ev.retryAt = now.Add(r.cfg.RetryBackoff.Delay(ev.attempts))
				r.logFailure(ev, err)
				e.wg.Go(func() { e.fail(ctx, ev, err) })
				break run
			}
		}
		if !held {
			q.busy = false
			if len(q.evs) == 0 && e.keys[q.name] == q {
				delete(e.keys, q.name)
			}
		}
		i = j
	}
	e.probing = false
	switch {
	case outage != nil && !answered:
		e.outages++
		if e.outages == 1 {
			e.pausedSince = now
		}
		e.refused = publishers.IsMisconfigured(outage)
		d := r.cfg.OutageBackoff.Delay(e.outages)
		e.openUntil = time.Now().Add(d)
		r.stats.outages.Add(1)
		if publishers.IsMisconfigured(outage) {
			r.log.Error("the broker refused the relay's configuration (credentials, permissions or a missing target); "+
				"pausing the stream, no event is charged an attempt: fix the configuration", "retry_in", d.Round(time.Millisecond), "error", outage)
		} else {
			r.log.Warn("broker unavailable; pausing the stream", "retry_in", d.Round(time.Millisecond), "error", outage)
		}
	case e.outages > 0:
		e.outages, e.pausedSince, e.refused = 0, time.Time{}, false
		r.log.Info("broker available again; stream resumed")
	}
	if len(e.marks) > 0 {
		select {
		case r.markWake <- struct{}{}:
		default:
		}
	}
}

// fail stores ev's failure and decides its fate: retried (its key held),
// or dead (its row written dead, its key going on). The key is busy
// meanwhile.
func (e *engine) fail(ctx context.Context, ev *event, err error) {
	r := e.r
	attempts, pending := r.recordFailure(ctx, ev, err)
	e.mu.Lock()
	defer e.mu.Unlock()
	defer e.notify()
	if ev.epoch != e.epoch {
		return
	}
	ev.attempts = max(ev.attempts, attempts)
	dead := false
	switch {
	case !pending:
		// Dead-lettered by hand (or gone): drop it, the key goes on.
		r.log.Warn("event no longer pending in the table (dead-lettered by hand?): dropped", "id", ev.msg.ID, "key", ev.msg.Key)
		ev.q.busy = false
		e.done(ev)
		return
	case ev.msg.Key != "" && r.cfg.KeyedFailure == relay.BlockKey:
	case publishers.IsPermanent(err) || ev.attempts >= r.cfg.MaxAttempts:
		dead = true
	default:
		r.stats.retried.Add(1)
	}
	if !dead {
		ev.q.busy = false
		return
	}
	e.mu.Unlock()
	derr := r.writeDead(ctx, ev, err)
	e.mu.Lock()
	if derr != nil || ev.epoch != e.epoch {
		// Not stored: retry the event later (the key stays held).
		ev.q.busy = false
		return
	}
	r.stats.dead.Add(1)
	r.log.Error("event dead", "id", ev.msg.ID, "topic", ev.msg.Topic, "key", ev.msg.Key, "attempts", ev.attempts,
		"permanent", publishers.IsPermanent(err), "error", err)
	ev.q.busy = false
	e.done(ev)
}

// logFailure logs a failed publish at the level its outcome deserves.
func (r *Relay) logFailure(ev *event, err error) {
	level, msg := slog.LevelWarn, "publish failed; retrying"
	if ev.msg.Key != "" && r.cfg.KeyedFailure == relay.BlockKey {
		level, msg = slog.LevelError, "event fails and holds its key back; it is retried until it succeeds or is dead-lettered by hand (outbox dead-letter ID)"
	}
	r.failures.event(level, msg, ev, err)
}
