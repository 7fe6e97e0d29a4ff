package backend

import (
	"context"
	"strings"
	"testing"

	"github.com/outboxgo/outbox/publishers"
)

func TestApplyParams(t *testing.T) {
	set := map[string]string{"stream": "E"}
	for _, c := range []struct{ in, want string }{
		{"nats://a:4222", "nats://a:4222?stream=E"},
		{"nats://a:4222?stream=X&name=n", "nats://a:4222?name=n&stream=E"},
		{"kafka://h1:9092,h2:9092", "kafka://h1:9092,h2:9092?stream=E"},
		{"nats://a:4222?stream=X,nats://b:4222", "nats://a:4222,nats://b:4222?stream=E"},
		{"nats://a:4222,nats://b:4222?stream=X", "nats://a:4222,nats://b:4222?stream=E"},
	} {
		got, err := ApplyParams(c.in, set)
		if err != nil || got != c.want {
			t.Errorf("ApplyParams(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if got, _ := ApplyParams("nats://a:4222?stream=X", nil); got != "nats://a:4222?stream=X" {
		t.Errorf("ApplyParams with nothing to set changed the URL: %q", got)
	}
	if _, err := ApplyParams("nats://u:s3cret@a:bad port", set); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("ApplyParams of a bad URL = %v, want an error without the password", err)
	}
}

func TestLookupNamesTheSchemes(t *testing.T) {
	RegisterBroker(Broker{Name: "Test", Schemes: []string{"testbroker"},
		Open: func(context.Context, string, *BrokerOptions) (publishers.Publisher, error) { return nil, nil }})
	_, err := LookupBroker("mqttx://u:s3cret@h")
	if err == nil || !strings.Contains(err.Error(), `unsupported scheme "mqttx"`) || !strings.Contains(err.Error(), "testbroker") ||
		strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("LookupBroker of an unknown scheme = %v", err)
	}
	if _, err := LookupBroker("not a url"); err == nil || !strings.Contains(err.Error(), "not a URL") {
		t.Fatalf("LookupBroker of no URL = %v", err)
	}
	if b, err := LookupBroker("TESTBROKER://h"); err != nil || b.Name != "Test" {
		t.Fatalf("LookupBroker is case-sensitive on the scheme: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a scheme registered twice did not panic")
		}
	}()
	RegisterBroker(Broker{Name: "Again", Schemes: []string{"testbroker"},
		Open: func(context.Context, string, *BrokerOptions) (publishers.Publisher, error) { return nil, nil }})
}
