package mqtt_test

import (
	"testing"

	"github.com/outboxgo/outbox/backend/backendtest"
	"github.com/outboxgo/outbox/internal/testenv"
)

func TestRegistryConformance(t *testing.T) {
	testenv.RequireTCP(t, brokerName, brokerAddr())
	backendtest.Broker(t, backendtest.BrokerHarness{URL: "mqtt://" + brokerAddr(),
		Unreachable: "mqtt://user:" + backendtest.Secret + "@127.0.0.1:1"})
}
