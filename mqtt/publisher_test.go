package mqtt_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/mqtt"
	"github.com/outboxgo/outbox/publishers"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func msg(topic, key string, payload []byte) outbox.Message {
	return outbox.Message{ID: outbox.NewID(), Topic: topic, Key: key, Type: "T", Payload: payload, CreatedAt: time.Now().UTC()}
}

func idsOf(msgs []outbox.Message) []string {
	s := make([]string, len(msgs))
	for i, m := range msgs {
		s[i] = m.ID.String()
	}
	return s
}

// A private broker with max_packet_size (sent in the CONNACK) and
// message_size_limit (answered with PUBACK 0x95): a message over either
// fails alone as permanent, the connection survives, the rest arrive in
// order.
func TestBrokerSizeLimits(t *testing.T) {
	t.Parallel()
	b := startPrivateBroker(t, "max_packet_size 20000", "message_size_limit 5000")
	r := subscribe(t, b.addr, userAdmin, userAdmin+"-pw", "#")
	p := newPublisher(t, mqtt.PublisherConfig{URL: b.url(userAdmin, ""), TopicPrefix: "sizes/"})
	defer p.Close()
	msgs := []outbox.Message{
		msg("t", "k", []byte("small")),
		msg("t", "k", make([]byte, 6000)), // under the packet size, over message_size_limit
		msg("t", "k", []byte("small")),
		msg("t", "k", make([]byte, 30000)), // over the CONNACK's Maximum Packet Size
		msg("t", "k", []byte("small")),
	}
	errs := p.Publish(ctxT(t), msgs)
	for i, err := range errs {
		t.Logf("message %d: %v", i, err)
		switch i {
		case 1:
			if !publishers.IsPermanent(err) || !strings.Contains(err.Error(), "0x95") {
				t.Errorf("message over message_size_limit: %v, want Permanent with PUBACK 0x95", err)
			}
		case 3:
			if !publishers.IsPermanent(err) || !errors.Is(err, mqtt.ErrTooLarge) {
				t.Errorf("message over max_packet_size: %v, want Permanent ErrTooLarge", err)
			}
		default:
			if err != nil {
				t.Errorf("message %d: %v", i, err)
			}
		}
	}
	want := idsOf([]outbox.Message{msgs[0], msgs[2], msgs[4]})
	got := r.wait(len(want), 15*time.Second)
	var ids []string
	for _, g := range got {
		ids = append(ids, translate(t, g, "").ID)
	}
	if !slices.Equal(ids, want) {
		t.Errorf("read %v, want %v", ids, want)
	}
	// The connection is still good.
	if errs := p.Publish(ctxT(t), []outbox.Message{msg("t", "k", nil)}); errs[0] != nil {
		t.Errorf("after the refusals: %v", errs[0])
	}
}

// A user whose ACL forbids the topic passes Check (MQTT cannot ask), and
// its messages fail as misconfigured — never published, never
// dead-lettered — while an allowed topic works.
func TestForbiddenTopic(t *testing.T) {
	t.Parallel()
	b := startPrivateBroker(t)
	r := subscribe(t, b.addr, userAdmin, userAdmin+"-pw", "#")
	denied := newPublisher(t, mqtt.PublisherConfig{URL: b.url(userLimited, ""), TopicPrefix: "denied/"})
	defer denied.Close()
	if err := denied.Check(ctxT(t)); err != nil {
		t.Fatalf("Check: %v", err)
	}
	for round := range 2 {
		for i, err := range denied.Publish(ctxT(t), []outbox.Message{msg("t", "k", nil), msg("t", "k", nil)}) {
			if !publishers.IsMisconfigured(err) || publishers.IsPermanent(err) {
				t.Errorf("round %d, message %d to a forbidden topic: %v, want Misconfigured", round, i, err)
			}
		}
	}
	allowed := newPublisher(t, mqtt.PublisherConfig{URL: b.url(userLimited, ""), TopicPrefix: "allowed/"})
	defer allowed.Close()
	good := []outbox.Message{msg("t", "k", nil)}
	if errs := allowed.Publish(ctxT(t), good); errs[0] != nil {
		t.Fatalf("allowed topic: %v", errs[0])
	}
	got := r.wait(1, 15*time.Second)
	if len(got) != 1 || translate(t, got[0], "").ID != good[0].ID.String() {
		t.Errorf("read %d messages, want only the allowed one", len(got))
	}
}

