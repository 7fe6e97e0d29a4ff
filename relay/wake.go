package relay

import (
	"sync/atomic"
	"time"
)

// waker hands wake-ups to the relay's workers. A wake-up goes to one idle
// worker: a NOTIFY brings one event or a few, and a second worker woken
// for it only makes an empty claim. When no worker is idle, every worker
// gets it, so that one finishing its claim just now (not idle yet, but
// about to be) still looks again; the others find it on their next claim
// anyway. A worker whose claim found a backlog (Relay.backlog) hands a
// wake-up on to an idle peer (peer), so that the backlog spreads over the
// workers.
type waker struct {
	workers []*workerWake
}

// workerWake is one worker's side of the waker.
type workerWake struct {
	ch chan struct{} // buffered, 1: a wake-up waiting to be taken
	// idle is how long the worker waits on ch (or is about to), until a
	// wake-up or its timer; zero while it works.
	idle atomic.Int64
}

// waiting reports whether the worker waits for a wake-up.
func (ww *workerWake) waiting() bool { return ww.idle.Load() > 0 }

// setIdle records that the worker waits for d (zero: works).
func (ww *workerWake) setIdle(d time.Duration) { ww.idle.Store(int64(max(d, 0))) }

func newWaker(n int) *waker {
	w := &waker{workers: make([]*workerWake, n)}
	for i := range w.workers {
		w.workers[i] = &workerWake{ch: make(chan struct{}, 1)}
	}
	return w
}

// wake wakes one idle worker, or every worker when none is idle.
func (w *waker) wake() {
	for _, ww := range w.workers {
		if ww.waiting() && ww.offer() {
			return
		}
	}
	for _, ww := range w.workers {
		ww.offer()
	}
}

// peer wakes one idle worker other than self, if there is one.
func (w *waker) peer(self *workerWake) {
	for _, ww := range w.workers {
		if ww != self && ww.waiting() && ww.offer() {
			return
		}
	}
}

// offer leaves a wake-up for the worker unless one is waiting already;
// it reports whether it left one.
func (ww *workerWake) offer() bool {
	select {
	case ww.ch <- struct{}{}:
		return true
	default:
		return false
	}
}
