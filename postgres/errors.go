package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// isSchemaMissing reports whether err says the outbox schema or table does
// not exist (undefined_table, invalid_schema_name).
func isSchemaMissing(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "42P01" || pgErr.Code == "3F000"
	}
	return false
}

// isLockNotAvailable reports whether err is PostgreSQL's
// lock_not_available: a row locked with NOWAIT was held, or a lock was
// waited for longer than lock_timeout. The error may come from pgx or from
// any database/sql driver whose errors tell their SQLSTATE (lib/pq's do).
func isLockNotAvailable(err error) bool {
	var st interface{ SQLState() string }
	return errors.As(err, &st) && st.SQLState() == "55P03"
}
