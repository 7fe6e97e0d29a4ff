package mqtt

import (
	"errors"
	"testing"

	"github.com/outboxgo/outbox/publishers"
)

var errTest = errors.New("test")

// kind names err's class.
func kind(err error) string {
	switch {
	case publishers.IsMisconfigured(err):
		return "misconfigured"
	case publishers.IsPermanent(err):
		return "permanent"
	case publishers.IsUnavailable(err):
		return "unavailable"
	}
	return "plain"
}

func TestClassifyReasonCodes(t *testing.T) {
	err := errTest
	for code, want := range map[byte]string{0x86: "misconfigured", 0x87: "misconfigured", 0x85: "misconfigured", 0x88: "unavailable", 0x89: "unavailable", 0x9F: "unavailable"} {
		if got := kind(classifyConnack(err, code)); got != want {
			t.Errorf("CONNACK %s: %s, want %s", reasonText(code), got, want)
		}
	}
	for code, want := range map[byte]string{0x87: "misconfigured", 0x90: "permanent", 0x95: "permanent", 0x99: "permanent", 0x97: "unavailable", 0x80: "plain", 0x83: "plain"} {
		if got := kind(classifyPuback(err, code)); got != want {
			t.Errorf("PUBACK %s: %s, want %s", reasonText(code), got, want)
		}
	}
}
