package relay

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/stores"
)

// lingerInterval is how soon a worker claims again after the backlog ran dry.
const lingerInterval = 25 * time.Millisecond

// A worker whose claim found one event or none claims again after
// streamLinger, instead of waiting for a wake-up or lingerInterval, when
// its last claim that found events began less than streamGap before:
// events then come faster than NOTIFYs are paced (one per NotifyDebounce),
// and the next is likely committed soon — unless the writers announce
// when they pace (see quietSpells) and none is doing so now. At 1,000
// ev/s this took the p50 from 3.9 to 2.5 ms and the p99 from 10–10.9 to
// 6–7.6 ms, at 300 ev/s the p50 from 5.6 to 3.2 ms and the p99 from 12.3
// to 5.5–5.9 (with a gap of 5 ms, 9.8–12.4); at 100 ev/s, where a
// worker's finds are further apart than streamGap, it changes nothing (a
// rule without the gap added an empty claim per event there).
const (
	streamGap    = 8 * time.Millisecond
	streamLinger = 2 * time.Millisecond
)

// errOutage says a batch found the broker unavailable; errRefused that the
// broker refused the relay's configuration.
var (
	errOutage  = errors.New("broker unavailable")
	errRefused = errors.New("broker refused the relay's configuration")
)

// work is one worker's loop: claim, publish, complete, again while claims
// find events; when one finds none, wait for a wake-up or the poll interval.
// It returns when the relay stops or ctx ends, whatever the breaker's state.
func (r *Relay) work(ctx context.Context, w *workerWake) {
	storeBackoff := outbox.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second, Jitter: 0.2}
	storeFailures := 0
	busy := false       // the last claim found events
	var found time.Time // when the last claim that found events began
	var c chain
	defer c.abandon(ctx, r)
	for {
		probe, ok := r.brk.wait(ctx, r.stop)
		if !ok {
			return
		}
		select {
		case <-r.stop:
			if probe {
				r.brk.abandon()
			}
			return
		default:
		}
		began := r.now()
		n, err := r.drain(ctx, &c)
		streaming := r.quiet.streaming(began, found)
		if n > 0 {
			found = began
		}
		var idle time.Duration
		switch {
		case ctx.Err() != nil:
			if probe {
				r.brk.abandon()
			}
			return
		case errors.Is(err, errRefused):
			d := r.brk.failure(true)
			r.log.Error("the broker refused the relay's configuration (credentials, permissions or a missing target); "+
				"pausing the relay, no event is charged an attempt: fix the configuration",
				"retry_in", d.Round(time.Millisecond), "error", err)
			continue
		case errors.Is(err, errOutage):
			d := r.brk.failure(false)
			r.log.Warn("broker unavailable; pausing the relay", "retry_in", d.Round(time.Millisecond), "error", err)
			continue
		case n == 0:
			// The claim failed or found nothing: the broker was not
			// tested, so a probe hands its turn on.
			if probe {
				r.brk.abandon()
			}
		default:
			// The broker answered the batch (a store error may still
			// have failed its completion).
			if r.brk.success() {
				r.log.Info("broker available again; relay resumed")
			}
		}
		switch {
		case err != nil:
			storeFailures++
			idle = storeBackoff.Delay(storeFailures)
			r.stats.storeErrors.Add(1)
			r.log.Error("relay batch failed", "error", err, "retry_in", idle.Round(time.Millisecond))
		case n > 1, c.holds():
			// There may be more: a full batch, or in ordered mode the next
			// events of each key just published; or the continuation
			// claimed meanwhile holds some. This worker claims again at
			// once, and a backlog's batch wakes an idle peer too (see
			// backlog).
			storeFailures, busy = 0, true
			if !r.cfg.Unordered && r.backlog(n) {
				r.wakes.peer(w)
			}
			continue
		case n <= 1 && streaming:
			// Events a few milliseconds apart: the next one is likely
			// committed in a moment, and its NOTIFY likely paced away;
			// look again until streamGap has passed since the last find.
			// A claim that found none keeps busy, so that a backlog that
			// ran dry is still looked at once more after the linger.
			storeFailures = 0
			if n == 1 {
				busy = false
			}
			idle = min(r.cfg.PollInterval, streamLinger)
		case n == 1:
			// A trickle: the next event's NOTIFY wakes this worker, and
			// one whose NOTIFY was paced away is found by the linger's
			// claim, so no claim right away (at a trickle it finds
			// nothing: a claim per event saved).
			storeFailures, busy = 0, false
			idle = min(r.cfg.PollInterval, r.linger)
		case busy:
			// The backlog just ran dry, but an event whose NOTIFY was
			// debounced may commit just after: look once more soon.
			storeFailures, busy = 0, false
			idle = min(r.cfg.PollInterval, r.linger)
		default:
			storeFailures = 0
			idle = r.cfg.PollInterval
		}
		t := time.NewTimer(idle)
		w.setIdle(max(idle, time.Nanosecond))
		select {
		case <-r.stop:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		case <-w.ch:
		case <-t.C:
		}
		w.setIdle(0)
		t.Stop()
	}
}

