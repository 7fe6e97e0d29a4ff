package relay_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
)

// Environment of the relay subprocess that TestMain runs instead of tests.
const (
	envHelper = "OUTBOX_RELAY_TEST_HELPER" // "hold-after-publish"
	envSchema = "OUTBOX_RELAY_TEST_SCHEMA"
	envNATS   = "OUTBOX_RELAY_TEST_NATS"
	envPrefix = "OUTBOX_RELAY_TEST_PREFIX"
	envDelay  = "OUTBOX_RELAY_TEST_DELAY" // per-batch delay: a slow broker
)

func TestMain(m *testing.M) {
	if os.Getenv(envHelper) != "" {
		os.Exit(relayProcess())
	}
	goleak.VerifyTestMain(m,
		// The Pub/Sub client's OpenCensus starts a worker at init, for the
		// life of the process.
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// relayProcess is a relay in a process of its own. In "hold-after-publish"
// mode it prints "published <ids>" after its first publish and then holds,
// never marking: the parent kills it there. In "run" mode it relays until
// it is killed, with a short claim timeout so the chaos test's stalled
// relays lose their claims quickly.
func relayProcess() int {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mode := os.Getenv(envHelper)
	scfg := &postgres.Config{Schema: os.Getenv(envSchema)}
	rcfg := &relay.Config{Workers: 1, PollInterval: 20 * time.Millisecond}
	switch mode {
	case "hold-after-publish":
		rcfg.Hooks.AfterPublish = func(msgs []outbox.Message, errs []error) {
			ids := make([]string, len(msgs))
			for i, m := range msgs {
				ids[i] = m.ID.String()
			}
			fmt.Println("published", strings.Join(ids, ","))
			select {} // hold between publish and mark until killed
		}
	case "inproc-crash":
		// The job's effect is written in the claim transaction; the process
		// then dies before the mark.
		table := `"` + os.Getenv(envSchema) + `".effects`
		rcfg.InProcess = relay.Handlers(map[string]relay.Handler[pgx.Tx]{"jobs": recordEffect(table)})
		rcfg.Hooks.AfterPublish = func([]outbox.Message, []error) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	case "run":
		scfg.ClaimTimeout = chaosClaimTimeout
		rcfg.Workers = 2
		rcfg.BatchSize = 20
		rcfg.PollInterval = 100 * time.Millisecond
		rcfg.PublishTimeout = time.Second
		rcfg.OutageBackoff = outbox.Backoff{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond}
		// For checking that the chaos test can fail: OUTBOX_CHAOS_UNORDERED=1.
		rcfg.Unordered = os.Getenv("OUTBOX_CHAOS_UNORDERED") == "1"
	}
	db, err := postgres.New(pool, scfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s := db.Store()
	pub, err := natspub.NewPublisher(&natspub.PublisherConfig{URL: os.Getenv(envNATS), SubjectPrefix: os.Getenv(envPrefix),
		ReconnectWait: 50 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var p publishers.Publisher = pub
	if d, err := time.ParseDuration(os.Getenv(envDelay)); err == nil {
		p = slowPublisher{Publisher: pub, delay: d}
	}
	r, err := relay.New(s, p, rcfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return exitCode(r.Run(ctx))
}

func exitCode(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A relay SIGKILLed between publish and mark: the event stays pending, the
// next relay publishes it again with the same ID, and JetStream's duplicate
// window drops the second copy.
func TestKilledBetweenPublishAndMark(t *testing.T) {
	b := setup(t)
	ev := events("orders", 1)[0]
	b.enqueue(t, true, ev)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"=hold-after-publish", envSchema+"="+b.cfg.Schema,
		envNATS+"="+b.natsURL, envPrefix+"="+b.prefix)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	select {
	case l := <-line:
		if l != "published "+ev.ID.String() {
			t.Fatalf("relay process said %q", l)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the relay process did not publish within 60s")
	}
	if ids := b.arrivedIDs(t, 1); len(ids) != 1 || ids[0] != ev.ID.String() {
		t.Fatalf("stream after the first publish: %v", ids)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if row, ok := b.rows(t)[ev.ID]; !ok || row.status != 0 {
		t.Fatalf("after the kill the event is %+v (present %v), want still pending", row, ok)
	}

	pub := b.publisher(t)
	start(t, b.store, pub, nil)
	waitFor(t, "the second relay to mark the event", 30*time.Second, func() bool { return len(b.rows(t)) == 0 })
	if d := pub.Duplicates(); d != 1 {
		t.Fatalf("broker reported %d duplicates, want 1 (the re-publish)", d)
	}
	if n := b.streamCount(t); n != 1 {
		t.Fatalf("stream holds %d copies, want 1: the duplicate window should drop the re-publish", n)
	}
}
