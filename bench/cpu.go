package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuMeter measures CPU time spent from its start: by this process (the
// relay under test and the harness, which is idle while a drain runs), by
// the NATS server and by PostgreSQL (every process of the server: its
// backends, WAL writer, checkpointer …). The servers are read from /proc, so
// they count only when they run on this machine; on another, their figures
// are absent.
type cpuMeter struct {
	self, nats, pg time.Duration
}

func startCPU() cpuMeter {
	return cpuMeter{self: selfCPU(), nats: procCPU("nats-server"), pg: procCPU("postgres")}
}

// perEvent returns the µs of CPU per event since m started, as metrics:
// relay_cpu_us (this process), nats_cpu_us and pg_cpu_us.
func (m cpuMeter) perEvent(n int) map[string]float64 {
	out := map[string]float64{}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	out["relay_cpu_us"] = us(selfCPU() - m.self)
	if v := procCPU("nats-server"); v > 0 {
		out["nats_cpu_us"] = us(v - m.nats)
	}
	if v := procCPU("postgres"); v > 0 {
		out["pg_cpu_us"] = us(v - m.pg)
	}
	return out
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU sums user and system time of every process whose command is
// comm, from /proc/<pid>/stat (in USER_HZ ticks, 100 per second on Linux).
func procCPU(comm string) time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != comm {
			continue
		}
		// After "(comm) ": state is field 3; utime and stime are 14 and 15.
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * (time.Second / 100)
}
