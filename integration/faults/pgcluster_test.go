package faults

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// pgCluster is a private PostgreSQL cluster under a temporary directory, on
// a free port of 127.0.0.1, that the test may restart without touching the
// shared server. PostgreSQL refuses to run as root: when the test runs as
// root, the cluster runs as the postgres user.
type pgCluster struct {
	bin, dir, data string
	port           int
	runAs          string // "" or the user to run the server as
	opts           string // the server's options (port, socket directory, settings)
	logf           func(format string, args ...any)
	// hardStops counts the restarts whose fast shutdown did not finish
	// and that stopped the server immediately instead.
	hardStops atomic.Int64
}

// pgBinDir finds PostgreSQL's server binaries: OUTBOX_PG_BIN, or the
// newest /usr/lib/postgresql/*/bin holding initdb.
func pgBinDir() (string, error) {
	if d := os.Getenv("OUTBOX_PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server binaries (initdb) found; set OUTBOX_PG_BIN")
}

// startCluster initdb's and starts a private cluster, stopped and removed
// at cleanup. It returns an error (the caller decides) when that is not
// possible here.
func startCluster(t testing.TB) (*pgCluster, error) {
	t.Helper()
	bin, err := pgBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "outbox-faults-pg-")
	if err != nil {
		return nil, err
	}
	c := &pgCluster{bin: bin, dir: dir, data: filepath.Join(dir, "data"), logf: t.Logf}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root and no postgres user to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		c.runAs = "postgres"
	}
	port, err := freePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c.port = port
	if out, err := c.run("initdb", "-D", c.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	c.opts = fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200", port, dir)
	if err := c.start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	t.Cleanup(func() {
		_, _ = c.run("pg_ctl", "-D", c.data, "-w", "-t", "60", "-m", "immediate", "stop")
		_ = os.RemoveAll(dir)
	})
	return c, nil
}

// url is the cluster's connection URL; appName names the sessions.
func (c *pgCluster) url(appName string) string {
	u := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	if appName != "" {
		u += "&application_name=" + appName
	}
	return u
}

// restart stops the cluster (fast: sessions are terminated, in-flight
// transactions roll back) and starts it again on the same port.
//
// A fast shutdown waits for every walsender to have its client confirm the
// WAL it was sent. A CDC relay that cannot (its broker down, a key
// blocked) lets go of its stream once it sees the server shutting down
// (pgcdc's TestFastShutdownWhileStuck holds that); should a shutdown still
// not finish in fastStopWait, the server is stopped the hard way, as a
// crash would (crash recovery at the start; nothing committed is lost),
// the log says so, and the run goes on.
func (c *pgCluster) restart() error {
	if _, err := c.run("pg_ctl", "-D", c.data, "-w", "-t", strconv.Itoa(int(fastStopWait.Seconds())), "-m", "fast", "stop"); err != nil {
		c.logf("the fast shutdown did not finish in %v; stopping immediately", fastStopWait)
		c.hardStops.Add(1)
		if out, err := c.run("pg_ctl", "-D", c.data, "-w", "-t", "60", "-m", "immediate", "stop"); err != nil {
			return fmt.Errorf("pg_ctl stop -m immediate: %v: %s", err, out)
		}
	}
	return c.start()
}

// start starts the stopped cluster.
func (c *pgCluster) start() error {
	if out, err := c.run("pg_ctl", "-D", c.data, "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "60", "-o", c.opts, "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %v: %s", err, out)
	}
	return nil
}

// fastStopWait is how long restart waits for a fast shutdown.
const fastStopWait = 20 * time.Second

// run runs one of the cluster's binaries, as c.runAs when set.
func (c *pgCluster) run(name string, args ...string) (string, error) {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.runAs != "" {
		cmd = exec.Command("runuser", append([]string{"-u", c.runAs, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = c.dir
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
