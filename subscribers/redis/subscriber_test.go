package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/inbox"
	redissub "github.com/outboxgo/outbox/subscribers/redis"
)

func TestConfigChecks(t *testing.T) {
	in := inbox.New[pgx.Tx](nil, nil)
	rdb := goredis.NewClient(&goredis.Options{}) // never used: New fails first
	defer func() { _ = rdb.Close() }()
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	for name, c := range map[string]redissub.Config{
		"no streams":        {Group: "g", DeadLetterStream: "d"},
		"no group":          {Streams: []string{"s"}, DeadLetterStream: "d"},
		"no dead letters":   {Streams: []string{"s"}, Group: "g"},
		"dead is read":      {Streams: []string{"s"}, Group: "g", DeadLetterStream: "s"},
		"negative max":      {Streams: []string{"s"}, Group: "g", DeadLetterStream: "d", MaxDeliveries: -1},
		"backoff > idle":    {Streams: []string{"s"}, Group: "g", DeadLetterStream: "d", ClaimIdle: time.Second, Backoff: redissub.Backoff{Min: time.Second, Max: time.Minute}},
		"backoff min > max": {Streams: []string{"s"}, Group: "g", DeadLetterStream: "d", Backoff: redissub.Backoff{Min: time.Second, Max: time.Millisecond}},
		"concurrency":       {Streams: []string{"s"}, Group: "g", DeadLetterStream: "d", Concurrency: -1},
	} {
		if _, err := redissub.New(rdb, in, nop, c); err == nil {
			t.Errorf("%s: New accepted %+v", name, c)
		}
	}
}
