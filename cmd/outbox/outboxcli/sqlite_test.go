package outboxcli_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every documented SQLite URL form names the file it says, and migrate
// creates it there — not a file named after the URL.
func TestSQLiteURLForms(t *testing.T) {
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
		code, out, stderr := run(t, context.Background(), "migrate", "--database-url", c.url)
		if code != 0 || !strings.Contains(out, "outbox_messages is ready") {
			t.Fatalf("migrate %s: exit %d\n%s%s", c.url, code, out, stderr)
		}
		if _, err := os.Stat(c.file); err != nil {
			t.Errorf("migrate %s did not create %s: %v", c.url, c.file, err)
		}
		code, out, stderr = run(t, context.Background(), "status", "--database-url", c.url)
		if code != 0 || !regexpMatch(out, `(?m)^\(all\)\s+0\s`) {
			t.Errorf("status %s: exit %d\n%s%s", c.url, code, out, stderr)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, "sqlite:*"))
	if len(left) > 0 {
		t.Errorf("files named after the URL: %v", left)
	}
	failsWith(t, []string{"status", "--database-url", "sqlite:rel.db?mode=ro"}, "SQLite URLs take no parameters")
	failsWith(t, []string{"status", "--database-url", "sqlite://"}, "no file")
	failsWith(t, []string{"status", "--database-url", "sqlite:" + dir + "/"}, "no file")
}

// Only migrate creates a SQLite database: every other command, on a path
// where there is none, fails naming the path and leaves nothing behind.
func TestSQLiteReadOnlyCommandsCreateNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "missing.db")
	url := "sqlite://" + path
	id := "01a2315b-56b8-7cb8-95f2-01c9b8497ea1"
	for _, args := range [][]string{
		{"status"}, {"status", "--json"}, {"dead"}, {"dead", "list"}, {"dead", "show", id}, {"dead", "retry", "--all"}, {"dead", "retry", id},
		{"dead", "discard", id}, {"dead-letter", id}, {"purge", "--dead-older-than", "1h"},
		{"replay", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02T00:00:00Z"},
		{"relay", "--broker-url", "nats://127.0.0.1:1"},
	} {
		failsWith(t, append(args, "--database-url", url), "SQLite database "+path+" does not exist", "outbox migrate")
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 0 {
			t.Fatalf("%v created %v", args, entries)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s exists: %v", path, err)
	}
}
