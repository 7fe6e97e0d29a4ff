package mqtt_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/mqtt"
)

func TestConfigFromURL(t *testing.T) {
	cfg, err := mqtt.ConfigFromURL("mqtt://u:p@broker:1884?topic_prefix=events/&retain=true&client_id=relay-1&keepalive=10s&connect_timeout=2s&ack_timeout=5s&max_packet_size=1000")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.URL != "mqtt://u:p@broker:1884" || cfg.TopicPrefix != "events/" || !cfg.Retain || cfg.ClientID != "relay-1" ||
		cfg.KeepAlive != 10*time.Second || cfg.ConnectTimeout != 2*time.Second || cfg.AckTimeout != 5*time.Second || cfg.MaxPacketSize != 1000 {
		t.Errorf("ConfigFromURL = %+v", cfg)
	}
	if cfg, err := mqtt.ConfigFromURL("mqtt://127.0.0.1"); err != nil || cfg.Retain || cfg.TopicPrefix != "" {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
}

func TestConfigFromURLCAFile(t *testing.T) {
	if _, err := mqtt.ConfigFromURL("mqtt://h?ca_file=/x.pem"); err == nil || !strings.Contains(err.Error(), "mqtts") {
		t.Errorf("ca_file on mqtt://: %v, want an error", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mqtt.ConfigFromURL("mqtts://h?ca_file=" + bad); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("ca_file without a certificate: %v, want an error", err)
	}
}

func TestConfigFromURLRefuses(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"http://h", `scheme "http"`},
		{"mqtt://h?nope=1&also=2", `unknown parameter "also", "nope"`},
		{"mqtt://h?retain=maybe", "retain"},
		{"mqtt://h?keepalive=0s", "keepalive"},
		{"mqtt://h?keepalive=100000s", "KeepAlive"},
		{"mqtt://h?ack_timeout=soon", "ack_timeout"},
		{"mqtt://h?max_packet_size=-1", "max_packet_size"},
		{"mqtt://h?topic_prefix=a/%2B/", "TopicPrefix"},
		{"mqtt://h?topic_prefix=a/%23", "TopicPrefix"},
		{"mqtt://h?retain=true&retain=false", "retain given 2 times"},
		{"mqtt://h/path", "path"},
		{"mqtt://", "no host"},
		{"mqtt://u:S3CRET@h?nope=1", "nope"},
	} {
		_, err := mqtt.ConfigFromURL(c.url)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ConfigFromURL(%q) = %v, want an error with %q", c.url, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "S3CRET") {
			t.Errorf("ConfigFromURL(%q) shows the password: %v", c.url, err)
		}
	}
}

func TestNewPublisherRefusesConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  mqtt.PublisherConfig
		want string
	}{
		{mqtt.PublisherConfig{URL: "mqtt://h?topic_prefix=x"}, "query"},
		{mqtt.PublisherConfig{KeepAlive: time.Millisecond}, "KeepAlive"},
		{mqtt.PublisherConfig{MaxPacketSize: -1}, "MaxPacketSize"},
		{mqtt.PublisherConfig{ClientID: "bad\nid"}, "ClientID"},
		{mqtt.PublisherConfig{TopicPrefix: "x/#"}, "TopicPrefix"},
	} {
		p, err := mqtt.NewPublisher(&c.cfg)
		if err == nil {
			_ = p.Close()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewPublisher(%+v) = %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
}

func FuzzConfigFromURL(f *testing.F) {
	f.Add("mqtt://u:p@h:1883?topic_prefix=a/&retain=true")
	f.Add("mqtts://h?ca_file=")
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := mqtt.ConfigFromURL(s)
		if err != nil {
			return
		}
		if p, err := mqtt.NewPublisher(cfg); err != nil {
			t.Errorf("ConfigFromURL(%q) accepted what NewPublisher refuses: %v", s, err)
		} else {
			_ = p.Close()
		}
	})
}
