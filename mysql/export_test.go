package mysql

import (
	"time"

	"github.com/outboxgo/outbox/internal/sqlkit"
)

// SetMigrateTableLock makes d's migrations wait timeout a try for a table
// (whole seconds: the server's lock_wait_timeout), tries times, pause
// between tries (see sqlkit.TableLock).
func SetMigrateTableLock(d *DB, timeout, pause time.Duration, tries int) {
	d.tableLock = sqlkit.TableLock{Timeout: timeout, Tries: tries, Pause: func(int) time.Duration { return pause }}
}
