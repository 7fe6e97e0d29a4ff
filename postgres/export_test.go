package postgres

import (
	"time"

	"github.com/outboxgo/outbox/internal/sqlkit"
)

// SetMigrateTableLock makes db's migrations wait timeout a try for a table,
// tries times, pause between tries (see sqlkit.TableLock).
func SetMigrateTableLock(db *DB, timeout, pause time.Duration, tries int) {
	db.mig.tableLock = sqlkit.TableLock{Timeout: timeout, Tries: tries, Pause: func(int) time.Duration { return pause }}
}

var IsLockNotAvailable = isLockNotAvailable
