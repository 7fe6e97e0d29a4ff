// Package cputime measures the CPU time a benchmark costs: this process's
// (the relay under test, and an in-process broker), and that of the
// servers it talks to on this machine, read from /proc.
package cputime

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Self is the user and system CPU time this process has used.
func Self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Proc is the user and system CPU time used by every process whose command
// is comm ("postgres", "beam.smp"), with that of their children already
// reaped (PostgreSQL's exited backends), from /proc/<pid>/stat. It is zero
// where there is no such process (a server on another machine), or no
// /proc.
func Proc(comm string) time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range stats {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(raw)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != comm {
			continue
		}
		// From the state, field 3: utime, stime, cutime and cstime are
		// fields 14 to 17, in USER_HZ ticks (100 a second on Linux).
		f := strings.Fields(s[end+1:])
		if len(f) < 15 {
			continue
		}
		for _, field := range f[11:15] {
			t, _ := strconv.ParseInt(field, 10, 64)
			ticks += t
		}
	}
	return time.Duration(ticks) * (time.Second / 100)
}

// Syscall is what one system call costs this machine: the median, over
// five rounds of 20,000, of a getppid(2), which the kernel answers without
// work of its own, so that what it measures is the entry and the exit.
// Ratios between relays that make system calls at different rates (a
// PostgreSQL walsender makes one per WAL record it decodes, a relay that
// claims in batches a few per thousand events) move with it: on this
// project's host it was about 1 µs on 2026-12-06, a day its CDC drains ran
// at 0.7–0.8 × the polling relay's instead of the 0.9–0.97 × of the day
// before. Benchmarks report it beside their ratios.
func Syscall() time.Duration {
	const rounds, calls = 5, 20_000
	per := make([]time.Duration, rounds)
	for r := range per {
		start := time.Now()
		for range calls {
			syscall.Getppid()
		}
		per[r] = time.Since(start) / calls
	}
	slices.Sort(per)
	return per[rounds/2]
}
