package outboxcli_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/outboxgo/outbox/stores"
)

// `outbox relay` names its database connections "outbox relay <host> pid
// <pid>", so the dashboard (stores.SessionLister) sees it connected.
func TestRelayNamesItsConnections(t *testing.T) {
	e := newPG(t)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("outbox relay %s pid %d", host, os.Getpid()) // the relay runs in this process
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan string, 1)
	go func() {
		code, out, stderr := run(t, ctx, append([]string{"relay", "--data-dir", t.TempDir()}, e.db...)...)
		done <- fmt.Sprintf("exit %d:\n%s%s", code, out, stderr)
	}()
	lister := e.store.(stores.SessionLister)
	deadline := time.Now().Add(time.Minute)
	for {
		sessions, err := lister.Sessions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range sessions {
			found = found || s.Application == want
		}
		if found {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the relay stopped before its connections were seen: %s", r)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session named %q within a minute: %+v", want, sessions)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}
