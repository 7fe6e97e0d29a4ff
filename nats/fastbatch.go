package nats

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream's fast-ingest batches (ADR-50, nats-server 2.14+) have no
// headers: a batch lives in its messages' reply subjects,
//
//	<prefix>.<batch ID>.<flow>.<gap mode>.<batch sequence>.<operation>.$FI
//
// The server stores each message as it arrives, tells the publisher every
// <flow> stored messages how far it got (a flow acknowledgement, which
// also says how often the next ones come), and answers the commit with a
// PubAck whose count is how many of the batch it stored. In gap mode
// "fail", which is the only one the publisher uses, the first message it
// refuses or misses ends the batch: it stores nothing after it, and the
// count says exactly where it stopped.
const (
	fastOpStart  = 0 // the first message
	fastOpAppend = 1 // the messages after it
	fastOpCommit = 2 // a message that commits the batch it ends (a batch of one)
	fastOpEOB    = 3 // the commit after the last message, itself no message
)

const (
	// fastFlow is the flow the publisher asks for: the server sends a
	// flow acknowledgement at least every fastFlow stored messages (it
	// asks for them more often when several batches share a stream, and
	// for at most 500).
	fastFlow = 500
	// fastWindows is how many flows a batch may have sent beyond the
	// last flow acknowledgement (ADR-50's default): at most
	// fastWindows × flow messages of a batch are in flight.
	fastWindows = 2
	// maxFastBatches is how many fast-ingest batches a Publisher has in
	// flight at once, far below nats-server's 1,000 a stream
	// (max_batch_inflight_per_stream).
	maxFastBatches = maxAtomicBatches
	// fastReplies is the capacity of the channel the server's answers
	// to fast-ingest batches wait in: a full channel drops them (nats.go's
	// slow consumer). Each message in flight gets at most one answer
	// (most get none): an error, or "unknown batch" after an early end.
	fastReplies = maxFastBatches*fastWindows*fastFlow + 1024
)

// JetStream API error codes of fast-ingest batches.
const (
	codeBatchDisabled       = 10205 // the stream does not allow batch publish
	codeBatchInvalidPattern = 10206
	codeBatchInvalidID      = 10207
	codeBatchUnknownID      = 10208 // the batch ended, or the server dropped it
	codeBatchTooMany        = 10211 // too many batches in flight on the stream or the server
	codeDuplicateInProcess  = 10158 // the same Nats-Msg-Id is being stored (replicated streams)
)

// errBatchDropped ends a batch the server answered with "unknown batch"
// before its end: it dropped the batch (its batch timeout passed, or the
// stream's leader changed).
var errBatchDropped = errors.New("JetStream dropped the fast-ingest batch before its commit")

// fastBatch is one fast-ingest batch of a Publish call: messages idx of the
// call, batch sequences 1…len(idx), to one stream, and — for two or more —
// a commit (EOB) after them. The call's goroutine sends it; the acker's
// records what the server says of it.
type fastBatch struct {
	id      string
	idx     []int
	msgs    []*nats.Msg // the NATS message of each of idx
	wake    chan struct{}
	release func() // frees the batch's slot (batchSlot)

	mu    sync.Mutex
	sent  int    // batch sequences sent, the commit's included
	acked uint64 // the server stored every message up to this one (a flow acknowledgement)
	flow  int    // the server's flow: how many messages one flow acknowledgement covers
	seen  time.Time
	errs  map[uint64]error // what the server said of a message, by batch sequence
	over  bool             // ended: count, or err
	count uint64           // messages 1…count are stored (or were duplicates)
	dup   bool             // a batch of one whose message was a duplicate
	err   error            // why the publisher gave up on the batch (count unknown, acked known)
}

// total is how many batch sequences the batch sends, the commit's
// included.
func (b *fastBatch) total() int {
	if len(b.idx) == 1 {
		return 1
	}
	return len(b.idx) + 1
}

