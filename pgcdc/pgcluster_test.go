package pgcdc_test

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

// startCluster initdb's and starts a private cluster with wal_level=logical;
// stop stops and removes it. It returns an error (the caller decides) when
// that is not possible here.
func startCluster() (*pgCluster, func(), error) {
	bin, err := pgBinDir()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "outbox-pgcdc-pg-")
	if err != nil {
		return nil, nil, err
	}
	c := &pgCluster{bin: bin, dir: dir, data: filepath.Join(dir, "data")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, nil, fmt.Errorf("running as root and no postgres user to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, nil, err
		}
		c.runAs = "postgres"
	}
	port, err := freePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	c.port = port
	if out, err := c.run("initdb", "-D", c.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	c.opts = fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200 -c wal_level=logical -c max_replication_slots=64 -c max_wal_senders=64 -c wal_sender_timeout=60s", port, dir)
	if out, err := c.run("pg_ctl", "-D", c.data, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "-o", c.opts, "start"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("pg_ctl start: %v: %s", err, out)
	}
	stop := func() {
		_, _ = c.run("pg_ctl", "-D", c.data, "-w", "-t", "60", "-m", "immediate", "stop")
		_ = os.RemoveAll(dir)
	}
	return c, stop, nil
}

// url is the cluster's connection URL; appName names the sessions.
func (c *pgCluster) url(appName string) string {
	u := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	if appName != "" {
		u += "&application_name=" + appName
	}
	return u
}

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
