package nats

import (
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
)

func TestSubjectMatches(t *testing.T) {
	for _, c := range []struct {
		filter, subject string
		want            bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", false},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{">", "x", true},
		{"a.*.c", "a.b.c", true},
		{"a.b.c", "a.b", false},
	} {
		if got := subjectMatches(c.filter, c.subject); got != c.want {
			t.Errorf("subjectMatches(%q, %q) = %v", c.filter, c.subject, got)
		}
	}
}

func TestHeaderValue(t *testing.T) {
	if got := headerValue("a\r\nb", 10); got != "a  b" {
		t.Fatalf("%q", got)
	}
	long := strings.Repeat("é", 10) // 20 bytes
	if got := headerValue(long, 5); got != "éé" {
		t.Fatalf("cut inside a rune: %q", got)
	}
}

func TestBackoffDelay(t *testing.T) {
	b := outbox.Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	var got []time.Duration
	for d := 1; d <= 5; d++ {
		got = append(got, b.Delay(d))
	}
	want := []time.Duration{10, 20, 40, 50, 50}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v", got)
		}
	}
	b.Jitter = 0.5
	for range 100 {
		if d := b.Delay(1); d < 5*time.Millisecond || d > 15*time.Millisecond {
			t.Fatalf("jittered delay %v outside ±50%% of 10ms", d)
		}
	}
}
