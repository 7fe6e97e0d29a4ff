// Package consumer holds what the subscribers share: the Start/Stop/Run
// lifecycle, the handler that turns a panic into an error, and the decision
// of how a delivery settles. Each subscriber keeps its broker's side:
// fetching, acknowledging, retrying and dead-lettering.
package consumer

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Lifecycle is a subscriber's Start/Stop state: Start once; Stop once,
// a no-op before Start; a Stop whose context ends cancels the handlers'
// context.
type Lifecycle struct {
	name string // "nats subscriber", for errors

	mu       sync.Mutex
	started  bool
	stopOnce sync.Once
	stopping chan struct{} // closed by Stop
	done     chan struct{} // closed by Done: every goroutine has returned
	hctx     context.Context
	hcancel  context.CancelFunc
}

// NewLifecycle returns the Lifecycle of a subscriber that errors name.
func NewLifecycle(name string) *Lifecycle {
	return &Lifecycle{name: name, stopping: make(chan struct{}), done: make(chan struct{})}
}

// Start runs start, which connects and launches the subscriber's
// goroutines, unless the subscriber was started before. Context is ready
// when start runs. Once start returns nil the subscriber is started, and
// the last of its goroutines to return must call Done.
func (l *Lifecycle) Start(start func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return fmt.Errorf("%s: already started", l.name)
	}
	l.hctx, l.hcancel = context.WithCancel(context.Background())
	if err := start(); err != nil {
		l.hcancel()
		return err
	}
	l.started = true
	return nil
}

// Stop closes Stopping and runs halt (nil: nothing), once, then waits for
// Done. When ctx ends first it cancels Context, waits for Done and returns
// ctx's error. Before Start it does nothing.
func (l *Lifecycle) Stop(ctx context.Context, halt func()) error {
	l.mu.Lock()
	started := l.started
	l.mu.Unlock()
	if !started {
		return nil
	}
	l.stopOnce.Do(func() {
		close(l.stopping)
		if halt != nil {
			halt()
		}
	})
	select {
	case <-l.done:
		l.hcancel()
		return nil
	case <-ctx.Done():
		l.hcancel()
		<-l.done
		return ctx.Err()
	}
}

// Run calls start, waits for ctx to end and calls stop with timeout.
func Run(ctx context.Context, start, stop func(context.Context) error, timeout time.Duration) error {
	if err := start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return stop(stopCtx)
}

// Context is the handlers' context: cancelled by a hard Stop.
func (l *Lifecycle) Context() context.Context { return l.hctx }

// Stopping is closed by Stop.
func (l *Lifecycle) Stopping() <-chan struct{} { return l.stopping }

// Stopped reports whether Stop was called.
func (l *Lifecycle) Stopped() bool {
	select {
	case <-l.stopping:
		return true
	default:
		return false
	}
}

// Wait waits d; false when Stop came first.
func (l *Lifecycle) Wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.stopping:
		return false
	case <-t.C:
		return true
	}
}

// Done tells Stop that every goroutine of the subscriber has returned.
func (l *Lifecycle) Done() { close(l.done) }
