package sidekiq_test

import (
	"testing"

	"github.com/outboxgo/outbox/backend/backendtest"
	"github.com/outboxgo/outbox/internal/testenv"
)

func TestRegistryConformance(t *testing.T) {
	testenv.RequireTCP(t, "Redis", "127.0.0.1:6379")
	for _, scheme := range []string{"sidekiq", "sidekiq+redis", "sidekiq+rediss"} {
		t.Run(scheme, func(t *testing.T) {
			backendtest.Broker(t, backendtest.BrokerHarness{URL: scheme + "://127.0.0.1:6379/0",
				Unreachable: scheme + "://:" + backendtest.Secret + "@127.0.0.1:1/0"})
		})
	}
}
