package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// errExited: the server exited while starting (its port may have been
// taken meanwhile).
var errExited = errors.New("exited while starting")

// awaitReady waits until the server answers PING, while it makes progress.
func (s *Server) awaitReady() error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	p := s.progress()
	for {
		err := ping(s.addr, s.password)
		if err == nil {
			return nil
		}
		if loading := strings.HasPrefix(err.Error(), "LOADING"); !p.moved(loading) {
			return fmt.Errorf("redis-server on port %d shows no progress for %v (%v); its log:\n%s", s.port, stallLimit, err, s.logTail())
		}
		select {
		case <-s.exited:
			return fmt.Errorf("redis-server on port %d %w: %v; its log:\n%s", s.port, errExited, s.cmd.ProcessState, s.logTail())
		case <-tick.C:
		}
	}
}

// ping sends AUTH (given a password) and PING on a connection of its own,
// and returns nil when both succeed, a Redis error reply as an error of its
// text (LOADING while the server reads its data). It speaks the protocol
// itself: a client library's pool would log and retry each refused dial.
func ping(addr, password string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	cmds := [][]string{{"PING"}}
	if password != "" {
		cmds = [][]string{{"AUTH", password}, {"PING"}}
	}
	var req []byte
	for _, cmd := range cmds {
		req = fmt.Appendf(req, "*%d\r\n", len(cmd))
		for _, arg := range cmd {
			req = fmt.Appendf(req, "$%d\r\n%s\r\n", len(arg), arg)
		}
	}
	if _, err := c.Write(req); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	for range cmds {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if msg, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "-"); ok {
			return errors.New(msg)
		}
	}
	return nil
}

func (s *Server) logPath() string { return filepath.Join(s.dir, "redis.log") }

// logTail is the end of the server's log, for an error.
func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logPath())
	if err != nil {
		return err.Error()
	}
	if len(b) > 4<<10 {
		b = b[len(b)-4<<10:]
	}
	return string(b)
}

// progress tracks a server's signs of life: its log growing, or a
// LOADING reply.
type progress struct {
	s     *Server
	size  int64
	since time.Time
}

func (s *Server) progress() *progress {
	return &progress{s: s, size: s.logSize(), since: time.Now()}
}

// moved records what the server shows now and reports whether it has
// shown progress within stallLimit.
func (p *progress) moved(loading bool) bool {
	if n := p.s.logSize(); loading || n != p.size {
		p.size, p.since = n, time.Now()
	}
	return time.Since(p.since) < stallLimit
}

func (s *Server) logSize() int64 {
	fi, err := os.Stat(s.logPath())
	if err != nil {
		return -1
	}
	return fi.Size()
}
