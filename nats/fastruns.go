package nats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/publishers"
)

// fastRoute is a stream the publisher's subjects go to, as KeepsKeyOrder
// found it: its name and the subjects it captures.
type fastRoute struct {
	name     string
	subjects []string
}

// fastStreams returns why the publisher's messages cannot go as
// fast-ingest batches ("" when they can) and the streams they go to, or
// the error that kept it from finding out.
func (p *Publisher) fastStreams(ctx context.Context) (why string, routes []fastRoute, err error) {
	v := p.nc.ConnectedServerVersion()
	if v == "" {
		return "", nil, errNoServerYet
	}
	if !versionAtLeast(v, 2, 14, 0) {
		return fmt.Sprintf("nats-server %s: fast-ingest batches need 2.14.0 or later", v), nil, nil
	}
	cfgs, why, err := p.streamConfigs(ctx)
	if why != "" || err != nil {
		return why, nil, err
	}
	for _, cfg := range cfgs {
		switch {
		case !cfg.AllowBatchPublish:
			return fmt.Sprintf("stream %s does not allow batch publish (AllowBatchPublish)", cfg.Name), nil, nil
		case cfg.NoAck:
			return fmt.Sprintf("stream %s acknowledges nothing (NoAck)", cfg.Name), nil, nil
		}
		routes = append(routes, fastRoute{name: cfg.Name, subjects: cfg.Subjects})
	}
	return "", routes, nil
}

// route returns the index in routes of the stream subject goes to, -1
// when none of them captures it (streams do not overlap).
func route(routes []fastRoute, subject string, cache map[string]int) int {
	if r, ok := cache[subject]; ok {
		return r
	}
	r := -1
	for i, rt := range routes {
		for _, filter := range rt.subjects {
			if subjectMatches(filter, subject) {
				r = i
			}
		}
	}
	cache[subject] = r
	return r
}

// fastCall is the state of a Publish call with FastKeyRuns on.
type fastCall struct {
	*call
	s       *sender
	nms     []*nats.Msg        // each message's NATS message (nil: failed before sending)
	dead    map[string]deadKey // keys whose message failed: their later messages fail too
	slow    []int              // messages to send one at a time per key, after the batches
	resends int                // batches sent again from a message the server ended them at without saying why
}

// publishFast publishes the call with FastKeyRuns on: see the package
// documentation, "Key order".
func (c *call) publishFast() {
	f := &fastCall{call: c, s: c.sender(), nms: make([]*nats.Msg, len(c.msgs)), dead: map[string]deadKey{}}
	batches, plain := f.plan()
	pas := make([]*pubAck, len(c.msgs))
	for _, i := range plain {
		pas[i] = f.s.one(i)
	}
	f.run(batches)
	c.await(pas)
	f.oneByOne()
}

// plan builds every message and cuts the call into batches (each in call
// order, to one stream) and plain publishes: unkeyed messages no known
// stream captures, and a stream's share of fewer than minFastBatch
// messages, no two of one key. A message that cannot be built
// fails, and so do its key's later ones; the messages of a key that goes
// to more than one stream (or to one KeepsKeyOrder did not see) go one at
// a time, after the batches.
func (f *fastCall) plan() (batches [][]int, plain []int) {
	routes := *f.p.routes.Load()
	cache := map[string]int{}
	stream := make([]int, len(f.msgs))
	keyStream := map[string]int{} // -2: the key's messages go to more than one stream
	for i := range f.msgs {
		m := &f.msgs[i]
		if cause := f.deadBefore(i); cause != nil {
			f.follow([]int{i}, cause)
			continue
		}
		if err := f.s.unsendable(i); err != nil {
			f.errs[i] = err
			continue
		}
		nm, err := f.s.build(i)
		if err != nil {
			f.failed(i, err)
			continue
		}
		f.nms[i] = nm
		stream[i] = route(routes, nm.Subject, cache)
		if m.Key != "" {
			if have, ok := keyStream[m.Key]; !ok {
				keyStream[m.Key] = stream[i]
			} else if have != stream[i] {
				keyStream[m.Key] = -2
			}
		}
	}
	groups := map[int][]int{}
	var order []int
	for i := range f.msgs {
		if f.nms[i] == nil {
			continue
		}
		switch k, g := f.msgs[i].Key, stream[i]; {
		case k == "" && g < 0:
			plain = append(plain, i)
		case k != "" && keyStream[k] < 0:
			f.slow = append(f.slow, i)
		default:
			if _, ok := groups[g]; !ok {
				order = append(order, g)
			}
			groups[g] = append(groups[g], i)
		}
	}
	for _, g := range order {
		idx := groups[g]
		if len(idx) < minFastBatch && noKeyTwice(len(idx), func(j int) string { return f.msgs[idx[j]].Key }) {
			plain = append(plain, idx...)
		} else {
			batches = append(batches, idx)
		}
	}
	return batches, plain
}

