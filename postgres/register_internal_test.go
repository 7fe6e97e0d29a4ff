package postgres

import "testing"

// A pool opened from a URL has room for two claims per relay worker and
// the LISTEN session, unless the URL sets its size.
func TestURLPoolSize(t *testing.T) {
	for _, c := range []struct {
		url  string
		want int32
	}{
		{"postgres://u@h/db", minPoolConns},
		{"postgres://u@h/db?pool_max_conns=3", 3},
		{"postgres://u@h/db?pool_max_conns=20", 20},
		{"host=h dbname=db pool_max_conns=2", 2},
	} {
		pcfg, err := parseURL(c.url)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		if pcfg.MaxConns != c.want {
			t.Errorf("%s: MaxConns = %d, want %d", c.url, pcfg.MaxConns, c.want)
		}
	}
}
