package sns_test

import (
	"strings"
	"testing"

	"github.com/outboxgo/outbox/sns"
)

func TestConfigFromURL(t *testing.T) {
	cfg, err := sns.ConfigFromURL("sns://123456789012.eu-west-1/orders-?fifo=true&check_topics=a&max_in_flight=4")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Account != "123456789012" || cfg.Region != "eu-west-1" || cfg.TopicPrefix != "orders-" || !cfg.FIFO ||
		cfg.MaxInFlight != 4 || len(cfg.CheckTopics) != 1 {
		t.Fatalf("%+v", cfg)
	}
	for u, want := range map[string]string{
		"sns://eu-west-1/":                                         "ACCOUNT.REGION",
		"sns://123456789012.eu-west-1/?x=1":                        `unknown parameter "x"`,
		"sns://k:S3CRET@123456789012.eu-west-1/":                   "credentials in the URL",
		"sns://123456789012.127.0.0.1:4566/":                       "region",
		"sns://123456789012.eu-west-1/?endpoint=http://u:S3CRET@h": "endpoint",
	} {
		_, err := sns.ConfigFromURL(u)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "S3CRET") {
			t.Errorf("ConfigFromURL(%s) = %v, want an error with %q and no secret", u, err, want)
		}
	}
}
