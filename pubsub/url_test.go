package pubsub_test

import (
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/pubsub"
)

func TestConfigFromURL(t *testing.T) {
	cfg, err := pubsub.ConfigFromURL("pubsub://my-project?topic_prefix=shop-&ordering=false&check_topics=orders,payments&publish_timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Project != "my-project" || cfg.TopicPrefix != "shop-" || !cfg.NoOrdering ||
		strings.Join(cfg.CheckTopics, ",") != "orders,payments" || cfg.PublishTimeout != 5*time.Second {
		t.Errorf("ConfigFromURL = %+v", cfg)
	}
	def, err := pubsub.ConfigFromURL("pubsub://p")
	if err != nil {
		t.Fatal(err)
	}
	if def.NoOrdering || def.TopicPrefix != "" {
		t.Errorf("defaults: %+v, want ordering on, no prefix", def)
	}
	for url, want := range map[string]string{
		"pubsub://p?nope=1":              `unknown parameter "nope"`,
		"pubsub://p?ordering=maybe":      "ordering",
		"pubsub://p?publish_timeout=-1s": "publish_timeout",
		"pubsub://p?check_topics=a,,b":   "CheckTopics",
		"pubsub://":                      "no project",
		"pubsub://p:8085":                "PUBSUB_EMULATOR_HOST",
		"pubsub://p/topic":               "the host is the project ID",
		"nats://p":                       "scheme",
		"pubsub://user:S3CRETx@p":        "credentials come from the environment",
	} {
		_, err := pubsub.ConfigFromURL(url)
		switch {
		case err == nil:
			t.Errorf("ConfigFromURL(%s) accepted it", url)
		case !strings.Contains(err.Error(), want):
			t.Errorf("ConfigFromURL(%s) = %v, want it to say %q", url, err, want)
		case strings.Contains(err.Error(), "S3CRETx"):
			t.Errorf("ConfigFromURL(%s) shows the secret: %v", url, err)
		}
	}
}

func FuzzConfigFromURL(f *testing.F) {
	f.Add("pubsub://p?topic_prefix=a-&ordering=true")
	f.Add("pubsub://u:pw@p?check_topics=x")
	f.Fuzz(func(t *testing.T, raw string) {
		cfg, err := pubsub.ConfigFromURL(raw)
		if err == nil && cfg.Project == "" {
			t.Fatalf("ConfigFromURL(%q) = no project, no error", raw)
		}
	})
}
