package nats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/publishers"
)

// acker is the publisher's own asynchronous JetStream publish: every
// message goes out with a reply subject under one inbox of the
// publisher's, and one goroutine of its own matches the acknowledgements
// to the waiting publishes. Close unsubscribes the inbox and waits for the
// goroutine, so a publisher on a caller's connection leaves nothing
// behind. (jetstream's PublishMsgAsync starts a goroutine per JetStream
// context that, in nats.go v1.55.0, its CleanupPublisher can leave blocked
// for good on a connection that outlives the publisher.)
type acker struct {
	nc         *nats.Conn
	prefix     string // reply subjects are prefix + token
	sub        *nats.Subscription
	in         chan *nats.Msg
	status     chan nats.Status
	slots      chan struct{} // one per publish awaiting its acknowledgement
	ackTimeout time.Duration
	quit       chan struct{}
	wg         sync.WaitGroup

	// Fast-ingest batches (FastKeyRuns): their replies come to fastPrefix
	// + batch ID + "." + …, on a subscription of their own.
	fastPrefix string
	fastSub    *nats.Subscription
	fastIn     chan *nats.Msg
	fastIDs    string // unique to the acker: batch IDs are fastIDs + a counter

	mu       sync.Mutex
	pending  map[uint64]*pubAck
	next     uint64
	fast     map[string]*fastBatch // batches awaiting their end, by ID
	nextFast uint64
	closed   bool
	denied   error         // the server refuses the replies: every publish fails with this
	refused  chan struct{} // closed when denied is set
	drop     chan struct{} // closed, and replaced, when the connection drops
}

// pubAck is one publish awaiting its acknowledgement.
type pubAck struct {
	subject string
	sent    time.Time
	done    chan struct{} // closed once ack or err is set
	ack     *jetstream.PubAck
	err     error
	release func() // when set, called once the outcome is set (frees an atomic batch's slot)
}

// errAckTimeout is the error of a publish not acknowledged within
// PublisherConfig.AckTimeout.
var errAckTimeout = fmt.Errorf("no acknowledgement within the ack timeout: %w", nats.ErrTimeout)

// statusNoResponders is the status of the reply to a publish no
// subscription (no stream) takes.
const statusNoResponders = "503"

// newAcker subscribes to the acknowledgements, and with fast to those of
// fast-ingest batches too, and starts the acker's goroutine.
func newAcker(nc *nats.Conn, maxPending int, ackTimeout time.Duration, fast bool) (*acker, error) {
	a := &acker{
		nc:         nc,
		prefix:     nc.NewInbox() + ".",
		in:         make(chan *nats.Msg, 2*maxPending+64), // a full channel drops acks (nats.go's slow consumer)
		slots:      make(chan struct{}, maxPending),
		ackTimeout: ackTimeout,
		quit:       make(chan struct{}),
		pending:    make(map[uint64]*pubAck),
		fast:       make(map[string]*fastBatch),
		drop:       make(chan struct{}),
		refused:    make(chan struct{}),
	}
	sub, err := nc.ChanSubscribe(a.prefix+"*", a.in)
	if err != nil {
		return nil, fmt.Errorf("subscribe to the acknowledgements: %w", err)
	}
	a.sub = sub
	if fast {
		inbox := nc.NewInbox()
		a.fastPrefix, a.fastIDs = inbox+".", inbox[strings.LastIndexByte(inbox, '.')+1:]
		a.fastIn = make(chan *nats.Msg, fastReplies)
		if a.fastSub, err = nc.ChanSubscribe(a.fastPrefix+">", a.fastIn); err != nil {
			_ = sub.Unsubscribe()
			return nil, fmt.Errorf("subscribe to the fast-ingest acknowledgements: %w", err)
		}
	}
	a.status = nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	a.wg.Add(1)
	go a.run()
	return a, nil
}

// send publishes m with a reply subject of the acker's, waiting up to
// stallWait (or ctx's end) for a free slot. A release that is not nil is
// called once the publish has its outcome, and when send fails: it may be
// called twice, so it must be idempotent.
func (a *acker) send(ctx context.Context, m *nats.Msg, stallWait time.Duration, release func()) (*pubAck, error) {
	pa, err := a.sendMsg(ctx, m, stallWait, release)
	if err != nil && release != nil {
		release()
	}
	return pa, err
}

func (a *acker) sendMsg(ctx context.Context, m *nats.Msg, stallWait time.Duration, release func()) (*pubAck, error) {
	select {
	case a.slots <- struct{}{}:
	default:
		t := time.NewTimer(stallWait)
		select {
		case a.slots <- struct{}{}:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("not sent: %d publishes await their acknowledgement: %w", cap(a.slots), ctx.Err())
		case <-t.C:
			return nil, fmt.Errorf("not sent: %d publishes await their acknowledgement: %w", cap(a.slots), jetstream.ErrTooManyStalledMsgs)
		case <-a.quit:
			t.Stop()
			return nil, ErrClosed
		}
	}
	a.mu.Lock()
	if a.closed || a.denied != nil {
		err := a.denied
		if a.closed {
			err = ErrClosed
		}
		a.mu.Unlock()
		<-a.slots
		return nil, err
	}
	id := a.next
	a.next++
	pa := &pubAck{subject: m.Subject, sent: time.Now(), done: make(chan struct{}), release: release}
	a.pending[id] = pa
	a.mu.Unlock()
	m.Reply = a.prefix + strconv.FormatUint(id, 36)
	if err := a.nc.PublishMsg(m); err != nil {
		a.settle(id, nil, err)
		return nil, err
	}
	return pa, nil
}

