// Package logbridge routes the log lines of third-party libraries that
// write to loggers of their own — go-sql-driver/mysql's "[mysql] …" lines,
// go-redis's "redis: connection pool: …" lines — into a *slog.Logger, so
// that an operator reads one log, in one format, at fitting levels.
//
// Where a library takes a logger per client (mysql.Config.Logger), pass
// MySQL there. Where it has only a process-wide hook (redis.SetLogger),
// InstallRedis sets it: that is a decision for a main package (the outbox
// CLI), never for a library, so no package of this module but the CLI calls
// it.
package logbridge

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// MySQL is a go-sql-driver/mysql Logger (set it as mysql.Config.Logger)
// that writes each line of the driver to Logger at Warn, with
// component=mysql-driver. The driver logs only what it recovers from
// (closing a bad idle connection, a connection lost mid-query, which the
// caller sees as an error too), hence Warn. A nil Logger discards.
type MySQL struct {
	Logger *slog.Logger
}

// Print implements mysql.Logger.
func (m MySQL) Print(v ...any) {
	if m.Logger == nil {
		return
	}
	m.Logger.Warn(line(fmt.Sprint(v...)), "component", "mysql-driver")
}

var (
	redisTarget  atomic.Pointer[slog.Logger]
	installRedis sync.Once
)

// InstallRedis routes go-redis's process-wide log (redis.SetLogger) to log:
// a recovered panic at Error, everything else (failed dials, bad
// connections dropped from the pool) at Warn, with component=go-redis. It
// may be called again to change the logger; nil discards. It is safe for
// concurrent use, with the last call winning.
func InstallRedis(log *slog.Logger) {
	redisTarget.Store(log)
	installRedis.Do(func() { redis.SetLogger(redisLogger{}) })
}

// redisLogger is go-redis's Logging, forwarding to redisTarget.
type redisLogger struct{}

func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	log := redisTarget.Load()
	if log == nil {
		return
	}
	msg := line(fmt.Sprintf(format, v...))
	level := slog.LevelWarn
	if strings.Contains(msg, "panic") {
		level = slog.LevelError
	}
	if ctx == nil {
		ctx = context.Background()
	}
	log.Log(ctx, level, msg, "component", "go-redis")
}

// line is a library's log line without its trailing newline.
func line(s string) string {
	return strings.TrimRight(s, "\r\n")
}
