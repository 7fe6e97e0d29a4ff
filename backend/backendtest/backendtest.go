// Package backendtest is the conformance suite of the registry contract
// (package backend): every backend package runs Broker or Database from a
// test, against its real service, and is done when it passes. It holds
// each backend to what a user of `outbox relay` and `outbox migrate` sees:
// the backend is registered under its URL, says what it reads, refuses an
// unknown parameter by name, never shows a secret from its URL in an
// error, and — for a database — migrates to the latest version, says so,
// and migrates again as a no-op.
//
// The cases come from bugs: a secret in the query of the second URL of a
// list was printed (redact), and a flag's override dropped the second URL
// of a list (ApplyParams).
package backendtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/redact"
)

// Secret is the password and token the cases put in URLs; no error may
// contain it.
const Secret = "S3CRETbackendtest"

// unknownParam is a parameter no backend reads.
const unknownParam = "outbox_no_such_param"

// BrokerHarness adapts one broker to the suite.
type BrokerHarness struct {
	// URL is a URL of the real broker, without parameters, that Open
	// accepts. Required.
	URL string
	// Unreachable is a URL of this scheme where nothing listens, with
	// Secret as its password or token. Required.
	Unreachable string
}

// Broker runs the suite for the broker of h.URL's scheme.
func Broker(t *testing.T, h BrokerHarness) {
	t.Run("Registered", func(t *testing.T) {
		b, err := backend.LookupBroker(h.URL)
		if err != nil {
			t.Fatal(err)
		}
		checkDescribed(t, b.Name, b.Schemes, b.Forms, b.Params, backend.Scheme(h.URL))
	})
	t.Run("Opens", func(t *testing.T) {
		p, err := backend.OpenBroker(ctx(t), h.URL, nil)
		if err != nil {
			t.Fatalf("OpenBroker(%s): %v", h.URL, err)
		}
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	t.Run("UnknownParameter", func(t *testing.T) {
		u := join(h.URL, unknownParam+"=1")
		p, err := backend.OpenBroker(ctx(t), u, nil)
		if err == nil {
			_ = p.Close()
			t.Fatalf("OpenBroker(%s) accepted a parameter no broker reads", u)
		}
		if !strings.Contains(err.Error(), unknownParam) {
			t.Errorf("OpenBroker(%s) = %v, want an error naming %s", u, err, unknownParam)
		}
	})
	t.Run("SecretsNeverShown", func(t *testing.T) {
		for _, u := range secretURLs(h.URL, h.Unreachable) {
			// As tools show the URL: the relay's start line, its errors.
			if shown := redact.URL(u); strings.Contains(shown, Secret) {
				t.Errorf("redact.URL(%q) = %q: the secret shows", u, shown)
			}
			p, err := backend.OpenBroker(ctx(t), u, nil)
			if err == nil {
				_ = p.Close()
				continue // opened lazily: nothing printed
			}
			if strings.Contains(err.Error(), Secret) {
				t.Errorf("OpenBroker(%s) shows the secret: %v", u, err)
			}
		}
	})
	t.Run("FlagsOverrideEveryURLOfAList", func(t *testing.T) {
		b, _ := backend.LookupBroker(h.URL)
		for _, p := range b.Params {
			if !p.Flag {
				continue
			}
			// A list whose first URL has the parameter: the flag's value
			// replaces it and no URL of the list is lost.
			list := join(h.URL, p.Name+"=first") + "," + h.URL
			got, err := backend.ApplyParams(list, map[string]string{p.Name: "flag"})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Count(got, "://") != 2 || strings.Contains(got, "first") || !strings.Contains(got, p.Name+"=flag") {
				t.Errorf("ApplyParams(%s, %s=flag) = %s", list, p.Name, got)
			}
		}
	})
}

// DatabaseHarness adapts one database to the suite.
type DatabaseHarness struct {
	// New returns a URL of the real database and options that name tables
	// of this test's own (cleaned up with t). Required.
	New func(t *testing.T) (url string, o *backend.DatabaseOptions)
	// Unreachable is a URL of this scheme that cannot be opened, with
	// Secret as its password where the scheme has one. Required.
	Unreachable string
}

// Database runs the suite for the database of h.New's scheme.
func Database(t *testing.T, h DatabaseHarness) {
	t.Run("Registered", func(t *testing.T) {
		u, _ := h.New(t)
		d, err := backend.LookupDatabase(u)
		if err != nil {
			t.Fatal(err)
		}
		if d.SchemaSQL == nil {
			t.Error("no SchemaSQL: outbox migrate --print has nothing to print")
		}
		checkDescribed(t, d.Name, d.Schemes, d.Forms, d.Params, backend.Scheme(u))
	})
	t.Run("MigrateReportsVersions", func(t *testing.T) {
		u, o := h.New(t)
		o.Create = true
		db, err := backend.OpenDatabase(ctx(t), u, o)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.CheckSchema(ctx(t)); !errors.Is(err, outbox.ErrSchemaMissing) {
			t.Fatalf("CheckSchema before Migrate = %v, want ErrSchemaMissing", err)
		}
		for range 2 { // the second is a no-op
			if err := db.Migrate(ctx(t)); err != nil {
				t.Fatal(err)
			}
			vs, err := db.SchemaVersions(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) < 2 {
				t.Fatalf("SchemaVersions = %+v, want the outbox and the inbox table", vs)
			}
			for _, v := range vs {
				if v.Version < 1 || v.Version != v.Latest {
					t.Errorf("after Migrate %s is at version %d of %d", v.Table, v.Version, v.Latest)
				}
			}
		}
		if err := db.CheckSchema(ctx(t)); err != nil {
			t.Fatalf("CheckSchema after Migrate: %v", err)
		}
		if db.Table() == "" || db.Store() == nil {
			t.Fatalf("Table %q, Store %v", db.Table(), db.Store())
		}
	})
	t.Run("SecretsNeverShown", func(t *testing.T) {
		if shown := redact.URL(h.Unreachable); strings.Contains(shown, Secret) {
			t.Errorf("redact.URL(%q) = %q: the secret shows", h.Unreachable, shown)
		}
		db, err := backend.OpenDatabase(ctx(t), h.Unreachable, nil)
		if err == nil {
			_ = db.Close()
			t.Fatalf("OpenDatabase(%s) succeeded", h.Unreachable)
		}
		if strings.Contains(err.Error(), Secret) {
			t.Errorf("OpenDatabase(%s) shows the secret: %v", h.Unreachable, err)
		}
	})
}

// checkDescribed: the backend says what it is and what it reads.
func checkDescribed(t *testing.T, name string, schemes, forms []string, params []backend.Param, scheme string) {
	t.Helper()
	if name == "" || len(forms) == 0 {
		t.Errorf("Name %q, Forms %q: --help would not say what it is", name, forms)
	}
	found := false
	for _, s := range schemes {
		found = found || s == scheme
	}
	if !found {
		t.Errorf("Schemes %q lack %q", schemes, scheme)
	}
	for _, p := range params {
		if p.Name == "" || p.Usage == "" {
			t.Errorf("parameter %+v: a name and a usage, please", p)
		}
	}
}

// secretURLs are URLs with Secret where an error might echo it: the
// unreachable one; a list whose second URL carries it in a secret-named
// parameter next to an unknown one; a user-info with it and a bad port.
func secretURLs(good, unreachable string) []string {
	scheme := backend.Scheme(good)
	return []string{
		unreachable,
		good + "," + join(scheme+"://127.0.0.1:1", "password="+Secret+"&token="+Secret+"&"+unknownParam+"=1"),
		good + ",?token=" + Secret,
		scheme + "://user:" + Secret + "@127.0.0.1:notaport",
	}
}

// join adds query to u.
func join(u, query string) string {
	if strings.Contains(u, "?") {
		return u + "&" + query
	}
	return u + "?" + query
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}
