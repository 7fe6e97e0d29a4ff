package rabbitmq_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.ExamplesNeed("RabbitMQ", "127.0.0.1:5672")
	testenv.ExamplesNeed("PostgreSQL", "127.0.0.1:5432") // ExampleNewSubscriber's inbox
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		deleteUsers()
		os.Exit(code)
	}))
}
