//go:build race

package otel_test

// race: the race detector is on; allocation counts mean nothing.
const race = true
