package kafka_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/publishers"
)

func TestRegistered(t *testing.T) {
	for _, sch := range []string{"kafka", "kafka+tls"} {
		if !slices.Contains(backend.BrokerSchemes(), sch) {
			t.Errorf("scheme %s not registered: %v", sch, backend.BrokerSchemes())
		}
	}
	b, err := backend.LookupBroker("kafka://b1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range b.Params {
		names = append(names, p.Name)
		if p.Usage == "" {
			t.Errorf("parameter %s has no usage", p.Name)
		}
	}
	want := []string{"client_id", "delivery_timeout", "dial_timeout", "key_runs", "max_record_bytes", "sasl", "tls", "topic_prefix"}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("Params %v, want %v", names, want)
	}
}

// TestOpenBroker opens a publisher by URL, as the outbox command does,
// and publishes through it.
func TestOpenBroker(t *testing.T) {
	b := brokers(t)
	prefix := newTopicName(t) + "."
	createTopic(t, b, prefix+testTopic)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := backend.OpenBroker(ctx, "kafka://"+strings.Join(b, ",")+"?topic_prefix="+prefix+"&client_id=reg&dial_timeout=2s", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.(publishers.Checker).Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	m := outbox.Message{ID: outbox.NewID(), Topic: testTopic, Key: "k", Payload: []byte("by URL")}
	if err := p.Publish(ctx, []outbox.Message{m})[0]; err != nil {
		t.Fatalf("Publish: %v", err)
	}
	got := read(t, b, prefix+testTopic, prefix, 1, 15*time.Second)
	if len(got) != 1 || got[0].ID != m.ID.String() || string(got[0].Payload) != "by URL" {
		t.Fatalf("read %+v", got)
	}
}

// TestOpenBrokerRefusesBadURL: a bad parameter is one error that names
// it, and never shows the URL's password.
func TestOpenBrokerRefusesBadURL(t *testing.T) {
	for url, want := range map[string]string{
		"kafka://bob:s3cret@b1:9092?nope=1":                  `unknown parameter "nope"`,
		"kafka+tls://bob:s3cret@b1?topic_prefix=a&Tls=true":  `unknown parameter "Tls"`,
		"kafka://bob:s3cret@b1?delivery_timeout=soon":        "delivery_timeout",
		"kafka://bob:s3cret@b1?dial_timeout=-1s":             "dial_timeout: -1s is negative",
		"kafka://bob:s3cret@b1?max_record_bytes=-5":          "max_record_bytes: -5 is negative",
		"kafka://bob:s3cret@b1?max_record_bytes=99999999999": "max_record_bytes",
		"kafka://bob:s3cret@b1?tls=maybe":                    "tls",
		"kafka://bob:s3cret@b1?sasl=gssapi":                  `sasl "gssapi"`,
		"kafka://b1?sasl=plain":                              "needs a user",
		"kafka://bob:s3cret@":                                "no broker",
	} {
		p, err := backend.OpenBroker(context.Background(), url, nil)
		if err == nil {
			_ = p.Close()
			t.Errorf("%s: no error", url)
			continue
		}
		if p != nil {
			t.Errorf("%s: a publisher (%T) with the error", url, p)
		}
		if msg := err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, "s3cret") || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q, want one line naming %s without the password", url, msg, want)
		}
	}
}
