package nats_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/inbox/pginbox"
	"github.com/outboxgo/outbox/internal/natstest"
	"github.com/outboxgo/outbox/internal/pgtest"
	natssub "github.com/outboxgo/outbox/subscribers/nats"
)

// Environment of the consumer subprocess that TestMain runs instead of tests.
const (
	envHelper  = "OUTBOX_SUB_TEST_HELPER" // "hold-after-commit"
	envSchema  = "OUTBOX_SUB_TEST_SCHEMA"
	envStream  = "OUTBOX_SUB_TEST_STREAM"
	envDead    = "OUTBOX_SUB_TEST_DEAD"
	envDurable = "OUTBOX_SUB_TEST_DURABLE"
)

func TestMain(m *testing.M) {
	if os.Getenv(envHelper) != "" {
		os.Exit(consumerProcess())
	}
	goleak.VerifyTestMain(m)
}

// killConfig is the subscriber config of both the killed process and its
// successor: a short AckWait, so the redelivery comes quickly.
func killConfig(stream, dead, durable string) natssub.Config {
	return natssub.Config{Stream: stream, Durable: durable, SubjectPrefix: stream, DeadLetterSubject: dead,
		AckWait: time.Second, Backoff: natssub.Backoff{Min: 10 * time.Millisecond, Max: 2 * time.Second}}
}

// consumerProcess is a consumer that prints "committed <id>" once its first
// message's transaction has committed, and then holds, never acknowledging:
// the parent kills it there.
func consumerProcess() int {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	schema := os.Getenv(envSchema)
	d, err := pginbox.NewPgx(pool, &pginbox.Config{Schema: schema})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	nc, err := nats.Connect(natstest.URL())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := killConfig(os.Getenv(envStream), os.Getenv(envDead), os.Getenv(envDurable))
	cfg.Hooks.AfterCommit = func(m inbox.Message, _ inbox.Outcome) {
		fmt.Println("committed", m.ID)
		select {} // hold between commit and ack until killed
	}
	s, err := natssub.New(js, inbox.New(d, nil), func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		_, err := tx.Exec(ctx, `INSERT INTO "`+schema+`".effects VALUES ($1, 'killed process')`, m.ID)
		return err
	}, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := s.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A consumer SIGKILLed after its transaction committed and before the ack:
// JetStream redelivers the message, the next consumer finds it in the inbox,
// acknowledges it, and the effect stays single.
func TestKilledBetweenCommitAndAck(t *testing.T) {
	b := setup(t)
	ev := events(1)[0]
	b.publish(t, ev)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"=hold-after-commit", envSchema+"="+b.schema,
		envStream+"="+b.stream, envDead+"="+b.dlSubject, envDurable+"=killed")
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
		if l != "committed "+ev.ID.String() {
			t.Fatalf("consumer process said %q", l)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the consumer process did not commit within 60s")
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if n := b.effects(t, ev.ID); n != 1 {
		t.Fatalf("%d effects after the kill, want 1 (committed)", n)
	}
	if info := b.consumerInfo(t, "killed"); info.NumAckPending != 1 {
		t.Fatalf("after the kill the consumer has %d unacknowledged, want 1", info.NumAckPending)
	}

	var rec recorder
	cfg := killConfig(b.stream, b.dlSubject, "killed")
	cfg.Hooks.AfterSettle = rec.add
	start(t, b, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		t.Errorf("the handler ran again for %s", m.ID)
		return b.effect(ctx, tx, m)
	}, cfg)
	waitFor(t, "the redelivery to be acknowledged", 30*time.Second, func() bool { return rec.count(natssub.ActionAck) == 1 })
	got := rec.list()[0]
	if got.Outcome != inbox.Duplicate || got.Message.ID != ev.ID || got.Delivery != 2 {
		t.Fatalf("redelivery settled as %+v, want a duplicate of %s on delivery 2", got, ev.ID)
	}
	if n := b.effects(t, ev.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	info := b.consumerInfo(t, "killed")
	if info.NumAckPending != 0 || info.NumPending != 0 {
		t.Fatalf("consumer after the redelivery: %d unacknowledged, %d pending", info.NumAckPending, info.NumPending)
	}
}
