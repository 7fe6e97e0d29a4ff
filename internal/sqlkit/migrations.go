package sqlkit

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"text/template"
)

// Migration is one numbered step of a schema: Up brings the schema from
// Version-1 to Version, Down takes it back.
type Migration struct {
	Version  int
	Name     string
	Up, Down string
}

var migrationFile = regexp.MustCompile(`^(\d+)_([a-z0-9_]+)\.(up|down)\.sql$`)

// LoadMigrations reads the migrations in dir of fsys, named
// NNN_name.up.sql and NNN_name.down.sql, and renders each as a text/template
// with vars (the validated schema and table names). Versions must run 1, 2,
// 3, … without a gap, each with both files.
func LoadMigrations(fsys fs.FS, dir string, vars any) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	byVersion := map[int]*Migration{}
	for _, e := range entries {
		m := migrationFile.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		v, _ := strconv.Atoi(m[1])
		raw, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
		t, err := template.New(e.Name()).Option("missingkey=error").Parse(string(raw))
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, vars); err != nil {
			return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		mg := byVersion[v]
		if mg == nil {
			mg = &Migration{Version: v, Name: m[2]}
			byVersion[v] = mg
		}
		if mg.Name != m[2] {
			return nil, fmt.Errorf("migration %d has two names: %s and %s", v, mg.Name, m[2])
		}
		if m[3] == "up" {
			mg.Up = buf.String()
		} else {
			mg.Down = buf.String()
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range out {
		switch {
		case m.Version != i+1:
			return nil, fmt.Errorf("migrations: version %d missing (found %d)", i+1, m.Version)
		case m.Up == "" || m.Down == "":
			return nil, fmt.Errorf("migration %d_%s: needs both an .up.sql and a .down.sql file", m.Version, m.Name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("migrations: none in %s", dir)
	}
	return out, nil
}

// Pending returns the migrations after version current, in order.
func Pending(ms []Migration, current int) []Migration {
	for i, m := range ms {
		if m.Version > current {
			return ms[i:]
		}
	}
	return nil
}

// Latest returns the highest version of ms (0 for none).
func Latest(ms []Migration) int {
	if len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}
