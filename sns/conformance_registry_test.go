package sns_test

import (
	"testing"

	"github.com/outboxgo/outbox/backend/backendtest"
	"github.com/outboxgo/outbox/internal/testkit/goawstest"
)

func TestRegistryConformance(t *testing.T) {
	g := goawstest.Start(t, testAccessKey)
	backendtest.Broker(t, backendtest.BrokerHarness{URL: "sns://" + testAccount + ".us-east-1/outbox-registry-?endpoint=" + g.URL,
		Unreachable: "sns://" + testAccount + ".us-east-1/outbox-?endpoint=http://127.0.0.1:1&token=" + backendtest.Secret})
}
