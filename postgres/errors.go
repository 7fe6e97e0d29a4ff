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
// lock_not_available: a row locked with NOWAIT was held.
func isLockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}
