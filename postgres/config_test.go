package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/stores"
)

// Zero means the default; negatives are refused, naming the field.
func TestConfig(t *testing.T) {
	ms, err := postgres.Migrations(nil)
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].Table != "outbox.messages" || ms[len(ms)-1].Table != "outbox.inbox" {
		t.Fatalf("default tables: %+v", ms)
	}
	for _, c := range []struct {
		cfg  postgres.Config
		want string
	}{
		{postgres.Config{ClaimTimeout: -time.Second}, "ClaimTimeout -1s: negative"},
		{postgres.Config{NotifyDebounce: -1}, "NotifyDebounce -1ns: negative"},
		{postgres.Config{Table: "events", InboxTable: "events"}, `Table and InboxTable are both "events"`},
		{postgres.Config{InboxTable: "messages"}, `Table and InboxTable are both "messages"`},
		{postgres.Config{Table: postgres.VersionTable}, "schema-version table"},
	} {
		_, err := postgres.New(nil, &c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "postgres: config: ") {
			t.Errorf("New(%+v) = %v, want %q", c.cfg, err, c.want)
		}
		if _, err := postgres.SchemaSQL(&c.cfg); err == nil {
			t.Errorf("SchemaSQL(%+v) succeeded", c.cfg)
		}
	}
	for _, cfg := range []postgres.Config{{InboxTable: "in-box"}, {InboxTable: strings.Repeat("i", 41)}} {
		if _, err := postgres.NewSQL(nil, &cfg); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("NewSQL(%+v) = %v, want ErrBadIdentifier", cfg, err)
		}
	}
	if _, err := postgres.New(nil, nil); err == nil || !strings.Contains(err.Error(), "nil pool") {
		t.Errorf("New(nil, nil) = %v, want a nil pool refused", err)
	}
	if _, err := postgres.NewSQL(nil, nil); err == nil || !strings.Contains(err.Error(), "nil db") {
		t.Errorf("NewSQL(nil, nil) = %v, want a nil db refused", err)
	}
}
