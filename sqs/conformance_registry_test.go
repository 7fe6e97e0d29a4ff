package sqs_test

import (
	"testing"

	"github.com/outboxgo/outbox/backend/backendtest"
)

func TestRegistryConformance(t *testing.T) {
	f := startFake(t)
	backendtest.Broker(t, backendtest.BrokerHarness{URL: "sqs://us-east-1/outbox-registry-?endpoint=" + f.URL,
		Unreachable: "sqs://us-east-1/outbox-?endpoint=http://127.0.0.1:1&token=" + backendtest.Secret})
}
