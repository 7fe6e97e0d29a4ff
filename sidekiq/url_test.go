package sidekiq_test

import (
	"strings"
	"testing"

	"github.com/outboxgo/outbox/sidekiq"
)

func TestConfigFromURL(t *testing.T) {
	cfg, err := sidekiq.ConfigFromURL("sidekiq+rediss://relay:s3cret@redis.internal:6380/2?namespace=app&class=Billing::EventJob&queue=events&retry=3&max_payload=1000&dial_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Namespace != "app" || cfg.Class != "Billing::EventJob" || cfg.Queue != "events" || cfg.Retry != "3" || cfg.MaxPayload != 1000 {
		t.Errorf("config %+v", cfg)
	}
	if cfg.URL != "rediss://relay:s3cret@redis.internal:6380/2?dial_timeout=2s" {
		t.Errorf("URL %s", cfg.URL)
	}
	if cfg, err := sidekiq.ConfigFromURL("sidekiq://127.0.0.1:6379/0"); err != nil || cfg.URL != "redis://127.0.0.1:6379/0" {
		t.Errorf("plain URL: %+v, %v", cfg, err)
	}
	for raw, want := range map[string]string{
		"sidekiq://:s3cret@h:6379/0?klass=X":        `unknown parameter "klass"`,
		"sidekiq://:s3cret@h:6379/0?class=lower":    `class "lower"`,
		"sidekiq://:s3cret@h:6379/0?retry=often":    `retry "often"`,
		"sidekiq://:s3cret@h:6379/0?max_payload=-1": `max_payload "-1"`,
		"redis://:s3cret@h:6379/0":                  `scheme "redis"`,
	} {
		_, err := sidekiq.ConfigFromURL(raw)
		switch {
		case err == nil:
			t.Errorf("%s: accepted", raw)
		case !strings.Contains(err.Error(), want):
			t.Errorf("%s: %v, want %s", raw, err, want)
		case strings.Contains(err.Error(), "s3cret"):
			t.Errorf("%s: the password shows: %v", raw, err)
		}
	}
}
