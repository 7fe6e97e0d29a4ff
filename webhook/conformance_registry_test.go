package webhook_test

import (
	"testing"

	"github.com/outboxgo/outbox/backend/backendtest"
)

func TestRegistryConformance(t *testing.T) {
	r := newReceiver(t, newSecret())
	backendtest.Broker(t, backendtest.BrokerHarness{URL: "webhook+" + r.URL + "/hooks/{topic}",
		Unreachable: "webhook+http://relay:" + backendtest.Secret + "@127.0.0.1:1/hooks?secret=" + backendtest.Secret})
}
