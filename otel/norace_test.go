//go:build !race

package otel_test

const race = false
