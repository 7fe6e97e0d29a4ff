package rabbitmq_test

import (
	"testing"

	"github.com/outboxgo/outbox/backend/backendtest"
	"github.com/outboxgo/outbox/internal/testenv"
)

func TestRegistryConformance(t *testing.T) {
	testenv.RequireTCP(t, "RabbitMQ", "127.0.0.1:5672")
	backendtest.Broker(t, backendtest.BrokerHarness{URL: "amqp://guest:guest@127.0.0.1:5672/",
		Unreachable: "amqp://guest:" + backendtest.Secret + "@127.0.0.1:1/"})
}
