package sqs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/sqs"
)

func TestSubscriberConfigValidate(t *testing.T) {
	ok := sqs.SubscriberConfig{Queue: "orders", DeadLetterQueue: "dead"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v", ok, err)
	}
	if c := ok.WithDefaults(); c.Topic != "orders" || c.VisibilityTimeout != sqs.DefaultVisibilityTimeout || c.WaitTime != sqs.DefaultWaitTime {
		t.Fatalf("defaults %+v", c)
	}
	if c := (sqs.SubscriberConfig{Queue: "p-orders.fifo", QueuePrefix: "p-"}).WithDefaults(); c.Topic != "orders" {
		t.Fatalf("topic of p-orders.fifo under p-: %q", c.Topic)
	}
	for name, c := range map[string]sqs.SubscriberConfig{
		"Queue is required":           {DeadLetterQueue: "dead"},
		"DeadLetterQueue is required": {Queue: "orders"},
		"is Queue":                    {Queue: "orders", DeadLetterQueue: "orders"},
		"FIFO queue's dead letters":   {Queue: "orders.fifo", DeadLetterQueue: "dead"},
		"not a valid SQS queue name":  {Queue: "orders.placed", DeadLetterQueue: "dead"},
		"VisibilityTimeout":           {Queue: "orders", DeadLetterQueue: "dead", VisibilityTimeout: 1500 * time.Millisecond},
		"WaitTime":                    {Queue: "orders", DeadLetterQueue: "dead", WaitTime: 21 * time.Second},
		"Account":                     {Queue: "orders", DeadLetterQueue: "dead", Account: "42"},
	} {
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Validate(%+v) = %v, want an error naming %q", c, err, name)
		}
	}
}