// signal wakes the call waiting on the batch.
func (b *fastBatch) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// end ends the batch with f's outcome, unless it has ended already.
func (b *fastBatch) end(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.over {
		return false
	}
	f()
	b.over = true
	return true
}

// record keeps what the server said of message seq (the first word wins).
func (b *fastBatch) record(seq uint64, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.errs == nil {
		b.errs = map[uint64]error{}
	}
	if _, ok := b.errs[seq]; !ok {
		b.errs[seq] = err
	}
}

// startFast registers a new batch of the call's messages idx (their NATS
// messages msgs) whose outcome wakes wake.
func (a *acker) startFast(idx []int, msgs []*nats.Msg, wake chan struct{}, release func()) (*fastBatch, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.closed:
		return nil, ErrClosed
	case a.denied != nil:
		return nil, a.denied
	}
	a.nextFast++
	b := &fastBatch{id: a.fastIDs + strconv.FormatUint(a.nextFast, 36), idx: idx, msgs: msgs, wake: wake,
		release: release, flow: 1, seen: time.Now()}
	a.fast[b.id] = b
	return b, nil
}

// forget unregisters b, ended.
func (a *acker) forget(b *fastBatch) {
	a.mu.Lock()
	delete(a.fast, b.id)
	a.mu.Unlock()
	b.release()
	b.signal()
}

// giveUp ends b, unless it has ended, with err: the messages the server
// acknowledged are stored, the others' fate is unknown.
func (a *acker) giveUp(b *fastBatch, err error) {
	if b.end(func() { b.err = err }) {
		a.forget(b)
	}
}

// failFast gives up on every batch in flight with err.
func (a *acker) failFast(err error) {
	a.mu.Lock()
	bs := make([]*fastBatch, 0, len(a.fast))
	for _, b := range a.fast {
		bs = append(bs, b)
	}
	a.mu.Unlock()
	for _, b := range bs {
		a.giveUp(b, err)
	}
}

// denyFast records err, the server's refusal of the permission to publish
// to subject, as the answer to every message of a batch in flight sent
// there: no answer of the stream's will come for it.
func (a *acker) denyFast(subject string, err error) {
	a.mu.Lock()
	bs := make([]*fastBatch, 0, len(a.fast))
	for _, b := range a.fast {
		bs = append(bs, b)
	}
	a.mu.Unlock()
	for _, b := range bs {
		b.mu.Lock()
		sent := min(b.sent, len(b.msgs))
		b.mu.Unlock()
		for i, m := range b.msgs[:sent] {
			if m.Subject == subject {
				b.record(uint64(i+1), err)
			}
		}
		b.signal()
	}
}

// fastReply is what the server sends to a fast-ingest batch's reply
// subjects: a flow acknowledgement ({"type":"ack","seq":N,"msgs":M}), a
// gap or a message's error ("gap", "err", informational), or — without
// a type — a PubAck, which ends the batch.
type fastReply struct {
	Type      string              `json:"type"`
	Seq       uint64              `json:"seq"`  // a flow message's batch sequence; a PubAck's stream sequence
	Msgs      int                 `json:"msgs"` // a flow acknowledgement's flow
	Error     *jetstream.APIError `json:"error"`
	Stream    string              `json:"stream"`
	Duplicate bool                `json:"duplicate"`
	Batch     string              `json:"batch"`
	Count     uint64              `json:"count"`
}

