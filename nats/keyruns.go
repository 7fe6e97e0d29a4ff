package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/publishers"
)

// JetStream's atomic batch headers (ADR-50, nats-server 2.12+).
const (
	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"
)

// Limits of the atomic batches the publisher sends.
const (
	// maxAtomicBatch is the most messages one batch holds: nats-server's
	// default limit (max_batch_size). A longer run goes on one message at
	// a time once its first batch is stored; so does a run whose batch a
	// server with a lower limit refuses.
	maxAtomicBatch = 1000
	// minAtomicRun is PublisherConfig.AtomicMinRun's default on
	// replicated and memory streams, where the server stages a batch in
	// memory: every run of two or more goes as a batch.
	minAtomicRun = 2
	// minAtomicRunR1File is AtomicMinRun's default where a stream is R1
	// with file storage: there the server stages each batch in a file
	// store of its own, created, synced at the commit and removed — 3 to
	// 8 ms a batch on the development machine, one batch after the other
	// per stream — which only a long run repays, or a server far enough
	// away that a run's round trips cost more.
	minAtomicRunR1File = 32
	// maxAtomicBatches is how many batches a Publisher has awaiting their
	// commit at once, below nats-server's default of 50 per stream
	// (max_batch_inflight_per_stream) so that a second relay fits too.
	maxAtomicBatches = 32
	// atomicCheckTimeout bounds KeepsKeyOrder's look at the streams.
	atomicCheckTimeout = 5 * time.Second
)

// States of Publisher.keyRuns.
const (
	runsUnknown int32 = iota // not checked (or the check failed)
	runsOn                   // key runs go as atomic (or fast-ingest) batches
	runsOff                  // checked: JetStream cannot
)

// KeepsKeyOrder reports whether the Publisher keeps each key's order
// within a Publish call by itself, whatever fails (publishers.OrderKeeper):
// by default or with PublisherConfig.FastKeyRuns, on nats-server 2.14.0
// or later, when every stream the publisher's subjects go to allows batch
// publish; with AtomicKeyRuns, on nats-server 2.12.1 or later, when every
// such stream allows atomic publish; never with NoKeyRuns. It asks
// JetStream (within a few seconds) and keeps a yes for good. A no is kept
// for good too when the option was set, and said once at Warn; by default
// it is said at Info, once for each reason, and asked again at the next
// call (the relays ask every minute). When JetStream cannot answer it
// reports false and asks again at the next call. While it has not
// reported true, Publish publishes as it does without the option. See the
// package documentation, "Key order".
func (p *Publisher) KeepsKeyOrder() bool {
	if p.cfg.NoKeyRuns {
		return false
	}
	switch p.keyRuns.Load() {
	case runsOn:
		return true
	case runsOff:
		return false
	}
	fast := p.cfg.fastRuns()
	set := p.cfg.AtomicKeyRuns || p.cfg.FastKeyRuns
	option := "AtomicKeyRuns"
	if fast {
		option = "FastKeyRuns"
	}
	ctx, cancel := context.WithTimeout(context.Background(), atomicCheckTimeout)
	defer cancel()
	var why string
	var minRun int
	var routes []fastRoute
	var err error
	if fast {
		why, routes, err = p.fastStreams(ctx)
	} else {
		why, minRun, err = p.atomicStreams(ctx)
	}
	log := p.cfg.Logger
	switch {
	case err != nil && set:
		log.Warn("nats publisher: cannot tell whether the streams take "+option+"'s batches; a key's events go one at a time",
			"option", option, "err", errText(err))
		return false
	case err != nil:
		log.Info("nats publisher: cannot tell yet whether the streams take fast-ingest batches; a key's events go one at a time until they do",
			"err", errText(err))
		return false
	case why != "" && set:
		p.keyRuns.Store(runsOff)
		log.Warn("nats publisher: "+option+" is set but JetStream cannot take its batches here; a key's events go one at a time",
			"option", option, "why", why)
		return false
	case why != "":
		if old := p.noRunsWhy.Swap(&why); old == nil || *old != why {
			log.Info("nats publisher: a key's events go one at a time, as JetStream cannot take fast-ingest batches here "+
				"(nats-server 2.14+ and streams that allow batch publish pipeline them)", "why", why)
		}
		return false
	}
	if fast {
		p.routes.Store(&routes)
		p.keyRuns.Store(runsOn)
		log.Info("nats publisher: a call's events go to each stream as fast-ingest batches, keeping key order", "streams", len(routes))
		return true
	}
	if p.cfg.AtomicMinRun > 0 {
		minRun = p.cfg.AtomicMinRun
	}
	p.minRun.Store(int64(minRun))
	p.keyRuns.Store(runsOn)
	log.Info("nats publisher: a key's events in one call go as one atomic batch", "min_batch", minRun)
	return true
}

