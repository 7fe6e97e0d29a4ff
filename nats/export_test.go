package nats

import "time"

// MinFastBatch is minFastBatch, for the tests.
const MinFastBatch = minFastBatch

// FastBatches returns how many fast-ingest batches p has started.
func FastBatches(p *Publisher) uint64 {
	a := p.acks.Load()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nextFast
}

// BeforeStreamLookup makes SetupStream and EnsureStream call f before they
// look the stream up, until restore is called.
func BeforeStreamLookup(f func()) (restore func()) {
	testHookStreamLookup = f
	return func() { testHookStreamLookup = nil }
}

// WaitConnected waits until p's connection is up, at most d; it reports
// whether it is.
func WaitConnected(p *Publisher, d time.Duration) bool {
	for deadline := time.Now().Add(d); !p.nc.IsConnected(); {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