// settle gives the publish id its outcome and frees its slot, once.
func (a *acker) settle(id uint64, ack *jetstream.PubAck, err error) {
	a.mu.Lock()
	pa, ok := a.pending[id]
	delete(a.pending, id)
	a.mu.Unlock()
	if ok {
		a.finish(pa, ack, err)
	}
}

func (a *acker) finish(pa *pubAck, ack *jetstream.PubAck, err error) {
	pa.ack, pa.err = ack, err
	close(pa.done)
	<-a.slots
	if pa.release != nil {
		pa.release()
	}
}

// failIf fails every pending publish for which match holds with err.
func (a *acker) failIf(match func(*pubAck) bool, err error) {
	a.mu.Lock()
	var failed []*pubAck
	for id, pa := range a.pending {
		if match(pa) {
			failed = append(failed, pa)
			delete(a.pending, id)
		}
	}
	a.mu.Unlock()
	for _, pa := range failed {
		a.finish(pa, nil, err)
	}
}

func all(*pubAck) bool { return true }

// run matches acknowledgements until close, fails what is pending when
// the connection drops, and times out what waited too long.
func (a *acker) run() {
	defer a.wg.Done()
	tick := time.NewTicker(max(a.ackTimeout/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case m := <-a.in:
			a.handle(m)
		case m := <-a.fastIn:
			a.handleFast(m)
		case s, ok := <-a.status:
			if !ok {
				a.status = nil
				continue
			}
			err := nats.ErrDisconnected
			if s == nats.CLOSED {
				err = nats.ErrConnectionClosed
			}
			a.mu.Lock()
			close(a.drop)
			a.drop = make(chan struct{})
			a.mu.Unlock()
			a.failIf(all, fmt.Errorf("connection lost before the acknowledgement: %w", err))
			a.failFast(fmt.Errorf("connection lost before the batch's acknowledgement: %w", err))
		case now := <-tick.C:
			a.failIf(func(pa *pubAck) bool { return now.Sub(pa.sent) >= a.ackTimeout }, errAckTimeout)
		case <-a.quit:
			return
		}
	}
}

// ackResponse is JetStream's answer to a publish.
type ackResponse struct {
	Error *jetstream.APIError `json:"error,omitempty"`
	jetstream.PubAck
}

// handle settles the publish m answers.
func (a *acker) handle(m *nats.Msg) {
	id, err := strconv.ParseUint(strings.TrimPrefix(m.Subject, a.prefix), 36, 64)
	if err != nil {
		return
	}
	if len(m.Data) == 0 && m.Header.Get("Status") != "" {
		if st := m.Header.Get("Status"); st == statusNoResponders {
			a.settle(id, nil, ErrNoStream)
		} else {
			a.settle(id, nil, fmt.Errorf("JetStream answered with status %s %s", st, m.Header.Get("Description")))
		}
		return
	}
	var r ackResponse
	if stream, seq, dup, ok := parseAck(m.Data); ok {
		a.settle(id, &jetstream.PubAck{Stream: stream, Sequence: seq, Duplicate: dup}, nil)
		return
	}
	switch err := json.Unmarshal(m.Data, &r); {
	case err != nil:
		a.settle(id, nil, fmt.Errorf("JetStream's acknowledgement: %w", err))
	case r.Error != nil:
		a.settle(id, nil, r.Error)
	case r.Stream == "":
		a.settle(id, nil, errors.New("JetStream's acknowledgement names no stream"))
	default:
		a.settle(id, &r.PubAck, nil)
	}
}

// deny fails the pending publishes to subject with err (the server refused
// the permission to publish there); or, when all is set (the server
// refused a subscription of the connection, or a reply subject: no answer
// can come), every publish, pending and to come.
func (a *acker) deny(subject string, all bool, err error) {
	if !all && !strings.HasPrefix(subject, a.prefix) && (a.fastPrefix == "" || !strings.HasPrefix(subject, a.fastPrefix)) {
		a.failIf(func(pa *pubAck) bool { return pa.subject == subject }, err)
		a.denyFast(subject, err)
		return
	}
	a.mu.Lock()
	if a.denied == nil {
		a.denied = err
		close(a.refused)
	}
	a.mu.Unlock()
	a.failIf(func(*pubAck) bool { return true }, err)
	a.failFast(err)
}

// refusal returns the server's refusal of every publish, or nil.
func (a *acker) refusal() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.denied
}

