package relay_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/relay"
)

// effectsTable makes the table in-process handlers write their effects to.
func (b *bundle) effectsTable(t testing.TB) string {
	t.Helper()
	name := `"` + b.cfg.Schema + `".effects`
	if _, err := b.pool.Exec(context.Background(), `CREATE TABLE `+name+` (id uuid NOT NULL, note text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return name
}

func (b *bundle) effects(t testing.TB, table string) map[string]int {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT id::text, count(*) FROM `+table+` GROUP BY id`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	var id string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error { out[id] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// recordEffect is the handler the tests use: it writes one effect row in the
// relay's transaction.
func recordEffect(table string) relay.Handler[pgx.Tx] {
	return func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+table+` VALUES ($1, $2)`, m.ID, m.Type)
		return err
	}
}

// Jobs go to in-process handlers, events to the broker; each job's effect
// happens once, and a job that fails twice is retried to one effect.
func TestInProcessHandlers(t *testing.T) {
	b := setup(t)
	table := b.effectsTable(t)
	var mu sync.Mutex
	failures := map[string]int{}
	flaky := func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
		// The effect is written first, then the failure: it must roll back.
		if err := recordEffect(table)(ctx, tx, m); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if failures[m.ID.String()] < 2 {
			failures[m.ID.String()]++
			return errors.New("provider timed out")
		}
		return nil
	}
	var jobs []outbox.Message
	for i := range 20 {
		jobs = append(jobs, outbox.Message{ID: outbox.NewID(), Topic: "jobs", Key: fmt.Sprint("j", i%5), Type: "SendEmail"})
	}
	flakyJob := outbox.Message{ID: outbox.NewID(), Topic: "flaky-jobs", Type: "CallProvider"}
	evs := events("orders", 10)
	b.enqueue(t, true, append(append(jobs, flakyJob), evs...)...)

	start(t, b.store, b.publisher(t), &relay.Config{
		RetryBackoff: outbox.Backoff{Min: 10 * time.Millisecond, Max: 20 * time.Millisecond},
		InProcess: relay.Handlers(map[string]relay.Handler[pgx.Tx]{
			"jobs":       recordEffect(table),
			"flaky-jobs": flaky,
		}),
	})
	b.arrivedIDs(t, 10)
	waitFor(t, "every job handled and the table empty", 20*time.Second, func() bool { return len(b.rows(t)) == 0 })
	eff := b.effects(t, table)
	for _, j := range append(jobs, flakyJob) {
		if eff[j.ID.String()] != 1 {
			t.Fatalf("job %s had %d effects, want 1", j.ID, eff[j.ID.String()])
		}
	}
	if len(eff) != 21 {
		t.Fatalf("%d distinct effects, want the 21 jobs' (broker events must not be handled in-process)", len(eff))
	}
	if n := b.streamCount(t); n != 10 {
		t.Fatalf("the broker got %d messages, want the 10 events only", n)
	}
}

// A relay process dies between a job's effect and the mark: the effect,
// made in the same transaction, is rolled back with it, and the next relay
// runs the job to one effect.
func TestInProcessCrashBetweenEffectAndMark(t *testing.T) {
	b := setup(t)
	table := b.effectsTable(t)
	job := outbox.Message{ID: outbox.NewID(), Topic: "jobs", Type: "SendEmail"}
	b.enqueue(t, true, job)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"=inproc-crash", envSchema+"="+b.cfg.Schema,
		envNATS+"="+b.natsURL, envPrefix+"="+b.prefix)
	out, err := cmd.CombinedOutput()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the relay process did not die by SIGKILL (err %v):\n%s", err, out)
	}
	if eff := b.effects(t, table); len(eff) != 0 {
		t.Fatalf("the crashed relay's effect survived: %v", eff)
	}
	if rows := b.rows(t); rows[job.ID].status != 0 {
		t.Fatalf("after the crash the job is %+v, want pending", rows[job.ID])
	}

	start(t, b.store, b.publisher(t), &relay.Config{
		InProcess: relay.Handlers(map[string]relay.Handler[pgx.Tx]{"jobs": recordEffect(table)}),
	})
	waitFor(t, "the job to be handled", 20*time.Second, func() bool { return len(b.rows(t)) == 0 })
	if eff := b.effects(t, table); eff[job.ID.String()] != 1 {
		t.Fatalf("effects %v, want exactly one for the job", eff)
	}
}
