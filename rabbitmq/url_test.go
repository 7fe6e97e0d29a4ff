package rabbitmq_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/rabbitmq"
)

func TestConfigFromURL(t *testing.T) {
	cfg, err := rabbitmq.ConfigFromURL("amqp://bob:s3cret@h:5672/vh?exchange=ev&routing_key_prefix=app.&confirm_timeout=5s&max_message_size=1000&heartbeat=5" +
		"&dial_timeout=3s&connection_name=relay-1")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Exchange != "ev" || cfg.RoutingKey("x") != "app.x" || cfg.ConfirmTimeout != 5*time.Second || cfg.MaxMessageSize != 1000 ||
		cfg.DialTimeout != 3*time.Second || cfg.Name != "relay-1" {
		t.Errorf("cfg %+v", cfg)
	}
	if cfg.URL != "amqp://bob:s3cret@h:5672/vh?heartbeat=5" {
		t.Errorf("URL %q", cfg.URL)
	}
	cfg, err = rabbitmq.ConfigFromURL("amqps://h/?connection_timeout=1500&exchange=")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DialTimeout != 1500*time.Millisecond || cfg.Exchange != "" || cfg.RoutingKey != nil || cfg.URL != "amqps://h/" {
		t.Errorf("connection_timeout: cfg %+v", cfg)
	}
	for _, bad := range []string{"kafka://h", "amqp://bob:s3cret@h/?confirm_timeout=x"} {
		_, err := rabbitmq.ConfigFromURL(bad)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// TestConfigFromURLRefuses: a parameter ConfigFromURL does not know, one
// given twice, or a bad value is one error that names it, and never
// prints the password.
func TestConfigFromURLRefuses(t *testing.T) {
	for query, want := range map[string]string{
		"exchnage=ev":                            `unknown parameter "exchnage"`,
		"frame_max=4096":                         `unknown parameter "frame_max"`,
		"exchange=a&exchange=b":                  `parameter "exchange" given 2 times`,
		"confirm_timeout=-1s":                    `confirm_timeout "-1s"`,
		"dial_timeout=soon":                      `dial_timeout "soon"`,
		"connection_timeout=-5":                  `connection_timeout "-5"`,
		"dial_timeout=1s&connection_timeout=100": "give one",
		"max_message_size=-1":                    `max_message_size "-1"`,
		"max_message_size=1MB":                   `max_message_size "1MB"`,
		"heartbeat=often":                        "heartbeat",
		"exchange=%zz":                           "malformed query",
	} {
		_, err := rabbitmq.ConfigFromURL("amqp://bob:s3cret@h:5672/vh?" + query)
		switch {
		case err == nil:
			t.Errorf("%s: accepted", query)
		case !strings.Contains(err.Error(), want):
			t.Errorf("%s: %v: want an error saying %s", query, err, want)
		case strings.Contains(err.Error(), "s3cret"):
			t.Errorf("%s: the error prints the password: %v", query, err)
		}
	}
}

// TestParamsAccepted: every parameter the registered broker lists is one
// ConfigFromURL accepts, with the default it states.
func TestParamsAccepted(t *testing.T) {
	b, err := backend.LookupBroker("amqp://h/")
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{}
	for _, p := range b.Params {
		if p.Name == "connection_timeout" {
			continue // dial_timeout's other name: not both
		}
		if p.Usage == "" {
			t.Errorf("parameter %s has no usage", p.Name)
		}
		q.Set(p.Name, p.Default)
	}
	cfg, err := rabbitmq.ConfigFromURL("amqp://guest:guest@h/?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.WithDefaults(), (*rabbitmq.PublisherConfig)(nil).WithDefaults(); got.Exchange != want.Exchange ||
		got.ConfirmTimeout != want.ConfirmTimeout || got.DialTimeout != want.DialTimeout ||
		got.MaxMessageSize != want.MaxMessageSize || got.Name != want.Name {
		t.Errorf("the defaults the parameters state are not the config's: %+v, want %+v", got, want)
	}
}

// FuzzConfigFromURL: whatever the query, ConfigFromURL does not panic,
// and its error never shows the password.
func FuzzConfigFromURL(f *testing.F) {
	for _, q := range []string{"", "exchange=ev", "exchnage=ev", "confirm_timeout=-1s", "dial_timeout=1s&connection_timeout=5",
		"max_message_size=x", "heartbeat=70000", "a=%zz", "exchange=a&exchange=b", "auth_mechanism=plain&auth_mechanism=external"} {
		f.Add("h:5672", q)
	}
	f.Fuzz(func(t *testing.T, host, query string) {
		const password = "pw-Zq81x"
		raw := "amqp://bob:" + password + "@" + host + "/vh?" + query
		cfg, err := rabbitmq.ConfigFromURL(raw)
		if err != nil {
			if strings.Contains(err.Error(), password) {
				t.Fatalf("%q: the error shows the password: %v", raw, err)
			}
			return
		}
		if cfg.URL == "" {
			t.Fatalf("%q: no URL", raw)
		}
	})
}
