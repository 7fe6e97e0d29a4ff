package mqtt_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/publishers/publishertest"
)

// newPrefix returns a topic prefix no other test uses.
func newPrefix() string {
	return fmt.Sprintf("outbox-test/%d/%d/", os.Getpid(), seq.Add(1))
}

// reader is a plain MQTT 5 subscriber (paho, not the package's code) that
// keeps every message it receives, in order.
type reader struct {
	mu     sync.Mutex
	got    []*paho.Publish
	notify chan struct{} // signaled on every message
}

// subscribe connects a reader to addr (user "" for anonymous) and
// subscribes it to filter at QoS 1; it disconnects at cleanup.
func subscribe(t testing.TB, addr, user, pass, filter string) *reader {
	t.Helper()
	r := &reader{notify: make(chan struct{}, 1)}
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		testenv.Unreachable(t, "MQTT broker at "+addr, err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: nc, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
		func(pr paho.PublishReceived) (bool, error) {
			r.mu.Lock()
			r.got = append(r.got, pr.Packet)
			r.mu.Unlock()
			select {
			case r.notify <- struct{}{}:
			default:
			}
			return true, nil
		}}})
	// "allowed-": the prefix a private broker with clientid_prefixes
	// admits (the publishers' default IDs start with "outbox-pub-").
	cp := &paho.Connect{ClientID: fmt.Sprintf("allowed-reader-%d-%d", os.Getpid(), seq.Add(1)), CleanStart: true, KeepAlive: 30}
	if user != "" {
		cp.Username, cp.UsernameFlag, cp.Password, cp.PasswordFlag = user, true, []byte(pass), true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, cp); err != nil {
		t.Fatalf("reader: connect to %s: %v", addr, err)
	}
	t.Cleanup(func() {
		_ = c.Disconnect(&paho.Disconnect{})
		<-c.Done()
	})
	sa, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}})
	if err != nil {
		t.Fatalf("reader: subscribe to %q: %v", filter, err)
	}
	if len(sa.Reasons) != 1 || sa.Reasons[0] != 1 {
		t.Fatalf("reader: subscribe to %q: granted %v, want QoS 1", filter, sa.Reasons)
	}
	return r
}

// wait returns what arrived once n messages did or timeout passed.
func (r *reader) wait(n int, timeout time.Duration) []*paho.Publish {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		got := append([]*paho.Publish(nil), r.got...)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-r.notify:
		case <-deadline.C:
			return got
		}
	}
}

// read is wait translated for the suite, topics less prefix.
func (r *reader) read(t *testing.T, prefix string, n int, timeout time.Duration) []publishertest.Received {
	t.Helper()
	got := r.wait(n, timeout)
	out := make([]publishertest.Received, len(got))
	for i, p := range got {
		out[i] = translate(t, p, prefix)
	}
	return out
}

// translate reads a message the way a consumer that knows the documented
// user properties would (not with the package's Properties).
func translate(t testing.TB, p *paho.Publish, prefix string) publishertest.Received {
	rc := publishertest.Received{Topic: strings.TrimPrefix(p.Topic, prefix), Payload: p.Payload, Headers: map[string]string{}}
	if p.Properties == nil {
		return rc
	}
	for _, up := range p.Properties.User {
		name, value := up.Key, up.Value
		if n, ok := strings.CutPrefix(name, "outbox-b64-"); ok {
			b, err := base64.StdEncoding.DecodeString(value)
			if err != nil {
				t.Errorf("user property %q: %v", name, err)
			}
			name, value = n, string(b)
		}
		switch name {
		case "outbox-id":
			rc.ID = value
		case "outbox-key":
			rc.Key = value
		case "outbox-type":
			rc.Type = value
		}
		rc.Headers[name] = value
	}
	return rc
}
