package webhook_test

import (
	"crypto/rand"
	"encoding/base64"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/internal/testenv"
)

func TestMain(m *testing.M) {
	// The receiving side's example feeds an inbox in the local PostgreSQL.
	testenv.ExamplesNeed("PostgreSQL", "127.0.0.1:5432")
	goleak.VerifyTestMain(m)
}

// seq numbers the topics of the tests.
var seq atomic.Int64

// newSecret returns a fresh secret in its whsec_ form.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}