// Topics MQTT cannot publish to fail alone as permanent, unsent.
func TestInvalidTopics(t *testing.T) {
	t.Parallel()
	testenv.RequireTCP(t, brokerName, brokerAddr())
	prefix := newPrefix()
	r := subscribe(t, brokerAddr(), "", "", prefix+"#")
	p := newPublisher(t, mqtt.PublisherConfig{URL: "mqtt://" + brokerAddr(), Topic: func(topic string) string {
		if topic == "long" {
			return prefix + strings.Repeat("x", mqtt.MaxTopicLen)
		}
		return prefix + topic
	}})
	defer p.Close()
	msgs := []outbox.Message{msg("a/+/b", "", nil), msg("a/#", "", nil), msg("tab\there", "", nil),
		msg("ok", "", nil), msg("long", "", nil), msg("c1\u0085", "", nil), msg("nonchar\ufdd0", "", nil)}
	for i, err := range p.Publish(ctxT(t), msgs) {
		switch {
		case msgs[i].Topic == "ok" && err != nil:
			t.Errorf("topic ok: %v", err)
		case msgs[i].Topic != "ok" && (!publishers.IsPermanent(err) || !errors.Is(err, mqtt.ErrInvalidTopic)):
			t.Errorf("topic %q: %v, want Permanent ErrInvalidTopic", msgs[i].Topic, err)
		}
	}
	if got := r.wait(1, 15*time.Second); len(got) != 1 || got[0].Topic != prefix+"ok" {
		t.Errorf("read %d messages, want the one to %q", len(got), prefix+"ok")
	}
}

// Keys, types and header values that MQTT may not carry as text travel
// base64-encoded under "outbox-b64-"+name, and Decode restores them.
func TestUnsafeTextRoundTrip(t *testing.T) {
	t.Parallel()
	testenv.RequireTCP(t, brokerName, brokerAddr())
	prefix := newPrefix()
	r := subscribe(t, brokerAddr(), "", "", prefix+"#")
	p := newPublisher(t, mqtt.PublisherConfig{URL: "mqtt://" + brokerAddr(), TopicPrefix: prefix})
	defer p.Close()
	m := msg("t", "key\ufdd0\u0085", []byte{0, 1, 2})
	m.Type = "type\uffff"
	m.Headers = map[string]string{"tab": "a\tb", "c1": "x\u009fy", "plain": "ok ☃"}
	if errs := p.Publish(ctxT(t), []outbox.Message{m}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	got := r.wait(1, 15*time.Second)
	if len(got) != 1 {
		t.Fatalf("read %d messages", len(got))
	}
	var names []string
	for _, up := range got[0].Properties.User {
		names = append(names, up.Key)
	}
	wantNames := []string{"outbox-id", "outbox-b64-outbox-key", "outbox-b64-outbox-type", "outbox-created-at", "outbox-b64-c1", "plain", "outbox-b64-tab"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("user properties %q, want %q", names, wantNames)
	}
	in, err := mqtt.Decode(got[0], prefix, 1)
	if err != nil {
		t.Fatal(err)
	}
	if in.ID != m.ID || in.Topic != "t" || in.Key != m.Key || in.Type != m.Type || !bytes.Equal(in.Payload, m.Payload) ||
		!in.CreatedAt.Equal(m.CreatedAt) || len(in.Headers) != 3 || in.Headers["tab"] != "a\tb" || in.Headers["c1"] != "x\u009fy" || in.Headers["plain"] != "ok ☃" {
		t.Errorf("decoded %+v, want %+v", in, m)
	}
}

// Check against a port where nothing listens: unavailable, not
// misconfigured; Publish likewise.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	p := newPublisher(t, mqtt.PublisherConfig{URL: "mqtt://user:pw@127.0.0.1:1"})
	defer p.Close()
	err := p.Check(ctxT(t))
	if !publishers.IsUnavailable(err) || publishers.IsMisconfigured(err) {
		t.Errorf("Check: %v, want Unavailable", err)
	}
	if strings.Contains(err.Error(), ":pw@") {
		t.Errorf("Check shows the password: %v", err)
	}
	for _, err := range p.Publish(ctxT(t), []outbox.Message{msg("t", "", nil)}) {
		if !publishers.IsUnavailable(err) {
			t.Errorf("Publish: %v, want Unavailable", err)
		}
	}
}

