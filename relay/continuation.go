package relay

import (
	"context"

	"github.com/outboxgo/outbox/stores"
)

// maxContinuations bounds how many batches in a row a worker takes as
// continuations of the one before (stores.Continuer) before it claims
// afresh: a fresh claim reaches the keys and unkeyed events that appeared
// meanwhile.
const maxContinuations = 8

// chain is a worker's next batch in ordered mode, claimed while the current
// one is published, so that no claim stands between a key's batches: one
// key, or a few, move at the broker's pace instead of stopping for a claim
// and a completion every batch.
type chain struct {
	next  chan continued // nil when no continuation is pending
	got   *continued     // next's outcome, once received
	depth int            // continuations in a row, the pending one included
	skip  map[string]bool
}

// continued is the outcome of stores.Continuer.Continue.
type continued struct {
	b   stores.Batch
	err error
}

// start claims b's continuation in the background, when b's store can and
// the chain is not at its bound.
func (c *chain) start(ctx context.Context, r *Relay, b stores.Batch, depth int) {
	cont, ok := b.(stores.Continuer)
	if !ok || r.cfg.Unordered || depth >= maxContinuations {
		return
	}
	ch := make(chan continued, 1)
	c.next, c.got, c.depth = ch, nil, depth+1
	p := r.claimParams()
	go func() {
		cctx, cancel := context.WithTimeout(ctx, r.cfg.StoreTimeout)
		defer cancel()
		nb, err := cont.Continue(cctx, p)
		ch <- continued{b: nb, err: err}
	}()
}

// hold notes, of the batch whose continuation is pending, the keys whose
// records failed or were not sent: the continuation sends nothing of them.
func (c *chain) hold(recs []stores.Record, errs []error) {
	if c.next == nil {
		return
	}
	c.skip = nil
	for i, err := range errs {
		if err != nil && recs[i].Key != "" {
			if c.skip == nil {
				c.skip = map[string]bool{}
			}
			c.skip[recs[i].Key] = true
		}
	}
}

// wait waits for the pending continuation's claim, if any, and returns its
// outcome; ok is false when none is pending.
func (c *chain) wait() (got continued, ok bool) {
	if c.next == nil {
		return continued{}, false
	}
	if c.got == nil {
		g := <-c.next
		c.got = &g
	}
	return *c.got, true
}

// holds reports whether the pending continuation claimed a batch, once its
// claim is done.
func (c *chain) holds() bool {
	got, ok := c.wait()
	return ok && got.b != nil
}

// take returns the pending continuation, resumed, with the keys it must
// not send and its depth; nil when there is none (the caller claims
// afresh).
func (c *chain) take(ctx context.Context, r *Relay) (stores.Batch, map[string]bool, int) {
	got, ok := c.wait()
	if !ok {
		return nil, nil, 0
	}
	skip, depth := c.skip, c.depth
	c.next, c.got, c.skip = nil, nil, nil
	switch {
	case got.err != nil:
		r.log.Warn("claiming the next batch ahead failed; claiming afresh", "error", got.err)
		return nil, nil, 0
	case got.b == nil:
		return nil, nil, 0
	}
	if res, ok := got.b.(stores.Resumer); ok {
		rctx, cancel := context.WithTimeout(ctx, r.cfg.StoreTimeout)
		err := res.Resume(rctx)
		cancel()
		if err != nil {
			r.log.Warn("the batch claimed ahead was lost; claiming afresh", "error", err)
			_ = got.b.Abort(context.WithoutCancel(ctx))
			return nil, nil, 0
		}
	}
	return got.b, skip, depth
}

// abandon aborts the pending continuation, if any, once its claim is done.
func (c *chain) abandon(ctx context.Context, r *Relay) {
	got, ok := c.wait()
	if !ok {
		return
	}
	c.next, c.got, c.skip = nil, nil, nil
	if got.b != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.StoreTimeout)
		defer cancel()
		_ = got.b.Abort(actx)
	}
}
