package backoff

import (
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 10: 5 * time.Second} {
		if got := Delay(time.Second, 5*time.Second, 0, n); got != want {
			t.Errorf("Delay(1s, 5s, 0, %d) = %v, want %v", n, got, want)
		}
	}
	for range 1000 {
		if d := Delay(time.Second, time.Minute, 0.2, 3); d < 3200*time.Millisecond || d > 4800*time.Millisecond {
			t.Fatalf("Delay with jitter 0.2 around 4s gave %v", d)
		}
	}
}