// atomicStreams returns why the publisher's messages cannot go as atomic
// batches ("" when they can) and the shortest run worth a batch on their
// streams, or the error that kept it from finding out.
func (p *Publisher) atomicStreams(ctx context.Context) (why string, minRun int, err error) {
	v := p.nc.ConnectedServerVersion()
	if v == "" {
		return "", 0, errNoServerYet
	}
	if !versionAtLeast(v, 2, 12, 1) {
		return fmt.Sprintf("nats-server %s: atomic batches with Nats-Msg-Id need 2.12.1 or later", v), 0, nil
	}
	cfgs, why, err := p.streamConfigs(ctx)
	if why != "" || err != nil {
		return why, 0, err
	}
	minRun = minAtomicRun
	for _, cfg := range cfgs {
		if !cfg.AllowAtomicPublish {
			return fmt.Sprintf("stream %s does not allow atomic publish (AllowAtomicPublish)", cfg.Name), 0, nil
		}
		if cfg.Storage == jetstream.FileStorage && cfg.Replicas <= 1 {
			minRun = minAtomicRunR1File
		}
	}
	return "", minRun, nil
}

// streamConfigs returns the configurations of the streams the publisher's
// messages go to (PublisherConfig.Stream, or the streams capturing
// SubjectPrefix.>), or why it cannot tell ("" when it can), or the error
// that kept it from finding out.
func (p *Publisher) streamConfigs(ctx context.Context) (cfgs []jetstream.StreamConfig, why string, err error) {
	var names []string
	switch {
	case p.cfg.Stream != "":
		names = []string{p.cfg.Stream}
	case p.cfg.prefixed():
		err := p.acks.Load().request(ctx, func(ctx context.Context) error {
			l := p.js.StreamNames(ctx, jetstream.WithStreamListSubject(p.cfg.SubjectPrefix+".>"))
			for n := range l.Name() {
				names = append(names, n)
			}
			return l.Err()
		})
		if err != nil {
			return nil, "", fmt.Errorf("list the streams of %s.>: %w", p.cfg.SubjectPrefix, err)
		}
		if len(names) == 0 {
			return nil, fmt.Sprintf("no stream captures %s.>", p.cfg.SubjectPrefix), nil
		}
	default:
		return nil, "the subjects are not under a SubjectPrefix (Subject or NoSubjectPrefix): set Stream to name the stream", nil
	}
	for _, name := range names {
		var cfg jetstream.StreamConfig
		err := p.acks.Load().request(ctx, func(ctx context.Context) error {
			s, err := p.js.Stream(ctx, name)
			if err == nil {
				cfg = s.CachedInfo().Config
			}
			return err
		})
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Sprintf("stream %s does not exist", name), nil
		}
		if err != nil {
			return nil, "", fmt.Errorf("look up stream %s: %w", name, err)
		}
		cfgs = append(cfgs, cfg)
	}
	return cfgs, "", nil
}

// errNoServerYet is why KeepsKeyOrder cannot tell before the publisher's
// first connection (nats.RetryOnFailedConnect): it asks again later.
var errNoServerYet = errors.New("not connected to a server yet, so its version is unknown")

// versionAtLeast reports whether the server version v ("2.12.1",
// "2.14.0-beta") is at least major.minor.patch.
func versionAtLeast(v string, major, minor, patch int) bool {
	v, _, _ = strings.Cut(strings.TrimPrefix(v, "v"), "-")
	parts := strings.SplitN(v, ".", 3)
	want := []int{major, minor, patch}
	for i, w := range want {
		n := 0
		if i < len(parts) {
			var err error
			if n, err = strconv.Atoi(parts[i]); err != nil {
				return false
			}
		}
		if n != w {
			return n > w
		}
	}
	return true
}