// Close while a Publish waits on a stalled broker: the Publish returns
// at once, unavailable (ErrClosed), and Close leaves nothing behind.
func TestCloseDuringStall(t *testing.T) {
	t.Parallel()
	testenv.RequireTCP(t, brokerName, brokerAddr())
	px := tcpproxy.Start(t, brokerAddr())
	p := newPublisher(t, mqtt.PublisherConfig{URL: "mqtt://" + px.Addr, TopicPrefix: newPrefix()})
	if err := p.Check(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	px.Stall(true)
	defer px.Stall(false)
	done := make(chan []error)
	go func() {
		done <- p.Publish(context.Background(), []outbox.Message{msg("t", "", nil), msg("t", "", nil)})
	}()
	closed := make(chan error)
	go func() {
		time.Sleep(50 * time.Millisecond) // let the Publish start waiting; either order must work
		closed <- p.Close()
	}()
	select {
	case errs := <-done:
		for i, err := range errs {
			if !publishers.IsUnavailable(err) || publishers.IsPermanent(err) {
				t.Errorf("message %d: %v, want Unavailable", i, err)
			}
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Publish did not return after Close")
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
}

// retain=true: a subscriber that comes after the publish gets the message,
// flagged retained.
func TestRetain(t *testing.T) {
	t.Parallel()
	testenv.RequireTCP(t, brokerName, brokerAddr())
	prefix := newPrefix()
	cfg, err := mqtt.ConfigFromURL("mqtt://" + brokerAddr() + "?retain=true&topic_prefix=" + prefix)
	if err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, *cfg)
	t.Cleanup(func() { _ = p.Close() })
	m := msg("t", "", []byte("last"))
	if errs := p.Publish(ctxT(t), []outbox.Message{m}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	t.Cleanup(func() { // an empty retained message clears the topic's
		if errs := p.Publish(context.Background(), []outbox.Message{msg("t", "", nil)}); errs[0] != nil {
			t.Errorf("clear the retained message: %v", errs[0])
		}
	})
	r := subscribe(t, brokerAddr(), "", "", prefix+"#")
	got := r.wait(1, 15*time.Second)
	if len(got) != 1 || !got[0].Retain || translate(t, got[0], prefix).ID != m.ID.String() {
		t.Fatalf("a late subscriber read %d messages, want the retained one", len(got))
	}
}

// A broker that falls silent is dropped after the keep-alive (no
// PINGRESP): the messages waiting on it fail as unavailable before their
// context ends, and once the broker answers again the publisher
// reconnects.
func TestSilentBrokerDropped(t *testing.T) {
	t.Parallel()
	testenv.RequireTCP(t, brokerName, brokerAddr())
	px := tcpproxy.Start(t, brokerAddr())
	prefix := newPrefix()
	r := subscribe(t, brokerAddr(), "", "", prefix+"#")
	p := newPublisher(t, mqtt.PublisherConfig{URL: "mqtt://" + px.Addr, TopicPrefix: prefix, KeepAlive: time.Second})
	defer p.Close()
	if errs := p.Publish(ctxT(t), []outbox.Message{msg("t", "k", nil)}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	px.Stall(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stalled := []outbox.Message{msg("t", "k", nil)}
	errs := p.Publish(ctx, stalled)
	t.Logf("while stalled: %v", errs[0])
	if !publishers.IsUnavailable(errs[0]) || ctx.Err() != nil || errors.Is(errs[0], context.DeadlineExceeded) {
		t.Fatalf("while stalled: %v, want Unavailable from the lost connection, before the deadline", errs[0])
	}
	px.Stall(false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		errs := p.Publish(ctxT(t), stalled)
		if errs[0] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after the stall: %v", errs[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The first and the stalled one, which may have arrived twice (its
	// first PUBLISH reached the broker when the stall ended).
	got := r.wait(2, 15*time.Second)
	if len(got) < 2 || translate(t, got[len(got)-1], prefix).ID != stalled[0].ID.String() {
		t.Errorf("read %d messages, want the stalled message last", len(got))
	}
}
