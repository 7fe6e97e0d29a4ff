package outboxcli_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/logtest"
)

// outbox ui refuses an address off loopback without a token, in one line,
// before it connects to anything.
func TestUIRefusesOffLoopbackWithoutToken(t *testing.T) {
	t.Setenv("OUTBOX_UI_TOKEN", "")
	db := []string{"--database-url", "postgres://u:s3cret@127.0.0.1:1/x"}
	failsWith(t, append([]string{"ui", "--addr", "0.0.0.0:8080"}, db...), "--addr 0.0.0.0:8080", "not a loopback address", "--token")
	failsWith(t, append([]string{"ui", "--addr", ":8080"}, db...), "every interface", "OUTBOX_UI_TOKEN")
	failsWith(t, append([]string{"ui", "--addr", "nowhere"}, db...), "--addr", "want host:port")
	failsWith(t, append([]string{"relay", "--ui-addr", "0.0.0.0:8080"}, db...), "--ui-addr", "--ui-token")
	failsWith(t, append([]string{"relay", "--ui-token", "x"}, db...), "--ui-token needs --ui-addr")
	failsWith(t, []string{"demo", "--ui=0.0.0.0:8080"}, "--ui", "loopback")
}

// outbox ui serves the dashboard of the table, with its counts, until
// interrupted, and then exits 0.
func TestUIServesTheDashboard(t *testing.T) {
	e := newSQLite(t)
	e.enqueue(outbox.Message{Topic: "orders", Payload: []byte("{}")}, outbox.Message{Topic: "orders", Payload: []byte("{}")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr logtest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- mainWith(ctx, append([]string{"ui", "--addr", "127.0.0.1:0"}, e.db...), &stdout, &stderr)
	}()
	urlRE := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/)`)
	var url string
	deadline := time.Now().Add(time.Minute)
	for url == "" {
		if m := urlRE.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("outbox ui exited %d before serving: %s%s", code, stdout.String(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox ui printed no URL within a minute: %q", stdout.String())
		}
		time.Sleep(10 * time.Millisecond) // the polling interval of the wait, bounded by the deadline
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `<b id="total-pending">2</b>`) {
		t.Fatalf("GET %s: %d, want the page with 2 pending:\n%s", url, resp.StatusCode, body)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("outbox ui interrupted: exit %d, want 0; stderr %q", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("outbox ui did not stop within a minute of its interruption")
	}
}
