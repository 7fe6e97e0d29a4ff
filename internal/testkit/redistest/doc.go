// Package redistest starts private redis-server processes for the tests
// that must take Redis down, restart it or change its configuration
// (requirepass, ACL users, limits): never the shared server on
// 127.0.0.1:6379, which other tests and CI use.
//
//	s := redistest.Start(t, redistest.Options{RequirePass: "pw"})
//	url := s.URL() // redis://:pw@127.0.0.1:PORT/0
//
// A server is a child process of the test (daemonize no) on a free port of
// 127.0.0.1, with its files (log, append-only file) in a directory of
// t.TempDir(); it is killed at cleanup. Where redis-server is not
// installed, Start skips the test, or fails it under CI=true
// (internal/testenv).
package redistest
