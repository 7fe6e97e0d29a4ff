package sqlite_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/sqlite"
	"github.com/outboxgo/outbox/stores"
)

// Zero means the default; what no default can mend is refused, naming
// the field.
func TestConfig(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "x.db"))
	d, err := sqlite.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := d.Config()
	if c.Table != sqlite.DefaultTable || c.InboxTable != sqlite.DefaultInboxTable ||
		c.ClaimTimeout != sqlite.DefaultClaimTimeout || c.ListenInterval != sqlite.DefaultListenInterval ||
		c.Clock == nil || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
	if d.Store().Config() != c || d.Inbox().Config() != c || d.Store().ClaimTimeout() != sqlite.DefaultClaimTimeout {
		t.Fatal("the store and the inbox do not share the DB's configuration")
	}
	for _, bad := range []struct {
		cfg  sqlite.Config
		want string
	}{
		{sqlite.Config{ClaimTimeout: -time.Second}, "ClaimTimeout"},
		{sqlite.Config{ListenInterval: -time.Millisecond}, "ListenInterval"},
		{sqlite.Config{Table: "events", InboxTable: "events"}, "InboxTable"},
		{sqlite.Config{InboxTable: sqlite.DefaultTable}, "InboxTable"},
		{sqlite.Config{Table: sqlite.VersionTable}, sqlite.VersionTable},
	} {
		if _, err := sqlite.New(db, &bad.cfg); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", bad.cfg, err, bad.want)
		}
		if _, err := sqlite.SchemaSQL(&bad.cfg); err == nil {
			t.Errorf("SchemaSQL(%+v) succeeded", bad.cfg)
		}
	}
	if _, err := sqlite.New(nil, nil); err == nil || errors.Is(err, stores.ErrBadIdentifier) {
		t.Errorf("New(nil, nil) = %v, want an error about the nil handle", err)
	}
}
