package kafka_test

import (
	"strings"
	"testing"

	"github.com/outboxgo/outbox/backend/backendtest"
)

func TestRegistryConformance(t *testing.T) {
	backendtest.Broker(t, backendtest.BrokerHarness{URL: "kafka://" + strings.Join(brokers(t), ","),
		Unreachable: "kafka://user:" + backendtest.Secret + "@127.0.0.1:1"})
}