// run is one key's messages in a call, in call order, which go as one
// atomic batch (the first maxAtomicBatch of them).
type run struct {
	short bool  // too short for a batch (Publisher.minRun): one at a time
	idx   []int // indexes into the call's messages
	batch []int // the messages the batch holds (a prefix of idx)
	done  bool  // every message of idx has its outcome: nothing to send one at a time
}

// publishRuns publishes the call with AtomicKeyRuns on: unkeyed messages
// and keys with one message as plain publishes, each run of
// Publisher.minRun or more messages of one key as one atomic batch, and
// the first message of each shorter run, all in flight at once; then, one
// message at a time per key (rounds of one message of each key,
// pipelined), the rest of the short runs, the runs whose batch JetStream
// refused for other reasons than an outage (a duplicate of a stored
// message, too many batches, a message it rejects) and what runs longer
// than a batch hold.
func (c *call) publishRuns() {
	plain, runs := c.runs()
	s := c.sender()
	pas := make([]*pubAck, len(c.msgs))
	for _, i := range plain {
		pas[i] = s.one(i)
	}
	for _, r := range runs {
		if r.short = int64(len(r.idx)) < c.p.minRun.Load(); r.short {
			pas[r.idx[0]] = s.one(r.idx[0])
			continue
		}
		if i, pa := s.batch(r); pa != nil {
			pas[i] = pa
		}
	}
	c.await(pas)
	var rest [][]int
	for _, r := range runs {
		if r.short {
			if err := c.errs[r.idx[0]]; err != nil {
				c.follow(r.idx[1:], err)
			} else {
				rest = append(rest, r.idx[1:])
			}
			continue
		}
		if len(r.batch) == 0 {
			continue
		}
		last := r.batch[len(r.batch)-1]
		err := c.errs[last]
		switch {
		case err == nil:
			if !r.done && len(r.batch) < len(r.idx) {
				rest = append(rest, r.idx[len(r.batch):])
			}
		case len(r.batch) > 1 && (publishers.IsUnavailable(err) || publishers.IsMisconfigured(err)):
			// Not stored, or stored with the ack lost: a retry is
			// deduplicated either way.
			for _, i := range r.batch[:len(r.batch)-1] {
				c.errs[i] = fmt.Errorf("nats publish %s: its key's atomic batch failed: %w", c.msgs[i].ID, err)
			}
			if !r.done {
				c.follow(r.idx[len(r.batch):], err)
			}
		case len(r.batch) > 1:
			// The batch stored nothing: say exactly which message fails,
			// keeping the order, one at a time.
			c.errs[last] = nil
			if r.done {
				rest = append(rest, r.batch)
			} else {
				rest = append(rest, r.idx)
			}
		case !r.done:
			c.follow(r.idx[1:], err)
		}
	}
	c.oneByOne(rest)
}

// runs splits the call's messages into the plain ones (unkeyed, or the
// only one of their key) and the runs of two or more of one key.
func (c *call) runs() (plain []int, runs []*run) {
	byKey := map[string]*run{}
	for i := range c.msgs {
		k := c.msgs[i].Key
		if k == "" {
			continue
		}
		r := byKey[k]
		if r == nil {
			r = &run{}
			byKey[k] = r
			runs = append(runs, r)
		}
		r.idx = append(r.idx, i)
	}
	keep := runs[:0]
	for _, r := range runs {
		if len(r.idx) > 1 {
			keep = append(keep, r)
		}
	}
	for i := range c.msgs {
		if k := c.msgs[i].Key; k == "" || len(byKey[k].idx) == 1 {
			plain = append(plain, i)
		}
	}
	return plain, keep
}

