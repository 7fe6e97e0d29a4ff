package sqlkit

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

var errTimedOut = errors.New("lock wait timeout")

func timedOut(err error) bool { return errors.Is(err, errTimedOut) }

// Retry tries again only after a lock wait timed out, as many times as
// the tries allow, and says so in its last error.
func TestTableLockRetry(t *testing.T) {
	l := TableLock{Timeout: time.Second, Tries: 3, Pause: func(int) time.Duration { return 0 }}
	log := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		name      string
		results   []error // what each try returns, in turn
		wantTries int
		wantErr   string
	}{
		{"success", []error{nil}, 1, ""},
		{"success after a timeout", []error{errTimedOut, nil}, 2, ""},
		{"another error, not tried again", []error{errors.New("syntax error")}, 1, "syntax error"},
		{"every try timed out", []error{errTimedOut, errTimedOut, errTimedOut, nil}, 3, "lock wait timeout (3 tries of 1s each"},
	} {
		tries := 0
		err := l.Retry(context.Background(), log, timedOut, func() error {
			tries++
			return c.results[tries-1]
		})
		if tries != c.wantTries {
			t.Errorf("%s: %d tries, want %d", c.name, tries, c.wantTries)
		}
		if got := errString(err); !strings.HasPrefix(got, c.wantErr) || (c.wantErr == "") != (err == nil) {
			t.Errorf("%s: error %q, want one starting %q", c.name, got, c.wantErr)
		}
	}
}

// A context ended while Retry pauses ends it, with both reasons.
func TestTableLockRetryCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	l := TableLock{Timeout: time.Second, Tries: 3, Pause: func(int) time.Duration { return time.Hour }}
	err := l.Retry(ctx, slog.New(slog.DiscardHandler), timedOut, func() error {
		cancel()
		return errTimedOut
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "lock wait timeout") {
		t.Fatalf("Retry canceled while pausing = %v, want context.Canceled after the lock wait timeout", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
