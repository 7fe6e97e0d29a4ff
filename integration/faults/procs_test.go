package faults

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// proc is a slot for one helper process (a relay, or the inbox's
// consumer); a kill starts a new process in it.
type proc struct {
	env  []string
	mode string
	log  io.Writer

	mu   sync.Mutex
	cmd  *exec.Cmd
	dups atomic.Int64 // "dup" lines the inbox process printed
}

// start starts the slot's process; one the slot still holds is killed
// once the new one has taken its place, so that a kill and a start racing
// from two goroutines (the killer's and the test's) cannot leave a
// process behind.
func (p *proc) start() error {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = slices.Concat(p.env, []string{envHelper + "=" + p.mode}) // a copy: slots start concurrently
	cmd.Stderr = p.log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := helpers.start(cmd, p.mode); err != nil {
		return err
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "dup" {
				p.dups.Add(1)
			}
		}
	}()
	p.mu.Lock()
	old := p.cmd
	p.cmd = cmd
	p.mu.Unlock()
	if old != nil {
		_ = old.Process.Kill()
		helpers.wait(old)
	}
	return nil
}

func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// kill SIGKILLs the process and waits for it.
func (p *proc) kill() {
	p.mu.Lock()
	cmd := p.cmd
	p.cmd = nil
	p.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		helpers.wait(cmd)
	}
}

// holdAndKill starts an extra relay in a hold mode, waits until it holds a
// batch (claimed and not published, or published and not marked) and
// SIGKILLs it there. It returns how many events the batch held.
func holdAndKill(env []string, log io.Writer, mode string) (int, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = slices.Concat(env, []string{envHelper + "=" + mode})
	cmd.Stderr = log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := helpers.start(cmd, mode); err != nil {
		return 0, err
	}
	defer func() { _ = cmd.Process.Kill(); helpers.wait(cmd) }()
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "held ") {
				line <- sc.Text()
				return
			}
		}
		close(line)
	}()
	select {
	case l, ok := <-line:
		if !ok {
			return 0, fmt.Errorf("%s relay exited before holding a batch", mode)
		}
		if err := cmd.Process.Kill(); err != nil {
			return 0, err
		}
		return len(strings.Split(strings.TrimPrefix(l, "held "), ",")), nil
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("%s relay held no batch within 30s", mode)
	}
}

// helpers is every helper process the suite started and has not yet
// waited for. Each test stops what it started; TestMain fails the run
// when one outlived the tests (see outlived).
var helpers = helperSet{cmds: map[*exec.Cmd]string{}}

type helperSet struct {
	mu   sync.Mutex
	cmds map[*exec.Cmd]string // the helper's mode
}

// start starts cmd, a helper process in mode, and records it.
func (h *helperSet) start(cmd *exec.Cmd, mode string) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	h.mu.Lock()
	h.cmds[cmd] = mode
	h.mu.Unlock()
	return nil
}

// wait waits for cmd to exit and forgets it.
func (h *helperSet) wait(cmd *exec.Cmd) {
	_ = cmd.Wait()
	h.mu.Lock()
	delete(h.cmds, cmd)
	h.mu.Unlock()
}

// outlived SIGKILLs every helper still recorded and describes those that
// were still running then (one that had exited on its own and was not
// yet waited for is only reaped); "" when there were none.
func (h *helperSet) outlived() string {
	h.mu.Lock()
	cmds := maps.Clone(h.cmds)
	h.mu.Unlock()
	var alive []string
	for cmd, mode := range cmds {
		_ = cmd.Process.Kill()
		h.wait(cmd)
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			alive = append(alive, fmt.Sprintf("pid %d (%s)", cmd.Process.Pid, mode))
		}
	}
	slices.Sort(alive)
	return strings.Join(alive, ", ")
}

// The net under every test: a helper still running when the tests end is
// named (and killed); one that exited on its own is not.
func TestHelpersOutlived(t *testing.T) {
	h := helperSet{cmds: map[*exec.Cmd]string{}}
	running, exited := exec.Command("sleep", "600"), exec.Command("true")
	if err := h.start(running, "run"); err != nil {
		t.Skipf("no sleep(1) here: %v", err)
	}
	if err := h.start(exited, "inbox"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "true(1) to exit", 30*time.Second, func() bool { // a zombie, not yet waited for
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", exited.Process.Pid))
		return err == nil && strings.Contains(string(b), ") Z ")
	})
	want := fmt.Sprintf("pid %d (run)", running.Process.Pid)
	if got := h.outlived(); got != want {
		t.Errorf("outlived() = %q, want %q", got, want)
	}
	if got := h.outlived(); got != "" {
		t.Errorf("outlived() a second time = %q, want none", got)
	}
}
