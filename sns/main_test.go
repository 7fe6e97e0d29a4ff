package sns_test

import (
	"os"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The SDK's default chain, for the publishers made from URLs: static
	// keys the test server knows, and no instance metadata to wait for.
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": testAccessKey, "AWS_SECRET_ACCESS_KEY": "fake-secret",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
	} {
		_ = os.Setenv(k, v)
	}
	_ = os.Unsetenv("AWS_PROFILE")
	_ = os.Unsetenv("AWS_SESSION_TOKEN")
	goleak.VerifyTestMain(m)
}

// testAccessKey is the access key the test server accepts.
const testAccessKey = "AKIDOUTBOXTEST"

// testAccount is the account of the tests' topic ARNs (goaws reads only
// the topic's name from an ARN).
const testAccount = "000000000000"

var (
	creds      = credentials.NewStaticCredentialsProvider(testAccessKey, "fake-secret", "")
	wrongCreds = credentials.NewStaticCredentialsProvider("AKIDUNKNOWN", "fake-secret", "")
)

// seq numbers the names of the tests' topics and queues.
var seq atomic.Int64
