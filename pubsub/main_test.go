package pubsub_test

import (
	"os"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/internal/testenv"
)

// emulatorAddr is the shared Pub/Sub emulator.
const emulatorAddr = "127.0.0.1:8085"

func TestMain(m *testing.M) {
	// Google's client reads the emulator's address from the environment;
	// with it set it needs no credentials.
	if os.Getenv("PUBSUB_EMULATOR_HOST") == "" {
		_ = os.Setenv("PUBSUB_EMULATOR_HOST", emulatorAddr)
	}
	testenv.ExamplesNeed("the Pub/Sub emulator", os.Getenv("PUBSUB_EMULATOR_HOST"))
	testenv.ExamplesNeed("PostgreSQL", "127.0.0.1:5432")
	goleak.VerifyTestMain(m, leakOptions...)
}

// leakOptions ignore the goroutine OpenCensus starts at init, for the
// whole process, and the keep-alive goroutine of a stopped streaming pull,
// which Google's client leaves to end at its next tick (up to 30 s after
// Receive returned).
var leakOptions = []goleak.Option{
	goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
	goleak.IgnoreTopFunction("cloud.google.com/go/pubsub/v2.(*messageIterator).streamKeepAliveHandler"),
}

// requireEmulator ends the test when the emulator does not answer.
func requireEmulator(t testing.TB) {
	t.Helper()
	testenv.RequireTCP(t, "the Pub/Sub emulator", os.Getenv("PUBSUB_EMULATOR_HOST"))
}

// seq numbers the projects and topic prefixes of the tests, which isolate
// them.
var seq atomic.Int64

// emulatorHost is the emulator's address, as the client reads it.
func emulatorHost() string { return os.Getenv("PUBSUB_EMULATOR_HOST") }
