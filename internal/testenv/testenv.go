// Package testenv decides what a test does when a service it needs is not
// there: skip, saying which service it wanted, or — with CI=true — fail.
package testenv

import (
	"flag"
	"fmt"
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

// ExamplesNeed is called from a package's TestMain before m.Run, for a
// package whose runnable examples need service at addr. An example cannot
// skip, so when the service does not accept TCP connections the run leaves
// the examples out (it selects ^Test and ^Fuzz), saying so in one line —
// unless CI=true, where they run and fail, or -run already chose what runs.
func ExamplesNeed(service, addr string) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if CI() {
		return
	}
	if f := flag.Lookup("test.run"); f == nil || f.Value.String() != "" {
		return
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		_ = c.Close()
		return
	}
	fmt.Fprintf(os.Stderr, "skipping the examples: they need %s: %v\n", service, err)
	_ = flag.Set("test.run", "^(Test|Fuzz)")
}
