package mysql_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/stores"
)

// Writers, relays (marking and deleting, with retries and dead letters), a
// purger and a replayer all at once: no statement may fail (InnoDB reports
// a deadlock as an error), and no record may be claimed again once
// published. This is the test that caught IN-list statements turning into
// locking table scans.
func TestEverythingAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const writers, txs, perTx, relays = 4, 60, 3, 3

	var published sync.Map // id → true
	var claimed, failed atomic.Int64
	fail := func(what string, err error) {
		if err != nil {
			failed.Add(1)
			t.Errorf("%s: %v", what, err)
		}
	}

	var writing sync.WaitGroup
	for range writers {
		writing.Go(func() {
			for range txs {
				fail("enqueue", b.enqueue(ctx, messages("s", perTx, time.Now()), true))
			}
		})
	}
	writersDone := make(chan struct{})
	go func() { writing.Wait(); close(writersDone) }()

	var others sync.WaitGroup
	others.Go(func() { // purge and replay until the writers are done
		for {
			_, err := b.store.Purge(ctx, stores.PurgeParams{Before: time.Now(), Limit: 50})
			fail("purge", err)
			_, err = b.store.Replay(ctx, stores.ReplayParams{Now: time.Now()})
			fail("replay", err)
			select {
			case <-writersDone:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})

	var relaying sync.WaitGroup
	for r := range relays {
		relaying.Go(func() {
			i := 0
			for ctx.Err() == nil && failed.Load() == 0 {
				now := time.Now()
				c, err := b.store.Claim(ctx, stores.ClaimParams{Limit: 50, Now: now})
				if err != nil {
					fail("claim", err)
					return
				}
				recs := c.Records()
				if len(recs) == 0 {
					select {
					case <-writersDone:
						if st := stats(t, b)["s"]; st.Pending == 0 {
							return
						}
					default:
					}
					time.Sleep(5 * time.Millisecond) // polling, as a relay does
					continue
				}
				claimed.Add(int64(len(recs)))
				o := stores.Outcome{Now: now, DeletePublished: r == 0}
				for _, rec := range recs {
					if _, dup := published.Load(rec.ID); dup {
						fail("claim", errDup(rec.ID))
					}
					switch i++; {
					case i%20 == 0:
						o.Dead = append(o.Dead, stores.Failure{ID: rec.ID, Err: "dead"})
					case i%10 == 0:
						o.Retry = append(o.Retry, stores.Failure{ID: rec.ID, Err: "retry", NextAttempt: now.Add(10 * time.Millisecond)})
					default:
						o.Published = append(o.Published, rec.ID)
					}
				}
				err = c.Complete(ctx, o)
				fail("complete", err)
				if err == nil {
					for _, id := range o.Published {
						published.Store(id, true)
					}
				}
			}
		})
	}
	relaying.Wait()
	others.Wait()
	t.Logf("claimed %d records", claimed.Load())
}

type errDup uuid.UUID

func (e errDup) Error() string {
	return "record " + uuid.UUID(e).String() + " claimed again after it was published"
}
