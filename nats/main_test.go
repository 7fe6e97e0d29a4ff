package nats_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.ExamplesNeed("NATS", "127.0.0.1:4222")
	testenv.ExamplesNeed("PostgreSQL", "127.0.0.1:5432")
	goleak.VerifyTestMain(m)
}
