package mqtt_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgo/outbox/internal/testenv"
)

// Users of a private broker; each password is the name + "-pw".
const (
	userAdmin   = "admin"   // may read and write every topic
	userLimited = "limited" // may read everything, write only under allowed/
)

// privateBroker is a mosquitto of one test's own, on a free port of
// 127.0.0.1, with allow_anonymous false, a password file and an ACL;
// killed at cleanup. The shared broker is never touched.
type privateBroker struct {
	addr string
	log  *bytes.Buffer
}

// startPrivateBroker starts a private mosquitto with extra lines of
// configuration, or ends the test (testenv.Unreachable) where mosquitto
// cannot run.
func startPrivateBroker(t testing.TB, extra ...string) *privateBroker {
	t.Helper()
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		testenv.Unreachable(t, "mosquitto (for a private broker)", err)
	}
	passwd, err := exec.LookPath("mosquitto_passwd")
	if err != nil {
		testenv.Unreachable(t, "mosquitto_passwd (for a private broker)", err)
	}
	dir := t.TempDir()
	pw := filepath.Join(dir, "passwords")
	for i, u := range []string{userAdmin, userLimited} {
		args := []string{"-b", pw, u, u + "-pw"}
		if i == 0 {
			args = append([]string{"-c"}, args...)
		}
		if out, err := exec.Command(passwd, args...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_passwd: %v: %s", err, out)
		}
	}
	acl := filepath.Join(dir, "acl")
	writeFile(t, acl, "user "+userAdmin+"\ntopic readwrite #\n\nuser "+userLimited+"\ntopic read #\ntopic write allowed/#\n")
	port := freePort(t)
	lines := []string{
		fmt.Sprintf("listener %d 127.0.0.1", port),
		"allow_anonymous false",
		"password_file " + pw,
		"acl_file " + acl,
		"persistence false",
		"log_dest stderr",
	}
	if os.Geteuid() == 0 {
		lines = append(lines, "user root") // else mosquitto drops to a user that cannot read t.TempDir()
	}
	conf := filepath.Join(dir, "mosquitto.conf")
	writeFile(t, conf, strings.Join(append(lines, extra...), "\n")+"\n")
	b := &privateBroker{addr: fmt.Sprintf("127.0.0.1:%d", port), log: &bytes.Buffer{}}
	cmd := exec.Command(bin, "-c", conf)
	var mu sync.Mutex
	cmd.Stdout, cmd.Stderr = lockedWriter{&mu, b.log}, lockedWriter{&mu, b.log}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mosquitto: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			mu.Lock()
			t.Logf("private mosquitto's log:\n%s", b.log)
			mu.Unlock()
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err == nil {
			_ = c.Close()
			return b
		}
		select {
		case <-exited:
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("mosquitto exited at start: %s", b.log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("private mosquitto does not accept connections on %s: %v", b.addr, err)
		}
	}
}

// url is the broker's mqtt:// URL as user (with its password; "" for
// none) and, when pw is set, that password instead.
func (b *privateBroker) url(user, pw string) string {
	switch {
	case user == "":
		return "mqtt://" + b.addr
	case pw == "":
		pw = user + "-pw"
	}
	return "mqtt://" + user + ":" + pw + "@" + b.addr
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// freePort is a TCP port of 127.0.0.1 nothing listened on a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
