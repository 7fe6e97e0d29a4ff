package sns_test

import (
	"testing"

	"github.com/outboxgo/outbox/backend/backendtest"
)

func TestRegistryConformance(t *testing.T) {
	g := startGoaws(t)
	backendtest.Broker(t, backendtest.BrokerHarness{URL: "sns://" + testAccount + ".us-east-1/outbox-registry-?endpoint=" + g.URL,
		Unreachable: "sns://" + testAccount + ".us-east-1/outbox-?endpoint=http://127.0.0.1:1&token=" + backendtest.Secret})
}
