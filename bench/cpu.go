package bench

import (
	"time"

	"github.com/outboxgo/outbox/internal/cputime"
)

// cpuMeter measures CPU time spent from its start: by this process (the
// relay under test and the harness, which is idle while a drain runs), by
// the NATS server and by the database server: PostgreSQL (every process of
// the server: its backends, WAL writer, checkpointer …), or MySQL/MariaDB
// (mariadbd or mysqld, one process: every connection's thread and
// InnoDB's purge and flushing). The servers are read from /proc, so they
// count only when they run on this machine; on another, their figures are
// absent.
type cpuMeter struct {
	self, nats, db time.Duration
	// dbComm is the database server's command ("postgres", "mariadbd"),
	// dbMetric the metric of its CPU per event.
	dbComm, dbMetric string
}

func startCPU() cpuMeter { return startCPUOf("postgres", "pg_cpu_us") }

// startCPUOf is startCPU for the database server whose processes are
// named comm, reported as metric.
func startCPUOf(comm, metric string) cpuMeter {
	return cpuMeter{self: cputime.Self(), nats: cputime.Proc("nats-server"), db: cputime.Proc(comm), dbComm: comm, dbMetric: metric}
}

// startCPU is the meter of e's database server.
func (e *env) startCPU() cpuMeter {
	if e.my != nil {
		return startCPUOf(mysqlComm(), "mysql_cpu_us")
	}
	return startCPU()
}

// perEvent returns the µs of CPU per event since m started, as metrics:
// relay_cpu_us (this process), nats_cpu_us and pg_cpu_us (mysql_cpu_us).
func (m cpuMeter) perEvent(n int) map[string]float64 {
	out := map[string]float64{}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	out["relay_cpu_us"] = us(cputime.Self() - m.self)
	if v := cputime.Proc("nats-server"); v > 0 {
		out["nats_cpu_us"] = us(v - m.nats)
	}
	if v := cputime.Proc(m.dbComm); v > 0 {
		out[m.dbMetric] = us(v - m.db)
	}
	return out
}
