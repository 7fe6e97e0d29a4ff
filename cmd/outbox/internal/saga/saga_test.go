package saga_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/internal/logtest"

	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/cmd/outbox/internal/saga"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// run runs the demo with a private TMPDIR and checks that it leaves nothing
// behind there.
func run(t *testing.T, o saga.Options) (saga.Report, string) {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out logtest.Buffer
	rep, err := saga.Run(ctx, o, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if o.DataDir == "" {
		left, err := os.ReadDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 0 || rep.Kept {
			t.Fatalf("files left behind in the temporary directory: %v (kept %v)", left, rep.Kept)
		}
		if _, err := os.Stat(rep.DataDir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the data directory %s is still there: %v", rep.DataDir, err)
		}
	}
	return rep, out.String()
}

func checkVerified(t *testing.T, rep saga.Report, out string, orders int) {
	t.Helper()
	if !rep.OK() || rep.Lost != 0 || rep.AppliedTwice != 0 || rep.Phantom != 0 {
		t.Fatalf("verification failed: %+v", rep)
	}
	if rep.Confirmed != orders || rep.Reserved != orders || rep.Complete != orders {
		t.Fatalf("confirmed %d, reserved %d, complete %d; want %d each", rep.Confirmed, rep.Reserved, rep.Complete, orders)
	}
	if rep.StockTaken != rep.StockExpected || rep.StockTaken < int64(orders) {
		t.Fatalf("stock taken %d, expected %d", rep.StockTaken, rep.StockExpected)
	}
	if rep.Published < int64(2*orders) {
		t.Fatalf("%d events published, want at least %d (an OrderConfirmed and a StockReserved per order)", rep.Published, 2*orders)
	}
	if !strings.Contains(out, "verification: OK") {
		t.Fatal("no verification line")
	}
}

// The default demo, shortened: the broker goes down, orders keep being
// confirmed, the backlog drains, every order is reserved once.
func TestDefaultFlags(t *testing.T) {
	rep, out := run(t, saga.Options{Orders: 100, Outage: time.Second})
	checkVerified(t, rep, out, 100)
	if rep.BrokerDown < time.Second || rep.PeakBacklog == 0 {
		t.Fatalf("broker down %v, peak backlog %d: want an outage of 1s that left a backlog", rep.BrokerDown, rep.PeakBacklog)
	}
	for _, want := range []string{"broker DOWN", "broker UP", "outbox pending", "duplicates dropped"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

// --crash: a relay dies between publish and mark; its batch is published
// again and the inbox drops the redelivery.
func TestCrash(t *testing.T) {
	rep, out := run(t, saga.Options{Orders: 100, Outage: time.Second, Crash: true})
	checkVerified(t, rep, out, 100)
	if rep.Crashed == 0 || rep.DuplicatesDropped == 0 {
		t.Fatalf("crashed batch %d, duplicates dropped %d: want a redelivery that the inbox dropped", rep.Crashed, rep.DuplicatesDropped)
	}
	if !strings.Contains(out, "CRASHED") {
		t.Error("the output does not show the crash")
	}
}

// --crash without an outage, one relay per outbox, more relays.
func TestCrashWithoutOutage(t *testing.T) {
	for _, relays := range []int{1, 3} {
		rep, out := run(t, saga.Options{Orders: 60, Outage: -1, Relays: relays, Crash: true})
		checkVerified(t, rep, out, 60)
		if rep.DuplicatesDropped == 0 || rep.BrokerDown != 0 {
			t.Fatalf("relays %d: duplicates dropped %d, broker down %v", relays, rep.DuplicatesDropped, rep.BrokerDown)
		}
	}
}

// With a data directory the files are kept, and a second run there refuses
// to mix with the first.
func TestDataDirIsKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	rep, out := run(t, saga.Options{Orders: 30, Outage: -1, DataDir: dir})
	checkVerified(t, rep, out, 30)
	for _, f := range []string{"orders.db", "stock.db", "nats"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s not kept: %v", f, err)
		}
	}
	if !rep.Kept || !strings.Contains(out, "kept in "+dir) {
		t.Errorf("kept %v; output does not say where the files are", rep.Kept)
	}
	_, err := saga.Run(context.Background(), saga.Options{Orders: 30, Outage: -1, DataDir: dir}, &logtest.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "previous run") {
		t.Fatalf("a second run in the same directory = %v, want a refusal", err)
	}
}

// Options that cannot make a run are refused before anything starts.
func TestOptionsValidate(t *testing.T) {
	for _, o := range []saga.Options{
		{Orders: -1}, {Relays: -1}, {Timeout: -time.Second}, {ProgressEvery: -time.Second},
		{Outage: 30 * time.Second},                      // confirmed over 90s > the 60s default
		{Outage: time.Second, Timeout: 3 * time.Second}, // 3s of confirmations leave nothing
		{Outage: -1, Timeout: 1500 * time.Millisecond},  // at least 1.5s of confirmations
	} {
		if err := o.Validate(); !errors.Is(err, saga.ErrOptions) {
			t.Errorf("%+v: Validate = %v, want ErrOptions", o, err)
		}
		if _, err := saga.Run(context.Background(), o, io.Discard); !errors.Is(err, saga.ErrOptions) {
			t.Errorf("%+v: Run = %v, want ErrOptions", o, err)
		}
	}
	for _, o := range []saga.Options{{}, {Outage: -1}, {Outage: 10 * time.Second, Timeout: 31 * time.Second}} {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: Validate = %v", o, err)
		}
	}
}
