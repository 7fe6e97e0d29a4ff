package sqs_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/outboxgo/outbox/sqs"
)

func TestConfigFromURL(t *testing.T) {
	cfg, err := sqs.ConfigFromURL("sqs://123456789012.eu-west-1/orders-?endpoint=http://127.0.0.1:4566&fifo=true&max_size=1000&max_in_flight=3&max_attempts=2&check_topics=a,b")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Account != "123456789012" || cfg.Region != "eu-west-1" || cfg.QueuePrefix != "orders-" || cfg.Endpoint != "http://127.0.0.1:4566" ||
		!cfg.FIFO || cfg.MaxSize != 1000 || cfg.MaxInFlight != 3 || cfg.MaxAttempts != 2 || !slices.Equal(cfg.CheckTopics, []string{"a", "b"}) {
		t.Fatalf("%+v", cfg)
	}
	cfg, err = sqs.ConfigFromURL("sqs://us-east-1")
	if err != nil || cfg.Region != "us-east-1" || cfg.Account != "" || cfg.QueuePrefix != "" {
		t.Fatalf("%+v, %v", cfg, err)
	}
}

func TestConfigFromURLRefuses(t *testing.T) {
	for u, want := range map[string]string{
		"sqs://us-east-1/?nope=1":                     `unknown parameter "nope"`,
		"sqs://key:S3CRET@us-east-1/":                 "credentials in the URL are not read",
		"sqs://127.0.0.1:4566/":                       "region",
		"sqs://12345.us-east-1/":                      "account",
		"sqs://us-east-1/a/b":                         "slash",
		"sqs://us-east-1/?fifo=maybe":                 "fifo",
		"sqs://us-east-1/?max_size=-1":                "max_size",
		"sqs://us-east-1/?endpoint=ftp://x":           "endpoint",
		"sqs://us-east-1/?endpoint=http://u:S3CRET@x": "endpoint",
		"redis://us-east-1/":                          "scheme",
	} {
		_, err := sqs.ConfigFromURL(u)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ConfigFromURL(%s) = %v, want an error with %q", u, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "S3CRET") {
			t.Errorf("ConfigFromURL(%s) shows the secret: %v", u, err)
		}
	}
}
