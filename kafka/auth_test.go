package kafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/kafka"
	"github.com/outboxgo/outbox/publishers"
)

// aclCluster is a kfake cluster with SASL and ACLs: the superuser admin,
// a user with no ACL at all, and one that may only describe topics.
func aclCluster(t *testing.T) []string {
	t.Helper()
	describe := kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "*", Pattern: kmsg.ACLResourcePatternTypeLiteral,
		Operation: kmsg.ACLOperationDescribe, Allow: true}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(1), kfake.SeedTopics(1, "t"),
		kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("PLAIN", "admin", "pw"),
		kfake.User("PLAIN", "noacl", "pw"), kfake.User("PLAIN", "reader", "pw", describe))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func publishOne(t *testing.T, p *kafka.Publisher) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return p.Publish(ctx, []outbox.Message{{ID: outbox.NewID(), Topic: "t", Payload: []byte("x")}})[0]
}

func checkPub(t *testing.T, p *kafka.Publisher) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return p.Check(ctx)
}

// A user the brokers authenticate but whose ACLs refuse the write (or
// the idempotent producer's cluster permission) passes Check — it names
// no topic — and fails every record as Misconfigured, not as an outage.
func TestAuthorizationFailedIsMisconfigured(t *testing.T) {
	b := aclCluster(t)
	for user, want := range map[string]string{"noacl": "TOPIC_AUTHORIZATION_FAILED", "reader": "CLUSTER_AUTHORIZATION_FAILED"} {
		t.Run(user, func(t *testing.T) {
			p := newPublisher(t, &kafka.PublisherConfig{Brokers: b, ClientOptions: []kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: "pw"}.AsMechanism())}})
			defer p.Close()
			if err := checkPub(t, p); err != nil {
				t.Fatalf("Check: %v", err)
			}
			err := publishOne(t, p)
			if !publishers.IsMisconfigured(err) || publishers.IsUnavailable(err) || publishers.IsPermanent(err) || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v, want Misconfigured (%s)", err, want)
			}
		})
	}
	p := newPublisher(t, &kafka.PublisherConfig{Brokers: b, ClientOptions: []kgo.Opt{kgo.SASL(plain.Auth{User: "admin", Pass: "pw"}.AsMechanism())}})
	defer p.Close()
	if err := publishOne(t, p); err != nil {
		t.Fatalf("the superuser: %v", err)
	}
}

// A client without SASL on brokers that require it fails Check as
// Misconfigured, at once.
func TestCheckWithoutSASLIsMisconfigured(t *testing.T) {
	b := aclCluster(t)
	p := newPublisher(t, &kafka.PublisherConfig{Brokers: b})
	defer p.Close()
	if err := checkPub(t, p); !publishers.IsMisconfigured(err) || publishers.IsUnavailable(err) {
		t.Fatalf("Check: got %v, want Misconfigured", err)
	}
}

// Check says Unavailable when no broker answers, and after Close.
func TestCheckUnavailable(t *testing.T) {
	f := startKfake(t)
	addrs := f.addrs()
	p := newPublisher(t, &kafka.PublisherConfig{Brokers: addrs, DialTimeout: 200 * time.Millisecond})
	defer p.Close()
	if err := checkPub(t, p); err != nil {
		t.Fatalf("Check with the broker up: %v", err)
	}
	f.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.Check(ctx); !publishers.IsUnavailable(err) || publishers.IsMisconfigured(err) {
		t.Fatalf("Check with the broker down: got %v, want Unavailable", err)
	}
	_ = p.Close()
	if err := checkPub(t, p); !publishers.IsUnavailable(err) {
		t.Fatalf("Check after Close: got %v, want Unavailable", err)
	}
}

// The password of a kafka:// URL appears in no error of a refused
// publisher.
func TestRefusedHidesPassword(t *testing.T) {
	b := aclCluster(t)
	cfg, err := kafka.ConfigFromURL("kafka://admin:s3cr3t-pw@" + b[0])
	if err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, cfg)
	defer p.Close()
	for _, err := range []error{checkPub(t, p), publishOne(t, p)} {
		if !publishers.IsMisconfigured(err) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("got %v, want Misconfigured without the password", err)
		}
	}
}
