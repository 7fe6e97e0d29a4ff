package redis_test

import (
	"testing"

	"github.com/outboxgo/outbox/backend/backendtest"
	"github.com/outboxgo/outbox/internal/testenv"
)

func TestRegistryConformance(t *testing.T) {
	testenv.RequireTCP(t, "Redis", "127.0.0.1:6379")
	backendtest.Broker(t, backendtest.BrokerHarness{URL: "redis://127.0.0.1:6379/0",
		Unreachable: "redis://:" + backendtest.Secret + "@127.0.0.1:1/0"})
}
