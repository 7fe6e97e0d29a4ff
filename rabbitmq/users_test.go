package rabbitmq_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgo/outbox/internal/testenv"
)

// The read-only user of this test binary: it may configure and read
// everything on the vhost "/" and write nothing. Created on first use with
// rabbitmqctl (slow: once per binary), deleted by TestMain.
var roUser struct {
	once sync.Once
	name string
	err  error
}

// readOnlyUser returns the credentials of the read-only user, or ends the
// test where it cannot be made (rabbitmqctl talks to the local node only).
func readOnlyUser(t *testing.T) *url.Userinfo {
	t.Helper()
	roUser.once.Do(func() {
		if !strings.Contains(rabbitURL(), "@127.0.0.1:5672/") {
			roUser.err = fmt.Errorf("the broker at %s is not the local node rabbitmqctl manages", rabbitURL())
			return
		}
		name := fmt.Sprintf("outbox-test-ro-%d", os.Getpid())
		if roUser.err = rabbitmqctl("add_user", name, name+"-pw"); roUser.err != nil {
			return
		}
		roUser.name = name
		roUser.err = rabbitmqctl("set_permissions", "-p", "/", name, ".*", "^$", ".*")
	})
	if roUser.err != nil {
		testenv.Unreachable(t, "a RabbitMQ user of the test's own, made with rabbitmqctl", roUser.err)
	}
	return url.UserPassword(roUser.name, roUser.name+"-pw")
}

// deleteUsers deletes the users the tests made.
func deleteUsers() {
	if roUser.name != "" {
		if err := rabbitmqctl("delete_user", roUser.name); err != nil {
			fmt.Fprintln(os.Stderr, "delete the test's RabbitMQ user:", err)
		}
	}
}

func rabbitmqctl(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "rabbitmqctl", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("rabbitmqctl %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}
