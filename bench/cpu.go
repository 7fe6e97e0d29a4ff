package bench

import (
	"time"

	"github.com/outboxgo/outbox/internal/cputime"
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
	return cpuMeter{self: cputime.Self(), nats: cputime.Proc("nats-server"), pg: cputime.Proc("postgres")}
}

// perEvent returns the µs of CPU per event since m started, as metrics:
// relay_cpu_us (this process), nats_cpu_us and pg_cpu_us.
func (m cpuMeter) perEvent(n int) map[string]float64 {
	out := map[string]float64{}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	out["relay_cpu_us"] = us(cputime.Self() - m.self)
	if v := cputime.Proc("nats-server"); v > 0 {
		out["nats_cpu_us"] = us(v - m.nats)
	}
	if v := cputime.Proc("postgres"); v > 0 {
		out["pg_cpu_us"] = us(v - m.pg)
	}
	return out
}
