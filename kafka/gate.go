package kafka

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
)

// writeGate holds a lane's writes to the brokers while its call hands a
// key run over to franz-go (see keyruns.go, lanes.go). Until every record
// of the call is in the client's buffers nothing of the call reaches a
// broker, so nothing of it can fail yet; and once a batch fails, franz-go
// fails every record it then holds for the partition, so none of a key's
// later records can be sent after an earlier one failed.
//
// The gate is held for as long as handing the records over takes (about
// a microsecond a record); the acknowledgements are awaited outside it. A
// write that meets the gate held waits for it: the bytes it carries were
// built before the hand-over began.
type writeGate struct {
	mu      sync.RWMutex
	waiting atomic.Int64 // writes waiting at the gate (tests watch it)
}

// hold closes the gate: writes wait until release.
func (g *writeGate) hold() { g.mu.Lock() }

// release opens the gate.
func (g *writeGate) release() { g.mu.Unlock() }

// pass returns once the gate is open.
func (g *writeGate) pass() {
	if !g.mu.TryRLock() {
		g.waiting.Add(1)
		g.mu.RLock()
		g.waiting.Add(-1)
	}
	g.mu.RUnlock()
}

// dialer returns dial with every connection it opens gated by g. dial is
// the client's own (with its TLS, if any), so the gate sits under TLS and
// SASL alike.
func (g *writeGate) dialer(dial func(context.Context, string, string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		c, err := dial(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return &gatedConn{Conn: c, g: g}, nil
	}
}

// gatedConn is a broker connection whose writes pass the gate.
type gatedConn struct {
	net.Conn
	g *writeGate
}

func (c *gatedConn) Write(b []byte) (int, error) {
	c.g.pass()
	return c.Conn.Write(b)
}