// handleFast applies the server's message m to the batch it answers.
func (a *acker) handleFast(m *nats.Msg) {
	id, seq, ok := fastReplyOf(strings.TrimPrefix(m.Subject, a.fastPrefix))
	if !ok {
		return
	}
	a.mu.Lock()
	b := a.fast[id]
	a.mu.Unlock()
	if b == nil {
		return // ended: what follows an end says nothing new
	}
	if len(m.Data) == 0 && m.Header.Get("Status") != "" {
		if st := m.Header.Get("Status"); st == statusNoResponders {
			// No stream took the message: none takes the batch (it
			// went away), nor will answer its commit.
			a.giveUp(b, ErrNoStream)
		} else {
			b.record(seq, fmt.Errorf("JetStream answered with status %s %s", st, m.Header.Get("Description")))
			b.signal()
		}
		return
	}
	var r fastReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		b.record(seq, fmt.Errorf("JetStream's answer to a fast-ingest batch: %w", err))
		b.signal()
		return
	}
	switch r.Type {
	case "ack":
		b.mu.Lock()
		b.acked, b.seen = max(b.acked, r.Seq), time.Now()
		if r.Msgs > 0 {
			b.flow = r.Msgs
		}
		b.mu.Unlock()
		b.signal()
	case "gap":
		// The PubAck follows: in gap mode "fail" a gap ends the batch.
	case "err":
		if r.Error != nil {
			b.record(r.Seq, r.Error)
		}
	default:
		a.fastPubAck(b, seq, &r)
	}
}

// fastPubAck applies r, a PubAck (or a PubAck's error) to message seq of b.
func (a *acker) fastPubAck(b *fastBatch, seq uint64, r *fastReply) {
	var ended bool
	switch {
	case r.Error != nil && seq == 1:
		// The first message failed: the server dropped the batch, or
		// never made it (its first message refused before the batch).
		b.record(seq, r.Error)
		ended = b.end(func() { b.count = 0 })
	case r.Error != nil && r.Error.ErrorCode == codeBatchUnknownID:
		// The batch is gone before its end: the server dropped it.
		ended = b.end(func() { b.err = errBatchDropped })
	case r.Error != nil:
		// Refused before the batch took it: the gap it leaves ends the
		// batch at the next message (or the commit).
		b.record(seq, r.Error)
		b.signal()
	case r.Stream == "":
		b.record(seq, errors.New("JetStream's acknowledgement names no stream"))
		b.signal()
	default:
		count := r.Count
		if r.Batch == "" {
			count = seq
		}
		ended = b.end(func() { b.count, b.dup = count, r.Duplicate && seq == 1 })
	}
	if ended {
		a.forget(b)
	}
}

// fastReplyOf reads a batch's ID and a message's batch sequence from the
// reply subject s (without the acker's prefix).
func fastReplyOf(s string) (id string, seq uint64, ok bool) {
	toks := strings.SplitN(s, ".", 6)
	if len(toks) != 6 {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(toks[3], 10, 64)
	return toks[0], seq, err == nil
}

// fastReplySubject is the reply subject of batch sequence seq of batch id.
func (a *acker) fastReplySubject(id string, seq, op int) string {
	var buf [128]byte
	b := append(buf[:0], a.fastPrefix...)
	b = append(b, id...)
	b = append(b, '.')
	b = strconv.AppendInt(b, fastFlow, 10)
	b = append(b, ".fail."...)
	b = strconv.AppendInt(b, int64(seq), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(op), 10)
	b = append(b, ".$FI"...)
	return string(b)
}

// pump sends what b's window allows of its messages, then its commit. It
// returns the error of a send that failed (b is not ended then).
func (a *acker) pump(b *fastBatch) error {
	total := b.total()
	for {
		b.mu.Lock()
		if b.over || b.sent == total || b.sent-int(b.acked) >= fastWindows*b.flow {
			b.mu.Unlock()
			return nil
		}
		b.sent++
		seq := b.sent
		b.mu.Unlock()
		var m *nats.Msg
		switch {
		case total == 1:
			m = b.msgs[0]
			m.Reply = a.fastReplySubject(b.id, seq, fastOpCommit)
		case seq == total:
			m = &nats.Msg{Subject: b.msgs[len(b.msgs)-1].Subject, Reply: a.fastReplySubject(b.id, seq, fastOpEOB)}
		default:
			m = b.msgs[seq-1]
			op := fastOpAppend
			if seq == 1 {
				op = fastOpStart
			}
			m.Reply = a.fastReplySubject(b.id, seq, op)
		}
		if err := a.nc.PublishMsg(m); err != nil {
			return err
		}
	}
}
