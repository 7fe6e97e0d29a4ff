// Package faulttest holds the fault-injection suite (issue 9): relays in
// processes of their own are SIGKILLed and SIGSTOPped, the broker is stopped
// and its path stalled, dropped and cut, the database's connections are
// killed and the database restarted, while writers enqueue; a checker then
// proves that nothing was lost, nothing phantom arrived, per-key order held
// and the inbox applied every effect exactly once. See docs/faults.md.
//
// The package has tests only; run them with
//
//	go test ./faulttest/                      # short mode (CI)
//	OUTBOX_FAULTS=long go test -v -timeout 30m ./faulttest/
package faulttest
