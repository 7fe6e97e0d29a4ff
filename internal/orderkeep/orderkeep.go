// Package orderkeep remembers whether a publisher keeps key order by
// itself (publishers.OrderKeeper), for the relays that ask.
package orderkeep

import (
	"sync/atomic"
	"time"

	"github.com/outboxgo/outbox/publishers"
)

// Recheck is how often a publisher that has not said it keeps key order
// is asked again.
const Recheck = time.Minute

// Keeping remembers a publisher's answer. A publisher may not know at
// first — the NATS publisher asks JetStream, which may be down when a
// relay starts — so until it says yes it is asked again, at most once per
// Recheck: a yes is for good, as the relay would otherwise keep one event
// of a key in flight until it restarts. The zero Keeping, or one for a
// publisher that is no OrderKeeper, says no.
type Keeping struct {
	keeper publishers.OrderKeeper
	yes    atomic.Bool
	asked  atomic.Int64 // when it was last asked, in Unix nanoseconds
}

// New returns the Keeping of pub, asking it at now when it is an
// OrderKeeper.
func New(pub publishers.Publisher, now time.Time) *Keeping {
	k := &Keeping{}
	if ok, is := pub.(publishers.OrderKeeper); is {
		k.keeper = ok
		k.Keeps(now)
	}
	return k
}

// Keeps reports whether the publisher keeps key order, asking it at now if
// it has not said yes and was last asked a Recheck ago or more.
func (k *Keeping) Keeps(now time.Time) bool {
	if k == nil || k.keeper == nil {
		return false
	}
	if k.yes.Load() {
		return true
	}
	last := k.asked.Load()
	if last != 0 && now.UnixNano()-last < int64(Recheck) || !k.asked.CompareAndSwap(last, now.UnixNano()) {
		return false
	}
	if k.keeper.KeepsKeyOrder() {
		k.yes.Store(true)
		return true
	}
	return false
}
