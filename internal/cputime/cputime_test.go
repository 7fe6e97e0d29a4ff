package cputime

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSelfGrows(t *testing.T) {
	before := Self()
	x := 0
	for i := range 50_000_000 {
		x += i % 7
	}
	if Self() <= before {
		t.Fatalf("Self did not grow over a busy loop (%d)", x)
	}
}

func TestProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 50_000_000 {
		x += i % 7
	}
	name := string(comm[:len(comm)-1])
	if Proc(name) <= 0 {
		t.Fatalf("Proc(%q) = 0 for this very process after a busy loop (%d)", name, x)
	}
	if got := Proc(filepath.Base(t.TempDir()) + "-no-such-command"); got != 0 {
		t.Fatalf("Proc of a command nothing runs = %v", got)
	}
}

func TestSyscall(t *testing.T) {
	// Between a nanosecond (no kernel entry at all: not a system call) and
	// a millisecond (not one call's cost).
	if d := Syscall(); d < time.Nanosecond || d > time.Millisecond {
		t.Fatalf("Syscall() = %v: not the cost of one system call", d)
	}
}
