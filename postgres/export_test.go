package postgres

import "time"

// SetMigrateTableLock makes db's migrations wait timeout a try for a table,
// tries times, pause between tries (see tableLock).
func SetMigrateTableLock(db *DB, timeout, pause time.Duration, tries int) {
	db.mig.tableLock = tableLock{timeout: timeout, tries: tries, pause: func(int) time.Duration { return pause }}
}

var IsLockNotAvailable = isLockNotAvailable