// batch sends the first messages of r as one atomic batch: every message
// but the last without a reply subject, the last with Nats-Batch-Commit
// and a reply. It returns the index of the message whose pending
// acknowledgement says how the batch (or, for a batch of one, the
// message) fared, and that acknowledgement; nil when nothing awaits one
// (errs says why). A message that fails the checks before sending ends
// the batch before it: it fails, and so does every later one of r.
func (s *sender) batch(r *run) (int, *pubAck) {
	c := s.c
	chunk := r.idx[:min(len(r.idx), maxAtomicBatch)]
	if err := s.unsendable(r.idx[0]); err != nil {
		for _, i := range r.idx {
			c.errs[i] = s.unsendable(i)
		}
		r.done = true
		return 0, nil
	}
	id := uuid.NewString()
	nms := make([]*natsMsgOf, 0, len(chunk))
	for n, i := range chunk {
		nm, err := s.build(i, headerBatchID, id, headerBatchSeq, strconv.Itoa(n+1), headerBatchCommit, "1")
		if err != nil {
			c.errs[i] = c.wrap(&c.msgs[i], err)
			c.follow(r.idx[n+1:], c.errs[i])
			r.done = true
			break
		}
		nms = append(nms, &natsMsgOf{i: i, m: nm})
	}
	for _, nm := range nms {
		r.batch = append(r.batch, nm.i)
	}
	switch len(nms) {
	case 0:
		return 0, nil
	case 1:
		return nms[0].i, s.one(nms[0].i)
	}
	last := nms[len(nms)-1]
	for _, nm := range nms[:len(nms)-1] {
		delete(nm.m.Header, headerBatchCommit)
	}
	release, err := s.batchSlot()
	if err == nil {
		for _, nm := range nms[:len(nms)-1] {
			if err = c.p.nc.PublishMsg(nm.m); err != nil {
				release()
				break
			}
		}
	}
	var pa *pubAck
	if err == nil {
		pa, err = s.acks.send(c.ctx, last.m, c.p.stallWait(c.ctx), release)
	}
	if err != nil {
		// Without its commit the batch stores nothing; the server drops
		// it after its batch timeout.
		s.failed(last.i, err)
		return last.i, nil
	}
	return last.i, pa
}

// natsMsgOf is the NATS message of the call's message i.
type natsMsgOf struct {
	i int
	m *nats.Msg
}

// batchSlot waits for one of the publisher's maxAtomicBatches slots, as
// long as a publish waits for an acknowledgement slot, and returns the
// function that frees it (which may be called more than once).
func (s *sender) batchSlot() (func(), error) {
	p, ctx := s.c.p, s.c.ctx
	select {
	case p.batchSlots <- struct{}{}:
	default:
		t := time.NewTimer(p.stallWait(ctx))
		defer t.Stop()
		select {
		case p.batchSlots <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("not sent: %d batches await their commit: %w", cap(p.batchSlots), ctx.Err())
		case <-t.C:
			return nil, fmt.Errorf("not sent: %d batches await their commit: %w", cap(p.batchSlots), jetstream.ErrTooManyStalledMsgs)
		case <-p.done:
			return nil, ErrClosed
		}
	}
	return p.slotRelease(), nil
}

// slotRelease returns the function that frees a batch slot taken; it may
// be called more than once.
func (p *Publisher) slotRelease() func() {
	var once sync.Once
	return func() { once.Do(func() { <-p.batchSlots }) }
}

// oneByOne publishes each queue of message indexes (one key's, in order)
// one message at a time, the next only once JetStream stored the one
// before: rounds of the head of every queue, pipelined. A queue whose
// message fails sends nothing more; its later messages fail too.
func (c *call) oneByOne(queues [][]int) {
	for len(queues) > 0 {
		s := c.sender()
		pas := make([]*pubAck, len(c.msgs))
		for _, q := range queues {
			pas[q[0]] = s.one(q[0])
		}
		c.await(pas)
		next := queues[:0]
		for _, q := range queues {
			switch {
			case c.errs[q[0]] != nil:
				c.follow(q[1:], c.errs[q[0]])
			case len(q) > 1:
				next = append(next, q[1:])
			}
		}
		queues = next
	}
}

// follow fails the messages idx, not sent because an earlier message of
// their key failed with cause: publishers.NotSent, so the relay leaves
// them pending and uncharged, and with cause's class too when it is an
// outage or a refusal (a permanent failure of one message is not theirs).
func (c *call) follow(idx []int, cause error) {
	for _, i := range idx {
		m := &c.msgs[i]
		c.errs[i] = publishers.NotSentAfter(fmt.Sprintf("nats publish %s to %q", m.ID, c.p.subject(m.Topic)), redacted(cause))
	}
}
