// Package testenv decides what a test does when a service it needs is not
// there: skip, saying which service it wanted, or — with CI=true — fail.
package testenv

import (
	"net"
	"os"
	"strconv"
	"testing"
	"time"
)

// CI reports whether the tests run in CI, where a missing service is a
// failure, not a skip.
func CI() bool {
	v, _ := strconv.ParseBool(os.Getenv("CI"))
	return v
}

// Unreachable ends the test: Skip outside CI, Fatal in CI.
func Unreachable(t testing.TB, service string, err error) {
	t.Helper()
	if CI() {
		t.Fatalf("%s unreachable (CI=true, so this fails instead of skipping): %v", service, err)
	}
	t.Skipf("skipping: needs %s: %v", service, err)
}

// RequireTCP ends the test (see Unreachable) unless addr accepts TCP
// connections.
func RequireTCP(t testing.TB, service, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		Unreachable(t, service, err)
		return
	}
	_ = c.Close()
}

// Getenv returns the environment variable key, or def when it is empty.
func Getenv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
