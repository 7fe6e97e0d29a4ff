package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/stores"
)

// Both schemes open the database through the registry: the table is
// missing until Migrate, then the store answers.
func TestOpenByURL(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	for _, scheme := range []string{"postgres", "postgresql"} {
		schema := pgtest.Schema(t, pool)
		url := scheme + strings.TrimPrefix(pgtest.URL(), "postgres")
		db, err := backend.OpenDatabase(ctx, url, &backend.DatabaseOptions{Schema: schema, ClaimTimeout: 7 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", scheme, err)
		}
		if got, want := db.Table(), schema+".messages"; got != want {
			t.Errorf("Table() = %q, want %q", got, want)
		}
		if err := db.CheckSchema(ctx); !errors.Is(err, outbox.ErrSchemaMissing) {
			t.Errorf("CheckSchema before Migrate = %v, want ErrSchemaMissing", err)
		}
		if err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := db.CheckSchema(ctx); err != nil {
			t.Errorf("CheckSchema after Migrate = %v", err)
		}
		s := db.Store()
		if s.ClaimTimeout() != 7*time.Second {
			t.Errorf("ClaimTimeout = %v, want the option's 7s", s.ClaimTimeout())
		}
		if _, ok := s.(stores.Listener); !ok {
			t.Errorf("the store %T is no stores.Listener", s)
		}
		if st, err := s.Stats(ctx, stores.StatsParams{Now: time.Now()}); err != nil || len(st) != 0 {
			t.Errorf("Stats = %+v, %v", st, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// The registered SchemaSQL is the package's, for the options' names.
func TestRegisteredSchemaSQL(t *testing.T) {
	d, err := backend.LookupDatabase("postgresql://db/app")
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.SchemaSQL(&backend.DatabaseOptions{Schema: "app", Table: "events"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := postgres.SchemaSQL(&postgres.Config{Schema: "app", Table: "events"})
	if got != want || !strings.Contains(got, `"app"."events"`) {
		t.Fatalf("registered SchemaSQL differs from postgres.SchemaSQL:\n%s", got)
	}
	if _, err := d.SchemaSQL(&backend.DatabaseOptions{Table: "bad-name"}); !errors.Is(err, stores.ErrBadIdentifier) {
		t.Fatalf("SchemaSQL with a bad table = %v, want ErrBadIdentifier", err)
	}
}

// A bad parameter, an unreachable server and bad names each give one clear
// error, and the URL's password is never in it.
func TestOpenByURLErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, url string
		opts      *backend.DatabaseOptions
		want      []string
		is        error
	}{
		{"bad sslmode", "postgres://bob:s3cret@127.0.0.1:5432/test?sslmode=sometimes", nil,
			[]string{"--database-url postgres://bob:xxxxx@127.0.0.1:5432/test?sslmode=sometimes: ", "sslmode"}, nil},
		{"bad pool parameter", "postgres://bob:s3cret@127.0.0.1:5432/test?pool_max_conns=many", nil,
			[]string{"--database-url postgres://bob:xxxxx@127.0.0.1:5432/test", "pool_max_conns"}, nil},
		{"unknown run-time parameter", withParam(strings.Replace(pgtest.URL(), "postgres@", "postgres:s3cret@", 1), "no_such_setting=1"), nil,
			[]string{"cannot reach PostgreSQL at ", "postgres:xxxxx@", "no_such_setting"}, nil},
		{"unreachable", "postgres://bob:s3cret@127.0.0.1:1/app", nil,
			[]string{"cannot reach PostgreSQL at postgres://bob:xxxxx@127.0.0.1:1/app: "}, nil},
		{"bad table", "postgres://bob:s3cret@127.0.0.1:1/app", &backend.DatabaseOptions{Table: "x; DROP TABLE y"},
			[]string{"postgres: table"}, stores.ErrBadIdentifier},
	} {
		db, err := backend.OpenDatabase(ctx, c.url, c.opts)
		if err == nil {
			_ = db.Close()
			t.Errorf("%s: opened", c.name)
			continue
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v, want %v", c.name, err, c.is)
		}
		msg := err.Error()
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error %q does not say %q", c.name, msg, w)
			}
		}
		if strings.Contains(msg, "s3cret") {
			t.Errorf("%s: the password is in the error: %s", c.name, msg)
		}
	}
	// The form is checked without connecting.
	d, err := backend.LookupDatabase("postgres://x")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate("postgres://bob:s3cret@db/app?sslmode=sometimes"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Validate = %v, want an error without the password", err)
	}
	if err := d.Validate("postgres://bob:s3cret@db/app?sslmode=disable"); err != nil {
		t.Fatalf("Validate of a good URL = %v", err)
	}
}

// withParam adds the query parameter kv to url.
func withParam(url, kv string) string {
	if strings.Contains(url, "?") {
		return url + "&" + kv
	}
	return url + "?" + kv
}
