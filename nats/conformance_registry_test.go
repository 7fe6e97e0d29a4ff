package nats_test

import (
	"testing"

	"github.com/outboxgo/outbox/backend/backendtest"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
)

func TestRegistryConformance(t *testing.T) {
	natstest.Connect(t) // skips (or fails in CI) without the shared server
	backendtest.Broker(t, backendtest.BrokerHarness{URL: natstest.URL(),
		Unreachable: "nats://" + backendtest.Secret + "@127.0.0.1:1"})
}
