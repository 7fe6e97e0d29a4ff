package kafka_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/internal/testenv"
)

func TestMain(m *testing.M) {
	// The examples publish to kfake (in process); the subscriber's feeds
	// an inbox in PostgreSQL.
	testenv.ExamplesNeed("PostgreSQL", "127.0.0.1:5432")
	goleak.VerifyTestMain(m)
}
