package relay

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
// one key (ClaimParams.PerKey): they go out in rounds, round i holding the
// i-th event of every key, each round one pipelined call, so each key has
// one event in flight at a time and the next is sent only once the broker
// has acknowledged the one before, while every key of the batch shares each
// round. A key whose event fails sends nothing more in this batch; an
// outage or a refusal stops the rounds. Unkeyed events, unordered mode and
// publishers that keep a key's order by themselves (publishers.OrderKeeper)
// take one round.
//
// Rounds, not a goroutine per key: one call of many messages costs the
// relay and the broker far less per message than many calls of one (about
// half, measured with JetStream), and the claim shares a batch evenly among
// its keys, so the rounds are even and the wait for each round's slowest
// acknowledgement costs little.
//
// PublishTimeout bounds all rounds together, so the claim's timeout covers
// the whole batch; no round starts once half of it has passed, so a slow
// broker defers a key's last events to the next claim rather than failing
// them as an outage. Events not sent are errDeferred, and so are those of
// the keys in skip (see chain.hold).
func (r *Relay) publishBatch(ctx context.Context, b stores.Batch, recs []stores.Record, skip map[string]bool) ([]error, error) {
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	defer cancel()
	errs := make([]error, len(recs))
	failed := map[string]bool{} // keys that send nothing more
	maps.Copy(failed, skip)
	halt := false // the broker is down or refuses: send nothing more
	var msgs []outbox.Message
	var sent []int
	for i, round := range r.rounds(recs) {
		msgs, sent = msgs[:0], sent[:0]
		for _, j := range round {
			switch {
			case halt, i > 0 && time.Since(start) > r.cfg.PublishTimeout/2, failed[recs[j].Key]:
				errs[j] = errDeferred
			default:
				msgs, sent = append(msgs, recs[j].Message), append(sent, j)
			}
		}
		if len(msgs) == 0 {
			continue
		}
		res, err := r.publish(ctx, pctx, b, msgs)
		if err != nil {
			return nil, err
		}
		for k, j := range sent {
			if errs[j] = res[k]; res[k] != nil {
				failed[recs[j].Key] = true
				halt = halt || publishers.IsUnavailable(res[k]) || publishers.IsMisconfigured(res[k])
			}
		}
	}
	return errs, nil
}

// rounds returns the indexes of recs in publish rounds (see publishBatch):
// one round of everything, or in ordered mode round i with the i-th record
// of each key and every unkeyed record in round 0.
func (r *Relay) rounds(recs []stores.Record) [][]int {
	one := r.cfg.Unordered || r.order.Keeps(r.cfg.Clock.Now())
	var rounds [][]int
	depth := map[string]int{}
	for j := range recs {
		i := 0
		if k := recs[j].Key; k != "" && !one {
			i = depth[k]
			depth[k]++
		}
		if i == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[i] = append(rounds[i], j)
	}
	return rounds
}

// publish sends msgs to the broker within pctx, or to the in-process
// handlers (within ctx) for the topics they handle, and returns one result
// per message.
func (r *Relay) publish(ctx, pctx context.Context, b stores.Batch, msgs []outbox.Message) ([]error, error) {
	ip := r.cfg.InProcess
	if ip == nil {
		errs := r.pub.Publish(pctx, msgs)
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
			res := r.pub.Publish(pctx, remote)
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
		ip.run(ctx, b, local, res)
		for j, i := range li {
			errs[i] = res[j]
		}
	}
	return errs, nil
}