// backlog reports whether an ordered batch of n events may have left
// events behind that an idle peer could take now: a quarter of the batch
// size or more. A store's ordered claim takes every event it can up to
// the batch size, or stops at a cap on its keys that is never below a
// quarter of it (sqlkit.HeadLimit); a smaller batch took all there was,
// and a peer's claim would find nothing or split what comes next. At
// 1,000 ev/s, batches of a few events, waking the peer after every batch
// of two doubled the claims and completions, each a round trip and a
// commit (see docs/benchmarks.md, "Latency by the issue's own measure").
func (r *Relay) backlog(n int) bool {
	return n >= max(2, r.cfg.BatchSize/4)
}

// claimParams are the parameters of a claim, or of a continuation, made
// now.
func (r *Relay) claimParams() stores.ClaimParams {
	now := r.cfg.Clock.Now()
	return stores.ClaimParams{Limit: r.cfg.BatchSize, Now: now, Unordered: r.cfg.Unordered, PerKey: r.cfg.PerKey,
		Pipelined: !r.cfg.Unordered && r.order.Keeps(now)}
}

// drain takes one batch (c's continuation, or a fresh claim), publishes it
// and stores the outcome; in ordered mode it claims the batch's
// continuation meanwhile (see chain). It returns how many events it took.
func (r *Relay) drain(ctx context.Context, c *chain) (n int, err error) {
	start := time.Now()
	b, skip, depth := c.take(ctx, r)
	if b == nil {
		cctx, cancel := context.WithTimeout(ctx, r.cfg.StoreTimeout)
		b, err = r.store.Claim(cctx, r.claimParams())
		cancel()
	}
	res := BatchResult{ClaimElapsed: time.Since(start)}
	if err != nil {
		r.afterClaim(ClaimResult{Elapsed: res.ClaimElapsed, Err: err})
		return 0, err
	}
	r.stats.claims.Add(1)
	defer b.Abort(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after Complete
	recs := b.Records()
	r.afterClaim(ClaimResult{Claimed: len(recs), Elapsed: res.ClaimElapsed})
	if len(recs) == 0 {
		return 0, nil
	}
	c.start(ctx, r, b, depth)
	defer func() {
		if err != nil {
			// The batch's fate is unknown or its keys' records went back:
			// what follows them must wait for a fresh claim. The batch
			// ends first, so its connection is free for the continuation's
			// claim, which the abandon waits for.
			_ = b.Abort(context.WithoutCancel(ctx))
			c.abandon(ctx, r)
		}
	}()
	sent := time.Now()
	errs, err := r.publishBatch(ctx, b, recs, skip)
	res.PublishElapsed = time.Since(sent)
	if err != nil {
		return len(recs), err
	}
	c.hold(recs, errs)
	if h := r.cfg.Hooks.AfterPublish; h != nil {
		var msgs []outbox.Message
		var res []error
		for i := range recs {
			if attempted(errs[i]) {
				msgs, res = append(msgs, recs[i].Message), append(res, errs[i])
			}
		}
		h(msgs, res)
	}

	now := r.cfg.Clock.Now()
	o := stores.Outcome{Now: now, DeletePublished: r.cfg.Retention == 0}
	res.Claimed = len(recs)
	var outage, refused error
	for i, err := range errs {
		rec := &recs[i]
		switch {
		case err == nil:
			o.Published = append(o.Published, rec.ID)
		case !attempted(err):
			// Not attempted (held back here, or by the publisher behind
			// an earlier event of its key that failed): left pending,
			// uncharged.
			res.Deferred++
		case publishers.IsMisconfigured(err):
			// The broker refused the configuration: not the event's
			// fault either. Leave it untouched.
			res.Refused++
			if refused == nil {
				refused = err
			}
		case publishers.IsUnavailable(err):
			// Not the event's fault: leave it untouched.
			res.Unavailable++
			if outage == nil {
				outage = err
			}
		case r.blocksKey(rec):
			// Ordered and blocking: retry for ever, holding the key.
			d := r.retryDelay(rec, err)
			o.Retry = append(o.Retry, stores.Failure{ID: rec.ID, Err: errText(err), NextAttempt: now.Add(d)})
			r.failures.event(slog.LevelError, "event fails and holds its key back; it is retried until it succeeds or is dead-lettered by hand (outbox dead-letter ID)",
				rec, err, "retry_in", d.Round(time.Millisecond))
		case publishers.IsPermanent(err), rec.Attempts+1 >= r.cfg.MaxAttempts:
			o.Dead = append(o.Dead, stores.Failure{ID: rec.ID, Err: errText(err)})
			r.failures.event(slog.LevelError, "event dead", rec, err, "permanent", publishers.IsPermanent(err))
		default:
			d := r.retryDelay(rec, err)
			o.Retry = append(o.Retry, stores.Failure{ID: rec.ID, Err: errText(err), NextAttempt: now.Add(d)})
			r.failures.event(slog.LevelWarn, "publish failed; retrying", rec, err,
				"retry_in", d.Round(time.Millisecond), "attempts_left", r.cfg.MaxAttempts-rec.Attempts-1)
		}
	}
	// Store what is known even when the broker went away mid-batch: the
	// acknowledged events must not be published again needlessly.
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.StoreTimeout)
	defer dcancel()
	completing := time.Now()
	err = b.Complete(dctx, o)
	res.CompleteElapsed = time.Since(completing)
	res.Published, res.Retried, res.Dead = len(o.Published), len(o.Retry), len(o.Dead)
	res.Elapsed = time.Since(start)
	if err != nil {
		if h := r.cfg.Hooks.AfterCompleteFailed; h != nil {
			h(res, err)
		}
		return len(recs), err
	}
	r.stats.batches.Add(1)
	r.stats.published.Add(int64(res.Published))
	r.stats.retried.Add(int64(res.Retried))
	r.stats.dead.Add(int64(res.Dead))
	if h := r.cfg.Hooks.AfterComplete; h != nil {
		h(res)
	}
	switch {
	case refused != nil:
		r.stats.refusals.Add(1)
		return len(recs), errors.Join(errRefused, refused)
	case outage != nil:
		r.stats.outages.Add(1)
		return len(recs), errors.Join(errOutage, outage)
	}
	return len(recs), nil
}

