package sqlite

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// gates holds one gate per database file (absolute path) opened by Open in
// this process.
var gates sync.Map // string → *gate

// gate admits one writer of this process at a time to wait for the write
// lock, in arrival order, and tells it when another writer of the process
// ended its transaction.
type gate struct {
	head     chan struct{} // a send enters, a receive leaves
	released chan struct{} // a write transaction of this process ended
}

func newGate() *gate {
	return &gate{head: make(chan struct{}, 1), released: make(chan struct{}, 1)}
}

func gateFor(path string) *gate {
	g, _ := gates.LoadOrStore(path, newGate())
	return g.(*gate)
}

// enter waits for the gate until deadline or ctx's end, and says whether it
// had to wait.
func (g *gate) enter(ctx context.Context, deadline time.Time) (waited bool, err error) {
	select {
	case g.head <- struct{}{}:
		return false, nil
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case g.head <- struct{}{}:
		return true, nil
	case <-ctx.Done():
		return true, fmt.Errorf("waiting for the write lock: %w", ctx.Err())
	case <-t.C:
		return true, fmt.Errorf("%w: the write transactions of this process before this one did not get it in time", errLockTimeout)
	}
}

func (g *gate) leave() { <-g.head }

// release tells the writer at the head, if any, that the lock may be free.
func (g *gate) release() {
	select {
	case g.released <- struct{}{}:
	default:
	}
}
