package outboxcli_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The Pub/Sub client's OpenCensus starts a worker at init, for the
		// life of the process.
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