// attempted reports whether err, an event's result, is the outcome of
// trying to publish it: not when the relay held it back (errDeferred), nor
// when the publisher did not send it after an earlier event of its key
// failed (publishers.IsNotSent).
func attempted(err error) bool {
	return err != errDeferred && !publishers.IsNotSent(err) //nolint:errorlint // the sentinel itself, never wrapped
}

// afterClaim calls the AfterClaim hook, when there is one.
func (r *Relay) afterClaim(c ClaimResult) {
	if h := r.cfg.Hooks.AfterClaim; h != nil {
		h(c)
	}
}

// blocksKey reports whether a failure of rec holds its key: a keyed event
// in ordered mode under the BlockKey policy.
func (r *Relay) blocksKey(rec *stores.Record) bool {
	return rec.Key != "" && !r.cfg.Unordered && r.cfg.KeyedFailure == BlockKey
}

// purge deletes published events past the retention, in small batches.
// Concurrent relays purge disjoint rows (the store skips locked ones).
func (r *Relay) purge(ctx context.Context) {
	t := time.NewTicker(r.cfg.PurgeInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		before := r.cfg.Clock.Now().Add(-r.cfg.Retention)
		for {
			n, err := r.store.Purge(ctx, stores.PurgeParams{Before: before, Limit: 1000})
			if err != nil {
				r.log.Error("purge failed", "error", err)
				break
			}
			if n < 1000 {
				break
			}
		}
	}
}

// maxErrorText bounds the error text stored with a failed event.
const maxErrorText = 4096

// errText is err's text as every store can hold it: valid UTF-8 without
// NUL (a broker's error may quote the message's bytes), at most
// maxErrorText bytes.
func errText(err error) string {
	s := strings.ToValidUTF8(strings.ReplaceAll(err.Error(), "\x00", "\uFFFD"), "\uFFFD")
	if len(s) <= maxErrorText {
		return s
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// retryDelay is how long a failed event waits before its next attempt: its
// backoff, or longer when the broker asked for longer (publishers.RetryAfter).
func (r *Relay) retryDelay(rec *stores.Record, err error) time.Duration {
	d := r.cfg.RetryBackoff.Delay(rec.Attempts + 1)
	if ra, ok := publishers.RetryDelay(err); ok && ra > d {
		d = ra
	}
	return d
}
