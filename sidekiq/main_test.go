package sidekiq_test

import (
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/internal/testenv"
)

func TestMain(m *testing.M) {
	// The examples push to the local Redis.
	testenv.ExamplesNeed("Redis", "127.0.0.1:6379")
	goleak.VerifyTestMain(m)
}

// redisURL is the shared Redis: OUTBOX_TEST_REDIS_URL, or the local one.
func redisURL() string {
	return testenv.Getenv("OUTBOX_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
}

// seq numbers the namespaces of the tests, which isolate them.
var seq atomic.Int64
