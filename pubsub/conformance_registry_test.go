package pubsub_test

import (
	"testing"

	"github.com/outboxgo/outbox/backend/backendtest"
)

func TestRegistryConformance(t *testing.T) {
	requireEmulator(t)
	backendtest.Broker(t, backendtest.BrokerHarness{URL: "pubsub://outbox-registry-test",
		// Pub/Sub URLs hold no secret (credentials come from the
		// environment); this one is refused for its user-info.
		Unreachable: "pubsub://user:" + backendtest.Secret + "@outbox-registry-test"})
}