// minFastBatch is the fewest messages a stream's share of a call must be
// for them to go as a fast-ingest batch when no two of them have one key
// (there is then no order to keep within the call). A batch costs a fixed
// ~60 µs of CPU and a round trip more than as many plain publishes: two
// messages take about twice the CPU and the time as a batch; the two cost
// about the same near 32 messages, and from 64 the batch costs less
// (BenchmarkPublishSmallCalls). A relay at a few thousand events per
// second makes calls of one to a few events.
const minFastBatch = 32

// noKeyTwice reports whether no two of n messages (few), whose keys key
// returns, share a key; unkeyed messages share none.
func noKeyTwice(n int, key func(int) string) bool {
	for i := range n {
		k := key(i)
		if k == "" {
			continue
		}
		for j := i + 1; j < n; j++ {
			if key(j) == k {
				return false
			}
		}
	}
	return true
}

// failed records err, message i's error before sending, and fails its
// key's later messages.
func (f *fastCall) failed(i int, err error) {
	f.s.failed(i, err)
	f.kill(i)
}

// deadKey is where a key's first failure in the call is: message at, which
// failed with err.
type deadKey struct {
	at  int
	err error
}

// kill records message i's failure as its key's, when it is the first of
// the key in call order: the key's messages after it fail too.
func (f *fastCall) kill(i int) {
	k := f.msgs[i].Key
	if k == "" {
		return
	}
	if d, ok := f.dead[k]; !ok || i < d.at {
		f.dead[k] = deadKey{at: i, err: f.errs[i]}
	}
}

// deadBefore returns the error of a message of message i's key that failed
// before it in call order, or nil. (A failure found later in the call,
// such as a message after i that could not be built, is no reason not to
// send i.)
func (f *fastCall) deadBefore(i int) error {
	if k := f.msgs[i].Key; k != "" {
		if d, ok := f.dead[k]; ok && d.at < i {
			return d.err
		}
	}
	return nil
}

// run sends the batches, each once the publisher has a batch slot free,
// and the batches their outcomes call for, until every one has ended.
func (f *fastCall) run(pending [][]int) {
	var active []*fastBatch
	wake := make(chan struct{}, 1)
	for len(pending) > 0 || len(active) > 0 {
		for len(pending) > 0 {
			b, ok := f.start(pending[0], wake, len(active) > 0)
			if !ok {
				break // the batches in flight free a slot
			}
			pending = pending[1:]
			if b != nil {
				active = append(active, b)
			}
		}
		for _, b := range active {
			if err := f.s.acks.pump(b); err != nil {
				f.s.acks.giveUp(b, err)
			}
		}
		var deadline time.Time
		left := active[:0]
		for _, b := range active {
			b.mu.Lock()
			over, seen := b.over, b.seen
			b.mu.Unlock()
			if over {
				if again := f.outcome(b); len(again) > 0 {
					pending = append(pending, again)
				}
				continue
			}
			left = append(left, b)
			if d := seen.Add(f.p.cfg.AckTimeout); deadline.IsZero() || d.Before(deadline) {
				deadline = d
			}
		}
		active = left
		if len(active) == 0 {
			continue
		}
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-wake:
		case <-f.ctx.Done():
			for _, b := range active {
				f.s.acks.giveUp(b, fmt.Errorf("no acknowledgement before the context ended: %w", f.ctx.Err()))
			}
		case <-t.C:
			now := time.Now()
			for _, b := range active {
				b.mu.Lock()
				late := now.Sub(b.seen) >= f.p.cfg.AckTimeout
				b.mu.Unlock()
				if late {
					f.s.acks.giveUp(b, errAckTimeout)
				}
			}
		}
		t.Stop()
	}
}

