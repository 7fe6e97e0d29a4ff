package faults

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

func (p *proc) start() error {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = slices.Concat(p.env, []string{envHelper + "=" + p.mode}) // a copy: slots start concurrently
	cmd.Stderr = p.log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
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
	p.cmd = cmd
	p.mu.Unlock()
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
		_ = cmd.Wait()
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
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
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
