package mqtt_test

import (
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/internal/testenv"
)

func TestMain(m *testing.M) {
	// The examples publish to the local Mosquitto.
	testenv.ExamplesNeed(brokerName, "127.0.0.1:1883")
	goleak.VerifyTestMain(m)
}

// brokerAddr is the shared broker: OUTBOX_TEST_MQTT_ADDR, or the local
// Mosquitto (anonymous connections allowed).
func brokerAddr() string {
	return testenv.Getenv("OUTBOX_TEST_MQTT_ADDR", "127.0.0.1:1883")
}

// brokerName names the shared broker in skip and failure messages.
const brokerName = "Mosquitto"

// seq numbers the topic prefixes of the tests, which isolate them.
var seq atomic.Int64
