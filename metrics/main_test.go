package metrics_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/internal/testenv"
)

func TestMain(m *testing.M) {
	// The example runs a relay from the local PostgreSQL to the local
	// NATS JetStream.
	testenv.ExamplesNeed("PostgreSQL", "127.0.0.1:5432")
	testenv.ExamplesNeed("NATS JetStream", "127.0.0.1:4222")
	goleak.VerifyTestMain(m)
}
