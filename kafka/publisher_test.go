package kafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/kafka"
	"github.com/outboxgo/outbox/publishers"
)

func TestConfigFromURL(t *testing.T) {
	cfg, err := kafka.ConfigFromURL("kafka://b1:9092,b2?topic_prefix=app.&client_id=relay&delivery_timeout=5s&max_record_bytes=1000&dial_timeout=3s")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Brokers, ","); got != "b1:9092,b2:9092" {
		t.Errorf("brokers %q", got)
	}
	if cfg.TopicPrefix != "app." || cfg.ClientID != "relay" || cfg.DeliveryTimeout != 5*time.Second || cfg.MaxRecordBytes != 1000 ||
		cfg.DialTimeout != 3*time.Second || len(cfg.ClientOptions) != 0 {
		t.Errorf("cfg %+v", cfg)
	}
	if cfg.NoKeyRuns {
		t.Error("NoKeyRuns without key_runs, want key runs on")
	}
	if cfg, err := kafka.ConfigFromURL("kafka://b1?key_runs=false"); err != nil || !cfg.NoKeyRuns {
		t.Errorf("key_runs=false: %v, NoKeyRuns %v", err, cfg != nil && cfg.NoKeyRuns)
	}
	if cfg, err := kafka.ConfigFromURL("kafka://bob:s3cret@b1:9092?sasl=scram-sha-512&tls=true"); err != nil || len(cfg.ClientOptions) != 2 {
		t.Errorf("sasl and TLS: %v, %d client options", err, len(cfg.ClientOptions))
	}
	for _, bad := range []string{
		"amqp://b1", "kafka://", "kafka://bob:s3cret@b1?nope=1", "kafka://bob:s3cret@b1?sasl=gssapi", "kafka://b1?delivery_timeout=x",
		"kafka://bob:s3cret@b1?key_runs=maybe",
	} {
		_, err := kafka.ConfigFromURL(bad)
		if err == nil {
			t.Errorf("%s: no error", bad)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error leaks the password: %v", bad, err)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	if _, err := kafka.NewPublisher(&kafka.PublisherConfig{DeliveryTimeout: -1}); err == nil {
		t.Error("negative DeliveryTimeout accepted")
	}
	for field, c := range map[string]*kafka.PublisherConfig{
		"DeliveryTimeout": {DeliveryTimeout: -1},
		"DialTimeout":     {DialTimeout: -time.Second},
		"MaxRecordBytes":  {MaxRecordBytes: -1},
		"Brokers":         {Brokers: []string{"b1:9092", ""}},
	} {
		if _, err := kafka.NewPublisher(c); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: NewPublisher = %v, want an error naming it", field, err)
		}
	}
	// nil is every default.
	p, err := kafka.NewPublisher(nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
}

// TestUnknownTopicIsUnavailable: a topic that does not exist (and is not
// created automatically) fails as unavailable, not as permanent.
func TestUnknownTopicIsUnavailable(t *testing.T) {
	if realBrokers() != nil {
		t.Skip("the real Kafka may create topics automatically")
	}
	p := newPublisher(t, &kafka.PublisherConfig{Brokers: brokers(t), TopicPrefix: newTopicName(t) + "."})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	errs := p.Publish(ctx, []outbox.Message{{ID: outbox.NewID(), Topic: "missing", Payload: []byte("x")}})
	if !publishers.IsUnavailable(errs[0]) {
		t.Errorf("got %v, want unavailable", errs[0])
	}
}

// TestBrokerDownIsUnavailable: no broker at the address: unavailable.
func TestBrokerDownIsUnavailable(t *testing.T) {
	f := startKfake(t)
	addrs := f.addrs()
	f.stop(t)
	p := newPublisher(t, &kafka.PublisherConfig{Brokers: addrs, DialTimeout: 200 * time.Millisecond})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	errs := p.Publish(ctx, []outbox.Message{{ID: outbox.NewID(), Topic: "t", Payload: []byte("x")}})
	if !publishers.IsUnavailable(errs[0]) || !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Errorf("got %v, want unavailable (deadline)", errs[0])
	}
}
