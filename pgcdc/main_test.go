package pgcdc_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// cluster is the package's private PostgreSQL cluster (wal_level=logical);
// clusterErr says why there is none. Each test has a schema, a slot and a
// publication of its own in it.
var (
	cluster    *pgCluster
	clusterErr error
)

func TestMain(m *testing.M) {
	c, stop, err := startCluster()
	cluster, clusterErr = c, err
	code := func() int {
		if stop != nil {
			defer stop()
		}
		return m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
