package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/stores"
)

// errDeferred is the result of a claimed event the batch did not attempt:
// an earlier event of its key in the batch failed, the broker went away or
// refused the configuration, or the batch ran out of publish time. It stays
// pending and uncharged, and a later claim takes it again.
var errDeferred = errors.New("not attempted in this batch")

// publishBatch publishes a batch's records and returns one result per
// record. In ordered mode a batch may hold a run of consecutive events of
// one key (ClaimParams.PerKey): each such key gets a lane, a goroutine that
// sends the key's events one at a time, the next once the broker has
// acknowledged the one before, while the lanes of other keys run alongside;
// a lane whose event fails sends nothing more. Every other event (unkeyed,
// a key's only one in the batch, all of them in unordered mode or when the
// publisher keeps key order by itself, publishers.OrderKeeper) goes out in
// one pipelined call beside the lanes. An outage or a refusal stops every
// lane.
//
// PublishTimeout bounds the whole batch, so the claim's timeout covers it;
// a lane starts no new event once half of it has passed, so a slow broker
// defers a key's last events to the next claim rather than failing them as
// an outage. Events not sent are errDeferred.
func (r *Relay) publishBatch(ctx context.Context, b stores.Batch, recs []stores.Record) ([]error, error) {
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	defer cancel()
	sd := &sending{ctx: ctx, pctx: pctx, b: b}
	errs := make([]error, len(recs))
	together, lanes := r.lanes(recs)

	var halt atomic.Bool // the broker is down or refuses: send nothing more
	var mu sync.Mutex
	var bad error // a publisher that broke the contract
	// send publishes recs[idx...] in one call and reports whether all were
	// acknowledged.
	send := func(idx []int) bool {
		msgs := make([]outbox.Message, len(idx))
		for k, j := range idx {
			msgs[k] = recs[j].Message
		}
		res, err := r.publish(sd, msgs)
		if err != nil {
			mu.Lock()
			bad = err
			mu.Unlock()
			halt.Store(true)
			return false
		}
		ok := true
		for k, j := range idx {
			if errs[j] = res[k]; res[k] != nil {
				ok = false
				if publishers.IsUnavailable(res[k]) || publishers.IsMisconfigured(res[k]) {
					halt.Store(true)
				}
			}
		}
		return ok
	}
	var wg sync.WaitGroup
	if len(together) > 0 {
		wg.Go(func() { send(together) })
	}
	deferAll := func(idx []int) {
		for _, j := range idx {
			errs[j] = errDeferred
		}
	}
	for _, lane := range lanes {
		wg.Go(func() {
			for n, j := range lane {
				if halt.Load() || n > 0 && time.Since(start) > r.cfg.PublishTimeout/2 {
					deferAll(lane[n:])
					return
				}
				if !send([]int{j}) {
					deferAll(lane[n+1:])
					return
				}
			}
		})
	}
	wg.Wait()
	if bad != nil {
		return nil, bad
	}
	return errs, nil
}

// lanes splits recs (by index) into those sent together in one call and
// the lanes of keys with more than one record, each in the key's order.
func (r *Relay) lanes(recs []stores.Record) (together []int, lanes [][]int) {
	if r.cfg.Unordered || r.keepsKeyOrder {
		together = make([]int, len(recs))
		for j := range together {
			together[j] = j
		}
		return together, nil
	}
	byKey := map[string]int{} // key → its lane
	for j := range recs {
		k := recs[j].Key
		if k == "" {
			together = append(together, j)
			continue
		}
		if l, ok := byKey[k]; ok {
			lanes[l] = append(lanes[l], j)
			continue
		}
		byKey[k] = len(lanes)
		lanes = append(lanes, []int{j})
	}
	// A key with one record needs no lane of its own.
	n := 0
	for _, l := range lanes {
		if len(l) == 1 {
			together = append(together, l[0])
			continue
		}
		lanes[n] = l
		n++
	}
	return together, lanes[:n]
}

// sending is what the calls of one batch's publish share.
type sending struct {
	ctx  context.Context // in-process handlers run within it
	pctx context.Context // the broker's calls: ctx bounded by PublishTimeout
	b    stores.Batch
	// local makes the lanes take turns with in-process handlers, which
	// share the claim's transaction.
	local sync.Mutex
}

// publish sends msgs to the broker, or to the in-process handlers for the
// topics they handle, and returns one result per message.
func (r *Relay) publish(sd *sending, msgs []outbox.Message) ([]error, error) {
	ip := r.cfg.InProcess
	if ip == nil {
		errs := r.pub.Publish(sd.pctx, msgs)
		if len(errs) != len(msgs) {
			return nil, errors.New("relay: publisher returned a wrong number of results")
		}
		return errs, nil
	}
	errs := make([]error, len(msgs))
	var local, remote []outbox.Message
	var li, ri []int
	for i := range msgs {
		if ip.handles(msgs[i].Topic) {
			local, li = append(local, msgs[i]), append(li, i)
		} else {
			remote, ri = append(remote, msgs[i]), append(ri, i)
		}
	}
	if len(remote) > 0 {
		if r.pub == nil {
			for _, i := range ri {
				errs[i] = publishers.Permanent(fmt.Errorf("no broker and no in-process handler for topic %q", msgs[i].Topic))
			}
		} else {
			res := r.pub.Publish(sd.pctx, remote)
			if len(res) != len(remote) {
				return nil, errors.New("relay: publisher returned a wrong number of results")
			}
			for j, i := range ri {
				errs[i] = res[j]
			}
		}
	}
	if len(local) > 0 {
		res := make([]error, len(local))
		sd.local.Lock()
		ip.run(sd.ctx, sd.b, local, res)
		sd.local.Unlock()
		for j, i := range li {
			errs[i] = res[j]
		}
	}
	return errs, nil
}