// dropped returns a channel closed when the connection next drops.
func (a *acker) dropped() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.drop
}

// request runs f, a request to the server, with a context that also ends
// when the connection drops or the server refuses its subscriptions
// (nats.go would wait out ctx for an answer that cannot come). The error
// then says why.
func (a *acker) request(ctx context.Context, f func(context.Context) error) error {
	drop := a.dropped()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-drop:
			cancel(fmt.Errorf("the connection dropped before the answer: %w", nats.ErrDisconnected))
		case <-a.refused:
			cancel(a.refusal())
		case <-stop:
		}
	}()
	err := f(ctx)
	if err == nil {
		return nil
	}
	if denied := a.refusal(); denied != nil {
		return fmt.Errorf("%w (%v)", denied, err)
	}
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, nats.ErrDisconnected) {
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}

// close fails what is pending with ErrClosed, unsubscribes and waits for
// the acker's goroutine.
func (a *acker) close() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	a.mu.Unlock()
	_ = a.sub.Unsubscribe() // fails only when the connection is closed: nothing left to undo
	if a.fastSub != nil {
		_ = a.fastSub.Unsubscribe()
	}
	a.nc.RemoveStatusListener(a.status)
	close(a.quit)
	a.wg.Wait()
	a.failIf(all, ErrClosed)
	a.failFast(ErrClosed)
}

// wait returns pa's outcome, preferring one that is in over ctx's end, the
// publisher's close or the timer's.
func wait(ctx context.Context, done, timeout <-chan struct{}, pa *pubAck) (*jetstream.PubAck, error) {
	select {
	case <-pa.done:
		return pa.ack, pa.err
	default:
	}
	select {
	case <-pa.done:
		return pa.ack, pa.err
	case <-ctx.Done():
		return nil, fmt.Errorf("no acknowledgement before the context ended: %w", ctx.Err())
	case <-done:
		return nil, fmt.Errorf("no acknowledgement before Close: %w", ErrClosed)
	case <-timeout:
		return nil, errAckTimeout
	}
}

// permissionDenied parses nats.go's report of a permissions violation
// into the subject the server refused, and whether the refusal was of a
// subscription or a reply subject (no answer can come to the connection);
// ok is false for anything else.
func permissionDenied(err error) (subject string, replies, ok bool) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return "", false, false
	}
	msg := err.Error()
	for _, m := range []struct {
		marker  string
		replies bool
	}{{"Publish to ", false}, {"Publish with Reply of ", true}, {"Subscription to ", true}} {
		i := strings.Index(msg, m.marker)
		if i < 0 {
			continue
		}
		q, err := strconv.QuotedPrefix(msg[i+len(m.marker):])
		if err != nil {
			return "", false, false
		}
		s, err := strconv.Unquote(q)
		return s, m.replies, err == nil
	}
	return "", false, false
}

// refused is the error of a publish the server's permissions refused.
func refused(err error) error { return publishers.Misconfigured(redacted(err)) }

// parseAck reads JetStream's usual acknowledgement, {"stream":"S","seq":N}
// or {"stream":"S","seq":N,"duplicate":true}, without encoding/json, which
// cost a tenth of the relay's CPU in a profile of ordered drains (one small
// JSON document per event). Spaces after a comma or a colon are allowed:
// nats-server 2.9 writes {"stream":"S", "seq":N,"duplicate": true}. ok is
// false for any other form (a domain, an error, an escaped name …):
// json.Unmarshal reads those.
func parseAck(b []byte) (stream string, seq uint64, dup, ok bool) {
	b, ok = cut(b, `{"stream":`)
	if !ok || len(b) == 0 || b[0] != '"' {
		return "", 0, false, false
	}
	b = b[1:]
	end := bytes.IndexByte(b, '"')
	if end <= 0 || !plainName(b[:end]) {
		return "", 0, false, false
	}
	name := b[:end]
	if b, ok = cut(b[end+1:], `,`); ok {
		b, ok = cut(b, `"seq":`)
	}
	if !ok {
		return "", 0, false, false
	}
	n := 0
	for n < len(b) && n < 20 && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	if n == 0 || b[0] == '0' && n > 1 {
		return "", 0, false, false
	}
	seq, err := strconv.ParseUint(string(b[:n]), 10, 64)
	if err != nil {
		return "", 0, false, false
	}
	if rest, ok := cut(b[n:], `,`); ok {
		if rest, ok = cut(rest, `"duplicate":`); !ok || string(rest) != "true}" {
			return "", 0, false, false
		}
		dup = true
	} else if string(b[n:]) != "}" {
		return "", 0, false, false
	}
	return string(name), seq, dup, true
}

// cut returns what follows prefix in b and the spaces after it, and
// whether b begins with prefix.
func cut(b []byte, prefix string) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(prefix))
	if !ok {
		return b, false
	}
	return bytes.TrimLeft(rest, " "), true
}

// plainName reports whether b is printable ASCII with no backslash: a JSON
// string's content that means itself.
func plainName(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}
