package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/inbox"
	kafkasub "github.com/outboxgo/outbox/kafka/kafkasub"
)

func TestConfigChecks(t *testing.T) {
	in := inbox.New[pgx.Tx](nil, nil)
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	for name, c := range map[string]kafkasub.Config{
		"no topics":         {Group: "g", DeadLetterTopic: "d"},
		"no group":          {Topics: []string{"t"}, DeadLetterTopic: "d"},
		"no dead letters":   {Topics: []string{"t"}, Group: "g"},
		"dead is read":      {Topics: []string{"t"}, Group: "g", DeadLetterTopic: "t"},
		"negative max":      {Topics: []string{"t"}, Group: "g", DeadLetterTopic: "d", MaxDeliveries: -1},
		"backoff min > max": {Topics: []string{"t"}, Group: "g", DeadLetterTopic: "d", Backoff: kafkasub.Backoff{Min: time.Second, Max: time.Millisecond}},
	} {
		if _, err := kafkasub.New(in, nop, c); err == nil {
			t.Errorf("%s: New accepted %+v", name, c)
		}
	}
}
