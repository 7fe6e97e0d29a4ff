package sqs_test

import (
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/internal/testkit/sqsfake"
)

func TestMain(m *testing.M) {
	// The SDK's default chain, for the publishers made from URLs: static
	// keys the fake knows, and no instance metadata service to wait for.
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": testAccessKey, "AWS_SECRET_ACCESS_KEY": "fake-secret",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
	} {
		_ = os.Setenv(k, v)
	}
	_ = os.Unsetenv("AWS_PROFILE")
	_ = os.Unsetenv("AWS_SESSION_TOKEN")
	// The subscriber's example feeds an inbox in the local PostgreSQL.
	testenv.ExamplesNeed("PostgreSQL", "127.0.0.1:5432")
	goleak.VerifyTestMain(m)
}

// testAccessKey is the access key the fakes accept.
const testAccessKey = "AKIDOUTBOXTEST"

// creds are the tests' credentials; wrongCreds the fake refuses.
var (
	creds      = credentials.NewStaticCredentialsProvider(testAccessKey, "fake-secret", "")
	wrongCreds = credentials.NewStaticCredentialsProvider("AKIDUNKNOWN", "fake-secret", "")
)

// seq numbers the queue prefixes of the tests, which isolate them.
var seq atomic.Int64

// fake is an sqsfake server on a port of 127.0.0.1.
type fake struct {
	*sqsfake.Server
	URL string // http://127.0.0.1:port
}

// startFake starts a fake that knows only testAccessKey, closed at
// cleanup.
func startFake(t testing.TB) *fake {
	t.Helper()
	s := sqsfake.New(sqsfake.Options{AccessKeys: []string{testAccessKey}})
	return &fake{Server: s, URL: newHTTPServer(t, s)}
}

// newHTTPServer serves s on a port of 127.0.0.1 until cleanup and returns
// its URL.
func newHTTPServer(t testing.TB, s *sqsfake.Server) string {
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return hs.URL
}
