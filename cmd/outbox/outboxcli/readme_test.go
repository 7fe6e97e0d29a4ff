package outboxcli_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/internal/logtest"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/cmd/outbox/outboxcli"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/sqlite"
)

// readmeRelayCommands are the `outbox relay` commands of README.md's sh
// blocks that go to NATS (nats:// or the embedded broker), but the CDC
// relay's, split into arguments as a shell would, comments dropped.
func readmeRelayCommands(t *testing.T) [][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds [][]string
	inSh := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "```"):
			inSh = line == "```sh" || line == "```bash" || (inSh && line != "```")
			continue
		case !inSh || !strings.HasPrefix(line, "outbox relay "):
			continue
		}
		args, err := shellWords(line)
		if err != nil {
			t.Fatalf("README: %q: %v", line, err)
		}
		broker := flagValue(args, "--broker-url")
		if flagValue(args, "--mode") == "cdc" {
			// It needs PostgreSQL with wal_level=logical, which the shared
			// server is not: pgcdc's tests run it on a cluster of their own.
			continue
		}
		if broker == "" || strings.HasPrefix(broker, "nats://") {
			cmds = append(cmds, args[1:]) // without "outbox"
		}
	}
	if len(cmds) == 0 {
		t.Fatal("README.md shows no `outbox relay` command to NATS")
	}
	return cmds
}

// shellWords splits a command line as sh does for the forms the README
// uses: spaces, 'single' and "double" quotes, and # comments.
func shellWords(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 {
				return nil, errors.New("unterminated quote")
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			i = len(line)
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// withFlag returns args with flag name's value replaced by v.
func withFlag(args []string, name, v string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if a == name && i+1 < len(out) {
			out[i+1] = v
			return out
		}
	}
	return append(out, name, v)
}

// TestREADMERelayCommands runs the README's relay commands as written —
// only the database is the test's own — against the shared nats-server
// and the embedded one, and checks that an event enqueued arrives on the
// stream the command names (or the embedded broker's OUTBOX), on subject
// outbox.<topic>.
func TestREADMERelayCommands(t *testing.T) {
	cmds := readmeRelayCommands(t)
	var shared, embedded int
	for i, args := range cmds {
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			dbURL, topic := readmeDB(t)
			args := withFlag(args, "--database-url", dbURL)
			if broker := flagValue(args, "--broker-url"); broker != "" {
				shared++
				runSharedREADME(t, args, topic)
			} else {
				embedded++
				runEmbeddedREADME(t, args, topic)
			}
		})
	}
	if shared == 0 || embedded == 0 {
		t.Errorf("README.md shows %d relay commands to a NATS server and %d to the embedded one; want both kinds", shared, embedded)
	}
}

// readmeDB migrates a SQLite outbox of the test's own and enqueues one
// event on a topic of its own.
func readmeDB(t *testing.T) (url, topic string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.db")
	url = "sqlite://" + path
	ctx := context.Background()
	if code, out, stderr := run(t, ctx, "migrate", "--database-url", url); code != 0 {
		t.Fatalf("migrate: %s%s", out, stderr)
	}
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d, _ := sqlite.New(db, nil)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	topic = fmt.Sprintf("readme%d", time.Now().UnixNano())
	if err := outbox.New(d, nil).Enqueue(ctx, tx, outbox.Message{Topic: topic, Payload: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return url, topic
}

// relayUntil runs the relay with args until arrived says the event is
// there, then interrupts it; the relay must exit 0.
func relayUntil(t *testing.T, args []string, stdout *logtest.Buffer, arrived func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr logtest.Buffer
	done := make(chan int, 1)
	go func() { done <- outboxcli.Main(ctx, args, stdout, &stderr) }()
	deadline := time.Now().Add(60 * time.Second)
	for !arrived() {
		select {
		case code := <-done:
			t.Fatalf("%v exited %d before the event arrived:\n%s%s", args, code, stdout.String(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("%v: the event did not arrive within 60s:\n%s%s", args, stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("%v: exit %d:\n%s", args, code, stderr.String())
	}
}

// runSharedREADME runs a README command with --broker-url against the
// shared server (OUTBOX_TEST_NATS_URL when set, else as written).
func runSharedREADME(t *testing.T, args []string, topic string) {
	nc := natstest.Connect(t)
	if os.Getenv("OUTBOX_TEST_NATS_URL") != "" {
		args = withFlag(args, "--broker-url", natstest.URL())
	}
	stream := flagValue(args, "--stream")
	if stream == "" {
		t.Fatalf("README's NATS command %v names no --stream: nothing would capture the events", args)
	}
	js := natstest.JetStream(t, nc)
	// The stream may be there before (a run that died); the relay extends
	// it. It goes at cleanup either way.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("delete stream %s: %v", stream, err)
		}
	})
	relayUntil(t, args, &logtest.Buffer{}, func() bool { return onSubject(js, stream, "outbox."+topic) })
	info, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	if subj := info.CachedInfo().Config.Subjects; len(subj) == 0 || subj[len(subj)-1] != "outbox.>" || containsStr(subj, ">") {
		t.Fatalf("stream %s captures %v; want outbox.>, never every subject", stream, subj)
	}
}

// runEmbeddedREADME runs a README command without --broker-url: the
// embedded broker, its data under ./outbox-data of a temporary working
// directory.
func runEmbeddedREADME(t *testing.T, args []string, topic string) {
	t.Chdir(t.TempDir())
	var stdout logtest.Buffer
	urlRE := regexp.MustCompile(`embedded NATS JetStream at (nats://\S+) `)
	var nc *nats.Conn
	defer func() {
		if nc != nil {
			nc.Close()
		}
	}()
	relayUntil(t, args, &stdout, func() bool {
		if nc == nil {
			m := urlRE.FindStringSubmatch(stdout.String())
			if m == nil {
				return false
			}
			var err error
			if nc, err = nats.Connect(m[1], nats.Timeout(time.Second)); err != nil {
				return false
			}
		}
		js, err := jetstream.New(nc)
		return err == nil && onSubject(js, "OUTBOX", "outbox."+topic)
	})
	if _, err := os.Stat("outbox-data"); err != nil {
		t.Errorf("the embedded broker keeps no data in ./outbox-data: %v", err)
	}
}

// onSubject reports whether stream holds a message on subject.
func onSubject(js jetstream.JetStream, stream, subject string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return false
	}
	_, err = s.GetLastMsgForSubject(ctx, subject)
	return err == nil
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
