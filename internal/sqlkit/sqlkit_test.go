package sqlkit

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
)

func TestKeyCursorRoundRobin(t *testing.T) {
	var c KeyCursor
	c.Advance("", true, []string{"b", "a", "", "c"})
	if got := c.Get(); got != "c" {
		t.Fatalf("after a full batch from the start: %q, want c", got)
	}
	// A full batch that wrapped around: keys above "m" come first.
	c.Advance("m", true, []string{"x", "z", "a", "b"})
	if got := c.Get(); got != "b" {
		t.Fatalf("after a wrapped batch: %q, want b", got)
	}
	c.Advance("b", false, []string{"c"})
	if got := c.Get(); got != "" {
		t.Fatalf("after a batch that was not full: %q, want the start", got)
	}
}

func TestIDsJSON(t *testing.T) {
	id := uuid.MustParse("0190c0de-0000-7000-8000-000000000001")
	if got, want := IDsJSON([]uuid.UUID{id, id}), `["0190c0de000070008000000000000001","0190c0de000070008000000000000001"]`; got != want {
		t.Fatalf("IDsJSON = %s, want %s", got, want)
	}
	if got := IDsJSON(nil); got != "[]" {
		t.Fatalf("IDsJSON(nil) = %s", got)
	}
}

func TestWrap(t *testing.T) {
	base := errors.New("no such table: x")
	err := Wrap("sqlite", "claim", base, func(err error) bool { return strings.Contains(err.Error(), "no such table") })
	if !errors.Is(err, outbox.ErrSchemaMissing) || !errors.Is(err, base) || !strings.HasPrefix(err.Error(), "sqlite: claim: ") {
		t.Fatalf("Wrap = %v", err)
	}
	if err := Wrap("sqlite", "claim", errors.New("busy"), func(error) bool { return false }); errors.Is(err, outbox.ErrSchemaMissing) {
		t.Fatalf("Wrap marked a plain error: %v", err)
	}
}

func TestLoadMigrations(t *testing.T) {
	fsys := fstest.MapFS{
		"m/001_outbox.up.sql":   {Data: []byte(`CREATE TABLE {{.Table}};`)},
		"m/001_outbox.down.sql": {Data: []byte(`DROP TABLE {{.Table}};`)},
		"m/002_index.up.sql":    {Data: []byte(`CREATE INDEX ON {{.Table}};`)},
		"m/002_index.down.sql":  {Data: []byte(`DROP INDEX;`)},
		"m/README.md":           {Data: []byte(`not a migration`)},
	}
	ms, err := LoadMigrations(fsys, "m", map[string]string{"Table": "t"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Up != "CREATE TABLE t;" || ms[1].Name != "index" || Latest(ms) != 2 {
		t.Fatalf("LoadMigrations = %+v", ms)
	}
	if p := Pending(ms, 1); len(p) != 1 || p[0].Version != 2 {
		t.Fatalf("Pending(1) = %+v", p)
	}
	if p := Pending(ms, 2); p != nil {
		t.Fatalf("Pending(2) = %+v", p)
	}
}

func TestLoadMigrationsRefusesGapsAndHalves(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"gap": {
			"m/001_a.up.sql": {Data: []byte("x")}, "m/001_a.down.sql": {Data: []byte("x")},
			"m/003_c.up.sql": {Data: []byte("x")}, "m/003_c.down.sql": {Data: []byte("x")},
		},
		"no down":     {"m/001_a.up.sql": {Data: []byte("x")}},
		"unknown var": {"m/001_a.up.sql": {Data: []byte("{{.Nope}}")}, "m/001_a.down.sql": {Data: []byte("x")}},
		"empty":       {"m/README.md": {Data: []byte("x")}},
	} {
		if _, err := LoadMigrations(fsys, "m", map[string]string{"Table": "t"}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRunPolicy(t *testing.T) {
	if got := HeadLimit(1000, 1, true); got != 1000 {
		t.Errorf("HeadLimit heads only: %d", got)
	}
	if got := HeadLimit(1000, 1000, false); got != 250 {
		t.Errorf("HeadLimit with runs: %d", got)
	}
	for _, c := range []struct{ limit, want int }{{1000, 10}, {10000, 100}, {100, 10}, {20, 5}} {
		if got := HeadLimit(c.limit, 1000, true); got != c.want {
			t.Errorf("HeadLimit of %d with pipelined runs: %d, want %d", c.limit, got, c.want)
		}
	}
	if got := HeadLimit(3, 5, true); got != 1 {
		t.Errorf("HeadLimit of a tiny batch: %d", got)
	}
	if got := UnkeyedRoom(9, true); got != 5 {
		t.Errorf("UnkeyedRoom with runs: %d", got)
	}
	if got := UnkeyedRoom(9, false); got != 9 {
		t.Errorf("UnkeyedRoom without runs: %d", got)
	}
	if got := RunLength(990, 10, 1000); got != 99 {
		t.Errorf("RunLength even share: %d", got)
	}
	if got := RunLength(7, 2, 3); got != 2 {
		t.Errorf("RunLength capped by perKey: %d", got)
	}
}
