package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/internal/testkit/mysqltest"
	_ "github.com/outboxgo/outbox/mysql"
	"github.com/outboxgo/outbox/stores"
)

// testURL returns a mysql:// URL of a database of the test's own, on the
// server of OUTBOX_TEST_MYSQL_DSN, with password pass in place of the
// DSN's own when pass is not empty, and a handle on that database.
func testURL(t *testing.T, pass string) (string, *sql.DB) {
	t.Helper()
	db := mysqltest.Open(t)
	var name string
	if err := db.QueryRow(`SELECT DATABASE()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	cfg, err := gomysql.ParseDSN(testenv.Getenv("OUTBOX_TEST_MYSQL_DSN", mysqltest.DefaultDSN))
	if err != nil {
		t.Fatal(err)
	}
	user := cfg.User
	if pass == "" {
		pass = cfg.Passwd
	}
	if pass != "" {
		user += ":" + pass
	}
	return fmt.Sprintf("mysql://%s@%s/%s", user, cfg.Addr, name), db
}

func TestOpenByURL(t *testing.T) {
	t.Parallel()
	url, db := testURL(t, "")
	ctx := context.Background()
	o := &backend.DatabaseOptions{Schema: "billing", Table: "events", ClaimTimeout: 7 * time.Second}
	d, err := backend.OpenDatabase(ctx, url+"?parseTime=true", o)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Table() != "billing_events" || d.Store().ClaimTimeout() != 7*time.Second {
		t.Fatalf("table %s, claim timeout %v; want billing_events, 7s", d.Table(), d.Store().ClaimTimeout())
	}
	if err := d.CheckSchema(ctx); !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Fatalf("CheckSchema before Migrate = %v, want ErrSchemaMissing", err)
	}
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.CheckSchema(ctx); err != nil {
		t.Fatalf("CheckSchema after Migrate: %v", err)
	}
	if _, err := d.Store().Stats(ctx, stores.StatsParams{Now: time.Now()}); err != nil {
		t.Fatal(err)
	}

	// The tools' Migrate is the outbox table's and the inbox table's, as
	// on every database.
	var tables string
	err = db.QueryRowContext(ctx, `SELECT GROUP_CONCAT(table_name ORDER BY table_name) FROM information_schema.tables
		WHERE table_schema = DATABASE()`).Scan(&tables)
	if err != nil || tables != "billing_events,billing_events_keys,outbox_inbox,outbox_schema_versions" {
		t.Fatalf("tables after Migrate: %s (err %v)", tables, err)
	}
	reg, err := backend.LookupDatabase(url)
	if err != nil {
		t.Fatal(err)
	}
	ddl, err := reg.SchemaSQL(o)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ddl, "`billing_events`") || !strings.Contains(ddl, "`billing_events_keys`") || !strings.Contains(ddl, "`outbox_inbox`") {
		t.Fatalf("SchemaSQL for billing_events:\n%s", ddl)
	}
}

// Every way a URL can be wrong gives one line that says what, and never
// the password.
func TestOpenByURLErrors(t *testing.T) {
	t.Parallel()
	url, _ := testURL(t, "")
	wrongPass, _ := testURL(t, "s3cret")
	ctx := context.Background()
	for _, c := range []struct {
		url  string
		o    *backend.DatabaseOptions
		want []string
	}{
		{"mysql://root:s3cret@127.0.0.1:3306", nil, []string{"--database-url mysql://root:xxxxx@127.0.0.1:3306: no database name"}},
		{"mysql://bob:s3cret@127.0.0.1:3306/x?timeout=1s&parseTime=maybe", nil, []string{"bob:xxxxx@", "parameter parseTime: invalid bool value: maybe"}},
		{"mysql://bob:s3cret@db:port/x", nil, []string{"--database-url", "invalid port"}},
		{wrongPass, nil, []string{"cannot reach MySQL at mysql://root:xxxxx@", "Access denied"}},
		{url + "?no_such_variable=1", nil, []string{"cannot reach MySQL at", "no_such_variable"}},
		{url, &backend.DatabaseOptions{Schema: "x;drop"}, []string{"not a valid SQL identifier"}},
		{url, &backend.DatabaseOptions{ClaimTimeout: -time.Second}, []string{"ClaimTimeout", "negative"}},
	} {
		d, err := backend.OpenDatabase(ctx, c.url, c.o)
		if err == nil {
			_ = d.Close()
			t.Errorf("%s: opened", c.url)
			continue
		}
		msg := err.Error()
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not say %q", c.url, msg, w)
			}
		}
		if strings.Contains(msg, "s3cret") || strings.Contains(msg, "\n") {
			t.Errorf("%s: %q shows the password or is not one line", c.url, msg)
		}
	}
	// Validate checks the form without connecting.
	reg, err := backend.LookupDatabase("mysql://x")
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Validate("mysql://bob:s3cret@127.0.0.1:1/x"); err != nil {
		t.Errorf("Validate of a well-formed URL to nowhere: %v", err)
	}
	if err := reg.Validate("mysql://bob:s3cret@127.0.0.1:1/x?parseTime=maybe"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Validate of a bad parameter: %v", err)
	}
}