// start starts a batch of the messages idx that are still to be sent,
// once a batch slot is free: at once when busy (the call has batches in
// flight, which free slots), else waiting as long as a publish waits for
// a slot. ok is false when busy and no slot is free; the batch is nil
// when it sends nothing (its messages failed).
func (f *fastCall) start(idx []int, wake chan struct{}, busy bool) (b *fastBatch, ok bool) {
	var keep []int
	for _, i := range idx {
		if cause := f.deadBefore(i); cause != nil {
			f.follow([]int{i}, cause)
		} else if err := f.s.unsendable(i); err != nil {
			f.errs[i] = err
		} else {
			keep = append(keep, i)
		}
	}
	if len(keep) == 0 {
		return nil, true
	}
	var release func()
	select {
	case f.p.batchSlots <- struct{}{}:
		release = f.p.slotRelease()
	default:
		if busy {
			return nil, false
		}
		var err error
		if release, err = f.s.batchSlot(); err != nil {
			f.fail(keep, err)
			return nil, true
		}
	}
	msgs := make([]*nats.Msg, len(keep))
	for j, i := range keep {
		msgs[j] = f.nms[i]
	}
	b, err := f.s.acks.startFast(keep, msgs, wake, release)
	if err != nil {
		release()
		f.fail(keep, err)
		return nil, true
	}
	return b, true
}

// fail fails the messages idx with err, which stops the sending when it
// says the broker is away or refuses the configuration.
func (f *fastCall) fail(idx []int, err error) {
	for _, i := range idx {
		f.s.failed(i, err)
	}
}

// outcome reads how b ended into the call's results and returns the
// messages to send again as a batch: those of other keys than a failed
// message's, which its batch's end left unsent; or all from where the
// server ended the batch without saying why (a message lost on the way,
// the batch dropped). Messages the server refused as a batch, not for
// themselves, go one at a time.
func (f *fastCall) outcome(b *fastBatch) (again []int) {
	b.mu.Lock()
	count, acked, err, dup, errs := b.count, b.acked, b.err, b.dup, b.errs
	b.mu.Unlock()
	n := len(b.idx)
	if err != nil {
		stored := min(int(acked), n)
		rest := b.idx[stored:]
		if errors.Is(err, errBatchDropped) {
			return f.resend(rest)
		}
		f.fail(rest, err)
		return nil
	}
	if dup {
		f.p.dups.Add(1)
	}
	stored := min(int(count), n)
	if stored == n {
		return nil
	}
	cause := errs[uint64(stored+1)]
	var api *jetstream.APIError
	errors.As(cause, &api)
	code := 0
	if api != nil {
		code = int(api.ErrorCode)
	}
	switch {
	case cause == nil, code == codeBatchUnknownID, code == codeDuplicateInProcess:
		return f.resend(b.idx[stored:])
	case code == codeBatchDisabled, code == codeBatchInvalidPattern, code == codeBatchInvalidID, code == codeBatchTooMany:
		if code == codeBatchDisabled && f.p.fastWarned.CompareAndSwap(false, true) {
			f.p.cfg.Logger.Warn("nats publisher: a stream no longer allows batch publish (AllowBatchPublish); "+
				"its keys' events go one at a time", "err", errText(cause))
		}
		f.slow = append(f.slow, b.idx[stored:]...)
		return nil
	}
	k := b.idx[stored]
	f.s.failed(k, cause)
	rest := b.idx[stored+1:]
	if publishers.IsUnavailable(f.errs[k]) || publishers.IsMisconfigured(f.errs[k]) {
		f.follow(rest, f.errs[k])
		return nil
	}
	f.kill(k)
	for _, i := range rest {
		if cause := f.deadBefore(i); cause != nil {
			f.follow([]int{i}, cause)
		} else {
			again = append(again, i)
		}
	}
	return again
}

// resend returns idx to send again as a batch, while the call's budget of
// batches ended without a reason lasts; then they go one at a time.
func (f *fastCall) resend(idx []int) []int {
	if f.resends < maxFastResends {
		f.resends++
		return idx
	}
	f.slow = append(f.slow, idx...)
	return nil
}

// maxFastResends is how many times a call sends a batch again from a
// message the server ended it at without saying why.
const maxFastResends = 3

// oneByOne publishes the slow messages, each key's one at a time in call
// order (see call.oneByOne); unkeyed ones all at once.
func (f *fastCall) oneByOne() {
	if len(f.slow) == 0 {
		return
	}
	var queues [][]int
	byKey := map[string]int{}
	for _, i := range f.slow {
		if f.errs[i] != nil {
			continue
		}
		k := f.msgs[i].Key
		if k == "" {
			queues = append(queues, []int{i})
			continue
		}
		if cause := f.deadBefore(i); cause != nil {
			f.follow([]int{i}, cause)
			continue
		}
		q, ok := byKey[k]
		if !ok {
			q = len(queues)
			byKey[k] = q
			queues = append(queues, nil)
		}
		queues[q] = append(queues[q], i)
	}
	f.call.oneByOne(queues)
}
