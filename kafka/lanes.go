package kafka

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// maxLanes bounds the calls carrying key runs that are in flight at once,
// each on a lane of its own; a call past it waits for a lane to come free.
// A relay has one call in flight per worker (relay.Config.Workers, 2 by
// default), in ordered and unordered mode alike.
const maxLanes = 32

// A lane is a client for one call carrying key runs at a time, from the
// moment it starts handing its records over until the last of them is
// settled, dialling the brokers through a write gate of its own
// (gate.go). A lane's client holds no record but the call's, so no
// failure of another call's batch — a response that was on its way, a
// context that ended, a timeout — can fail the partition's buffer in the
// middle of the hand-over and leave the key's records handed over after
// it to be sent; and while the gate holds its writes, none of the call's
// own can fail yet.
type lane struct {
	cl   *kgo.Client
	gate *writeGate
}

// lanes is a Publisher's pool of lanes, opened as calls need them.
type lanes struct {
	opts []kgo.Opt // the Publisher's client options
	dial func(context.Context, string, string) (net.Conn, error)

	idle chan *lane // cap maxLanes

	mu     sync.Mutex
	all    []*lane
	closed bool
}

func newLanes(opts []kgo.Opt, dial func(context.Context, string, string) (net.Conn, error)) *lanes {
	return &lanes{opts: opts, dial: dial, idle: make(chan *lane, maxLanes)}
}

// get returns an idle lane, or a new one while there are fewer than
// maxLanes, or waits for one until ctx or done ends.
func (ls *lanes) get(ctx context.Context, done <-chan struct{}) (*lane, error) {
	select {
	case l := <-ls.idle:
		return l, nil
	default:
	}
	ls.mu.Lock()
	if ls.closed {
		ls.mu.Unlock()
		return nil, ErrClosed
	}
	if len(ls.all) < maxLanes {
		defer ls.mu.Unlock()
		l, err := ls.open()
		if err != nil {
			return nil, err
		}
		ls.all = append(ls.all, l)
		return l, nil
	}
	ls.mu.Unlock()
	select {
	case l := <-ls.idle:
		return l, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("every lane busy (%d calls with key runs in flight): %w", maxLanes, ctx.Err())
	case <-done:
		return nil, ErrClosed
	}
}

// put gives l back once its call's records are all settled.
func (ls *lanes) put(l *lane) { ls.idle <- l }

// open makes a lane: the Publisher's options, dialling through the lane's
// gate, with franz-go's buffer limits off — a call holding the gate must
// never wait in Produce for room that only writes could make (the lane
// holds one call's records).
func (ls *lanes) open() (*lane, error) {
	g := &writeGate{}
	cl, err := kgo.NewClient(append(slices.Clip(ls.opts),
		kgo.DialTLSConfig(nil), // the dialer below does the TLS
		kgo.Dialer(g.dialer(ls.dial)),
		kgo.MaxBufferedRecords(math.MaxInt),
		kgo.MaxBufferedBytes(0),
	)...)
	if err != nil {
		return nil, fmt.Errorf("kafka publisher: a client for key runs: %s", redactText(err.Error()))
	}
	return &lane{cl: cl, gate: g}, nil
}

// close closes every lane's client, busy or idle.
func (ls *lanes) close() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.closed = true
	for _, l := range ls.all {
		l.cl.Close()
	}
}
