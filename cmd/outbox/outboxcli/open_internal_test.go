package outboxcli

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/outboxgo/outbox/sqlite"
)

// --claim-timeout reaches the store's Config.ClaimTimeout, on every store.
func TestClaimTimeoutMapped(t *testing.T) {
	g := &globals{schema: "outbox", table: "messages", claimTimeout: 7 * time.Second, stdout: io.Discard, stderr: io.Discard}
	if o := g.databaseOptions(existing); o.ClaimTimeout != 7*time.Second || o.Create {
		t.Fatalf("options: %+v", o)
	}
	path := filepath.Join(t.TempDir(), "app.db")
	g.databaseURL = "sqlite:" + path
	d, err := g.openDB(context.Background(), create)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	if got := d.store.ClaimTimeout(); got != 7*time.Second {
		t.Fatalf("store's ClaimTimeout %v, want 7s", got)
	}
	g.claimTimeout = 0
	d2, err := g.openDB(context.Background(), existing)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.close()
	if got := d2.store.ClaimTimeout(); got != sqlite.DefaultClaimTimeout {
		t.Fatalf("store's ClaimTimeout %v without the flag, want the default", got)
	}
}
