package sqlite_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/sqlite"
	"github.com/outboxgo/outbox/stores"
)

// The sqlite: scheme opens a file through the registry: only with Create
// does it make one; migrated, its tables are there by the options' names.
func TestRegisteredOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "app.db")
	url := "sqlite://" + path
	if _, err := backend.OpenDatabase(ctx, url, nil); err == nil ||
		err.Error() != "SQLite database "+path+" does not exist: run `outbox migrate` to create it" {
		t.Fatalf("open a missing file: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("opening a missing file without Create made %v", entries)
	}
	o := &backend.DatabaseOptions{Schema: "billing", Table: "events", ClaimTimeout: 7 * time.Second, Create: true}
	d, err := backend.OpenDatabase(ctx, url, o)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Table() != "billing_events" {
		t.Errorf("Table() = %q, want billing_events", d.Table())
	}
	if got := d.Store().ClaimTimeout(); got != 7*time.Second {
		t.Errorf("ClaimTimeout = %v, want the options' 7s", got)
	}
	if err := d.CheckSchema(ctx); !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Fatalf("CheckSchema before Migrate: %v, want ErrSchemaMissing", err)
	}
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.CheckSchema(ctx); err != nil {
		t.Fatalf("CheckSchema after Migrate: %v", err)
	}
	db := open(t, path)
	var tables []string
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"billing_events", "billing_inbox", sqlite.VersionTable}; !slices.Equal(tables, want) {
		t.Fatalf("after Migrate through the registry, tables %v, want %v", tables, want)
	}
	if _, err := d.Store().Claim(ctx, stores.ClaimParams{Limit: 1, Now: time.Now()}); err != nil {
		t.Fatalf("Claim: %v", err)
	}

	// Without ClaimTimeout, the store's default; without Create, the file
	// now exists.
	d2, err := backend.OpenDatabase(ctx, "sqlite:"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if got := d2.Store().ClaimTimeout(); got != sqlite.DefaultClaimTimeout || d2.Table() != "outbox_messages" {
		t.Errorf("defaults: ClaimTimeout %v, table %s", got, d2.Table())
	}
}

// Every documented URL form names the file it says.
func TestRegisteredURLForms(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("rel", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ url, file string }{
		{"sqlite://" + dir + "/abs3.db", dir + "/abs3.db"},
		{"sqlite:" + dir + "/abs1.db", dir + "/abs1.db"},
		{"sqlite://rel/path.db", "rel/path.db"},
		{"sqlite:rel.db", "rel.db"},
		{"sqlite:with%20space.db", "with space.db"},
	} {
		d, err := backend.OpenDatabase(context.Background(), c.url, &backend.DatabaseOptions{Create: true})
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		_ = d.Close()
		if _, err := os.Stat(c.file); err != nil {
			t.Errorf("%s did not open %s: %v", c.url, c.file, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "sqlite:*")); len(left) > 0 {
		t.Errorf("files named after the URL: %v", left)
	}
	db, err := backend.LookupDatabase("sqlite:x.db")
	if err != nil {
		t.Fatal(err)
	}
	if db.Name != "SQLite" || len(db.Forms) == 0 || db.Validate == nil || db.SchemaSQL == nil {
		t.Fatalf("registered as %+v", db)
	}
}

// A bad URL gives one error that says what is wrong, before anything is
// opened or created; a password in the URL appears in none.
func TestRegisteredBadURLs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const secret = "s3cr3t"
	for _, c := range []struct{ url, want string }{
		{"sqlite:" + dir + "/x.db?mode=ro", "SQLite URLs take no parameters"},
		{"sqlite:" + dir + "/x.db?password=" + secret, "SQLite URLs take no parameters"},
		{"sqlite:" + dir + "/x.db#token=" + secret, "SQLite URLs take no parameters"},
		{"sqlite://user:" + secret + "@host" + dir + "/x.db", "SQLite URLs take no user or password"},
		{"sqlite://user:" + secret + "@/x.db", "SQLite URLs take no user or password"},
		{"sqlite://", "no file"},
		{"sqlite:" + dir + "/", "no file"},
		{"sqlite:%zz.db", "invalid URL escape"},
		{"sqlite:" + dir, "is a directory"},
	} {
		for _, create := range []bool{false, true} {
			_, err := backend.OpenDatabase(ctx, c.url, &backend.DatabaseOptions{Create: create})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s (create %v): %v, want %q", c.url, create, err, c.want)
				continue
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the error shows the secret: %v", c.url, err)
			}
			if strings.Count(err.Error(), c.want) != 1 {
				t.Errorf("%s: %v says it more than once", c.url, err)
			}
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("bad URLs created %v", entries)
	}
	db, err := backend.LookupDatabase("sqlite:x.db")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Validate("sqlite:x.db?cache=shared"); err == nil || !strings.Contains(err.Error(), "take no parameters") {
		t.Errorf("Validate with a parameter: %v", err)
	}
	if err := db.Validate("sqlite://rel/path.db"); err != nil {
		t.Errorf("Validate of a good URL: %v", err)
	}
}

// Bad names in the options are refused before the file is touched, and
// SchemaSQL renders the options' names.
func TestRegisteredNames(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.db")
	_, err := backend.OpenDatabase(context.Background(), "sqlite:"+path,
		&backend.DatabaseOptions{Table: "x; DROP TABLE y", Create: true})
	if !errors.Is(err, stores.ErrBadIdentifier) {
		t.Fatalf("bad table: %v, want ErrBadIdentifier", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused open created %s: %v", path, err)
	}
	db, err := backend.LookupDatabase("sqlite:x.db")
	if err != nil {
		t.Fatal(err)
	}
	ddl, err := db.SchemaSQL(&backend.DatabaseOptions{Schema: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ddl, `"billing_messages"`) || !strings.Contains(ddl, `"billing_inbox"`) {
		t.Fatalf("SchemaSQL for schema billing:\n%s", ddl)
	}
	if def, _ := db.SchemaSQL(nil); def != mustSchemaSQL(t) {
		t.Fatal("SchemaSQL with no options is not sqlite.SchemaSQL(nil)")
	}
}

func mustSchemaSQL(t *testing.T) string {
	t.Helper()
	s, err := sqlite.SchemaSQL(nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
